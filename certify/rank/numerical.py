"""The ``numerical_rank`` claim: how many singular values of a float matrix exceed a tolerance --
numpy's default ``sigma_1 max(m, n) 2^-52`` (the count ``numpy.linalg.matrix_rank`` makes, with an
enclosure of ``sigma_1``) or a stated rational -- certified from both sides: ``k`` above the
tolerance's upper end and the rest at or below its lower end, else the bracket it could prove
(verdict unknown: a singular value too close to the tolerance).

A float estimate proposes the count (:func:`solvers.numerical.estimate_count`); the checker's own
bounds (:func:`certify.checkers.rank.numerical.bounds_at`, the kernel's
:mod:`certify.checkers.kernel.singular`) decide it, computed once in the producer's scratch so that
its own check before writing finds them there. It is a statement about the stored float values,
not their exact rank over Q (a different question, which the ``exact_rank`` claim answers).
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from certify.checkers import scratch
from certify.checkers.kernel.hashing import float64_sha256
from certify.checkers.rank.numerical import WINDOW, bounds_at, least_upper, tolerance
from certify.core.certificate import Claim, ClaimKind
from certify.core.errors import InputError
from certify.core.kernel import Form, Kernel
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict
from certify.rank.evidence import source_params, token_evidence
from certify.rank.options import RankOptions
from solvers import exact as ex
from solvers.numerical import estimate_count

#: significant digits of the stated enclosure of sigma_1 (rounded outward)
DIGITS = 12


def float_values(kernel: Kernel) -> np.ndarray | None:
    """The kernel matrix as float64, when it is an array whose every value is one (float16/32/64,
    or integers of at most 53 bits); else None."""
    a = kernel.stored_matrix
    if kernel.form is not Form.MATRIX or a is None or a.dtype.kind not in "fbiu":
        return None
    if a.dtype.kind in "biu" and a.size and (int(a.max()) > 1 << 53 or int(a.min()) < -(1 << 53)):
        return None
    return np.ascontiguousarray(a, dtype=np.float64)


def wanted(kernel: Kernel, opt: RankOptions) -> bool:
    """Whether ``certify rank`` makes the claim: asked for (``--tol``), or a float matrix whose
    entries are not all integers (its exact rank over Q is then rarely the question)."""
    if opt.tol is not None or opt.numerical_only:
        if float_values(kernel) is None:
            raise InputError("the numerical rank needs an array of floats (.npy or .npz matrix; "
                             "integers up to 2^53)")
        return True
    a = kernel.stored_matrix
    return a is not None and a.dtype.kind == "f" and bool(np.any(a != np.round(a)))


def _outward(x: Fraction, up: bool) -> Fraction:
    """``x`` rounded outward to :data:`DIGITS` significant decimal digits (0 for ``x <= 0``)."""
    if x <= 0:
        return Fraction(0) if not up else x
    e = len(str(int(x))) if x >= 1 else -len(str(int(1 / x)))
    scale = Fraction(10) ** (DIGITS - e)
    v = x * scale
    r = -((-v.numerator) // v.denominator) if up else v.numerator // v.denominator
    return Fraction(r) / scale


class _Found(NamedTuple):
    k_lower: int
    k_upper: int
    sigma_max: list[str] | None
    tol_lower: Fraction
    tol_upper: Fraction


def _sigma_max(A: np.ndarray, ranks: set[int]) -> list[str]:
    """An enclosure of ``sigma_1`` holding the bounds' own at every rank in ``ranks`` (the checker
    asks for the one at the claim's rank), rounded outward."""
    lo, hi = None, None
    for j in sorted(ranks):
        b = bounds_at(A, j)
        if b is None:
            continue
        bl = max(b.lower[0] if b.lower else Fraction(0), Fraction(0))
        lo, hi = (bl, b.sigma1_upper) if lo is None else (min(lo, bl), max(hi, b.sigma1_upper))
    return [q_to_str(_outward(lo or Fraction(0), False)), q_to_str(_outward(hi or Fraction(0), True))]


