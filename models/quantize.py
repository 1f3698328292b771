"""Quantizers of the cross-token channel: the finite alphabets of Thm 9.

Every coordinate of every sketch ``(S, z)`` passes through one quantizer
before any token reads it. Two kinds:

* :class:`UniformQuantizer` -- ``2^p`` levels ``lo + k (hi - lo) / (2^p - 1)``,
  ``k = clamp(floor((x - lo) / step + 1/2), 0, 2^p - 1)`` (ties round up).
  The range ``[lo, hi]`` is an exact rational, stated or calibrated.
* :class:`FloatFormatQuantizer` -- round to nearest, ties to even, onto the
  finite values of fp8 e4m3 (the ``e4m3fn`` variant: no infinities, one NaN per
  sign), fp8 e5m2, bf16 or fp16, saturating to ``+-max``: it never produces
  NaN or an infinity. ``-0`` and ``+0`` are one value. Alphabet size = number
  of finite values counted once each = ``2 * (positive finite values) + 1``:
  e4m3 253 (256 patterns, 2 NaN, two zeros), e5m2 247 (256, 2 inf, 6 NaN, two
  zeros), bf16 65279, fp16 63487.

Each quantizer has an exact form on ``fractions.Fraction`` (``index_exact``,
``value_exact``; monotone, so an interval whose two ends share an index lies in
one cell) and a float64 torch form (``index_torch``) that only *proposes*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping

from certify.core.errors import InputError

FORMAT_NAMES = ("fp8-e4m3", "fp8-e5m2", "bf16", "fp16")


@dataclass(frozen=True)
class _FloatSpec:
    man: int           # explicit mantissa bits
    emin: int          # exponent of the smallest normal binade
    max: Fraction      # largest finite value
    alphabet: int      # finite values, -0 == +0


_FLOAT_SPECS = {
    "fp8-e4m3": _FloatSpec(3, -6, Fraction(448), 253),
    "fp8-e5m2": _FloatSpec(2, -14, Fraction(57344), 247),
    "bf16": _FloatSpec(7, -126, Fraction((2 ** 8 - 1) * 2 ** 120), 65279),
    "fp16": _FloatSpec(10, -14, Fraction(65504), 63487),
}


def _as_fraction(x: Any, what: str) -> Fraction:
    if isinstance(x, bool):
        raise InputError(f"{what} must be a number, got {x!r}")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise InputError(f"{what} must be finite, got {x!r}")
        return Fraction(x)
    try:
        return Fraction(x)
    except (TypeError, ValueError, ZeroDivisionError):
        raise InputError(f"{what} is not a rational number: {x!r}") from None


@dataclass(frozen=True)
class UniformQuantizer:
    """``bits`` bits per coordinate on the exact range ``[lo, hi]``."""

    bits: int
    lo: Fraction
    hi: Fraction
    calibrated: str | None = None      # how the range was chosen, when calibrated

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or self.bits < 1:
            raise InputError(f"bits per coordinate must be an integer >= 1, got {self.bits!r}")
        if self.bits > 48:
            raise InputError(f"bits per coordinate must be <= 48 here, got {self.bits}")
        object.__setattr__(self, "lo", _as_fraction(self.lo, "range lo"))
        object.__setattr__(self, "hi", _as_fraction(self.hi, "range hi"))
        if not self.lo < self.hi:
            raise InputError(f"quantizer range needs lo < hi, got [{self.lo}, {self.hi}]")

    kind = "uniform"

    @property
    def levels(self) -> int:
        return 1 << self.bits

    @property
    def alphabet(self) -> int:
        return self.levels

    @property
    def step(self) -> Fraction:
        return (self.hi - self.lo) / (self.levels - 1)

    def index_exact(self, x: Fraction) -> int:
        t = (Fraction(x) - self.lo) / self.step + Fraction(1, 2)
        return min(max(math.floor(t), 0), self.levels - 1)

    def value_of_index(self, k: int) -> Fraction:
        return self.lo + k * self.step

    def value_exact(self, x: Fraction) -> Fraction:
        return self.value_of_index(self.index_exact(x))

    def index_torch(self, x):
        """float64 tensor -> int64 tensor of indices (proposal only)."""
        import torch

        t = (x - float(self.lo)) / float(self.step)
        return torch.clamp(torch.floor(t + 0.5), 0, self.levels - 1).to(torch.int64)

    def dequantize_torch(self, idx):
        return idx.double() * float(self.step) + float(self.lo)

    def quantize_torch(self, x):
        """float64 tensor -> (int64 key tensor, float64 dequantized tensor)."""
        idx = self.index_torch(x)
        return idx, self.dequantize_torch(idx)

    def to_json(self) -> dict[str, Any]:
        from certify.core.numbers import q_to_str

        out = {"kind": "uniform", "bits": self.bits, "lo": q_to_str(self.lo),
               "hi": q_to_str(self.hi)}
        if self.calibrated:
            out["calibrated"] = self.calibrated
        return out

    def describe(self) -> str:
        return f"uniform {self.bits}-bit on [{self.lo}, {self.hi}]"


@dataclass(frozen=True)
class FloatFormatQuantizer:
    """Round to nearest even on a float format's finite values, saturating."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in _FLOAT_SPECS:
            raise InputError(f"unknown float format {self.name!r}; choose from {', '.join(FORMAT_NAMES)}")

    kind = "float"

    @property
    def spec(self) -> _FloatSpec:
        return _FLOAT_SPECS[self.name]

    @property
    def alphabet(self) -> int:
        return self.spec.alphabet

    @property
    def bits(self) -> float:
        return math.log2(self.alphabet)

    def value_exact(self, x: Fraction) -> Fraction:
        x = Fraction(x)
        if x == 0:
            return Fraction(0)
        sp = self.spec
        ax = abs(x)
        e = ax.numerator.bit_length() - ax.denominator.bit_length()
        if Fraction(2) ** e > ax:
            e -= 1                                    # now 2^e <= ax < 2^(e+1)
        ulp = Fraction(2) ** (max(e, sp.emin) - sp.man)
        t = ax / ulp
        n = math.floor(t)
        rest = t - n
        if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
            n += 1
        r = min(n * ulp, sp.max)
        return r if x > 0 else -r

    def index_exact(self, x: Fraction) -> Fraction:
        """The value itself is the symbol of the alphabet."""
        return self.value_exact(x)

    def quantize_torch(self, x):
        """float64 tensor -> (int64 key = bit pattern of the rounded float64 value,
        float64 rounded value). Proposal only."""
        import torch

        sp = self.spec
        _, ex = torch.frexp(x)                         # x = mant * 2^ex, |mant| in [0.5, 1)
        e = torch.clamp(ex.to(torch.int64) - 1, min=sp.emin)
        ulp = torch.pow(torch.tensor(2.0, dtype=torch.float64), (e - sp.man).double())
        r = torch.round(x / ulp) * ulp                 # torch.round: ties to even
        mx = float(sp.max)
        r = torch.clamp(r, -mx, mx) + 0.0              # + 0.0 turns -0 into +0
        return r.view(torch.int64), r

    def to_json(self) -> dict[str, Any]:
        return {"kind": "float", "format": self.name}

    def describe(self) -> str:
        return f"{self.name} (round to nearest even, saturating; {self.alphabet} values)"


