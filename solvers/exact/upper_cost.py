"""Which upper-bound proof of a matrix's rank is cheaper: ``certify rank
--upper-bound auto``.

Given the lower bound's minor ``N[R, C]`` (``r x r``) of an ``n1 x n2`` integer
matrix, the upper bound ``rank N <= r`` is proved either by the exact column-span
check (:mod:`solvers.exact.span`; the checker's
:func:`certify.checkers.rank.span.column_span`, which ``certify rank`` runs) or by
the Freivalds test at error ``<= 2^-128`` (:mod:`solvers.exact.freivalds`). Both
costs are predicted in CPU seconds from counts of their work:

* exact: ``n1 n2 r k`` multiply-adds (:func:`span_work`, ``k``
  primes counted from the Hadamard bound of the bordered minors; the check itself
  usually needs fewer, the constant absorbs it), ``n1 n2 k`` entries reduced and
  compared modulo the primes, ``n1 n2`` entries converted once, and the exact
  denominators of the minor, ``r^3 b`` (``b`` the bits of ``max|N|``: a
  determinant and a rational solve);
* Freivalds, from its plan (:func:`solvers.exact.freivalds.plan`: ``t`` vectors of
  ``s`` bits, ``m`` primes): the float multiply-adds of ``Y = N X`` and of
  ``N[:, C] W`` (``W`` the ``r x m t`` solutions mod the primes, 62 bits), each
  split into the digit planes the checker's exact product needs
  (:func:`certify.checkers.kernel.freivalds.product`), the Python-integer
  operations on the ``n1 x m t`` results, and the ``m`` solves ``r^3`` mod ``q``.

The constants are CPU seconds per unit, fitted by
``benchmarks/calibrate_rank_upper.py`` (timing both checks on planted matrices,
one BLAS thread; the measured points and the fit are in
``reports/bench/rank_upper_calibration.json``). They only choose between two
proofs that are both exact checks (Freivalds: up to its stated error); a wrong
prediction costs time, never soundness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from solvers.exact.freivalds import plan
from solvers.exact.integers import int_max_abs
from solvers.exact.span import bordered_minor_bound_sq, prime_limit

# CPU seconds per unit of work, fitted by benchmarks/calibrate_rank_upper.py (one
# BLAS thread, CPU seconds; a shared two-core machine at load average 6-7): both
# checks timed on 24 planted matrices U V (n = 128..2048, r = 4..512, factor
# entries of 3 and 12 bits), non-negative least squares on the relative error.
# The fit predicts every point within a factor 1.8 and orders the two proofs
# right wherever they differ by more than 0.0012 CPU s;
# reports/bench/rank_upper_calibration.json holds the points and the fit.
EXACT_S_PER_MADD = 1.41e-11           # n1 n2 r k (span_work)
EXACT_S_PER_REDUCE = 1.18e-9          # n1 n2 k
EXACT_S_PER_ENTRY = 1.14e-8           # n1 n2
EXACT_S_PER_DET = 2.90e-9             # r^3 bits(max|N|): the minor's denominators
EXACT_S_FIXED = 2.7e-4
FREIVALDS_S_PER_MADD = 9.68e-10       # float products Y = N X and N[:, C] W, digit planes
FREIVALDS_S_PER_OBJ = 5.20e-8         # Python-integer operations on the results
FREIVALDS_S_PER_SOLVE = 4.18e-10      # m r^3: solves mod the primes
FREIVALDS_S_FIXED = 1.5e-3
#: the error the default floor of ``verify`` accepts (2^-128)
ERROR_LOG2 = 128


@dataclass(frozen=True)
class UpperCosts:
    """Predicted CPU seconds of the two upper-bound proofs, and the cheaper one."""

    exact_s: float
    freivalds_s: float
    error_log2: int = ERROR_LOG2

    @property
    def choice(self) -> str:
        """The proof predicted cheaper; a tie goes to the exact check, which needs
        no randomness."""
        return "freivalds" if self.freivalds_s < self.exact_s else "exact"

    def why(self) -> str:
        """One phrase for the claim's method and info."""
        rule = "the cheaper" if self.exact_s != self.freivalds_s else "a tie goes to exact"
        return (f"--upper-bound auto chose {self.choice} ({rule}): predicted {self.exact_s:.3g} CPU s "
                f"for the exact span check, {self.freivalds_s:.3g} CPU s for the Freivalds test at "
                f"error 2^-{self.error_log2}")

    def to_json(self) -> dict:
        return {"choice": self.choice, "exact_s": round(self.exact_s, 4),
                "freivalds_s": round(self.freivalds_s, 4)}


