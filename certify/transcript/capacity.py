"""Eq. 8 / Thm 9: how many transcripts a quantized model can produce against the
``(s+1)^q`` assignments of the multilevel family, exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from certify.core.certificate import Claim
from certify.transcript.model import QuantizedSketchModel


@dataclass(frozen=True)
class Capacity:
    coordinates: int              # T = L H r (dv + 1)
    alphabet: int                 # per coordinate
    assignments: int              # (s+1)^q
    holds: bool                   # alphabet^T >= (s+1)^q, exact
    bits_available: float         # T log2 alphabet (an integer for uniform quantizers)
    bits_needed: float            # q log2(s+1)

    def to_json(self) -> dict[str, Any]:
        """Exact evidence: ``holds`` is ``alphabet^coordinates >= assignments``; the
        integer bit counts are ``bits_needed`` = least b with ``2^b >= assignments``
        and ``bits_available`` = ``coordinates log2 alphabet`` when the alphabet
        is a power of two (else null)."""
        A = self.alphabet
        return {"coordinates": self.coordinates, "alphabet": A,
                "assignments": self.assignments, "holds": self.holds,
                "bits_available": self.coordinates * (A.bit_length() - 1) if A & (A - 1) == 0 else None,
                "bits_needed": (self.assignments - 1).bit_length()}

    def display(self) -> dict[str, float]:
        """Float bit counts for people (never evidence)."""
        return {"bits_available": float(self.bits_available), "bits_needed": float(self.bits_needed)}


def _num(x: float):
    return int(x) if float(x).is_integer() else x


def capacity(model: QuantizedSketchModel, s: int, q: int) -> Capacity:
    from certify.core import bounds

    T = model.T
    A = model.quantizer.alphabet
    N = (s + 1) ** q
    holds = bounds.alphabets_suffice([A] * T, s, q)
    return Capacity(T, A, N, holds, T * math.log2(A), q * math.log2(s + 1))


def bound_claim(model: QuantizedSketchModel, s: int, q: int) -> Claim | None:
    """Eq. 8 as a ``BOUND`` claim (uniform quantizers: ``p`` bits per coordinate)."""
    from certify.core import bounds

    if model.quantizer.kind != "uniform":
        return None
    c = model.cfg
    return bounds.bound_claim(bounds.eq8(c.layers, c.heads, c.rank, c.dv,
                                         model.quantizer.bits, s, q))
