"""Checker of ``numerical_rank`` claims: how many singular values of a float64 matrix exceed a
tolerance (numpy's default ``sigma_1 max(m, n) 2^-52``, enclosed, or a stated rational), counted
from both sides by the kernel's rigorous float bounds
(:func:`certify.checkers.kernel.singular.singular_bounds`). The arithmetic is the kernel's; this
module routes and compares.

The claim: ``k_lower`` singular values exceed ``tol_upper`` and at most ``k_upper`` exceed
``tol_lower``, where ``[tol_lower, tol_upper]`` holds the tolerance (so the count at the tolerance is
in ``[k_lower, k_upper]``); proved exactly when the two meet. The checker runs the bounds at rank
``k_upper`` (at ``k_lower`` when ``k_upper`` is the trivial ``min(shape)``): ``k_lower`` must be the
count their lower bounds prove above ``tol_upper``, ``sigma_{k_upper + 1} <= tol_lower`` must be
proved by the bounds at rank exactly ``k_upper`` (rank 0: ``||A||_F <= tol_lower``), and for the
default tolerance the stated ``sigma_max`` must contain the bounds' own enclosure of ``sigma_1``.

``k_upper`` is re-derived, not only checked true: it must be the least rank ``j >= k_lower`` whose
bounds prove ``sigma_{j+1} <= tol_lower`` (:func:`upper_proved`; no ``j < k_lower`` can, the bounds
being rigorous), so a widened bracket fails. The trivial ``k_upper = min(shape)`` says that no rank
in ``k_lower .. k_lower + WINDOW - 1`` proves it (:data:`WINDOW` ranks scanned, the producer's
search width).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from certify.checkers import scratch
from certify.checkers.common import Bad, int_matrix, integer, rational
from certify.checkers.kernel.hashing import float64_sha256
from certify.checkers.kernel.singular import singular_bounds
from certify.checkers.kinds import BY_NAME
from certify.checkers.rank.evidence import _dyadic_array

#: a numerical_rank claim's parameters and evidence (declared in certify.checkers.kinds)
_DECLARED = BY_NAME["numerical_rank"]
#: float64's machine epsilon, numpy's ``finfo(float64).eps``
EPS64 = Fraction(1, 1 << 52)
#: the ranks above ``k_lower`` a trivial bracket (``k_upper = min(shape)``) says prove nothing
WINDOW = 3


def tolerance(tol: Any, sigma_max: Any, shape: tuple[int, int]) -> tuple[Fraction, Fraction]:
    """``(tol_lower, tol_upper)``: the stated rational twice, or ``max(shape) 2^-52 [lo, hi]``."""
    if tol == "default":
        if not isinstance(sigma_max, list) or len(sigma_max) != 2:
            raise Bad("the default tolerance needs sigma_max = [lo, hi]")
        lo, hi = rational(sigma_max[0], "sigma_max[0]"), rational(sigma_max[1], "sigma_max[1]")
        if not 0 <= lo <= hi:
            raise Bad("sigma_max must be [lo, hi] with 0 <= lo <= hi")
        return lo * max(shape) * EPS64, hi * max(shape) * EPS64
    if sigma_max is not None:
        raise Bad("sigma_max is null exactly when the tolerance is stated")
    t = rational(tol, "parameters.tol")
    if t <= 0:
        raise Bad("a stated tolerance must be > 0")
    return t, t


def _values(ev: Mapping[str, Any], matrix: Any) -> np.ndarray:
    """The float64 matrix: passed (re-read from its source) or embedded, bound by ``values_sha256``."""
    shape = ev["shape"]
    if matrix is not None:
        A = matrix
        if not isinstance(A, np.ndarray) or A.dtype != np.float64 or A.ndim != 2:
            raise Bad("the re-read matrix is not float64")
    else:
        rows = int_matrix(ev["matrix"], "matrix", (integer(shape[0], "shape", 1), integer(shape[1], "shape", 1)))
        A = _dyadic_array(rows, integer(ev["matrix_exponent"], "matrix_exponent"), "float64")
    if [int(v) for v in A.shape] != shape:
        raise Bad(f"the matrix is {A.shape[0]} x {A.shape[1]}, the evidence says {shape}")
    if float64_sha256(np.ascontiguousarray(A)) != ev["values_sha256"]:
        raise Bad("values_sha256 is not the hash of the matrix's float64 values")
    return A


def bounds_at(A: np.ndarray, rank: int) -> Any:
    """The kernel's bounds at ``rank``, computed once per certificate's check (keyed by content)."""
    return scratch.remember(("singular_bounds", scratch.array_key(A), rank), lambda: singular_bounds(A, rank))


def upper_proved(A: np.ndarray, j: int, tol_lower: Fraction) -> bool:
    """Whether the kernel's bounds at rank exactly ``j`` prove ``sigma_{j+1}(A) <= tol_lower``
    (rank 0: the whole Frobenius norm)."""
    b = bounds_at(A, j)
    return b is not None and b.delta_sq <= tol_lower * tol_lower


def least_upper(A: np.ndarray, k_lower: int, stop: int, tol_lower: Fraction) -> int | None:
    """The least rank in ``k_lower .. stop - 1`` whose bounds prove the rest ``<= tol_lower``, or None."""
    return next((j for j in range(k_lower, stop) if upper_proved(A, j, tol_lower)), None)


def check_numerical_rank(claim: Mapping[str, Any], cert: Mapping[str, Any], matrix: Any = None) -> list[str]:
    ev, p = claim["evidence"], claim["parameters"]
    _DECLARED.params().check_keys(p, "parameters")
    _DECLARED.form("matrix").check_keys(ev, "matrix evidence",
                                        forbid=() if matrix is None else ("matrix", "matrix_exponent"))
    if matrix is None and "matrix" not in ev:
        raise Bad("matrix not embedded (pass matrix= to re-check)")
    A = _values(ev, matrix)
    m, n = A.shape
    lo_t, hi_t = tolerance(p["tol"], ev["sigma_max"], (m, n))
    problems: list[str] = []
    if (rational(ev["tol_lower"], "tol_lower"), rational(ev["tol_upper"], "tol_upper")) != (lo_t, hi_t):
        problems.append("tol_lower, tol_upper are not the tolerance's enclosure re-derived from the claim")
    k_lo, k_hi = integer(ev["k_lower"], "k_lower", 0), integer(ev["k_upper"], "k_upper", 0)
    if not k_lo <= k_hi <= min(m, n):
        return problems + [f"need k_lower <= k_upper <= {min(m, n)}"]
    rank = k_hi if k_hi < min(m, n) else k_lo
    b = bounds_at(A, max(rank, min(1, m, n)))
    if b is None:
        return problems + ["the float bounds are undefined for this matrix (non-finite or out of range)"]
    own = max((i + 1 for i, v in enumerate(b.lower[:k_hi]) if v > hi_t), default=0)
    if own != k_lo:
        problems.append(f"the bounds prove {own} singular values > tol_upper, the evidence says {k_lo}")
    if k_hi < min(m, n) and not upper_proved(A, k_hi, lo_t):
        problems.append(f"sigma_{k_hi + 1} <= tol_lower is not proved (the rank-{k_hi} residual is too large)")
    stop = k_hi if k_hi < min(m, n) else min(k_lo + WINDOW, min(m, n))
    j = least_upper(A, k_lo, stop, lo_t)
    if j is not None:
        problems.append(f"k_upper {k_hi} is not the least rank the bounds settle: at rank {j} they prove "
                        f"sigma_{j + 1} <= tol_lower")
    if ev["sigma_max"] is not None:
        lo, hi = (rational(v, "sigma_max") for v in ev["sigma_max"])
        if not (lo <= max(b.lower[0] if b.lower else Fraction(0), Fraction(0)) and b.sigma1_upper <= hi):
            problems.append("sigma_max does not contain the checker's own enclosure of sigma_1")
    expect = "proved" if k_lo == k_hi else "unknown"
    if claim["verdict"] != expect:
        problems.append(f"verdict {claim['verdict']} but the evidence gives {expect}")
    return problems
