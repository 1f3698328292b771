"""Throughput of the Thm 9 transcript check against a naive per-assignment loop.

1. q = 8, s = 3 (65,536 assignments; M = 14, h = 7 gives a code of 8 words):
   assignments checked per second by ``certify.transcript.search_collisions``
   (batched float64, per-token tables, 64-bit hashing, one sort) versus a naive
   Python loop that runs the same model on one assignment at a time and keeps
   the transcripts in a dict (timed on a prefix, extrapolated). Prints the ratio.
2. The largest family (s = 1, M = 14, h = 7, growing q) whose whole streaming
   check finishes within a minute.

3. Certified enumeration (``certify.transcript_enum``: ball arithmetic,
   per-slot partial sums, exact replay near cell boundaries; decides every
   assignment exactly) vs the float64 search above (proposes only), both in
   this run: assignments per CPU second, the q = 20 (s = 1, 1 bit) proof of
   the built-in injective model, and the throughput limit (flops per
   assignment x assignments / sustained flops of one core, measured by a
   float64 GEMM in the same run).

Run: ``.venv/bin/python benchmarks/bench_transcript.py [--budget SECONDS] [--certified-only]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from certify.core.families import multilevel_spec
from certify.transcript.model import QuantizedSketchModel, calibrated_uniform
from certify.transcript.run import check_transcript
from certify.transcript.search import search_collisions
from models.sketch import (SketchConfig, builtin_uniform_quantizer, forward_fast, injective_model,
                           random_model)


def naive_rate(spec, model, count: int) -> float:
    """Per-assignment loop: build one input, run the model, store the transcript."""
    seen: dict[bytes, int] = {}
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(count):
            kap = spec.assignments(i, i + 1)
            X = torch.from_numpy(spec.tokens[spec.inputs(kap)].astype(np.float64))
            run = forward_fast(model.cfg, model.weights, model.quantizer, X)
            seen.setdefault(run.keys.numpy().tobytes(), i)
    return count / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--naive-count", type=int, default=3000)
    ap.add_argument("--certified-only", action="store_true", help="only part 3")
    args = ap.parse_args()
    torch.set_num_threads(1)
    certified_part()
    if args.certified_only:
        return

    spec = multilevel_spec(14, 3, 7, 8)
    print(f"family q=8 s=3 M=14 h=7: {spec.num_assignments} assignments, m = {spec.m}")
    cfg_i, W_i = injective_model(spec.words, spec.M, spec.s)
    cfg_r = SketchConfig(m=spec.m, d=spec.m, layers=2, heads=2, rank=4, dv=2, feature_map="relu")
    W_r = random_model(cfg_r, 0)
    models = {
        "builtin-injective (1x1, r=8, dv=1, 2-bit)":
            QuantizedSketchModel(cfg_i, W_i, builtin_uniform_quantizer(2)),
        "random relu (2 layers x 2 heads, r=4, dv=2, 4-bit calibrated)":
            QuantizedSketchModel(cfg_r, W_r, calibrated_uniform(spec, cfg_r, W_r, 4)),
    }
    for name, model in models.items():
        t0 = time.perf_counter()
        res = search_collisions(spec, model, progress=False)
        ours = res.checked / (time.perf_counter() - t0)
        base = naive_rate(spec, model, args.naive_count)
        print(f"  {name}: ours {ours:,.0f} assignments/s ({spec.num_assignments / ours:.2f} s), "
              f"naive loop {base:,.0f}/s (on {args.naive_count}, extrapolated "
              f"{spec.num_assignments / base:.1f} s); ratio {ours / base:.1f}x; "
              f"distinct transcripts {res.distinct_transcripts}")

    print(f"largest family finishing within {args.budget:.0f} s "
          "(builtin-injective, s=1, M=14, h=7, 1-bit; streaming check incl. hashing and sort, "
          "no exhaustive exact replay):")
    best, q, last = None, 16, 0.0
    while q <= 40:
        if last and last * 2.3 > args.budget:
            break
        spec = multilevel_spec(14, 1, 7, q)
        cfg, W = injective_model(spec.words, spec.M, spec.s)
        model = QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1))
        t0 = time.perf_counter()
        res = check_transcript(spec, model, time_limit=args.budget, progress=False, batch=4096,
                               exact_limit=0)
        last = time.perf_counter() - t0
        ok = res.search.complete and last <= args.budget
        print(f"  q={q}: {spec.num_assignments:,} assignments in {last:.1f} s "
              f"({res.search.checked / max(res.search.seconds, 1e-9):,.0f}/s), "
              f"distinct {res.search.distinct_transcripts:,}, verdict {res.verdict.value}"
              + ("" if ok else " (did not finish)"))
        if ok:
            best = (q, spec.num_assignments, last)
        q += 2
    if best:
        print(f"  largest: q={best[0]} ({best[1]:,} assignments) in {best[2]:.1f} s")


def _gemm_flops() -> float:
    a, b = np.random.rand(2048, 256), np.random.rand(256, 2048)
    t = time.process_time()
    for _ in range(5):
        a @ b
    return 5 * 2 * 2048 * 256 * 2048 / (time.process_time() - t)


def certified_part() -> None:
    from threadpoolctl import threadpool_limits

    from certify.transcript.enumerate import Enumerator, merge

    # flops per assignment (value + radius, counted from the shapes; see transcript_enum)
    cases = []
    spec = multilevel_spec(14, 1, 7, 20)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    cases.append(("builtin-injective q=20 s=1 (1x1, r=20, dv=1, 1-bit)",
                  spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1)),
                  3 * (2 * 20 * 20 * 2) + 25 * 40))
    spec = multilevel_spec(16, 3, 8, 10)
    cfg = SketchConfig(m=spec.m, d=spec.m, layers=2, heads=2, rank=4, dv=2, feature_map="relu")
    W = random_model(cfg, 0)
    cases.append(("random relu q=10 s=3 (2 layers x 2 heads, r=4, dv=2, 4-bit calibrated)",
                  spec, QuantizedSketchModel(cfg, W, calibrated_uniform(spec, cfg, W, 4)),
                  3 * 2 * 20 * 21 * 10 * 2 + 3 * 2 * (20 * 4 * 3 * 2 + 20 * 2 * 21 * 2)))
    with threadpool_limits(1):
        peak = _gemm_flops()
    print(f"# certified enumeration (decides every assignment) vs float64 search (proposes); "
          f"one core, CPU seconds; float64 GEMM here: {peak / 1e9:.1f} GFlop/s")
    for name, spec, model, flops in cases:
        N = spec.num_assignments
        t = time.process_time()
        en = Enumerator(spec, model)
        r = merge(en, [en.run(a, min(N, a + (1 << 16))) for a in range(0, N, 1 << 16)])
        ours = time.process_time() - t
        t = time.process_time()
        res = search_collisions(spec, model, progress=False)
        base = time.process_time() - t
        limit = N * flops / peak
        print(f"  {name}: {N:,} assignments; certified {ours:.1f} CPU s ({N / ours:,.0f}/s; "
              f"{r.replayed} replayed exactly, {'injective' if r.injective else 'not injective'}, "
              f"{r.correct:,} correct), float search {base:.1f} CPU s ({N / base:,.0f}/s); "
              f"ratio certified/float {ours / base:.2f}; throughput limit ~{flops:,} flops x {N:,} "
              f"/ {peak / 1e9:.1f} GFlop/s = {limit:.1f} s ({limit / ours:.0%} of it reached)")


if __name__ == "__main__":
    main()
