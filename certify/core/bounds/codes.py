"""Rank bounds from codes: Thm 5 (amplified rank), Thm 6 (three-token phase
transition, code size checked with integers), Cor 7 (growing exact length),
Prop 10 (size of the multilevel code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from certify.checkers.statements import render
from certify.core.bounds.exact import (
    E_UPPER,
    HALF,
    MAX_EXACT_M,
    THM6_EXTENDED_MIN_M,
    THM6_MIN_M,
    _check_m,
    _qs,
    as_int,
    ceil_q,
    check_eps,
    floor_log2,
    floor_q,
)
from certify.core.bounds.lemmas import _rank_from_bound, lemma3_factor, lemma3_min_gap
from certify.core.errors import InputError, UncertifiableError

# ------------------------------------------------------------------ Thm 5

@dataclass(frozen=True)
class Thm5Bound:
    """Thm 5 for a code of size ``code_size`` with directed distance ``delta``,
    step ``g``, exact length ``n`` and error ``eps``. The proof gives
    ``C_SU < 1/Lambda`` strictly, so for ``code_size >= 2`` Lemma 4 is strict."""

    NAME = "thm5"
    code_size: int
    delta: int
    g: int
    n: int
    eps: Fraction
    mu: Fraction                  # (n-2)(g-2eps)/(2eps) > 1
    steps: int                    # floor(delta/g)
    lam: Fraction                 # mu^steps
    bound: Fraction               # |G| / (1 + (|G|-1)/Lambda^2)
    rank_bound: int               # floor(bound)+1 (strict), or 1 when |G| = 1
    weak_bound: Fraction          # min(|G|, Lambda^2)/2
    weak_rank_bound: int          # ceil(weak_bound)

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "code_size": self.code_size, "delta": self.delta,
                "g": self.g, "n": self.n, "eps": _qs(self.eps)}

    def evidence(self) -> dict[str, Any]:
        return {"gap_threshold": _qs(2 * self.eps * (self.n - 1) / (self.n - 2)),
                "mu": _qs(self.mu), "steps": self.steps, "lam": _qs(self.lam),
                "bound": _qs(self.bound), "rank_bound": self.rank_bound,
                "weak_bound": _qs(self.weak_bound), "weak_rank_bound": self.weak_rank_bound}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def thm5(code_size: Any, delta: Any, g: Any, n: Any = 3, eps: Any = HALF) -> Thm5Bound:
    """Thm 5 with its hypotheses checked exactly (``g <= delta``,
    ``g > 2 eps (n-1)/(n-2)``, ``mu_g > 1``). The code's distance is the
    caller's hypothesis (see :func:`certify.core.codes.verify_code`).

    >>> thm5(15, 6, 3).rank_bound    # the 5.1 code with a uniform Lambda = 4
    9
    """
    G = as_int(code_size, "code size |G|", minimum=1)
    delta = as_int(delta, "Delta", minimum=1)
    g = as_int(g, "g", minimum=1)
    n = as_int(n, "n", minimum=3)
    e = check_eps(eps)
    if g > delta:
        raise InputError(f"Thm 5 needs g <= Delta, got g = {g} > Delta = {delta}")
    threshold = lemma3_min_gap(n, e)
    if not g > threshold:
        raise InputError(f"Thm 5 needs g > 2 eps (n-1)/(n-2) = {threshold}, got g = {g}")
    mu = lemma3_factor(n, e, g)
    if not mu > 1:
        raise InputError(f"Thm 5 needs mu_g > 1, got mu_g = {mu}")
    steps = delta // g
    lam = mu ** steps
    lam2 = lam * lam
    bound = Fraction(G) / (1 + Fraction(G - 1) / lam2)
    rank = 1 if G == 1 else _rank_from_bound(bound, True)
    weak = min(Fraction(G), lam2) / 2
    return Thm5Bound(code_size=G, delta=delta, g=g, n=n, eps=e, mu=mu, steps=steps, lam=lam,
                     bound=bound, rank_bound=rank, weak_bound=weak, weak_rank_bound=ceil_q(weak))


# ------------------------------------------------------------------ codes by counting

def middle_layer_code_size(M: int, delta: int) -> tuple[int, int, int]:
    """Greedy packing guarantee in the middle layer ``binom([M], M/2)`` (``M`` even)
    at directed distance ``>= delta``: ``(binom(M, M/2), sum_{a<delta}
    binom(M/2, a)^2, ceil(quotient))``. The greedy code has at least the ceiling."""
    h = M // 2
    num = math.comb(M, h)
    den = sum(math.comb(h, a) ** 2 for a in range(min(delta, h + 1)))
    return num, den, -(-num // den)


# ------------------------------------------------------------------ Thm 6

@dataclass(frozen=True)
class Thm6Bound:
    """Thm 6 at ``m >= 168``: ``M = 2 floor(m/2)``, ``Delta = floor(M/8)``,
    ``g = 5``, ``mu = 4``, ``n = 3``, ``eps = 1/2``; greedy middle-layer code.

    ``log2_lower_bound`` is the exponent the paper's chain implies,
    ``r >= min(|G|, Lambda^2)/2 >= 2^e``; ``sharp_rank_bound`` is the integer
    from the full (strict) Thm 5 bound with the same guaranteed code size."""

    NAME = "thm6"
    m: int
    extended: bool                # m < 168: the exact-check extension, not the paper's range
    M: int
    delta: int
    g: int
    mu: int
    lam_sq_log2: int              # log2(Lambda^2) = 4 floor(Delta/5)
    code_numerator: int           # binom(M, M/2)
    code_denominator: int         # sum_{a < Delta} binom(M/2, a)^2
    code_size_lower: int          # ceil(numerator / denominator) <= |G|
    code_hypothesis: bool         # log2 T >= M/10, decided as T^10 >= 2^M
    code_covers_lambda: bool      # T >= Lambda^2 (what the min(.) step uses)
    log2_lower_bound: int | None  # e with r >= 2^e (None when a hypothesis fails)
    paper_exponent: int           # 4 floor(M/40) - 1
    paper_second_inequality: bool  # 4 floor(M/40) - 1 >= m/10 - 6, decided exactly
    sharp_bound: Fraction         # T / (1 + (T-1)/Lambda^2)
    sharp_rank_bound: int         # floor(sharp_bound) + 1

    @property
    def agrees_with_paper(self) -> bool:
        return self.log2_lower_bound == self.paper_exponent

    @property
    def sharp_log2_lower_bound(self) -> int:
        return floor_log2(self.sharp_rank_bound)

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "m": self.m, "extended": self.extended}

    def evidence(self) -> dict[str, Any]:
        return {"M": self.M, "delta": self.delta, "g": self.g, "mu": self.mu,
                "lam_sq_log2": self.lam_sq_log2, "code_numerator": self.code_numerator,
                "code_denominator": self.code_denominator,
                "code_size_lower": self.code_size_lower, "code_hypothesis": self.code_hypothesis,
                "code_covers_lambda": self.code_covers_lambda,
                "log2_lower_bound": self.log2_lower_bound, "paper_exponent": self.paper_exponent,
                "paper_second_inequality": self.paper_second_inequality,
                "sharp_bound": _qs(self.sharp_bound), "sharp_rank_bound": self.sharp_rank_bound}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def thm6(m: Any, *, extended: bool = False) -> Thm6Bound | None:
    """Thm 6's lower bound at ``m``; ``None`` when ``m < 168`` (outside the theorem).

    The code-size hypothesis ``log2 T >= M/10`` is decided with integers as
    ``T^10 >= 2^M`` for the guaranteed size ``T = ceil(binom(M,M/2) /
    sum_{a<Delta} binom(M/2,a)^2)``; ``T >= Lambda^2`` is checked too.

    ``extended=True`` applies the same argument from ``m >= 40`` (where
    ``Delta >= g = 5``): the paper needs ``m >= 168`` only for its analytic
    estimate of ``log2 T``, which is decided exactly here instead.
    """
    m = _check_m(m)
    if m < (THM6_EXTENDED_MIN_M if extended else THM6_MIN_M):
        return None
    M = 2 * (m // 2)
    delta = M // 8
    t5_g, t5_n, t5_eps = 5, 3, HALF
    num, den, T = middle_layer_code_size(M, delta)
    t5 = thm5(T, delta, t5_g, t5_n, t5_eps)
    mu = t5.mu
    assert mu == 4 and t5.lam.denominator == 1
    lam_sq = t5.lam.numerator ** 2
    lam_sq_log2 = floor_log2(lam_sq)
    assert 1 << lam_sq_log2 == lam_sq
    code_hyp = T ** 10 >= 1 << M
    covers = T >= lam_sq
    e = floor_log2(t5.weak_rank_bound) if (code_hyp and covers) else None
    paper = 4 * (M // 40) - 1
    return Thm6Bound(m=m, extended=m < THM6_MIN_M, M=M, delta=delta, g=t5_g, mu=int(mu),
                     lam_sq_log2=lam_sq_log2,
                     code_numerator=num, code_denominator=den, code_size_lower=T,
                     code_hypothesis=code_hyp, code_covers_lambda=covers,
                     log2_lower_bound=e, paper_exponent=paper,
                     paper_second_inequality=10 * paper >= m - 60,
                     sharp_bound=t5.bound, sharp_rank_bound=t5.rank_bound)


def thm6_log2_lower_bound(m: Any) -> int | None:
    """The integer e of Thm 6's ``r >= 2^e`` at ``m`` (None when ``m < 168``)."""
    res = thm6(m)
    return None if res is None else res.log2_lower_bound


