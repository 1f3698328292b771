"""Thm 9 / Eq. 8: the bits a transcript needs and the bits a quantized sketch has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from certify.checkers.statements import render
from certify.core.bounds.exact import MAX_POWER_BITS, as_int, ceil_log2
from certify.core.errors import UncertifiableError

# ------------------------------------------------------------------ Thm 9 / Eq. 8

def bits_available(L: Any, H: Any, r: Any, dv: Any, p: Any) -> int:
    """Eq. 8's left side: ``L H r (dv+1) p`` transcript bits."""
    return (as_int(L, "L", minimum=1) * as_int(H, "H", minimum=1) * as_int(r, "r", minimum=1)
            * (as_int(dv, "dv", minimum=1) + 1) * as_int(p, "p", minimum=0))


def _assignments(s: Any, q: Any) -> int:
    s = as_int(s, "s", minimum=1)
    q = as_int(q, "q", minimum=1)
    if q * (s + 1).bit_length() > MAX_POWER_BITS:
        raise UncertifiableError(f"(s+1)^q with s = {s}, q = {q} is too large to form exactly")
    return (s + 1) ** q


def bits_needed(s: Any, q: Any) -> int:
    """``ceil(q log2(s+1))``: the least b with ``2^b >= (s+1)^q``.

    >>> bits_needed(3, 8)
    16
    """
    return ceil_log2(_assignments(s, q))


def transcript_bound_holds(bits: Any, s: Any, q: Any) -> bool:
    """Eq. 8 decided exactly: ``2^bits >= (s+1)^q``."""
    return as_int(bits, "bits", minimum=0) >= bits_needed(s, q)


def alphabets_suffice(sizes: Iterable[Any], s: Any, q: Any) -> bool:
    """Thm 9 decided exactly: ``prod_l |Sigma_l| >= (s+1)^q``."""
    prod = 1
    for i, a in enumerate(sizes):
        prod *= as_int(a, f"|Sigma_{i + 1}|", minimum=1)
    return prod >= _assignments(s, q)


def minimal_bits_per_coordinate(L: Any, H: Any, r: Any, dv: Any, s: Any, q: Any) -> int:
    """Least p with ``L H r (dv+1) p >= q log2(s+1)``."""
    per_p = bits_available(L, H, r, dv, 1)
    return -(-bits_needed(s, q) // per_p)


@dataclass(frozen=True)
class Eq8Check:
    """Eq. 8 at given sizes: ``holds`` is False when the model provably cannot
    solve every assignment (Thm 9)."""

    NAME = "eq8"
    L: int
    H: int
    r: int
    dv: int
    p: int
    s: int
    q: int
    bits_available: int
    bits_needed: int

    @property
    def holds(self) -> bool:
        return self.bits_available >= self.bits_needed

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "L": self.L, "H": self.H, "r": self.r, "dv": self.dv,
                "p": self.p, "s": self.s, "q": self.q}

    def evidence(self) -> dict[str, Any]:
        return {"bits_available": self.bits_available, "bits_needed": self.bits_needed,
                "holds": self.holds}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def eq8(L: Any, H: Any, r: Any, dv: Any, p: Any, s: Any, q: Any) -> Eq8Check:
    """Eq. 8 at ``L`` layers, ``H`` heads, rank ``r``, value width ``dv``,
    ``p`` bits per coordinate, against ``(s+1)^q`` assignments."""
    sizes = {"L": L, "H": H, "r": r, "dv": dv}
    ints = {k: as_int(v, k, minimum=1) for k, v in sizes.items()}
    p_, s_, q_ = as_int(p, "p", minimum=0), as_int(s, "s", minimum=1), as_int(q, "q", minimum=1)
    return Eq8Check(**ints, p=p_, s=s_, q=q_,
                    bits_available=bits_available(ints["L"], ints["H"], ints["r"], ints["dv"], p_), bits_needed=bits_needed(s_, q_))
