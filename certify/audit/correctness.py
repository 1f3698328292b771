"""Exact correctness on a family: every scored position of every input, decided
``|t_hat - t| < eps`` in rationals; ``refuted`` with the first failing input.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from certify.audit.head import HALF, ExactHead, Output, evaluate
from certify.core.families import Family
from certify.core.verdict import Verdict


@dataclass(frozen=True)
class Correctness:
    verdict: Verdict
    eps: Fraction
    scored: int
    failures: int
    max_error: Fraction | None          # None when a denominator is <= 0
    counterexample: Output | None       # the first failing position


def check_correctness(head: ExactHead, family: Family, eps: Fraction = HALF) -> Correctness:
    outs = evaluate(head, family)
    bad = [o for o in outs if not o.correct(eps)]
    errors = [o.error() for o in outs]
    known = [e for e in errors if e is not None]
    max_err = max(known) if len(known) == len(errors) else None
    return Correctness(verdict=Verdict.REFUTED if bad else Verdict.PROVED, eps=eps,
                       scored=len(outs), failures=len(bad), max_error=max_err,
                       counterexample=bad[0] if bad else None)
