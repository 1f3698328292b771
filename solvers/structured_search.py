"""Rank-r witness search by a smooth margin objective, then LP polish and an exact check.

No knowledge of attention: the problem is any object with the fields of a
ratio-of-bilinear-forms problem (``entries`` (E, 2) row/column pairs,
``counts`` a sparse (P, E) matrix, ``targets`` (P,), ``num_rows``,
``num_cols``, ``num_entries`` and ``constraint_matrices()`` for the LP
polish); the caller gives the start values ``g_init`` and the exact check
``verify(PhiQ, PhiK) -> (witness, check)`` (``check.ok``). The attention
binding is :func:`certify.feasibility.witness_search.smooth_search`.

``alpha_e = <PhiQ[a_e], PhiK[b_e]>`` on the used pairs and free values ``g_e``;
scored position ``p`` predicts ``t_hat_p = sum_e c_pe alpha_e g_e / sum_e c_pe alpha_e``.
The slacks ``t_p + 1/2 - t_hat_p`` and ``t_hat_p - t_p + 1/2`` (and, for signed
features, the row-normalized kernel values ``alpha_e / mean_row(alpha)``) must be
positive. :func:`smooth_search` maximizes a soft minimum of all of them,
``-log(sum exp(-beta * slack)) / beta`` with ``beta`` annealed, by L-BFGS over
``(PhiQ, PhiK, g)`` jointly (nonnegative class: ``PhiQ = A^2``, ``PhiK = B^2``),
from random or given starts. Each candidate goes to the caller's exact check;
if it is close but not yet exact, the
alternating LPs of :mod:`solvers.factor` continue from it. Floats propose, the
exact check decides: a returned witness has passed it. Every ``time_limit`` here
counts CPU seconds of this process (:mod:`certify.core.budget`), checked between
L-BFGS stages and restarts, so the machine's load does not change the answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch

    from certify.core.progress import TimeBar

#: ``verify(PhiQ, PhiK) -> (witness or None, check or None)``; a witness counts
#: only when ``check.ok`` (the caller's exact check passed).
Verify = Callable[[np.ndarray, np.ndarray], "tuple[Any, Any]"]


@dataclass(frozen=True)
class StructuredResult:
    witness: Any | None                # exactly verified by the caller's check (None if not found)
    check: Any | None
    phi_q: np.ndarray | None           # float factors of the best candidate
    phi_k: np.ndarray | None
    best_margin: float                 # best float soft-min slack reached
    restarts: int
    seconds: float
    stage: str                         # "smooth", "alternating" or "none"


def _torch_problem(problem: Any) -> tuple[torch.Tensor, ...]:
    import torch

    ex = torch.as_tensor(problem.entries, dtype=torch.long)
    C = torch.as_tensor(problem.counts.toarray(), dtype=torch.float64)
    tgt = torch.as_tensor(problem.targets, dtype=torch.float64)
    rows = ex[:, 0]
    cnt = torch.bincount(rows, minlength=problem.num_rows).to(torch.float64)
    return ex, C, tgt, rows, cnt


def smooth_optimize(problem: Any, rank: int, nonneg: bool, g_init: np.ndarray, *,
                    seed: int = 0, init: tuple[np.ndarray, np.ndarray] | None = None,
                    betas: Sequence[float] = (10.0, 30.0, 100.0, 300.0), max_iter: int = 400,
                    time_limit: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """One L-BFGS run. Returns ``(PhiQ, PhiK, g, margin)`` in floats, ``margin`` the
    smallest slack (> 0: strictly correct in floats)."""
    import torch

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(int(seed))
    nonneg = bool(nonneg)
    ex, C, tgt, rows, cnt = _torch_problem(problem)
    R, K, _E = problem.num_rows, problem.num_cols, problem.num_entries
    if init is not None:
        P0 = torch.as_tensor(np.asarray(init[0], dtype=np.float64)[:, :rank])
        Q0 = torch.as_tensor(np.asarray(init[1], dtype=np.float64)[:, :rank])
        if P0.shape[1] < rank:
            P0 = torch.cat([P0, 1e-3 * torch.randn(R, rank - P0.shape[1], generator=gen,
                                                    dtype=torch.float64)], 1)
            Q0 = torch.cat([Q0, 1e-3 * torch.randn(K, rank - Q0.shape[1], generator=gen,
                                                    dtype=torch.float64)], 1)
        if nonneg:
            P0, Q0 = P0.clamp_min(0).sqrt(), Q0.clamp_min(0).sqrt()
    else:
        # a positive start keeps every denominator positive; signs may develop later
        P0 = torch.rand(R, rank, generator=gen, dtype=torch.float64)
        Q0 = torch.rand(K, rank, generator=gen, dtype=torch.float64)
        if nonneg:
            P0, Q0 = P0.sqrt(), Q0.sqrt()
    P = P0.contiguous().clone().requires_grad_()
    Q = Q0.contiguous().clone().requires_grad_()
    g = torch.as_tensor(np.asarray(g_init, dtype=np.float64)).clone().requires_grad_()

    def slacks() -> torch.Tensor:
        Pf, Qf = (P * P, Q * Q) if nonneg else (P, Q)
        alpha = (Pf[ex[:, 0]] * Qf[ex[:, 1]]).sum(-1)
        den = C @ alpha
        num = C @ (alpha * g)
        that = num / den
        parts = [tgt + 0.5 - that, that - tgt + 0.5]
        rmean = torch.zeros(R, dtype=torch.float64).index_add(0, rows, alpha.abs()) / cnt
        parts.append(alpha / rmean[rows].clamp_min(1e-300))
        return torch.cat(parts)

    opt = torch.optim.LBFGS([P, Q, g], max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-12, tolerance_change=1e-15)
    t0 = time.process_time()
    beta = [betas[0]]

    def closure() -> torch.Tensor:
        opt.zero_grad()
        s = slacks()
        loss = torch.logsumexp(-beta[0] * s, 0) / beta[0]
        if not torch.isfinite(loss):
            loss = torch.zeros((), dtype=torch.float64, requires_grad=True)
        loss.backward()
        return loss

    for b in betas:
        if time_limit is not None and time.process_time() - t0 > time_limit:
            break
        beta[0] = b
        opt.step(closure)
    with torch.no_grad():
        s = slacks()
        margin = float(s.min()) if torch.isfinite(s).all() else -np.inf
        Pf, Qf = (P * P, Q * Q) if nonneg else (P, Q)
        return Pf.numpy().copy(), Qf.numpy().copy(), g.detach().numpy().copy(), margin


def smooth_search(problem: Any, rank: int, nonneg: bool, *, verify: Verify, g_init: np.ndarray,
                  time_limit: float, seed: int = 0,
                  init: tuple[np.ndarray, np.ndarray] | None = None,
                  polish_threshold: float = -0.02, polish_seconds: float = 30.0,
                  progress: TimeBar | None = None) -> StructuredResult:
    """Random restarts (the first from ``init`` when given) of :func:`smooth_optimize`;
    every candidate is checked exactly, near misses are polished by alternating
    LPs. Stops at the first exactly verified witness or at ``time_limit``."""
    rng = np.random.default_rng(seed)
    t0 = time.process_time()
    best: tuple[np.ndarray | None, np.ndarray | None, float] = (None, None, -np.inf)
    restarts = 0
    while time.process_time() - t0 < time_limit:
        left = time_limit - (time.process_time() - t0)
        P, Q, _g, m = smooth_optimize(problem, rank, nonneg, g_init, seed=int(rng.integers(2**31)),
                                      init=init if restarts == 0 else None, time_limit=left)
        restarts += 1
        if progress is not None:
            progress.update(1)
            progress.set_postfix(margin=f"{max(m, best[2]):.3g}")
        if m > best[2]:
            best = (P, Q, m)
        if m > 0:
            w, chk = verify(P, Q)
            if w is not None and chk is not None and chk.ok:
                return StructuredResult(w, chk, P, Q, m, restarts, time.process_time() - t0,
                                        "smooth")
        if m > polish_threshold:
            left = time_limit - (time.process_time() - t0)
            if left <= 0:
                break
            res = _polish(problem, rank, nonneg, verify, P, Q, seed=int(rng.integers(2**31)),
                          time_limit=min(polish_seconds, left))
            if res is not None:
                w, chk, P2, Q2 = res
                return StructuredResult(w, chk, P2, Q2, m, restarts, time.process_time() - t0,
                                        "alternating")
    return StructuredResult(None, None, best[0], best[1], best[2], restarts,
                            time.process_time() - t0, "none")


def _polish(problem: Any, rank: int, nonneg: bool, verify: Verify, P: np.ndarray, Q: np.ndarray, *,
            seed: int, time_limit: float) -> tuple[Any, Any, np.ndarray, np.ndarray] | None:
    """Alternating LPs from ``(P, Q)``; a witness only if it passes the exact check."""
    from solvers.factor import FactorProblem, alternating_search

    Ga, Gh = problem.constraint_matrices()
    fp = FactorProblem(problem.num_rows, problem.num_cols, problem.entries, Ga, Gh)
    found = []

    def accept(P_: np.ndarray, Q_: np.ndarray, delta: float) -> bool:
        w, chk = verify(P_, Q_)
        if w is not None and chk is not None and chk.ok:
            found.append((w, chk, P_.copy(), Q_.copy()))
            return True
        return False

    alternating_search(fp, rank, nonneg=bool(nonneg),
                       rng=np.random.default_rng(seed), time_limit=time_limit, accept=accept,
                       init=(P, Q), max_iterations=200)
    return found[-1] if found else None
