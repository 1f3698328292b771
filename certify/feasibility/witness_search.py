"""The smooth witness search (:mod:`solvers.structured_search`) bound to a
feasibility problem of attention heads.

The solver knows nothing of attention; this module gives it the start values
(each used pair's value starts at the key's overlap with the query, the target
of the "pure" input) and the exact check
(:func:`certify.feasibility.model.verify_factors`: dyadic rounding, value LP for
the exact kernel, exact re-check). A returned witness has passed that check.
"""

from __future__ import annotations

import numpy as np

from certify.feasibility.model import FeasibilityProblem, Features, verify_factors
from solvers import structured_search as _search
from solvers.structured_search import StructuredResult


def start_values(problem: FeasibilityProblem) -> np.ndarray:
    """``g_e = <x_a, z_b>`` for each used pair ``e = (a, b)``: (E,)."""
    toks = problem.family.tokens.astype(np.float64)
    ex = np.asarray(problem.entries)
    q = toks[np.asarray(problem.queries)][ex[:, 0]]
    k = toks[np.asarray(problem.keys)][ex[:, 1]]
    return (q * k).sum(-1)


def smooth_search(problem: FeasibilityProblem, rank: int, features: Features, *,
                  time_limit: float, seed: int = 0,
                  init: tuple[np.ndarray, np.ndarray] | None = None,
                  polish_threshold: float = -0.02, polish_seconds: float = 30.0,
                  progress=None) -> StructuredResult:
    """:func:`solvers.structured_search.smooth_search` with the feasibility
    model's start values and exact check."""
    features = Features(features)
    return _search.smooth_search(
        problem, rank, features is Features.NONNEGATIVE,
        verify=lambda P, Q: verify_factors(problem, P, Q, features, rank),
        g_init=start_values(problem), time_limit=time_limit, seed=seed, init=init,
        polish_threshold=polish_threshold, polish_seconds=polish_seconds, progress=progress)


__all__ = ["StructuredResult", "smooth_search", "start_values"]
