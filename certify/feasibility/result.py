"""The result of a feasibility question at one rank (:class:`FeasibilityResult`):
its outcome, the evidence behind it, and the claim it turns into.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from certify.core.certificate import Claim, ClaimKind
from certify.core.families import Family
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict
from certify.feasibility.chain_bounds import ChainBound
from certify.feasibility.model import Features, ModelClass, Witness


class Outcome(str, enum.Enum):
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FeasibilityResult:
    outcome: Outcome
    rank: int
    features: Features
    family: Family
    method: str
    margin: Fraction | None = None
    bound: ChainBound | None = None
    witness: Witness | None = None
    reason: str | None = None
    best_float_margin: float | None = None
    timings: dict = field(default_factory=dict)
    search_info: dict = field(default_factory=dict)     # LP and restart counts (diagnostics)
    model_class: ModelClass = ModelClass.PAPER

    @property
    def cube_rank(self) -> int | None:
        """Rank of the whole-cube head a paper-class witness extends to."""
        return None if self.witness is None else self.witness.cube_rank

    @property
    def scope(self) -> str:
        """What ``rank`` is about: ``cube`` when a whole-cube head of that rank is
        proved, else ``family``."""
        return "cube" if self.cube_rank is not None and self.cube_rank == self.rank else "family"

    def summary(self) -> dict[str, Any]:
        out = {"verdict": self.outcome.value, "rank": self.rank,
               "features": self.features.value, "class": self.model_class.value,
               "scope": self.scope, "cube_rank": self.cube_rank,
               "extension": None if self.witness is None or self.witness.extension is None
               else dict(self.witness.extension), "family": self.family.name,
               "sha256": self.family.sha256, "method": self.method,
               "margin": None if self.margin is None else q_to_str(self.margin),
               "margin_float": None if self.margin is None else float(self.margin),
               "lower_bound": None if self.bound is None else q_to_str(self.bound.bound),
               "lower_bound_float": None if self.bound is None else float(self.bound.bound),
               "max_infeasible_rank": None if self.bound is None else self.bound.max_infeasible_rank,
               "reason": self.reason, "timings": dict(self.timings)}
        return out

    def to_claim(self) -> Claim:
        params = {"rank": self.rank, "features": self.features.value,
                  "class": self.model_class.value, "scope": self.scope,
                  "family": self.family.name, "family_sha256": self.family.sha256,
                  "error": "1/2"}
        fam = self.family.to_json()
        if self.outcome is Outcome.INFEASIBLE:      # statements: certify.checkers.statements
            if self.bound is None:
                raise ValueError("a proved-infeasible result carries the chain bound it rests on")
            return Claim(ClaimKind.INFEASIBLE, None, Verdict.PROVED, params,
                         {"family": fam, "derivation": self.bound.to_json()},
                         self.method, None, self.timings)
        statement = None
        if self.outcome is Outcome.FEASIBLE:
            if self.witness is None or self.margin is None:
                raise ValueError("a proved-feasible result carries its witness and exact margin")
            info: dict[str, Any] = {"margin_float": float(self.margin), **self.search_info}
            if self.cube_rank is not None:
                info["cube_rank"] = self.cube_rank
            return Claim(ClaimKind.FEASIBLE, statement, Verdict.PROVED, params,
                         {"family": fam, "witness": self.witness.to_json(),
                          "margin": q_to_str(self.margin)}, self.method, None, self.timings,
                         info=info)
        info = dict(self.search_info)
        if self.bound is not None:
            info["chain_bound"] = q_to_str(self.bound.bound)
        if self.best_float_margin is not None and np.isfinite(self.best_float_margin):
            info["best_float_lp_margin"] = float(self.best_float_margin)
        return Claim(ClaimKind.FEASIBLE, statement, Verdict.UNKNOWN, params, {},
                     self.method, self.reason, self.timings, info=info)