Quantizer = UniformQuantizer | FloatFormatQuantizer


def quantizer_from_json(obj: Mapping[str, Any]) -> Quantizer:
    if not isinstance(obj, Mapping):
        raise InputError("quantizer must be a JSON object")
    kind = obj.get("kind")
    if kind == "uniform":
        extra = set(obj) - {"kind", "bits", "lo", "hi", "calibrated"}
        if extra:
            raise InputError(f"uniform quantizer has unknown keys: {sorted(extra)}")
        from certify.core.numbers import str_to_q

        bits: Any = obj.get("bits")         # any JSON value: UniformQuantizer rejects a non-integer
        return UniformQuantizer(bits=bits, lo=str_to_q(obj.get("lo", "x")),
                                hi=str_to_q(obj.get("hi", "x")), calibrated=obj.get("calibrated"))
    if kind == "float":
        extra = set(obj) - {"kind", "format"}
        if extra:
            raise InputError(f"float quantizer has unknown keys: {sorted(extra)}")
        return FloatFormatQuantizer(str(obj.get("format")))
    raise InputError(f"unknown quantizer kind {kind!r}")


def dyadic_outward(lo: float, hi: float, frac_bits: int = 8) -> tuple[Fraction, Fraction]:
    """Round a float range outward to multiples of ``2^-frac_bits`` (exact
    dyadic ends, ``lo < hi``)."""
    scale = 1 << frac_bits
    a = Fraction(math.floor(lo * scale), scale)
    b = Fraction(math.ceil(hi * scale), scale)
    if b <= a:
        b = a + Fraction(1, scale)
    return a, b