def span_work(V: np.ndarray, rows: Sequence[int], cols: Sequence[int],
              bound_sq: Callable[[np.ndarray, list, list], int] | None = None) -> int:
    """Multiply-adds of the exact span check: ``n1 n2 r`` per prime, primes of
    ``prime_limit`` bits until their product exceeds the bordered-minor bound
    (``bound_sq(V, rows, cols)``, default :func:`bordered_minor_bound_sq`)."""
    r = len(cols)
    top = prime_limit(r, int_max_abs(V))
    if top < 1 << 12:
        return 1 << 62
    bsq = (bound_sq or bordered_minor_bound_sq)(V, list(rows), list(cols))
    bound_bits = (math.isqrt(bsq) + 1).bit_length()
    return V.shape[0] * V.shape[1] * r * -(-bound_bits // (top.bit_length() - 1))


def _planes(inner: int, abits: int, xbits: int) -> int:
    """Float products of one exact product ``A X`` (inner dimension ``inner``,
    ``|A| < 2^abits``, ``0 <= X < 2^xbits``) split into digits as the checker's
    :func:`certify.checkers.kernel.freivalds.product` does."""
    room = 52 - max(inner, 1).bit_length()
    if abits + xbits <= room:
        return 1
    b = min(xbits, max(room - abits, room // 2))
    return -(-xbits // b) * -(-abits // max(room - b, 1))


def exact_units(V: np.ndarray, rows: Sequence[int], cols: Sequence[int],
                bound_sq: Callable[[np.ndarray, list, list], int] | None = None
                ) -> tuple[float, float, float, float]:
    """``(n1 n2 r k, n1 n2 k, n1 n2, r^3 bits)`` of the exact span check (``n1 n2 r k``
    is ``2^62`` when it cannot run: no word-size primes)."""
    n1, n2 = V.shape
    r = max(len(cols), 1)
    bits = max(int_max_abs(V), 1).bit_length()
    work = float(span_work(V, rows, cols, bound_sq))
    return work, work / r, float(n1) * n2, float(r) ** 3 * bits


def freivalds_units(V: np.ndarray, rows: Sequence[int], cols: Sequence[int],
                    bound_sq: Callable[[np.ndarray, list, list], int] | None = None,
                    error_log2: int = ERROR_LOG2) -> tuple[float, float, float]:
    """``(float multiply-adds, Python-integer operations, m r^3)`` of the Freivalds
    test at its plan for error ``2^-error_log2``."""
    n1, n2 = V.shape
    r = len(cols)
    pl = plan(V, rows, cols, error_log2, bound_sq)
    s, t, m = pl.vector_bits, pl.vectors, pl.num_primes
    abits = max(int_max_abs(V), 1).bit_length()
    py, pw = _planes(n2, abits, s), _planes(r, abits, 62)
    madds = float(n1) * n2 * t * py + float(n1) * r * m * t * pw
    objs = float(n1) * t * py + float(n1) * m * t * (pw + 2) + float(r) * t * m
    return madds, objs, float(m) * r ** 3


def predict(V: np.ndarray, rows: Sequence[int], cols: Sequence[int],
            bound_sq: Callable[[np.ndarray, list, list], int] | None = None,
            error_log2: int = ERROR_LOG2) -> UpperCosts:
    """Predicted CPU seconds of both proofs for the minor ``(rows, cols)`` of ``V``
    (the Freivalds test at error ``2^-error_log2``)."""
    e1, e2, e3, e4 = exact_units(V, rows, cols, bound_sq)
    f1, f2, f3 = freivalds_units(V, rows, cols, bound_sq, error_log2)
    exact = (EXACT_S_PER_MADD * e1 + EXACT_S_PER_REDUCE * e2 + EXACT_S_PER_ENTRY * e3
             + EXACT_S_PER_DET * e4 + EXACT_S_FIXED)
    if e1 >= 1 << 62:                     # no word-size primes: the span check cannot run
        exact = math.inf
    return UpperCosts(exact, FREIVALDS_S_PER_MADD * f1 + FREIVALDS_S_PER_OBJ * f2
                      + FREIVALDS_S_PER_SOLVE * f3 + FREIVALDS_S_FIXED, error_log2)
