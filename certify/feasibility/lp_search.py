"""Witness search by alternating LPs (:mod:`solvers.factor`): from the
one-feature-per-query construction down to the asked rank, one rank at a
time, every improving float candidate rounded and checked exactly.

Every ``time_limit`` here is a CPU-second budget of this process
(:mod:`certify.core.budget`), checked between LPs; no LP is stopped by a clock.
"""

from __future__ import annotations

import numpy as np

from certify.core.budget import CpuBudget
from certify.core.progress import TimeBar, time_bar
from certify.feasibility.model import FeasibilityProblem, Features, verify_factors


def search_witness(problem: FeasibilityProblem, rank: int, features: Features, *,
                   time_limit: float, seed: int = 0, progress: bool | TimeBar = False,
                   init: tuple[np.ndarray, np.ndarray] | None = None,
                   iterations: int | None = None):
    """Alternating-LP search; every improving float candidate is rounded and
    checked exactly. ``progress``: True for a bar of its own, or a bar shared by the
    caller. Starts from ``init`` (float factors of a higher rank,
    truncated) when given, then random restarts. Returns
    ``(FactorResult, witness or None, check or None, float factors or None)``."""
    from solvers.factor import FactorProblem, alternating_search, truncate

    Ga, Gh = problem.constraint_matrices()
    fp = FactorProblem(problem.num_rows, problem.num_cols, problem.entries, Ga, Gh)
    nonneg = features is Features.NONNEGATIVE
    found: list = []

    def accept(P, Q, delta):
        w, chk = verify_factors(problem, P, Q, features, rank)
        if w is not None and chk is not None and chk.ok:
            found.append((w, chk, (P.copy(), Q.copy())))
            return True
        return False

    start = None
    if init is not None:
        start = truncate(fp, init[0], init[1], rank, nonneg=nonneg)
    own_bar = time_bar(f"rank {rank} {features.value}", time_limit, progress is True)
    # a bar shared by the caller (descend), else this search's own
    bar = progress if isinstance(progress, TimeBar) else own_bar
    try:
        budget = {} if iterations is None else {"max_iterations": iterations}
        res = alternating_search(fp, rank, nonneg=nonneg, rng=np.random.default_rng(seed),
                                 time_limit=time_limit, accept=accept, progress=bar,
                                 init=start, **budget)
    finally:
        if own_bar is not None:
            own_bar.close()
    if found:
        return res, found[-1][0], found[-1][1], found[-1][2]
    return res, None, None, None


def _construction_factors(problem: FeasibilityProblem) -> tuple[np.ndarray, np.ndarray]:
    """Float factors of the one-feature-per-query construction (rank = #queries)."""
    toks = problem.family.tokens.astype(np.float64)
    G = toks[problem.queries] @ toks[problem.keys].T                   # (R, C)
    return np.eye(problem.num_rows), (float(2 * problem.family.n) ** -G).T


def descend(problem: FeasibilityProblem, rank: int, features: Features, *, time_limit: float,
            seed: int = 0, progress: bool = False, iterations: int | None = None):
    """From the rank-#queries construction down to ``rank``, one rank at a time,
    each start the truncation of the previous solution; each intermediate rank
    gets an equal share of the CPU seconds left, the target rank the rest.
    Returns ``(FactorResult, witness, check)`` of the target."""
    if iterations is not None:               # reproducible: LP budgets, no clock
        time_limit = float("inf")
    budget = CpuBudget(time_limit)
    cur = _construction_factors(problem)
    R = problem.num_rows
    # one bar for the whole descent, named by the rank asked for
    bar = time_bar(f"rank {rank} {features.value} search", time_limit, bool(progress))
    shared: bool | TimeBar = bar if bar is not None else False
    try:
        return _descend(problem, rank, features, budget, seed, shared, cur, R, iterations)
    finally:
        if bar is not None:
            bar.close()


def _descend(problem, rank, features, budget: CpuBudget, seed, progress, cur, R,
             iterations=None):
    res = w = chk = None
    for r in range(R - 1, rank - 1, -1):
        left = budget.left()
        if left <= 0:              # the budget ran out above the target: no witness of it
            return res, None, None
        share = left if r == rank else left / (r - rank + 1)
        res, w, chk, fac = search_witness(problem, r, features, time_limit=share,
                                          seed=seed + r, progress=progress, init=cur,
                                          iterations=iterations)
        if fac is None:
            if r != rank:          # the chain broke: spend what is left at the target
                left = budget.left()
                res, w, chk, fac = search_witness(problem, rank, features, time_limit=max(left, 0.01),
                                                  seed=seed, progress=progress, init=cur,
                                                  iterations=iterations)
            break
        cur = fac
    return res, w, chk
