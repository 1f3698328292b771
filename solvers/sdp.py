"""PSD-lift relaxations (cvxpy: Clarabel, SCS) for the rank-r factor problem of
:mod:`solvers.factor`, with no knowledge of attention.

The factor problem: rows ``a``, columns ``b``, used entries ``(a_e, b_e)`` and
strict homogeneous constraints ``Ga @ alpha + Gh @ H > 0`` with ``alpha_e =
K[a_e, b_e]`` for a matrix ``K = P Q^T`` of rank ``r`` and ``H`` free with
``|H_e| <= g_box alpha_e``. With ``K`` itself as the variable every constraint is
*linear* (the substitution ``H = alpha * g`` removes the bilinear term), so the
only non-convex part is ``rank K <= r``. The lift

    [[X, K], [K^T, Y]] >= 0,   minimize <Wx, X> + <Wy, Y>

is the nuclear norm of ``K`` for ``Wx = Wy = I/2`` (the trace heuristic); the
log-det heuristic reweights ``Wx = (X_k + d I)^-1``, ``Wy = (Y_k + d I)^-1`` from
the previous solution, which pushes the small singular values to zero. For
nonnegative factors the lift is doubly nonnegative (``K, X, Y >= 0``
entrywise). The margin is kept at a fixed fraction of the best one
(``max delta`` of the convex problem without a rank term), and each row of
``alpha`` is normalized to sum 1 (the constraints are homogeneous per row).

Every answer is a float *proposal*: callers round it to rank ``r``, polish it
and re-check it exactly.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse as sp

from solvers.factor import FactorProblem


class SDPStatus(enum.Enum):
    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"


_STATUS = {"optimal": SDPStatus.OPTIMAL, "optimal_inaccurate": SDPStatus.OPTIMAL,
           "infeasible": SDPStatus.INFEASIBLE, "infeasible_inaccurate": SDPStatus.INFEASIBLE}


def status_of(cvxpy_status: str) -> SDPStatus:
    """cvxpy's status through one explicit map; anything else is UNKNOWN."""
    return _STATUS.get(cvxpy_status, SDPStatus.UNKNOWN)


@dataclass(frozen=True)
class LiftResult:
    status: SDPStatus
    K: np.ndarray | None          # (R, C) proposed kernel
    X: np.ndarray | None          # (R, R) lift block
    Y: np.ndarray | None          # (C, C) lift block
    delta: float | None           # margin reached
    singular_values: np.ndarray | None


def _selection(prob: FactorProblem) -> sp.csr_matrix:
    """``S`` with ``alpha = S @ vec(K)`` (cvxpy's column-major vec)."""
    R, C = prob.num_rows, prob.num_cols
    ex = prob.entries
    E = ex.shape[0]
    return sp.csr_matrix((np.ones(E), (np.arange(E), ex[:, 1] * R + ex[:, 0])), shape=(E, R * C))


def _constraints(prob: FactorProblem, K: Any, H: Any, *, nonneg: bool, floor: float,
                 all_nonneg: bool) -> tuple[Any, list[Any]]:
    import cvxpy as cp

    S = _selection(prob)
    alpha = S @ cp.vec(K, order="F")
    R = prob.num_rows
    E = prob.entries.shape[0]
    norm = sp.csr_matrix((np.ones(E), (prob.entries[:, 0], np.arange(E))), shape=(R, E))
    cons = [norm @ alpha == 1, alpha >= floor, H <= prob.g_box * alpha,
            H >= -prob.g_box * alpha]
    if all_nonneg:                      # every (row, column) pair, not only the used ones
        cons.append(K >= floor)
    elif nonneg:
        cons.append(K >= 0)
    return alpha, cons


def max_margin(prob: FactorProblem, *, nonneg: bool, floor: float = 1e-6,
               all_nonneg: bool = False, solver: str = "CLARABEL") -> float | None:
    """The best margin ``delta`` with no rank term (an upper bound for every rank)."""
    import cvxpy as cp

    K = cp.Variable((prob.num_rows, prob.num_cols))
    H = cp.Variable(prob.entries.shape[0])
    d = cp.Variable()
    alpha, cons = _constraints(prob, K, H, nonneg=nonneg, floor=floor, all_nonneg=all_nonneg)
    cons += [prob.Ga @ alpha + prob.Gh @ H >= d, d <= 1]
    pr = cp.Problem(cp.Maximize(d), cons)
    pr.solve(solver=solver)
    if status_of(pr.status) is not SDPStatus.OPTIMAL:
        return None
    return float(d.value)


