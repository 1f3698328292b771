"""``python -m models.train sec51|sec52|report``: train the paper's Sec. 5 models
and reproduce its sweeps (:mod:`models.train`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from certify.cli import common as cli
from certify.core.errors import InputError, run_command
from models.train import (
    DEFAULT_OUT,
    SMOKE_51,
    SMOKE_52,
    Sec51Config,
    Sec52Config,
    figure1,
    figure2,
    sweep51,
    sweep52,
    write_certified,
    write_readme,
)


def _ints(s: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None
    if not vals or min(vals) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {s!r}")
    return vals


def _scale(s: str) -> tuple[int, int, int]:
    v = _ints(s)
    if len(v) != 3:
        raise argparse.ArgumentTypeError(f"a scale is M,q,n, got {s!r}")
    return v


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.train",
                                description="Train the Sec. 5 models and reproduce the sweeps.")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, help_ in (("sec51", "lookup-table heads on paper-5.1 (Figure 1)"),
                        ("sec52", "positive-feature heads on the joint-OOD pools (Figure 2)")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("--smoke", action="store_true", help="a few-second version (tests)")
        s.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (CSV, PNG, README)")
        s.add_argument("--save-checkpoints", type=Path, default=None, metavar="DIR",
                       help="save the designated runs (and, for sec51, the r=15 construction) here")
        s.add_argument("--ranks", type=_ints, default=None, help="comma-separated ranks")
        s.add_argument("--seeds", type=_ints, default=None, help="comma-separated seeds")
        s.add_argument("--steps", type=int, default=None)
        s.add_argument("--no-progress", action="store_true")
        cli.add_engine_arguments(s)
        if name == "sec52":
            s.add_argument("--scales", type=_scale, nargs="+", default=None, help="M,q,n ...")
            s.add_argument("--batch", type=int, default=None)
            s.add_argument("--no-dense", action="store_true")
            s.add_argument("--budget", choices=("plateau", "fixed"), default=None,
                           help="plateau: until the train exact-sequence accuracy stops improving, "
                                "--steps is the cap (default); fixed: exactly --steps steps, cosine decay")
            s.add_argument("--feature-map", default=None, metavar="NAME",
                           help="the kernel heads' feature map over the learned projection "
                                "(default elu1; e.g. exp, softplus: any projection map of docs/layouts.md)")
            s.add_argument("--lr", type=float, default=None, help="initial learning rate (default 0.01)")
            s.add_argument("--lr-dense", type=float, default=None,
                           help="the dense control's own initial learning rate (default: --lr)")
            s.add_argument("--unseen-pool", action="store_true",
                           help="train without the held-out words and score each run on the unseen-token "
                                "pool too (models.train.unseen)")
    r = sub.add_parser("report", help="redraw figures and README from the CSV files")
    r.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    if args.cmd == "report":
        write_certified(args.out)
        figure1(args.out)
        figure2(args.out)
        write_readme(args.out)
        print(f"wrote {args.out / 'README.md'}", file=sys.stderr)
        return 0
    if args.steps is not None and args.steps < 1:
        raise InputError(f"--steps must be >= 1, got {args.steps}")
    over = {k: v for k, v in (("ranks", args.ranks), ("seeds", args.seeds), ("steps", args.steps))
            if v is not None}
    if args.cmd == "sec51":
        return _sec51(args, over)
    return _sec52(args, over)


def _sec51(args: argparse.Namespace, over: dict[str, Any]) -> int:
    """The Sec. 5.1 sweep (lookup-table heads on paper-5.1) with the overrides ``over``."""
    cfg = replace(SMOKE_51 if args.smoke else Sec51Config(), **over)
    if min(cfg.ranks) < 1:
        raise InputError("ranks must be >= 1")
    with cli.engine_from_args(args, progress=not args.no_progress) as engine:
        runs = sweep51(cfg, args.out, args.save_checkpoints, progress=not args.no_progress,
                       engine=engine)
    print(f"sec51: {sum(r.solved for r in runs)}/{len(runs)} runs solve paper-5.1; "
          f"wrote {args.out}", file=sys.stderr)
    return 0


def _sec52(args: argparse.Namespace, over: dict[str, Any]) -> int:
    """The Sec. 5.2 sweep (positive-feature heads on the joint-OOD pools) with the overrides
    ``over`` and this command's own options."""
    if args.scales is not None:
        over["scales"] = tuple(args.scales)
    if args.batch is not None:
        over["batch"] = args.batch
    if args.no_dense:
        over["dense"] = False
    if args.budget is not None:
        over["budget"] = args.budget
    if args.feature_map is not None:
        from models.feature_maps import spec
        spec(args.feature_map)                      # InputError for an unknown name
        over["feature_map"] = args.feature_map
    for name, v in (("--lr", args.lr), ("--lr-dense", args.lr_dense)):
        if v is not None and not (v > 0 and v < float("inf")):
            raise InputError(f"{name} must be a positive number, got {v}")
    if args.lr is not None:
        over["lr"] = args.lr
    if args.lr_dense is not None:
        over["lr_by_rank"] = ((0, args.lr_dense),)
    if args.unseen_pool:
        over["unseen"] = True
    cfg = replace(SMOKE_52 if args.smoke else Sec52Config(), **over)
    if min(cfg.ranks) < 1:
        raise InputError("ranks must be >= 1")
    with cli.engine_from_args(args, progress=not args.no_progress) as engine:
        runs = sweep52(cfg, args.out, args.save_checkpoints, progress=not args.no_progress,
                       engine=engine)
    print(f"sec52: {len(runs)} runs; wrote {args.out}", file=sys.stderr)
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """``main`` with the project's exit-code convention (``python -m models.train``)."""
    return run_command("models.train", main, argv)
