"""``certify feasibility``: is there a rank-r head that solves a finite family?
(:func:`certify.feasibility.decide.decide`, one rank; :func:`~certify.feasibility.decide.sweep`, a range).

``python -m certify.feasibility --rank R [--family NAME|FILE] [--features real|nonnegative]
[--class paper|used-pairs] [--json] [--out CERT] [--time-limit S] [--seed N] [--sweep LO:HI]``
"""

from __future__ import annotations

import json
import sys
from typing import Sequence

from certify.cli import common as cli
from certify.cli import log
from certify.core import limits, outputs
from certify.core.certificate import Certificate
from certify.core.errors import InputError
from certify.core.families import load_family
from certify.core.numbers import q_to_str
from certify.core.progress import show_progress
from certify.feasibility.decide import cube_brackets, decide, sweep
from certify.feasibility.model import Features, ModelClass
from certify.feasibility.result import FeasibilityResult, Outcome


def _parse(argv):
    p = cli.parser("feasibility", "Is there a rank-r normalized nonnegative kernel head that solves a finite family?")
    p.add_argument("--rank", type=int, help="feature dimension r >= 1")
    p.add_argument("--family", default="paper-5.1", help="built-in family name or family file")
    p.add_argument("--features", choices=[f.value for f in Features], default=None,
                   help="feature class (default: real; --sweep runs both unless given)")
    p.add_argument("--class", dest="model_class", choices=[c.value for c in ModelClass],
                   default=ModelClass.PAPER.value,
                   help="model class: paper (alpha >= 0 on every (query, token) pair, "
                        "extended to the whole cube; default) or used-pairs (alpha >= 0 on "
                        "the pairs the inputs use)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--out", metavar="CERT", help="write the certificate here; " + cli.OUT_FILE_HELP)
    p.add_argument("--time-limit", type=float, default=60.0,
                   help="CPU seconds of witness search per rank (of this process, or of "
                        "the worker running the rank), checked between solves, so the "
                        "verdict does not depend on the machine's load; recorded in the "
                        "claim's info.budget (finite, > 0; default 60)")
    p.add_argument("--seed", type=int, default=0, help="seed of the witness search (default 0)")
    p.add_argument("--sweep", metavar="LO:HI", help="run every rank in LO..HI (not with --rank)")
    cli.add_progress(p)
    p.add_argument("--method", choices=["lp", "sdp", "auto"], default="lp",
                   help="lp: chain bounds + alternating LPs; sdp: convex dual certificates and "
                        "PSD-lift (SDP) witness proposals; auto: chain bounds, then both")
    # parallel sweeps (certify.core.engine) and reproducible budgets
    cli.add_engine_arguments(p)
    p.add_argument("--iterations", type=int, default=None,
                   help="LP budget per rank step instead of --time-limit (reproducible "
                        "whatever the worker count)")
    return p.parse_args(argv)


def _sweep_range(text: str) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in text.split(":"))
    except ValueError:
        raise InputError(f"--sweep must be LO:HI with integers, got {text!r}") from None
    if a < 1 or b < a:
        raise InputError(f"--sweep needs 1 <= LO <= HI, got {text!r}")
    return a, b


def _line(res: FeasibilityResult) -> str:
    head = (f"{res.family.name} rank {res.rank} {res.features.value} "
            f"[class {res.model_class.value}]: {res.outcome.value}")
    if hasattr(res, "line_detail"):                          # convex dual / SDP results
        detail = res.line_detail()
    elif res.outcome is Outcome.INFEASIBLE and res.bound is not None:
        b = res.bound
        detail = (f"(proved) ranks <= {b.max_infeasible_rank_for(res.features)} excluded (Lemma 4 bound "
                  f"{q_to_str(b.bound)} ~ {float(b.bound):.4f}; nonnegative refinement with "
                  f"rho = {q_to_str(b.rho)}: r <= {b.perron_rank}) [{res.method}]")
    elif res.outcome is Outcome.FEASIBLE and res.margin is not None:
        detail = f"(proved) exact margin {float(res.margin):.6g} [{res.method}]"
        ext = None if res.witness is None else res.witness.extension
        if res.cube_rank is not None and ext is not None:
            detail += f"; whole cube: rank {res.cube_rank} ({ext['rule']} rule)"
    else:
        detail = f"- {res.reason}"
    secs = sum(res.timings.values())
    return f"{head} {detail}; {secs:.2f} s"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    limits.check_time_limit(args.time_limit)
    if args.iterations is not None and args.iterations < 1:
        raise InputError(f"--iterations must be >= 1, got {args.iterations}")
    if args.rank is not None and args.sweep:
        raise InputError("give either --rank R or --sweep LO:HI, not both")
    if args.rank is not None:
        limits.check_int("rank", args.rank, "--rank")
    if args.sweep:
        limits.check_int("rank", _sweep_range(args.sweep)[1], "--sweep HI")
    if args.out:
        outputs.check_out_file(args.out)
    progress = show_progress(args.no_progress)
    model_class = ModelClass(args.model_class)
    family = load_family(args.family)
    if args.sweep:
        lo, hi = _sweep_range(args.sweep)
        feats = [Features(args.features)] if args.features else [Features.REAL, Features.NONNEGATIVE]

        with cli.engine_from_args(args, progress=progress) as engine:
            results, brackets = sweep(family, lo, hi, feats, time_limit=args.time_limit,
                                      seed=args.seed, progress=progress,
                                      model_class=model_class, engine=engine,
                                      iterations=args.iterations, method=args.method)
    else:
        if args.rank is None:
            raise InputError("give --rank R (or --sweep LO:HI)")
        if args.rank < 1:
            raise InputError(f"rank must be an integer >= 1, got {args.rank}")
        results = [decide(family, args.rank, Features(args.features or "real"),
                          time_limit=args.time_limit, seed=args.seed,
                          progress=progress, model_class=model_class,
                          iterations=args.iterations, method=args.method)]
        brackets = None
    for res in results:
        log.info(_line(res))
    cube = None
    if brackets:
        cube = cube_brackets(results, brackets) if model_class is ModelClass.PAPER else None
        for k, (a, b) in brackets.items():
            line = (f"{family.name} {k} [class {model_class.value}]: minimum rank on the family "
                    f"in [{a}, {b if b is not None else '?'}]")
            if cube is not None:
                c = cube[k][1]
                line += f"; whole-cube head in [{a}, {c if c is not None else '?'}]"
            log.info(line)
    cert = Certificate(claims=[r.to_claim() for r in results],
                       command=["certify", "feasibility",
                                *(argv if argv is not None else sys.argv[1:])],
                       inputs={f"family:{family.name}": family.sha256}, seeds={"search": args.seed})
    if args.out:
        outputs.write_file(args.out, cert.dumps())
    if args.json:
        if brackets is None:
            doc = results[0].summary()
        else:
            doc = {"family": family.name, "sha256": family.sha256,
                   "class": model_class.value,
                   "results": [r.summary() for r in results],
                   "bracket": {k: list(v) for k, v in brackets.items()},
                   "bracket_cube": None if cube is None else {k: list(v)
                                                              for k, v in cube.items()}}
        print(json.dumps(doc, indent=1))
    return cert.exit_code()
