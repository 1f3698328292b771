"""Rank-r search for a factored matrix whose rows satisfy strict linear constraints.

The problem (no knowledge of attention): rows ``a = 0..R-1``, columns
``b = 0..C-1``, a list of used entries ``(a_e, b_e)``, and constraints

    Ga @ alpha + Gh @ H > 0,    alpha_e = <P[a_e], Q[b_e]>,   H free,

each constraint touching the entries of one row, homogeneous in the row. Find
``P (R, r)``, ``Q (C, r)`` with either ``alpha >= 0`` on used entries
(``nonneg=False``) or ``P, Q >= 0`` (``nonneg=True``). An entry that no
constraint touches (a zero column of ``Ga`` and ``Gh``) still gets
``alpha_e >= floor``: that is how a caller asks ``alpha >= 0`` on pairs beyond
the constrained ones (the paper's model class: every (query, token) pair).

Method: alternating LPs. For fixed ``Q`` the constraints are linear in
``(P, H)`` jointly; for fixed ``P`` in ``(Q, H)``. Each LP maximizes a common
margin ``delta`` under a per-row normalization ``sum_{e in row} alpha_e = 1``
and ``alpha_e >= floor`` (a small floor keeps every used kernel value
positive, so exact rounding cannot make it negative). The current point is
feasible for the next LP, so ``delta`` never decreases. Random restarts when
it stalls. The result is a proposal: callers re-check it exactly.

Budgets: ``time_limit`` counts CPU seconds of this process (``time.process_time``,
:mod:`certify.core.budget`), checked between LPs; one LP is never stopped by a
clock, only by HiGHS's iteration limit (:func:`lp_iteration_limit`), so the
sequence of LPs, and the answer, do not depend on the machine's load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import scipy.sparse as sp

from solvers.lp import LPStatus, solve_lp

if TYPE_CHECKING:
    from certify.core.progress import TimeBar


@dataclass(frozen=True)
class FactorProblem:
    num_rows: int
    num_cols: int
    entries: np.ndarray          # (E, 2) int
    Ga: sp.csr_matrix            # (K, E)
    Gh: sp.csr_matrix            # (K, E)
    g_box: float = 1e2           # |H_e| <= g_box alpha_e (values bounded by g_box)


@dataclass(frozen=True)
class FactorResult:
    P: np.ndarray | None         # (R, r)
    Q: np.ndarray | None         # (C, r)
    delta: float                 # best LP margin reached (> 0: strictly feasible in floats)
    iterations: int
    restarts: int
    seconds: float               # CPU seconds of this process
    stopped: str                 # "accepted", "time_limit", "stalled"


def _lift(prob: FactorProblem, fixed: np.ndarray, side: str) -> sp.csr_matrix:
    """Matrix ``L (E, n*r)`` with ``alpha = L @ vec(free)`` for the free factor."""
    ex = prob.entries
    E = ex.shape[0]
    r = fixed.shape[1]
    own = ex[:, 0] if side == "P" else ex[:, 1]
    other = ex[:, 1] if side == "P" else ex[:, 0]
    n = prob.num_rows if side == "P" else prob.num_cols
    rows = np.repeat(np.arange(E), r)
    cols = (own[:, None] * r + np.arange(r)[None, :]).ravel()
    vals = fixed[other].ravel()
    return sp.csr_matrix((vals, (rows, cols)), shape=(E, n * r))


def lp_iteration_limit(num_rows: int, num_cols: int) -> int:
    """HiGHS iterations one alternating LP may take: 20 x (rows + columns), at
    least 20,000. The paper-5.1 steps (4404 rows, 826-1190 columns) take at most
    ~4,700 simplex iterations, so the cap only stops a solve that has gone wrong,
    and it stops it at the same point on any machine and under any load."""
    return max(20_000, 20 * (num_rows + num_cols))


def lp_step(prob: FactorProblem, fixed: np.ndarray, side: str, *, nonneg: bool, floor: float,
            box: float) -> tuple[np.ndarray, float] | tuple[None, None]:
    """One alternating step: optimize the free factor and ``H`` for fixed ``fixed``.
    Returns ``(free (n, r), delta)`` or ``(None, None)`` (no optimum, including a
    solve stopped by :func:`lp_iteration_limit`)."""
    L = _lift(prob, fixed, side)                        # (E, n r)
    E, nv = L.shape
    K = prob.Ga.shape[0]
    R = prob.num_rows
    norm = sp.csr_matrix((np.ones(E), (prob.entries[:, 0], np.arange(E))), shape=(R, E))
    A = sp.vstack([
        sp.hstack([prob.Ga @ L, prob.Gh, -np.ones((K, 1))]),     # constraints >= delta
        sp.hstack([norm @ L, sp.csr_matrix((R, E + 1))]),         # row sums = 1
        sp.hstack([L, sp.csr_matrix((E, E + 1))]),                # alpha >= floor
        sp.hstack([prob.g_box * L, -sp.eye(E), sp.csr_matrix((E, 1))]),   # H <= g_box alpha
        sp.hstack([prob.g_box * L, sp.eye(E), sp.csr_matrix((E, 1))]),    # H >= -g_box alpha
    ]).tocsr()
    lo = np.r_[np.zeros(K), np.ones(R), np.full(E, floor), np.zeros(2 * E)]
    hi = np.r_[np.full(K, np.inf), np.ones(R), np.full(E, np.inf), np.full(2 * E, np.inf)]
    col_lo = np.r_[np.full(nv, 0.0 if nonneg else -box), np.full(E, -np.inf), -1.0]
    col_hi = np.r_[np.full(nv, box), np.full(E, np.inf), 1.0]
    cost = np.zeros(nv + E + 1)
    cost[-1] = 1.0
    res = solve_lp(cost, A, lo, hi, col_lo, col_hi, maximize=True,
                   iteration_limit=lp_iteration_limit(*A.shape))
    if res.status is not LPStatus.OPTIMAL or res.x is None:
        return None, None
    r = fixed.shape[1]
    return res.x[:nv].reshape(-1, r), float(res.x[-1])


def _balance(P: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rescale feature l by s_l on P and 1/s_l on Q (alpha unchanged) to equal norms."""
    p = np.linalg.norm(P, axis=0)
    q = np.linalg.norm(Q, axis=0)
    s = np.where((p > 0) & (q > 0), np.sqrt(q / np.maximum(p, 1e-300)), 1.0)
    return P * s, Q / s


