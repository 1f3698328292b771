"""``certify demo [--out DIR]``: the main job on the built-in defaults
(:func:`certify.api.demo.run`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from certify.api.demo import DEFAULT_OUT, run
from certify.cli import common as cli
from certify.cli import log
from certify.core import limits, outputs
from certify.core.progress import show_progress


def main(argv: Sequence[str] | None = None) -> int:
    ap = cli.parser("demo", 'The main job on the built-in defaults (make demo): bounds, the paper-5.1 feasibility bracket, the committed checkpoints, the Thm 2 cube kernel and the theorems on concrete objects (Thm 1, Thm 6 part 1, Thm 8), each certificate re-checked, with a report.')
    ap.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                    help="output folder (default reports/demo); " + cli.OUT_DIR_HELP)
    ap.add_argument("--time-limit", type=float, default=20.0,
                    help="witness search CPU seconds for the rank between the proved bounds (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the searches (default 0)")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    cli.add_progress(ap)
    args = ap.parse_args(argv)
    limits.check_time_limit(args.time_limit)
    outputs.check_out_dir(args.out, "demo")
    res = run(Path(args.out), time_limit=args.time_limit, seed=args.seed,
              progress=show_progress(args.no_progress))
    if args.json:
        print(json.dumps(res))
    log.info(f"certify-attention demo: {len(res['certificates'])} certificates, "
          f"{'all re-checked' if res['verified'] else 'SOME FAIL the re-check'} "
          f"({res['seconds']} s)\nreport: {res['report']}")
    return 0 if res["verified"] else 1
