"""``CERTIFY_NO_COMPILED=1`` (docs/commands.md, "Compiled kernels"): every import site of the
four optional compiled kernels takes its pure path, and the pure paths give the same answers
as the compiled ones (``rank`` certificates with the same claims, each verified by the other
mode); ``make test-pure`` runs a representative part of the suite that way (here: slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], cwd: Path, off: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                         if p)}
    env.pop("CERTIFY_NO_COMPILED", None)
    if off:
        env["CERTIFY_NO_COMPILED"] = "1"
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_switch_reaches_every_import_site(tmp_path):
    probe = ("from solvers.exact import modkernel\n"
             "from certify.checkers.kernel import span\n"
             "from certify.transcript import onelayer\n"
             "from models.canonical import arith\n"
             "from certify.core import compiled\n"
             "print(modkernel.available(), span._K is not None, onelayer._kernel() is not None,\n"
             "      arith._kernel() is not None, compiled.summary().split(' (')[0])")
    off = _run(["-c", probe], tmp_path, off=True)
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["False", "False", "False", "False", "0", "of", "4", "in", "use"]
    on = _run(["-c", probe], tmp_path, off=False)
    from certify.core import compiled
    built = [s != "not built" for s in compiled.status().values()]
    if not all(built):
        pytest.skip("the compiled kernels are not all built here")
    assert on.stdout.split() == ["True", "True", "True", "True", "in", "use"]


def _claims(cert: dict) -> list[tuple]:
    return [(c["kind"], c["verdict"], json.dumps(c["evidence"], sort_keys=True)) for c in cert["claims"]]


@pytest.mark.parametrize("n, r", [(120, 17), pytest.param(300, 40, marks=pytest.mark.slow)])
def test_rank_and_verify_give_the_same_answers_on_the_pure_paths(tmp_path, n, r):
    """A planted rank-r integer matrix: the same two-sided rank, the same claims and evidence
    (proposals are seeded, and every decision is exact), and each certificate verified by the
    other mode."""
    rng = np.random.default_rng(n)
    m = (rng.integers(-9, 10, (n, r)) @ rng.integers(-9, 10, (r, n))).astype(np.float64)
    np.save(tmp_path / "m.npy", m)
    docs = {}
    for off in (False, True):
        out = f"c-{int(off)}.json"
        p = _run(["-m", "certify", "rank", "m.npy", "--eps", "1/100", "--json", "--no-progress", "--out", out],
                 tmp_path, off)
        assert p.returncode == 0, p.stderr[-1500:]
        doc = json.loads(p.stdout)
        assert (doc["rank_lower"], doc["rank_upper"]) == (r, r)
        docs[off] = json.loads((tmp_path / out).read_text())
    assert _claims(docs[False]) == _claims(docs[True])
    assert docs[True]["environment"]["compiled"]["solvers.exact._modkernel"] != "in use"
    for off, other in ((False, "c-1.json"), (True, "c-0.json")):
        p = _run(["-m", "certify", "verify", other], tmp_path, off)
        assert p.returncode == 0, p.stderr[-1500:]


@pytest.mark.slow
def test_a_representative_part_of_the_suite_passes_on_the_pure_paths(tmp_path):
    """What ``make test-pure`` runs, minus this file."""
    files = ["tests/test_exact.py", "tests/test_span_check.py", "tests/test_verify.py", "tests/test_canonical.py",
             "tests/test_transcript.py", "tests/test_rank.py"]
    p = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *files], ROOT, off=True)
    assert p.returncode == 0, p.stdout[-3000:]
