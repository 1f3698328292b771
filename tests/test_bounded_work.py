"""Bounded work before any check: a small certificate cannot make ``verify`` allocate
gigabytes or run for minutes.

Every integer field of the schema has bounds (``certify.checkers.fields``: exponents
within +-4096, counts below 2^40, ...), checked before any shift or allocation. Here
every integer of a claim of committed certificates of each kind (and of a matrix-file
certificate made here) is replaced by hostile values (-4e9, 4e9, 2^62, -2^63, 10^30,
the other bound +- 1) and the certificate verified in a child process whose address
space is limited to 1 GB: no case may crash (an exception, a MemoryError) and none may
take 5 CPU seconds. The default suite takes a seeded sample of five integer fields per certificate with two
hostile values each; ``--runslow`` forty fields with every hostile value.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CERTS = ["reports/reference/cube-kernel.json", "reports/reference/checkpoint-paper51-lookup-r8-s0.json",
         "reports/reference/feasibility-r8-real.json", "reports/reference/feasibility-r13-real.json",
         "reports/reference/bounds.json", "reports/transcript/injective-M12-s3-h6-q4.cert.json",
         "reports/gallery/performer/certificate.json"]

DRIVER = textwrap.dedent('''
    import copy, json, random, resource, signal, sys, time
    from pathlib import Path
    import numpy as np
    from certify.checkers import verify
    from certify.cli import main as cli

    root, out, sample, tmp = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    every_value = int(sys.argv[6])
    names = json.loads(sys.argv[5])
    # a matrix-file certificate (array path, Freivalds upper bound)
    rng = np.random.default_rng(3)
    np.save(tmp / "m.npy", rng.integers(-8, 8, (40, 6)) @ rng.integers(-8, 8, (6, 40)))
    assert cli(["rank", str(tmp / "m.npy"), "--upper-bound", "freivalds", "--out", str(tmp / "m.json"),
                "--no-progress"]) == 0
    certs = [(root / n, json.loads((root / n).read_text())) for n in names] + \\
        [(tmp / "m.json", json.loads((tmp / "m.json").read_text()))]
    LIMIT = 1 << 30
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
    HOSTILE = [-4 * 10 ** 9, 4 * 10 ** 9, 1 << 62, -(1 << 63), 10 ** 30, (1 << 12) + 1, -(1 << 12) - 1,
               1 << 40, (1 << 64) + 1]

    def leaves(x, path):
        if isinstance(x, bool):
            return
        if isinstance(x, int):
            yield path
        elif isinstance(x, dict):
            for k, v in x.items():
                yield from leaves(v, path + [k])
        elif isinstance(x, list):
            for i, v in enumerate(x[:3]):                 # the first entries of a row stand for the rest
                yield from leaves(v, path + [i])

    class OverBudget(Exception):
        pass

    def over(*_):                                   # a case past 10 CPU s is stopped and reported
        raise OverBudget("over 10 CPU s")
    signal.signal(signal.SIGPROF, over)
    rnd = random.Random(52)
    results = []
    for path, cert in certs:
        spots = [["claims", i] + p for i, c in enumerate(cert["claims"])
                 for p in leaves({k: c[k] for k in ("parameters", "evidence") if k in c}, [])]
        spots += [["seeds", k] for k, v in cert.get("seeds", {}).items() if isinstance(v, int)]
        if sample and len(spots) > sample:
            spots = rnd.sample(spots, sample)
        for spot in spots:
            for value in HOSTILE if every_value else rnd.sample(HOSTILE, 2):
                c = copy.deepcopy(cert)
                node = c
                for k in spot[:-1]:
                    node = node[k]
                node[spot[-1]] = value
                t0 = time.process_time()
                signal.setitimer(signal.ITIMER_PROF, 10)
                try:
                    code = verify.verify_certificate(c, base=path.parent).exit_code()
                    crash = None
                except BaseException as exc:                # a crash is the failure this test looks for
                    code, crash = None, f"{type(exc).__name__}: {str(exc)[:200]}"
                finally:
                    signal.setitimer(signal.ITIMER_PROF, 0)
                results.append({"cert": str(path.name), "spot": [str(s) for s in spot], "value": str(value),
                                "exit": code, "crash": crash, "cpu": time.process_time() - t0})
    out.write_text(json.dumps(results))
''')


def _run(tmp_path: Path, sample: int, every_value: bool = False) -> list[dict]:
    out = tmp_path / "results.json"
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    import os
    env.update({k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS_", "PYTHON"))})
    run = subprocess.run([sys.executable, "-c", DRIVER, str(ROOT), str(out), str(sample), str(tmp_path),
                          json.dumps(CERTS), str(int(every_value))], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=3600)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(out.read_text())


def _judge(results: list[dict]) -> None:
    assert results
    worst = max(results, key=lambda r: r["cpu"])
    print(f"\nbounded work: {len(results)} cases, {sum(1 for r in results if r['crash'])} crashes, "
          f"the largest {worst['cpu']:.2f} CPU s ({worst['cert']} {'.'.join(worst['spot'])} = "
          f"{worst['value']})")
    crashes = [r for r in results if r["crash"]]
    assert not crashes, crashes[:5]
    slow = [r for r in results if r["cpu"] >= 5]
    assert not slow, slow[:5]
    # a hostile value is never taken: every mutated certificate that verified at 0 changed a
    # field whose hostile value the schema allows (an int64 seed)
    passed = [r for r in results if r["exit"] == 0]
    assert all(r["spot"][0] == "seeds" for r in passed), passed[:5]


def test_hostile_integers_end_quickly_under_a_1gb_address_space(tmp_path):
    _judge(_run(tmp_path, sample=5))


@pytest.mark.slow
def test_many_integer_fields_every_hostile_value_under_a_1gb_address_space(tmp_path):
    _judge(_run(tmp_path, sample=40, every_value=True))
