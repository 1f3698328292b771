"""Sweeps on a local Ray (``--workers N``) against the same sweep in one process,
in the same run: wall time of each, the speed-up, and whether the merged
claims are identical (timings aside).

1. Feasibility sweep, paper-5.1, ranks 12..13, real and nonnegative classes,
   ``--iterations 4`` (LP budgets: reproducible whatever the worker count).
2. Certified transcript enumeration, built-in injective model, q = 19, s = 1.
3. The reduced Sec. 5.1 sweep (smoke config, seeds 0..3).
4. The reduced Sec. 5.2 sweep (smoke config, seeds 0..3): per-task seeds and one
   torch thread per task, so its rows are the same for any worker count.

Run: ``python benchmarks/bench_parallel.py [--workers N] [--smoke]``. The Ray
start-up (seconds) is part of the parallel time. Results go to
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


def _rows(d: Path) -> list:
    name = "sec51_runs.csv" if (d / "sec51_runs.csv").is_file() else "sec52_runs.csv"
    with open(d / name) as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="the transcript task at q = 12 only, nothing written")
    a = ap.parse_args(argv)
    from certify.cli import feasibility, train, transcript

    w = ["--workers", str(a.workers)]
    cases = [
        ("feasibility sweep paper-5.1 r=12..13, 2 classes, 4 LPs/rank", feasibility.main,
         ["--sweep", "12:13", "--iterations", "4", "--no-progress"], "cert"),
        ("certified transcript q=19 s=1 builtin-injective", transcript.main,
         ["--M", "14", "--s", "1", "--h", "7", "--q", "19", "--bits", "1", "--no-progress"], "cert"),
        ("Sec. 5.1 reduced sweep (smoke, 4 seeds)", train.main,
         ["sec51", "--smoke", "--seeds", "0,1,2,3", "--no-progress"], "dir"),
        ("Sec. 5.2 reduced sweep (smoke, 4 seeds)", train.main,
         ["sec52", "--smoke", "--seeds", "0,1,2,3", "--no-progress"], "dir"),
    ]
    if a.smoke:
        cases = [("certified transcript q=12 s=1 builtin-injective", transcript.main,
                  ["--M", "14", "--s", "1", "--h", "7", "--q", "12", "--bits", "1", "--no-progress"], "cert")]
    import os
    print(f"load average {os.getloadavg()}")
    results = []
    print(f"| task | 1 process s | {a.workers} Ray workers s | speed-up | identical |")
    print("|---|---|---|---|---|")
    for name, fn, args, kind in cases:
        with tempfile.TemporaryDirectory() as tmp:
            outs, secs = [], []
            for extra in ([], w):
                out = Path(tmp) / f"out{len(outs)}"
                t = time.perf_counter()
                fn(args + extra + (["--out", str(out) + ".json"] if kind == "cert" else
                                   ["--out", str(out)]))
                secs.append(time.perf_counter() - t)
                outs.append(_claims(Path(str(out) + ".json")) if kind == "cert" else _rows(out))
            print(f"| {name} | {secs[0]:.1f} | {secs[1]:.1f} | {secs[0] / secs[1]:.2f} | "
                  f"{'yes' if outs[0] == outs[1] else 'NO'} |", flush=True)
            print(f"ratio one process / {a.workers} Ray workers ({name}): {secs[0] / secs[1]:.2f}", flush=True)
            results.append({"task": name, "one_process_s": secs[0], "workers": a.workers,
                            "ray_s": secs[1], "identical": outs[0] == outs[1]})
    identical = all(r["identical"] for r in results)
    if a.smoke:
        return 0 if identical else 1
    out = ROOT / "reports" / "bench" / "parallel.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": results, "loadavg_end": os.getloadavg()}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
