"""``certify bounds``: every closed-form bound of the paper at m, exactly
(:mod:`certify.core.bounds`), as a table, JSON, or a certificate of BOUND claims; with
``--constructions`` and ``--positional`` also the paper's theorems on concrete objects
(THEOREM claims, :mod:`certify.audit.theorems`): Thm 1 and Thm 6 part 1 decided on every input
over ``{0,1}^m``, Thm 8 on a chain family with positions."""

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
    p.add_argument("--constructions", action="store_true",
                   help="also decide the paper's constructions exactly at every position of every "
                        "sequence over {0,1}^m: Thm 1's dense softmin head (lengths <= n, temperature "
                        "--tau) and Thm 6's rank-1 head (lengths <= 2); m <= 5 at n = 3")
    p.add_argument("--tau", metavar="TAU",
                   help="Thm 1's temperature with --constructions: log(q) (exact weights 1/q^<x,z>) or "
                        "a rational (weights e^(-tau <x,z>) decided with arb balls); default log(n/eps)")
    p.add_argument("--positional", metavar="FAMILY",
                   help="also certify Thm 8 on a chain family (built-in name or file): its family with "
                        "positions (causal, query last) and a head with position-dependent key maps "
                        "that solves it: correctness, its effective kernel's exact rank and the bound "
                        "Thm 8 gives")
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
    if args.tau is not None and not args.constructions:
        raise InputError("--tau is Thm 1's temperature: it needs --constructions")
    obj, results = bounds_table(m, n, eps)
    claims = [bound_claim(r) for r in results]
    theorems, inputs = _theorem_claims(args, m, n, eps)
    claims += theorems
    if theorems:
        obj["theorems"] = [{"statement": c.statement, "verdict": c.verdict.value} for c in theorems]
    if args.out:
        cmd = ["certify", "bounds"] + list(sys.argv[1:] if argv is None else argv)
        outputs.write_file(args.out, Certificate(claims=claims, command=cmd, inputs=inputs).dumps())
    if args.json:
        print(json.dumps(obj, indent=1))
    else:
        log.info(format_table(obj))
        for c in theorems:
            log.info(f"[{c.verdict.value}] {c.statement}")
    return 0 if all(c.verdict is Verdict.PROVED for c in claims) else 1


def _theorem_claims(args: argparse.Namespace, m: int, n: int, eps) -> tuple[list, dict[str, str]]:
    """The ``theorem`` claims ``--constructions`` and ``--positional`` ask for, and the inputs they
    name (the family with positions)."""
    from certify.audit.theorems import check_tau, cube_claim, positional_claim
    claims, inputs = [], {}
    if args.constructions:
        tau = None if args.tau is None else check_tau(args.tau)
        claims += [cube_claim("thm1", m, n, eps, tau), cube_claim("thm6", m, 2, eps)]
    if args.positional:
        from certify.core.families import load_family
        from certify.core.families.positional import causal_family
        from models.constructions import thm8_positional_lookup
        fam = causal_family(load_family(args.positional))
        claims.append(positional_claim(fam, thm8_positional_lookup(fam, eps), eps))
        inputs[f"family:{fam.name}"] = fam.sha256
    return claims, inputs
