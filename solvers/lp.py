"""Linear programs through HiGHS (highspy), with the answer re-checked.

One front end, :func:`solve_lp`, for

    optimize  c^T x   subject to  row_lo <= A x <= row_hi,  col_lo <= x <= col_hi

with ``A`` a scipy sparse matrix. The backend's model status goes through one
explicit map (:data:`_STATUS_MAP`, default :attr:`LPStatus.UNKNOWN`), and a
claimed ``OPTIMAL`` point is re-checked against the bounds with the caller's
tolerance; a point that fails is downgraded to ``UNKNOWN``. An ``INFEASIBLE``
answer carries the dual (Farkas) ray when HiGHS provides one. Floats here only
propose; callers decide in exact arithmetic.

>>> import numpy as np, scipy.sparse as sp
>>> r = solve_lp(np.array([1.0, 1.0]), sp.csr_matrix([[1.0, 2.0]]), [2.0], [np.inf],
...              [0.0, 0.0], [np.inf, np.inf])
>>> r.status.name, round(r.objective, 6)
('OPTIMAL', 1.0)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class LPStatus(enum.Enum):
    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    UNKNOWN = "unknown"


def _status_map() -> dict[Any, LPStatus]:
    import highspy

    S = highspy.HighsModelStatus
    return {
        S.kOptimal: LPStatus.OPTIMAL,
        S.kInfeasible: LPStatus.INFEASIBLE,
        S.kUnbounded: LPStatus.UNBOUNDED,
        S.kTimeLimit: LPStatus.TIME_LIMIT,
        S.kIterationLimit: LPStatus.ITERATION_LIMIT,
    }


@dataclass(frozen=True)
class LPResult:
    status: LPStatus
    x: np.ndarray | None            # primal point (OPTIMAL only)
    objective: float | None
    row_dual: np.ndarray | None     # duals of the rows (OPTIMAL only)
    dual_ray: np.ndarray | None     # Farkas ray over the rows (INFEASIBLE, when available)
    message: str
    max_violation: float | None = None   # re-checked bound violation of x


def solve_lp(c: ArrayLike, A: Any, row_lo: ArrayLike, row_hi: ArrayLike, col_lo: ArrayLike,
             col_hi: ArrayLike, *, maximize: bool = False,
             time_limit: float | None = None, iteration_limit: int | None = None,
             tol: float = 1e-7, threads: int = 1) -> LPResult:
    """Solve one LP with HiGHS and re-check the primal point (``tol`` absolute,
    scaled by ``1 + |bound|``). ``time_limit`` is HiGHS's own, in *wall* seconds
    (a loaded machine reaches it sooner: searches with a CPU-second budget pass
    none, see :mod:`certify.core.budget`); ``iteration_limit`` caps the simplex and
    interior-point iterations (deterministic, whatever the load)."""
    import highspy

    A = sp.csr_matrix(A, dtype=np.float64)
    nrow, ncol = A.shape
    c = np.asarray(c, dtype=np.float64)
    row_lo = np.broadcast_to(np.asarray(row_lo, dtype=np.float64), (nrow,))
    row_hi = np.broadcast_to(np.asarray(row_hi, dtype=np.float64), (nrow,))
    col_lo = np.broadcast_to(np.asarray(col_lo, dtype=np.float64), (ncol,))
    col_hi = np.broadcast_to(np.asarray(col_hi, dtype=np.float64), (ncol,))
    if c.shape != (ncol,):
        raise ValueError(f"cost has shape {c.shape}, expected ({ncol},)")

    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = ncol, nrow
    lp.col_cost_ = c
    lp.col_lower_ = np.where(np.isinf(col_lo), -inf, col_lo)
    lp.col_upper_ = np.where(np.isinf(col_hi), inf, col_hi)
    lp.row_lower_ = np.where(np.isinf(row_lo), -inf, row_lo)
    lp.row_upper_ = np.where(np.isinf(row_hi), inf, row_hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data
    lp.a_matrix_.num_row_, lp.a_matrix_.num_col_ = nrow, ncol
    if maximize:
        lp.sense_ = highspy.ObjSense.kMaximize

    h = _new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", int(threads))
    if time_limit is not None:
        h.setOptionValue("time_limit", float(max(time_limit, 0.01)))
    if iteration_limit is not None:
        h.setOptionValue("simplex_iteration_limit", int(iteration_limit))
        h.setOptionValue("ipm_iteration_limit", int(iteration_limit))
    h.passModel(lp)
    h.run()
    raw = h.getModelStatus()
    status = _status_map().get(raw, LPStatus.UNKNOWN)
    message = h.modelStatusToString(raw)

    if status is LPStatus.OPTIMAL:
        sol = h.getSolution()
        x = np.asarray(sol.col_value, dtype=np.float64)
        viol = _violation(A, x, row_lo, row_hi, col_lo, col_hi)
        if not np.isfinite(viol) or viol > tol:
            return LPResult(LPStatus.UNKNOWN, None, None, None, None,
                            f"{message}, but the point violates a bound by {viol:.3g}", viol)
        return LPResult(status, x, float(c @ x), np.asarray(sol.row_dual, dtype=np.float64),
                        None, message, viol)
    ray = None
    if status is LPStatus.INFEASIBLE:
        try:
            _, has_ray, vals = h.getDualRay()
            if has_ray:
                ray = np.asarray(vals, dtype=np.float64)
        except Exception:          # a missing ray is not an error
            ray = None
    return LPResult(status, None, None, None, ray, message)


_BANNER_SHOWN = [False]


def _new_highs() -> Any:
    """A ``Highs`` instance. The first one prints a banner on file descriptor 1,
    which would corrupt a command's ``--json`` output and is library noise on
    stderr: send it to the null device."""
    import highspy

    if _BANNER_SHOWN[0]:
        return highspy.Highs()
    import os
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    _BANNER_SHOWN[0] = True
    return h


def _violation(A: Any, x: np.ndarray, row_lo: np.ndarray, row_hi: np.ndarray, col_lo: np.ndarray,
               col_hi: np.ndarray) -> float:
    """Largest relative violation of the row and column bounds at ``x``."""
    ax = A @ x
    parts = [0.0]
    for val, lo, hi in ((ax, row_lo, row_hi), (x, col_lo, col_hi)):
        if val.size == 0:
            continue
        with np.errstate(invalid="ignore"):
            lo_v = np.where(np.isfinite(lo), (lo - val) / (1 + np.abs(lo)), 0.0)
            hi_v = np.where(np.isfinite(hi), (val - hi) / (1 + np.abs(hi)), 0.0)
        parts.append(float(np.max(lo_v)))
        parts.append(float(np.max(hi_v)))
    return max(parts)
