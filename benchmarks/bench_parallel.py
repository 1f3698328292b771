"""Sweeps with ``--workers N`` against the same sweep in one process, in the same
run: wall and CPU seconds (this process) of each, the speed-up, where the
engine ran the tasks -- forked local processes, a local Ray or this process (its
stderr line, with the predicted seconds of each) -- and whether the merged claims
are identical (timings aside).

0. The engines' own costs: a local Ray started for one empty task (``ray.init``
   and the first worker, which imports this package): the ``RAY_START_S`` of
   :mod:`certify.core.engine`; forked processes for two empty tasks from a parent
   holding torch and the checkpoint stack: its ``PROCESS_START_S``.
1. Feasibility sweep, paper-5.1, ranks 12..15, real and nonnegative classes,
   ``--iterations 4`` (LP budgets: reproducible whatever the worker count).
2. Certified transcript enumeration (the range of all assignments in 8 shards),
   built-in injective model, q = 19, s = 1.
3. Checkpoint batch: every checkpoint in ``models/checkpoints``.
4. The reduced Sec. 5.1 and 5.2 sweeps (smoke config, seeds 0..3).

Run: ``python benchmarks/bench_parallel.py [--workers N] [--repeat R] [--smoke]``:
each sweep R times (default 3) in one process and with ``--workers``, interleaved,
medians of wall seconds. The machine this ran on is shared (its load average is
recorded): wall seconds there are ratios within one run, not an idle machine's. Results go to
``reports/bench/parallel.json``. ``--smoke``: the transcript task alone at q = 12,
nothing written.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _claims(path: Path) -> list:
    cert = json.loads(path.read_text())
    return [{k: v for k, v in c.items() if k not in ("timings", "info")} for c in cert["claims"]]


def _batch_claims(d: Path) -> list:
    return [(c.parent.name, _claims(c)) for c in sorted(d.glob("*/certificate.json"))]


def _rows(d: Path) -> list:
    name = "sec51_runs.csv" if (d / "sec51_runs.csv").is_file() else "sec52_runs.csv"
    with open(d / name) as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


def _empty(x):
    return x


def ray_start(workers: int) -> dict:
    """Wall seconds of a local Ray started (``init_local``, as a service does) for one
    empty task, then of 40 more empty tasks."""
    import ray

    from certify.core.engine import Engine, init_local
    t = time.perf_counter()
    init_local(workers)
    try:
        with Engine(workers, progress=False) as e:
            assert e.uses_ray
            e.map(_empty, [(0,), (1,)], cost_s=[86400.0, 86400.0])
            t1 = time.perf_counter()
            e.map(_empty, [(i,) for i in range(40)])
            t2 = time.perf_counter()
    finally:
        ray.shutdown()
    row = {"task": f"ray start-up ({workers} workers) and the first empty task", "ray_start_s": t1 - t,
           "empty_task_s": (t2 - t1) / 40}
    print(f"Ray start-up and first task: {t1 - t:.1f} s wall; an empty task then "
          f"{1000 * (t2 - t1) / 40:.1f} ms", flush=True)
    return row


def fork_start(workers: int) -> dict:
    """Wall seconds of the engine's forked processes for two empty tasks (fork, the
    first results back, the pool shut down), from this process (torch, fla and the
    feasibility stack loaded), median of 5; the ``PROCESS_START_S`` of the engine."""
    import statistics

    import torch  # noqa: F401

    import certify.cli.checkpoint  # noqa: F401  (a parent as large as a real run's)
    from certify.core.engine import Engine

    e = Engine(workers, progress=False)
    e.prepare([86400.0, 86400.0], label="empty tasks")
    assert e.forks
    secs = []
    for _ in range(5):
        t = time.perf_counter()
        e.map(_empty, [(0,), (1,)])
        secs.append(time.perf_counter() - t)
    row = {"task": f"forked processes ({workers}) and two empty tasks", "fork_start_s": statistics.median(secs),
           "fork_start_runs_s": secs}
    print(f"forked processes and two empty tasks: {1000 * statistics.median(secs):.0f} ms wall", flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="the transcript task at q = 12 only, nothing written")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved runs of each; medians reported")
    a = ap.parse_args(argv)
    from certify.cli import checkpoint, feasibility, train, transcript

    w = ["--workers", str(a.workers)]
    cases = [
        ("feasibility sweep paper-5.1 r=12..15, 2 classes, 4 LPs/rank", feasibility.main,
         ["--sweep", "12:15", "--iterations", "4", "--no-progress"], "cert"),
        ("certified transcript q=19 s=1 builtin-injective (8 shards)", transcript.main,
         ["--M", "14", "--s", "1", "--h", "7", "--q", "19", "--bits", "1", "--no-progress"], "cert"),
        ("checkpoint batch models/checkpoints (5 checkpoints)", checkpoint.main,
         ["--batch", str(ROOT / "models" / "checkpoints"), "--no-progress"], "batch"),
        ("Sec. 5.1 reduced sweep (smoke, 4 seeds)", train.main,
         ["sec51", "--smoke", "--seeds", "0,1,2,3", "--no-progress"], "dir"),
        ("Sec. 5.2 reduced sweep (smoke, 4 seeds)", train.main,
         ["sec52", "--smoke", "--seeds", "0,1,2,3", "--no-progress"], "dir"),
    ]
    if a.smoke:
        cases = [("certified transcript q=12 s=1 builtin-injective", transcript.main,
                  ["--M", "14", "--s", "1", "--h", "7", "--q", "12", "--bits", "1", "--no-progress"], "cert")]
    import io
    import os
    from contextlib import redirect_stderr
    load0 = os.getloadavg()
    print(f"load average {load0} (a shared machine: wall seconds are ratios within this run)")
    results: list[dict] = []
    if not a.smoke:
        results.append(ray_start(a.workers))
        results.append(fork_start(a.workers))
    print(f"| task | 1 process s (CPU) | --workers {a.workers} s (CPU here) | speed-up | engine | identical |")
    print("|---|---|---|---|---|---|")
    import statistics
    for name, fn, args, kind in cases:
        with tempfile.TemporaryDirectory() as tmp:
            outs, secs, cpus, said = [[], []], [[], []], [[], []], ""
            for rep in range(a.repeat):              # interleaved: one process, then --workers
                for j, extra in enumerate(([], w)):
                    out = Path(tmp) / f"out{rep}-{j}"
                    err = io.StringIO()
                    t, c = time.perf_counter(), time.process_time()
                    with redirect_stderr(err):
                        fn(args + extra + (["--out", str(out) + ".json"] if kind == "cert" else
                                           ["--out", str(out)]))
                    secs[j].append(time.perf_counter() - t)
                    cpus[j].append(time.process_time() - c)
                    if extra:
                        said = next((ln for ln in err.getvalue().splitlines()
                                     if ln.startswith("--workers")), "no engine line")
                    outs[j].append(_claims(Path(str(out) + ".json")) if kind == "cert" else
                                   _batch_claims(out) if kind == "batch" else _rows(out))
            s1, s2 = statistics.median(secs[0]), statistics.median(secs[1])
            same = all(o == outs[0][0] for o in outs[0] + outs[1])
            print(f"| {name} | {s1:.2f} ({statistics.median(cpus[0]):.1f}) | {s2:.2f} "
                  f"({statistics.median(cpus[1]):.1f}) | {s1 / s2:.2f} | {said} | {'yes' if same else 'NO'} |",
                  flush=True)
            print(f"ratio one process / --workers {a.workers} ({name}): {s1 / s2:.2f}", flush=True)
            results.append({"task": name, "one_process_s": s1, "one_process_cpu_s": statistics.median(cpus[0]),
                            "workers": a.workers, "workers_s": s2,
                            "workers_cpu_s_here": statistics.median(cpus[1]),
                            "one_process_runs_s": secs[0], "workers_runs_s": secs[1],
                            "engine": said, "ray_started": said.endswith("starting a local Ray"),
                            "forked": "forking local processes" in said,
                            "identical": same})
    identical = all(r.get("identical", True) for r in results)
    if a.smoke:
        return 0 if identical else 1
    out = ROOT / "reports" / "bench" / "parallel.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": results, "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                               "machine": "2 cores shared with other work"}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