# ------------------------------------------------------------------ Cor 7

@dataclass(frozen=True)
class Cor7Bound:
    """Cor 7's construction at a given ``(m, n)``, ``eps = 1/2``:
    ``M = 2 floor(m/2)``, ``s = log2(n-2)``, ``Delta = 2 ceil(M/(2s))`` (decided
    as the least ``k`` with ``(n-2)^(2k) >= 2^M``), ``g = 2``, ``mu_2 = n-2``.
    The code size is the greedy-packing counting guarantee (existence, not a
    constructed code); ``Lambda^2 >= 2^M >= |G|`` so the min is ``|G|``."""

    NAME = "cor7"
    m: int
    n: int
    M: int
    k: int                        # ceil(M / (2 log2(n-2)))
    delta: int                    # 2k
    g: int
    mu: int                       # n - 2
    lam: int                      # (n-2)^k
    code_numerator: int
    code_denominator: int
    code_size_lower: int
    bound: Fraction               # Thm 5 with |G| = code_size_lower
    rank_bound: int
    delta_le_quarter: bool        # Delta <= M/4, as in the paper's proof for large m

    @property
    def log2_lower_bound(self) -> int:
        return floor_log2(self.rank_bound)

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "m": self.m, "n": self.n}

    def evidence(self) -> dict[str, Any]:
        return {"M": self.M, "k": self.k, "delta": self.delta, "g": self.g, "mu": self.mu,
                "lam": self.lam, "code_numerator": self.code_numerator,
                "code_denominator": self.code_denominator,
                "code_size_lower": self.code_size_lower, "bound": _qs(self.bound),
                "rank_bound": self.rank_bound, "delta_le_quarter": self.delta_le_quarter}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def cor7(m: Any, n: Any) -> Cor7Bound:
    """Cor 7's bound at finite ``(m, n)`` (needs ``n >= 4`` so that
    ``g = 2 > (n-1)/(n-2)``, and ``m >= 2``)."""
    m = _check_m(m, minimum=2)
    n = as_int(n, "n", minimum=3)
    if n < 4:
        raise InputError(f"Cor 7 uses g = 2, which needs n >= 4 (g > (n-1)/(n-2)); got n = {n}")
    if n.bit_length() > MAX_EXACT_M:
        raise UncertifiableError(f"n has more than {MAX_EXACT_M} bits")
    M = 2 * (m // 2)
    base = n - 2
    target = 1 << M
    k = max(1, M // (2 * floor_log2(base) + 2))          # a lower estimate of the least k
    while k > 1 and base ** (2 * (k - 1)) >= target:
        k -= 1
    while base ** (2 * k) < target:
        k += 1
    delta = 2 * k
    num, den, T = middle_layer_code_size(M, delta)
    t5 = thm5(T, delta, 2, n, HALF)
    assert t5.mu == base and t5.lam == base ** k
    return Cor7Bound(m=m, n=n, M=M, k=k, delta=delta, g=2, mu=base, lam=base ** k,
                     code_numerator=num, code_denominator=den, code_size_lower=T,
                     bound=t5.bound, rank_bound=t5.rank_bound, delta_le_quarter=4 * delta <= M)


# ------------------------------------------------------------------ Prop 10

def prop10_s(m: int) -> int:
    """``floor(m / log2 m)`` decided with integers: the largest s with ``m^s <= 2^m``."""
    m = as_int(m, "m", minimum=2)
    target = 1 << m
    s = max(0, m // m.bit_length())            # <= m/log2 m since bit_length > log2 m
    while m ** (s + 1) <= target:
        s += 1
    return s


@dataclass(frozen=True)
class Prop10Bound:
    """Prop 10: ``s = floor(m/log2 m)``, ``M = m-s-2``, ``h = floor(M/2)``; a code
    in ``binom([M], h)`` with ``|U \\ S| >= s+1``. ``greedy_lower`` is the exact
    greedy guarantee ``ceil(binom(M,h) / sum_{a<=s} binom(h,a) binom(M-h,a))``;
    ``paper_lower`` is ``floor`` of the paper's ``2^M/((M+1)(s+1)(eM/s)^(2s))``
    evaluated with ``e < 27183/10000``, hence a rigorous lower bound of it."""

    NAME = "prop10"
    m: int
    s: int
    M: int
    h: int
    radius_legal: bool            # h > s + 1
    greedy_numerator: int
    greedy_denominator: int
    greedy_lower: int
    paper_lower: int

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "m": self.m}

    def evidence(self) -> dict[str, Any]:
        return {"s": self.s, "M": self.M, "h": self.h, "radius_legal": self.radius_legal,
                "greedy_numerator": self.greedy_numerator,
                "greedy_denominator": self.greedy_denominator,
                "greedy_lower": self.greedy_lower, "e_upper": _qs(E_UPPER),
                "paper_lower": self.paper_lower}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def prop10(m: Any) -> Prop10Bound:
    """Prop 10 at ``m >= 32``."""
    m = _check_m(m, minimum=1)
    if m < 32:
        raise InputError(f"Prop 10 needs m >= 32, got m = {m}")
    s = prop10_s(m)
    M = m - s - 2
    h = M // 2
    num = math.comb(M, h)
    den = sum(math.comb(h, a) * math.comb(M - h, a) for a in range(s + 1))
    q = Fraction((1 << M) * (10000 * s) ** (2 * s),
                 (M + 1) * (s + 1) * (E_UPPER.numerator * M) ** (2 * s))
    return Prop10Bound(m=m, s=s, M=M, h=h, radius_legal=h > s + 1, greedy_numerator=num,
                       greedy_denominator=den, greedy_lower=-(-num // den),
                       paper_lower=floor_q(q))