def _count(A: np.ndarray, rank: int, cap: int, tol_upper: Fraction) -> int | None:
    """The checker's ``k_lower`` from the bounds at ``rank`` (the last of the first ``cap`` lower
    bounds above ``tol_upper``), None when the bounds are undefined."""
    b = bounds_at(A, rank)
    if b is None:
        return None
    return max((i + 1 for i, v in enumerate(b.lower[:cap]) if v > tol_upper), default=0)


def _search(A: np.ndarray, tol: Fraction | None, k: int) -> _Found | None:
    """The bracket the checker re-derives (:mod:`certify.checkers.rank.numerical`): ``k_upper`` the
    least rank whose bounds prove the rest ``<= tol_lower`` (tried from the estimate ``k`` upward,
    ``k .. k + WINDOW - 1``, then down to ``k_lower``), ``k_lower`` the count the bounds at that rank
    prove; else the trivial ``min(shape)`` with ``k_lower`` a fixed point of the checker's rule and
    no rank of its window settling the rest. For the default tolerance the enclosure of
    ``sigma_1`` holds the bounds' own at every rank tried, and the search runs again until the
    tolerance it gives is stable (the enclosures differ in the last digits only)."""
    mn = min(A.shape)
    one = min(1, mn)
    ranks = {max(min(k, mn), one)}                       # where sigma_1 is enclosed (default tol)
    for _ in range(16):
        sig = None if tol is not None else _sigma_max(A, ranks)
        lo_t, hi_t = tolerance("default" if tol is None else q_to_str(tol), sig, A.shape)
        k_hi = least_upper(A, min(k, mn), min(k + WINDOW, mn), lo_t)
        if k_hi is not None:
            start = _count(A, max(k_hi, one), k_hi, hi_t)
            if start is None:
                return None
            k_hi = least_upper(A, start, k_hi + 1, lo_t)
            assert k_hi is not None                      # the rank found above is in range
            k_lo, rank = _count(A, max(k_hi, one), k_hi, hi_t), max(k_hi, one)
        else:
            guess, k_lo = min(k, mn), None
            while True:                                  # k_lower: a fixed point at rank k_lower
                got = _count(A, max(guess, one), mn, hi_t)
                if got is None:
                    return None
                if got == guess:
                    k_lo = guess
                    break
                guess = got
            j = least_upper(A, k_lo, min(k_lo + WINDOW, mn), lo_t)
            if j is not None:                            # the window settles it: search from there
                k = j
                continue
            k_hi, rank = mn, max(k_lo, one)
        if k_lo is None:
            return None
        if tol is None and rank not in ranks:            # its enclosure joins the hull: again
            ranks.add(rank)
            continue
        return _Found(k_lo, k_hi, sig, lo_t, hi_t)
    raise RuntimeError("internal error: the numerical-rank bracket did not settle in 16 rounds")


def numerical_rank_claim(kernel: Kernel, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    A = float_values(kernel)
    assert A is not None                          # wanted() refused the rest
    m, n = A.shape
    tol = opt.tol
    with scratch.session(scratch.current()):     # each rank's bounds once (the check's own scratch, if any)
        found = _search(A, tol, estimate_count(A, tol))
    ev: dict[str, Any] = {"form": "matrix", "shape": [m, n], "values_sha256": float64_sha256(A)}
    if A.size <= opt.embed_limit:
        d = ex.dyadic(A)
        ev.update(matrix=d.rows(), matrix_exponent=d.exponent)
    params = {"tol": "default" if tol is None else q_to_str(tol), **source_params(kernel)}
    if found is None:                             # floats bound nothing: the trivial bracket
        raise InputError("the float bounds are undefined for this matrix (values out of range)")
    ev.update(sigma_max=found.sigma_max, tol_lower=q_to_str(found.tol_lower),
              tol_upper=q_to_str(found.tol_upper), k_lower=found.k_lower, k_upper=found.k_upper)
    proved = found.k_lower == found.k_upper
    reason = None if proved else (f"a singular value lies too close to the tolerance for the float bounds: "
                                  f"between {found.k_lower} and {found.k_upper} exceed it")
    return Claim(ClaimKind.NUMERICAL_RANK, None, Verdict.PROVED if proved else Verdict.UNKNOWN,
                 parameters=params, evidence={**ev, **token_evidence(kernel)}, method="float_bounds",
                 reason=reason, timings={"numerical_rank": time.perf_counter() - t0})
