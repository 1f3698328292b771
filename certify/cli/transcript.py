"""``certify transcript``: Theorem 9 against a quantized sketch model on the\nSec. 4 multilevel family (:func:`certify.transcript.run.run_transcript`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from certify.checkers.parallel import workers as checker_workers
from certify.cli import common as cli
from certify.cli import log
from certify.core import limits, outputs
from certify.core.errors import InputError
from certify.core.families import multilevel_spec
from certify.core.progress import show_progress
from certify.core.verdict import Verdict
from certify.sources.paths import precheck_checkpoint, resolve_source
from certify.transcript.figure import sweep_figure
from certify.transcript.model import MODELS, ModelRequest
from certify.transcript.result import DEFAULT_EXACT_LIMIT
from certify.transcript.run import run_transcript
from certify.transcript.search import DEFAULT_BATCH
from models.sketch import FEATURE_MAPS


def _parse_sweep(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        a, b = int(lo), int(hi)
    except ValueError:
        raise InputError(f"--sweep-bits must be LO:HI with integers, got {text!r}") from None
    if not sep or a < 1 or b < a or b > 48:
        raise InputError(f"--sweep-bits needs 1 <= LO <= HI <= 48, got {text!r}")
    return a, b


def _parser() -> argparse.ArgumentParser:
    ap = cli.parser("transcript", "Thm 9 transcript check of a quantized sketch model "
                                  "on the Sec. 4 multilevel family.")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", help="sketch checkpoint X(.json|.safetensors)")
    src.add_argument("--model", default="builtin-injective",
                     choices=list(MODELS),
                     help="built-in model (default builtin-injective)")
    ap.add_argument("--seed", type=int, default=0, help="seed of a random model / calibration")
    qg = ap.add_mutually_exclusive_group()
    qg.add_argument("--bits", type=int, help="uniform quantizer, P bits per coordinate")
    qg.add_argument("--format", choices=["fp8-e4m3", "fp8-e5m2", "bf16", "fp16"],
                    help="floating-point quantizer format (instead of --bits)")
    ap.add_argument("--range", help="uniform range LO:HI (exact rationals) or 'auto' "
                                    "(calibrated on the family); builtin models default to 0:2^P-1")
    ap.add_argument("--M", type=int, required=True,
                    help="multilevel family: code length M (token dimension m = 2 + M + s)")
    ap.add_argument("--s", type=int, required=True,
                    help="multilevel family: number of levels s (code distance s + 1)")
    ap.add_argument("--h", type=int, required=True, help="multilevel family: code weight h (0 <= h <= M)")
    ap.add_argument("--q", type=int, required=True,
                    help="multilevel family: number of queries q (assignments (s+1)^q)")
    ap.add_argument("--n", type=int, help="context length (default 2q; 2q <= n is required)")
    ap.add_argument("--layers", type=int, default=1, help="random model: layers (default 1)")
    ap.add_argument("--heads", type=int, default=1, help="random model: heads per layer (default 1)")
    ap.add_argument("--rank", type=int, default=4, help="random model: feature dimension r (default 4)")
    ap.add_argument("--dv", type=int, default=2, help="random model: value dimension (default 2)")
    ap.add_argument("--d-model", type=int, help="state dimension of a random model (default m)")
    ap.add_argument("--feature-map", default="relu", choices=FEATURE_MAPS,
                    help="random model: feature map (default relu)")
    ap.add_argument("--sweep-bits", help="LO:HI: run every p in the range, print where collisions start")
    ap.add_argument("--figure", help="PNG path for the sweep figure (default reports/transcript/)")
    ap.add_argument("--exact-limit", type=int, default=DEFAULT_EXACT_LIMIT,
                    help="largest family whose outputs are all checked exactly")
    ap.add_argument("--batch-size", type=int, default=DEFAULT_BATCH,
                    help=f"assignments per batch (default {DEFAULT_BATCH})")
    ap.add_argument("--time-limit", type=float,
                    help="CPU seconds of this process for the search (the certified "
                         "enumeration or the float64 streaming search), checked between "
                         "batches, so the verdict does not depend on the machine's load; "
                         "not applied to shards run on --workers/--ray-address")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--out", metavar="CERT", help="write the certificate here; " + cli.OUT_FILE_HELP)
    cli.add_progress(ap)
    cli.add_engine_arguments(ap)                       # shards of the certified enumeration
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.batch_size < 1:
        raise InputError("--batch-size must be >= 1")
    if args.sweep_bits and args.format:
        raise InputError("--sweep-bits sweeps the uniform quantizer's bits; drop --format")
    if not args.sweep_bits and args.bits is None and args.format is None and not args.checkpoint:
        raise InputError("give --bits P, --format NAME or --sweep-bits LO:HI")
    req = ModelRequest(checkpoint=args.checkpoint, model=args.model, seed=args.seed, bits=args.bits,
                       format=args.format, range=args.range, layers=args.layers, heads=args.heads,
                       rank=args.rank, dv=args.dv, d_model=args.d_model,
                       feature_map=args.feature_map)
    limits.check_time_limit(args.time_limit)
    for nm, key in (("M", "family_m"), ("s", "family_q"), ("h", "family_q"), ("q", "family_q"),
                    ("layers", "family_q"), ("heads", "family_q"), ("rank", "rank"), ("dv", "rank"),
                    ("bits", "family_q")):
        if getattr(args, nm) is not None:
            limits.check_int(key, getattr(args, nm), f"--{nm}", low=0)
    if args.n is not None:
        limits.check_int("chain_n", args.n, "--n")
    if args.d_model is not None:
        limits.check_int("rank", args.d_model, "--d-model")
    if args.out:
        outputs.check_out_file(args.out)
    if args.figure:
        outputs.check_out_file(args.figure, suffixes=(".png",))
    if args.checkpoint:
        precheck_checkpoint(resolve_source(args.checkpoint), "sketch")
    spec = multilevel_spec(args.M, args.s, args.h, args.q)
    n = 2 * spec.q if args.n is None else args.n
    if 2 * spec.q > n:
        raise InputError(f"2q = {2 * spec.q} exceeds the context length n = {n}")
    progress = show_progress(args.no_progress)
    command = ["certify", "transcript"] + list(argv if argv is not None else sys.argv[1:])
    kw = dict(n=n, time_limit=args.time_limit, exact_limit=args.exact_limit,
              batch=args.batch_size, progress=progress, command=command)

    if args.sweep_bits:
        run = run_transcript(req, args.M, args.s, args.h, args.q,
                             bits_range=_parse_sweep(args.sweep_bits), **kw)
        rows = [{k: js[k] for k in _SWEEP_COLUMNS} for js in run.rows]
        for js in rows:
            log.info(f"p={js['p']:2d}  bits {js['bits_available']:>6} vs needed {js['bits_needed']:.3f}  "
                  f"bound {'holds' if js['bound_holds'] else 'FAILS'}  "
                  f"distinct {js['distinct_transcripts']}/{js['assignments_checked']}  "
                  f"collision {'yes' if js['collision'] else 'no'}  "
                  f"float acc {js['float_accuracy']:.4f}  -> {js['verdict']}")
        with_col = [r["p"] for r in rows if r["collision"]]
        start = max(with_col) if with_col else None
        log.info(f"certified collisions at p <= {start}" if start is not None else
              "no certified collision in the sweep")
        fig = args.figure or (Path("reports/transcript") /
                              f"sweep-{args.model if not args.checkpoint else 'checkpoint'}-"
                              f"M{spec.M}-s{spec.s}-h{spec.h}-q{spec.q}.png")
        sweep_figure(rows, fig, f"{run.model.source}: multilevel (M,s,h,q)=({spec.M},{spec.s},"
                                f"{spec.h},{spec.q})")
        log.info(f"figure: {fig}")
        cert = run.certificate
        if args.out:
            outputs.write_file(args.out, cert.dumps())
        if args.json:
            print(json.dumps({"sweep": rows, "collisions_up_to_bits": start,
                              "figure": str(fig), "verdict": _worst(cert.claims).value}))
        return cert.exit_code()

    with cli.engine_from_args(args, progress=progress) as engine:
        run = run_transcript(req, args.M, args.s, args.h, args.q, engine=engine, **kw)
    cert, js = run.certificate, run.rows[0]
    _print_human(run.model, js)
    if args.out:
        # the self-check's replay of every assignment uses the workers too (the checker's own
        # forked blocks, certify.checkers.parallel; the same answer as one process)
        with checker_workers(args.workers if engine.address is None else 1):
            outputs.write_file(args.out, cert.dumps())
    if args.json:
        print(json.dumps(js))
    return cert.exit_code()


_SWEEP_COLUMNS = ("p", "verdict", "bits_available", "bits_needed", "bound_holds",
                  "assignments_checked", "distinct_transcripts", "float_accuracy",
                  "exact_accuracy", "collision")


def _worst(claims) -> Verdict:
    vs = [c.verdict for c in claims]
    if Verdict.REFUTED in vs:
        return Verdict.REFUTED
    if Verdict.UNKNOWN in vs:
        return Verdict.UNKNOWN
    return Verdict.PROVED


def _print_human(model, js) -> None:
    c = js["capacity"]
    log.info(f"model: {model.source}; {model.cfg.layers} layer(s) x {model.cfg.heads} head(s), "
          f"r={model.cfg.rank}, dv={model.cfg.dv}, {model.cfg.feature_map}; "
          f"quantizer {model.quantizer.describe()}")
    log.info(f"Thm 9: {c['alphabet']}^{c['coordinates']} transcripts vs {c['assignments']} assignments "
          f"({js['bits_available']} bits vs q log2(s+1) = {js['bits_needed']:.3f}): "
          f"{'holds' if c['holds'] else 'FAILS (no such model can solve the family)'}")
    log.info(f"checked {js['assignments_checked']}/{js['assignments']} assignments, "
          f"{js['distinct_transcripts']} distinct transcripts, float accuracy "
          f"{js['float_accuracy']:.4f}")
    if js["collision"]:
        log.info(f"collision: kappa {js['collision']['kappa_a']} and {js['collision']['kappa_b']}")
    log.info(f"verdict: {js['verdict']}" + (f" ({js['reason']})" if js["reason"] else ""))
