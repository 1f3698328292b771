"""The result of one transcript check (:class:`TranscriptResult`) and the names
shared by the float and the certified paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from certify.core.certificate import Claim
from certify.core.verdict import Verdict
from certify.transcript.capacity import Capacity, _num
from certify.transcript.search import SearchResult

DEFAULT_EXACT_LIMIT = 4096


REPLAY_ASSUMPTION = "replay:transcript-enumeration"


@dataclass(frozen=True)
class TranscriptResult:
    verdict: Verdict
    reason: str | None
    capacity: Capacity
    search: SearchResult
    collision: dict[str, Any] | None            # kappa_a/kappa_b/... summary
    injective: bool | None                      # float transcripts pairwise distinct (complete runs)
    exact_checked: int                          # assignments whose outputs were checked exactly
    exact_correct: int
    claims: tuple[Claim, ...]
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        s = self.search
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "bits_available": _num(self.capacity.bits_available),
            "bits_needed": self.capacity.bits_needed,
            "bound_holds": self.capacity.holds,
            "capacity": self.capacity.to_json(),
            "assignments": s.assignments,
            "assignments_checked": s.checked,
            "distinct_transcripts": s.distinct_transcripts,
            "injective": self.injective,
            "candidate_collisions": len(s.candidates),
            "collision": self.collision,
            "float_accuracy": s.float_accuracy,
            "float_max_error": s.float_max_error,
            "exact_checked": self.exact_checked,
            "exact_accuracy": (self.exact_correct / self.exact_checked) if self.exact_checked else None,
            "seconds": self.timings,
        }