def lift_solve(prob: FactorProblem, delta: float, *, nonneg: bool,
               weights: tuple[np.ndarray, np.ndarray] | None = None, floor: float = 1e-6,
               all_nonneg: bool = False, solver: str = "CLARABEL",
               subtract: np.ndarray | None = None,
               time_limit: float | None = None) -> LiftResult:
    """One weighted trace minimization over the lift with margin ``>= delta``;
    ``subtract`` (R, C) adds ``-<subtract, K>`` to the objective (the truncated
    nuclear norm step). ``time_limit`` is the solver's own, in wall seconds
    (budgeted searches pass none)."""
    import cvxpy as cp

    R, C = prob.num_rows, prob.num_cols
    K = cp.Variable((R, C))
    X = cp.Variable((R, R), symmetric=True)
    Y = cp.Variable((C, C), symmetric=True)
    H = cp.Variable(prob.entries.shape[0])
    alpha, cons = _constraints(prob, K, H, nonneg=nonneg, floor=floor, all_nonneg=all_nonneg)
    cons += [prob.Ga @ alpha + prob.Gh @ H >= delta, cp.bmat([[X, K], [K.T, Y]]) >> 0]
    if nonneg:
        cons += [X >= 0, Y >= 0]
    Wx, Wy = weights if weights is not None else (np.eye(R) / 2, np.eye(C) / 2)
    obj = cp.trace(Wx @ X) + cp.trace(Wy @ Y)
    if subtract is not None:
        obj = obj - cp.sum(cp.multiply(subtract, K))
    pr = cp.Problem(cp.Minimize(obj), cons)
    opts = {}
    if time_limit is not None and solver == "CLARABEL":
        opts["time_limit"] = float(max(time_limit, 0.1))
    elif time_limit is not None and solver == "SCS":
        opts["time_limit_secs"] = float(max(time_limit, 0.1))
    try:
        pr.solve(solver=solver, **opts)
    except cp.error.SolverError:
        return LiftResult(SDPStatus.UNKNOWN, None, None, None, None, None)
    st = status_of(pr.status)
    if st is not SDPStatus.OPTIMAL or K.value is None:
        return LiftResult(st, None, None, None, None, None)
    Kv = np.asarray(K.value)
    return LiftResult(st, Kv, np.asarray(X.value), np.asarray(Y.value), delta,
                      np.linalg.svd(Kv, compute_uv=False))


def reweighted_lift(prob: FactorProblem, *, nonneg: bool, fraction: float = 0.05,
                    iterations: int = 6, eps: float = 1e-3, floor: float = 1e-6,
                    all_nonneg: bool = False, solver: str = "CLARABEL",
                    rank: int | None = None,
                    time_limit: Callable[[], float] | None = None) -> Iterator[LiftResult]:
    """Trace heuristic, then reweighting: yields one :class:`LiftResult` per
    iteration (the caller stops when a rounded proposal verifies). With ``rank``
    the reweighting is the truncated nuclear norm (minimize ``||K||_* -
    <U_r V_r^T, K>``, i.e. the singular values past ``r``, with ``U_r, V_r`` the top
    singular vectors of the previous ``K``); without it, log-det. ``time_limit``
    is a callable returning the budget left (CPU seconds,
    :mod:`certify.core.budget`), checked before each solve; a solve itself is not
    given a clock (the solver's wall-clock limit would depend on the machine's
    load) and stops at the solver's iteration limit (Clarabel: ``max_iter``,
    200 by default)."""
    dmax = max_margin(prob, nonneg=nonneg, floor=floor, all_nonneg=all_nonneg, solver=solver)
    if dmax is None or dmax <= 0:
        return
    delta = fraction * dmax
    weights = subtract = None
    for _ in range(iterations):
        left = None if time_limit is None else time_limit()
        if left is not None and left <= 0:
            return
        res = lift_solve(prob, delta, nonneg=nonneg, weights=weights, floor=floor,
                         all_nonneg=all_nonneg, solver=solver, subtract=subtract)
        if res.K is None or res.X is None or res.Y is None or res.singular_values is None:
            return
        yield res
        if rank is not None:
            U, _, Vt = np.linalg.svd(res.K, full_matrices=False)
            sub = U[:, :rank] @ Vt[:rank]
            weights = None
            subtract = sub
            continue
        scale = max(float(res.singular_values[0]), 1e-12)
        d = eps * scale
        Wx = np.linalg.inv(res.X + d * np.eye(res.X.shape[0]))
        Wy = np.linalg.inv(res.Y + d * np.eye(res.Y.shape[0]))
        nrm = (np.trace(Wx) + np.trace(Wy)) / (res.X.shape[0] + res.Y.shape[0])
        weights = ((Wx + Wx.T) / (2 * nrm), (Wy + Wy.T) / (2 * nrm))


def round_to_rank(K: np.ndarray, rank: int, *, nonneg: bool) -> tuple[np.ndarray, np.ndarray]:
    """Factors ``P (R, r)``, ``Q (C, r)`` of the truncated SVD of ``K`` (balanced);
    for nonnegative factors the sign of each singular pair is fixed so that its
    larger part is positive and the rest is clipped (a start for the LPs)."""
    U, S, Vt = np.linalg.svd(K, full_matrices=False)
    r = min(rank, S.size)
    s = np.sqrt(S[:r])
    P, Q = U[:, :r] * s, Vt[:r].T * s
    if nonneg:
        for l in range(r):
            if P[:, l].sum() + Q[:, l].sum() < 0:
                P[:, l], Q[:, l] = -P[:, l], -Q[:, l]
        P, Q = np.maximum(P, 0), np.maximum(Q, 0)
    if r < rank:
        P = np.hstack([P, np.zeros((P.shape[0], rank - r))])
        Q = np.hstack([Q, np.zeros((Q.shape[0], rank - r))])
    return P, Q