def alternating_search(prob: FactorProblem, rank: int, *, nonneg: bool,
                       rng: np.random.Generator, time_limit: float,
                       accept: Callable[[np.ndarray, np.ndarray, float], bool] | None = None,
                       floor: float = 1e-6, box: float = 1e3, stall: int = 6,
                       max_iterations: int = 10_000, progress: TimeBar | None = None,
                       init: tuple[np.ndarray, np.ndarray] | None = None) -> FactorResult:
    """Alternate ``P``- and ``Q``-LPs from random starts until ``accept(P, Q, delta)``
    returns True (called whenever ``delta > 0`` improves), ``time_limit`` CPU
    seconds of this process are spent (checked before each LP), or
    ``max_iterations`` steps are done."""
    t0 = time.process_time()
    best: tuple[np.ndarray | None, np.ndarray | None, float] = (None, None, -np.inf)
    it = restarts = 0
    stopped = "time_limit"
    while it < max_iterations:
        if init is not None and restarts == 0:
            P, Q = (np.array(a, dtype=np.float64) for a in init)
        else:
            P = rng.random((prob.num_rows, rank)) if nonneg else rng.standard_normal((prob.num_rows, rank))
            Q = rng.random((prob.num_cols, rank)) if nonneg else rng.standard_normal((prob.num_cols, rank))
        delta, hist, side = -np.inf, [], "P"
        while it < max_iterations:
            if time.process_time() - t0 >= time_limit:
                return FactorResult(best[0], best[1], best[2], it, restarts,
                                    time.process_time() - t0, "time_limit")
            fixed = Q if side == "P" else P
            new, d = lp_step(prob, fixed, side, nonneg=nonneg, floor=floor, box=box)
            it += 1
            if progress is not None:
                progress.update(1)
                progress.set_postfix(delta=f"{max(d if d is not None else -1, best[2]):.2e}",
                                     restarts=restarts)
            if new is None or d is None:        # both or neither (lp_step)
                break
            if side == "P":
                P = new
            else:
                Q = new
            P, Q = _balance(P, Q)
            improved = d > delta + 1e-9
            delta = max(delta, d)
            if d > best[2]:
                best = (P.copy(), Q.copy(), d)
            if d > 0 and improved and accept is not None and accept(P, Q, d):
                return FactorResult(P, Q, d, it, restarts, time.process_time() - t0, "accepted")
            hist.append(d)
            if len(hist) > stall and hist[-1] - hist[-1 - stall] < 1e-7:
                break
            side = "Q" if side == "P" else "P"
        restarts += 1
        stopped = "stalled"
    return FactorResult(best[0], best[1], best[2], it, restarts, time.process_time() - t0, stopped)


def truncate(prob: FactorProblem, P: np.ndarray, Q: np.ndarray, rank: int, *,
             nonneg: bool, floor: float = 1e-6, box: float = 1e3) -> tuple[np.ndarray, np.ndarray]:
    """A rank-``rank`` starting point from a higher-rank solution: the truncated SVD
    of ``P Q^T`` (real), or dropping the feature whose loss the ``P``-LP minds least
    (nonnegative)."""
    if P.shape[1] <= rank:
        return P, Q
    if not nonneg:
        U, S, Vt = np.linalg.svd(P @ Q.T, full_matrices=False)
        s = np.sqrt(S[:rank])
        return U[:, :rank] * s, Vt[:rank].T * s
    while P.shape[1] > rank:
        best = None
        for drop in range(P.shape[1]):
            keep = [k for k in range(P.shape[1]) if k != drop]
            _, d = lp_step(prob, Q[:, keep], "P", nonneg=True, floor=floor, box=box)
            if d is not None and (best is None or d > best[0]):
                best = (d, keep)
        keep = best[1] if best is not None else list(range(rank))
        P, Q = P[:, keep], Q[:, keep]
    return P, Q
