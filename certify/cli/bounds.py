"""``certify bounds``: every closed-form bound of the paper at m, exactly
(:mod:`certify.core.bounds`), as a table, JSON, or a certificate of BOUND claims."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from certify.cli import common, log
from certify.core import outputs
from certify.core.bounds import as_int, bound_claim, bounds_table, check_eps, format_table
from certify.core.certificate import Certificate
from certify.core.errors import InputError
from certify.core.verdict import Verdict


def _parser() -> argparse.ArgumentParser:
    p = common.parser("bounds", "The paper's closed-form bounds, exactly.")
    p.add_argument("--m", required=True, help="token dimension m >= 1")
    p.add_argument("--n", default="3", help="exact context length n >= 3 (default 3)")
    p.add_argument("--eps", default="1/2", help="error level, 0 < eps <= 1/2 (default 1/2)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--out", metavar="CERT", help="write a certificate of the BOUND claims here; "
                   + common.OUT_FILE_HELP)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    m = as_int(args.m, "--m", minimum=1)
    n = as_int(args.n, "--n")
    if n < 3:
        raise InputError(f"--n must be >= 3 (Lemma 3 needs exact length n >= 3), got {n}")
    eps = check_eps(args.eps)
    if args.out:
        outputs.check_out_file(args.out)
    obj, results = bounds_table(m, n, eps)
    claims = [bound_claim(r) for r in results]
    if args.out:
        cmd = ["certify", "bounds"] + list(sys.argv[1:] if argv is None else argv)
        outputs.write_file(args.out, Certificate(claims=claims, command=cmd).dumps())
    if args.json:
        print(json.dumps(obj, indent=1))
    else:
        log.info(format_table(obj))
    return 0 if all(c.verdict is Verdict.PROVED for c in claims) else 1
