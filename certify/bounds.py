"""The paper's closed-form bounds, in exact integer / rational arithmetic.

Lemma 3 (gap domination factor), Lemma 4 (approximate identity rank, also
strict and per-pair), Thm 5 (amplified rank bound), Thm 6 (three-token phase
transition, code-size hypothesis checked with integers), Cor 7 (growing exact
length), Thm 1 (softmin temperature), Thm 9 / Eq. 8 (transcript bits) and
Prop 10 (size of the multilevel code).

Every decision is made with Python ints and ``Fraction``; ``mpmath`` only
renders logarithms for people. Hypotheses are checked exactly and a violation
raises :class:`certify.errors.InputError`. Results with more than one number
are frozen dataclasses; :func:`bound_claim` turns one into a ``BOUND`` claim
whose evidence :mod:`certify.checkers.bounds` re-derives.

>>> lemma4_rank_bound(15, 4), lemma4_rank_bound(15, 4, strict=True)
(8, 9)
>>> thm6(200).log2_lower_bound
19

Command line: ``python -m certify.bounds --m 200 [--n 3] [--eps 1/2] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import operator
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Sequence

from certify.certificate import Certificate, Claim, ClaimKind, Verdict
from certify import cli as _cli, outputs as _outputs
from certify.checkers.statements import render
from certify.errors import InputError, UncertifiableError, run_command

#: Largest token dimension evaluated exactly: keeps every recorded integer below
#: Python's 4300-digit int/str conversion limit and the run well under a second.
MAX_EXACT_M = 4096
#: Largest exact length accepted by :func:`bounds_table` (Eq. 8 powers stay small).
MAX_TABLE_N = 10**6
#: Largest q * bitlength(s+1) for which (s+1)^q is formed exactly.
MAX_POWER_BITS = 1 << 24
THM6_MIN_M = 168
#: Smallest m where Thm 6's chain has Delta = floor(M/8) >= g = 5.
THM6_EXTENDED_MIN_M = 40
#: A rational upper bound of Euler's number (e = 2.718281...), used to bound
#: Prop. 10's expression from below with integers.
E_UPPER = Fraction(27183, 10000)

HALF = Fraction(1, 2)


# ------------------------------------------------------------------ exact helpers

def as_int(x: Any, name: str, *, minimum: int | None = None) -> int:
    """An exact integer (int or integral Fraction / string), at least ``minimum``."""
    if isinstance(x, bool) or isinstance(x, float):
        raise InputError(f"{name} must be an exact integer, got {x!r}")
    if isinstance(x, str):
        if len(x.strip()) > 4000:
            raise InputError(f"{name} has more than 4000 digits")
        try:
            x = int(x.strip())
        except ValueError:
            raise InputError(f"{name} must be an integer, got {x!r}") from None
    if isinstance(x, Fraction):
        if x.denominator != 1:
            raise InputError(f"{name} must be an integer, got {x}")
        x = x.numerator
    try:
        x = operator.index(x)
    except TypeError:
        raise InputError(f"{name} must be an integer, got {x!r}") from None
    if minimum is not None and x < minimum:
        raise InputError(f"{name} must be >= {minimum}, got {x}")
    return int(x)


def as_fraction(x: Any, name: str) -> Fraction:
    """An exact rational from an int, Fraction or string ("p/q" or a decimal).
    Floats are rejected: they are not exact input."""
    if isinstance(x, bool) or isinstance(x, float):
        raise InputError(f"{name} must be exact (int, Fraction or 'p/q'), got {x!r}")
    if isinstance(x, Fraction):
        return x
    if isinstance(x, str):
        from certify.limits import parse_exact
        return parse_exact(x, name)
    try:
        return Fraction(operator.index(x))
    except TypeError:
        raise InputError(f"{name} must be exact (int, Fraction or 'p/q'), got {x!r}") from None


def check_eps(eps: Any) -> Fraction:
    """The error level: exact and ``0 < eps <= 1/2`` (the main regime)."""
    e = as_fraction(eps, "eps")
    if not 0 < e <= HALF:
        raise InputError(f"eps must satisfy 0 < eps <= 1/2, got {e}")
    return e


def floor_q(x: Fraction) -> int:
    return x.numerator // x.denominator


def ceil_q(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def floor_log2(x: int) -> int:
    """floor(log2 x) for an integer x >= 1."""
    if x < 1:
        raise InputError(f"log2 of a non-positive integer {x}")
    return x.bit_length() - 1


def ceil_log2(x: int) -> int:
    """ceil(log2 x) for an integer x >= 1: the least b with 2^b >= x."""
    if x < 1:
        raise InputError(f"log2 of a non-positive integer {x}")
    return (x - 1).bit_length()


def _qs(x: Fraction | int) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _check_m(m: Any, *, minimum: int = 1) -> int:
    m = as_int(m, "m", minimum=minimum)
    if m > MAX_EXACT_M:
        raise UncertifiableError(
            f"m = {m} exceeds {MAX_EXACT_M}, the largest m evaluated exactly here")
    return m


# ------------------------------------------------------------------ Lemma 3

def lemma3_min_gap(n: Any, eps: Any = HALF) -> Fraction:
    """Lemma 3's gap threshold ``2 eps (n-1)/(n-2)`` (``n >= 3``)."""
    n = as_int(n, "n", minimum=3)
    e = check_eps(eps)
    return 2 * e * (n - 1) / (n - 2)


def lemma3_factor(n: Any, eps: Any, d: Any) -> Fraction:
    """Lemma 3's domination factor ``(n-2)(d-2 eps)/(2 eps)``:
    ``alpha(x,y) > factor * alpha(x,z)`` when ``d = <x,z> - <x,y>``.

    Hypotheses checked exactly: ``n >= 3``, ``0 < eps <= 1/2``,
    ``d >= 2 eps (n-1)/(n-2)``. At ``eps = 1/2`` the factor is ``(n-2)(d-1)``.

    >>> lemma3_factor(3, Fraction(1, 2), 2)
    Fraction(1, 1)
    """
    n = as_int(n, "n", minimum=3)
    e = check_eps(eps)
    d = as_fraction(d, "d")
    threshold = lemma3_min_gap(n, e)
    if d < threshold:
        raise InputError(f"Lemma 3 needs the gap d >= 2 eps (n-1)/(n-2) = {threshold}, got d = {d}")
    return (n - 2) * (d - 2 * e) / (2 * e)


@dataclass(frozen=True)
class Lemma3Factor:
    NAME = "lemma3"
    n: int
    eps: Fraction
    d: Fraction
    gap_threshold: Fraction
    factor: Fraction

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "n": self.n, "eps": _qs(self.eps), "d": _qs(self.d)}

    def evidence(self) -> dict[str, Any]:
        return {"gap_threshold": _qs(self.gap_threshold), "factor": _qs(self.factor)}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def lemma3(n: Any, eps: Any, d: Any) -> Lemma3Factor:
    factor = lemma3_factor(n, eps, d)
    n_, e = as_int(n, "n"), check_eps(eps)
    return Lemma3Factor(n=n_, eps=e, d=as_fraction(d, "d"), gap_threshold=lemma3_min_gap(n_, e),
                        factor=factor)


# ------------------------------------------------------------------ Lemma 4

def lemma4_bound(t: Any, lam: Any) -> Fraction:
    """The real bound ``t / (1 + (t-1)/lam^2)`` of Lemma 4."""
    t = as_int(t, "t", minimum=1)
    lam = as_fraction(lam, "lambda")
    if lam <= 0:
        raise InputError(f"lambda must be > 0, got {lam}")
    return Fraction(t) / (1 + Fraction(t - 1) / (lam * lam))


def _rank_from_bound(bound: Fraction, strict: bool) -> int:
    """Least integer rank allowed by ``rank >= bound`` (or ``rank > bound``)."""
    return floor_q(bound) + 1 if strict else ceil_q(bound)


def lemma4_rank_bound(t: Any, lam: Any, strict: bool = False) -> int:
    """Least integer rank of a ``t x t`` matrix with unit diagonal and
    ``|C_ij| <= 1/lam`` off the diagonal (``< 1/lam`` when ``strict``; the real
    bound is then strict for ``t >= 2``, so the integer is ``floor(bound) + 1``).

    >>> lemma4_rank_bound(15, 4), lemma4_rank_bound(15, 4, strict=True)
    (8, 9)
    """
    t = as_int(t, "t", minimum=1)
    return _rank_from_bound(lemma4_bound(t, lam), bool(strict) and t >= 2)


@dataclass(frozen=True)
class Lemma4Bound:
    NAME = "lemma4"
    t: int
    lam: Fraction
    strict: bool
    bound: Fraction
    rank_bound: int

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "t": self.t, "lam": _qs(self.lam), "strict": self.strict}

    def evidence(self) -> dict[str, Any]:
        return {"bound": _qs(self.bound), "rank_bound": self.rank_bound}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def lemma4(t: Any, lam: Any, strict: bool = False) -> Lemma4Bound:
    t_ = as_int(t, "t", minimum=1)
    lam_ = as_fraction(lam, "lambda")
    return Lemma4Bound(t=t_, lam=lam_, strict=bool(strict), bound=lemma4_bound(t_, lam_),
                       rank_bound=lemma4_rank_bound(t_, lam_, strict))


@dataclass(frozen=True)
class PerPairBound:
    """Lemma 4 with a bound per entry: ``|C_ij| <= 1/Lambda_ij``.
    ``rank >= t^2 / (t + sum_{i != j} Lambda_ij^-2)`` by the same
    trace/Frobenius argument; entries without a bound count as ``|C_ij| <= 1``."""

    NAME = "lemma4_per_pair"
    t: int
    lambdas: tuple[tuple[Fraction | None, ...], ...]   # (t, t), None = no bound, diagonal None
    strict: bool                  # every given bound is strict
    strict_applied: bool          # the real bound is strict (t >= 2 and some strict entry)
    frobenius_sq_max: Fraction    # t + sum_{i != j} Lambda_ij^-2
    bound: Fraction               # t^2 / frobenius_sq_max
    rank_bound: int

    def parameters(self) -> dict[str, Any]:
        return {"bound": self.NAME, "t": self.t, "strict": self.strict,
                "Lambda": [[None if v is None else _qs(v) for v in row] for row in self.lambdas]}

    def evidence(self) -> dict[str, Any]:
        return {"frobenius_sq_max": _qs(self.frobenius_sq_max), "bound": _qs(self.bound),
                "strict_applied": self.strict_applied, "rank_bound": self.rank_bound}

    def statement(self) -> str:
        return render("bound", self.parameters(), self.evidence()).text


def rank_bound_per_pair(Lambda: Sequence[Sequence[Any]], strict: bool = False) -> PerPairBound:
    """Per-pair Lemma 4 from a ``t x t`` matrix of bounds ``Lambda[i][j] > 0``
    (``|C_ij| <= 1/Lambda_ij``; ``None`` or ``0`` = only ``|C_ij| <= 1``; the
    diagonal is ignored). ``strict``: every given bound is strict.

    >>> rank_bound_per_pair([[None, 2], [2, None]]).bound
    Fraction(8, 5)
    """
    rows = [list(r) for r in Lambda]
    t = len(rows)
    if t < 1 or any(len(r) != t for r in rows):
        raise InputError("Lambda must be a non-empty square matrix (list of t rows of length t)")
    clean: list[tuple[Fraction | None, ...]] = []
    total = Fraction(t)
    have_bound = False
    for i, row in enumerate(rows):
        out: list[Fraction | None] = []
        for j, v in enumerate(row):
            if i == j or v is None:
                out.append(None)
                if i != j:
                    total += 1
                continue
            q = as_fraction(v, f"Lambda[{i}][{j}]")
            if q < 0:
                raise InputError(f"Lambda[{i}][{j}] must be > 0 (or 0/None for no bound), got {q}")
            if q == 0:
                out.append(None)
                total += 1
                continue
            have_bound = True
            out.append(q)
            total += 1 / (q * q)
        clean.append(tuple(out))
    bound = Fraction(t * t) / total
    applied = bool(strict) and t >= 2 and have_bound
    return PerPairBound(t=t, lambdas=tuple(clean), strict=bool(strict), strict_applied=applied,
                        frobenius_sq_max=total, bound=bound,
                        rank_bound=_rank_from_bound(bound, applied))


# ------------------------------------------------------------------ Lemma 4, nonnegative refinement

def perron_discriminant(t: Any, rho: Any, r: Any) -> Fraction:
    """``Delta(r) = t^2 (2 + (r-1) rho)^2 - 4 r (t^2 - (r-1) t (1 - rho))``.

    Setting: a real ``t x t`` matrix ``C`` with ``C_ii = 1`` and
    ``0 <= C_ij <= rho < 1`` off the diagonal (the row-normalized chain matrix
    of Thm 5 is one, since the kernel is nonnegative on the pairs it uses).
    Lemma 4's argument ignores the sign of ``C``; the sign forces a large top
    singular value. With ``s = sum_{i != j} C_ij``, ``F = ||C||_F^2``,
    ``sigma = ||C||_2`` and ``rank C <= r``:

    (a) ``t = tr C <= ||C||_* <= sigma + sqrt(r - 1) sqrt(F - sigma^2)``;
    (b) ``F <= t + rho s``  (``C_ij^2 <= rho C_ij``);
    (c) ``sigma >= 1^T C 1 / t = 1 + s / t``;
    (d) ``sigma^2 <= F <= t + rho t (t - 1) < t^2``, so ``t - sigma > 0``.

    Squaring (a) and inserting (b), (c):
    ``Q(sigma) = r sigma^2 - t (2 + (r-1) rho) sigma + t^2 - (r-1) t (1-rho) <= 0``.
    When ``Delta(r) < 0`` no real ``sigma`` satisfies it: ``rank C > r``; and a
    matrix of rank ``r' < r`` satisfies (a) with ``r`` too, so every rank
    ``<= r`` is excluded.
    """
    t, rho, r = as_fraction(t, "t"), as_fraction(rho, "rho"), as_fraction(r, "r")
    return t * t * (2 + (r - 1) * rho) ** 2 - 4 * r * (t * t - (r - 1) * t * (1 - rho))


def perron_max_excluded_rank(t: Any, rho: Any) -> int:
    """Largest ``r`` with ``Delta(r) < 0`` (0 when none): every rank ``<= r`` of a
    ``t x t`` unit-diagonal matrix with off-diagonal entries in ``[0, rho]`` is
    impossible. Needs ``t >= 2`` and ``0 <= rho < 1``.

    >>> perron_max_excluded_rank(15, Fraction(1, 4))     # paper-5.1 chains
    11
    """
    t = as_int(t, "t", minimum=2)
    rho = as_fraction(rho, "rho")
    if not 0 <= rho < 1:
        raise InputError(f"rho must satisfy 0 <= rho < 1, got {rho}")
    best = 0
    for r in range(1, t + 1):
        if perron_discriminant(t, rho, r) < 0:
            best = r
    return best


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
    caller's hypothesis (see :func:`certify.codes.verify_code`).

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


# ------------------------------------------------------------------ Thm 1

@dataclass(frozen=True)
class Temperature:
    """Thm 1's softmin temperature ``tau = log(n/eps)``, kept exact as the
    rational ``ratio = n/eps``; :meth:`value` is for display only."""

    n: int
    eps: Fraction
    ratio: Fraction

    def value(self, dps: int = 30):
        import mpmath
        with mpmath.workdps(dps):
            return mpmath.log(mpmath.mpf(self.ratio.numerator) / self.ratio.denominator)


def thm1_temperature(n: Any, eps: Any = HALF) -> Temperature:
    """``tau = log(n/eps)`` suffices for ``0 <= t_hat - t < eps`` on lengths ``<= n``.

    >>> thm1_temperature(3).ratio
    Fraction(6, 1)
    """
    n = as_int(n, "n", minimum=1)
    e = as_fraction(eps, "eps")
    if e <= 0:
        raise InputError(f"eps must be > 0, got {e}")
    return Temperature(n=n, eps=e, ratio=n / e)


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
                    bits_available=bits_available(*ints.values(), p_), bits_needed=bits_needed(s_, q_))


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


# ------------------------------------------------------------------ claims

def bound_claim(result: Any) -> Claim:
    """A ``BOUND`` claim for a result of this module (its hypotheses were checked
    exactly when it was built). A Thm 6 result whose code-size check failed
    gives an ``unknown`` claim with the reason."""
    for attr in ("NAME", "parameters", "evidence", "statement"):
        if not hasattr(result, attr):
            raise TypeError(f"not a bound result: {type(result).__name__}")
    verdict, reason = Verdict.PROVED, None
    if isinstance(result, Thm6Bound) and result.log2_lower_bound is None:
        verdict = Verdict.UNKNOWN
        reason = "the guaranteed code size failed T^10 >= 2^M or T >= Lambda^2"
    return Claim(kind=ClaimKind.BOUND, statement=None, verdict=verdict,
                 parameters=result.parameters(), evidence=result.evidence(),
                 method="closed form, exact integer/rational arithmetic (certify.bounds)",
                 reason=reason)


# ------------------------------------------------------------------ table and command

def bounds_table(m: Any, n: Any = 3, eps: Any = HALF) -> tuple[dict[str, Any], list[Any]]:
    """Every bound applicable at ``(m, n, eps)``: the JSON object of the command
    and the list of result values (for claims)."""
    m = _check_m(m)
    n = as_int(n, "n", minimum=3)
    if n > MAX_TABLE_N:
        raise UncertifiableError(f"n = {n} exceeds {MAX_TABLE_N}, the largest n tabulated here")
    e = check_eps(eps)
    results: list[Any] = []
    out: dict[str, Any] = {"m": m, "n": n, "eps": _qs(e)}

    tau = thm1_temperature(n, e)
    out["thm1"] = {"ratio": _qs(tau.ratio), "tau_display": str(tau.value(20)),
                   "statement": f"tau = log({_qs(tau.ratio)}) suffices at lengths <= {n}"}
    out["thm2_upper_log2"] = m

    gap = lemma3_min_gap(n, e)
    d = max(1, ceil_q(gap))
    l3 = lemma3(n, e, d)
    results.append(l3)
    out["lemma3"] = {**l3.evidence(), "d": _qs(l3.d)}

    t6 = thm6(m)
    out["thm6_log2_lower_bound"] = None if t6 is None else t6.log2_lower_bound
    t6x = thm6(m, extended=True) if t6 is None else None
    out["thm6_extended_log2_lower_bound"] = None if t6x is None else t6x.log2_lower_bound
    t6 = t6 if t6 is not None else t6x
    if t6 is None:
        out["thm6"] = None
    else:
        results.append(t6)
        out["thm6"] = {**t6.evidence(), "agrees_with_paper": t6.agrees_with_paper,
                       "sharp_log2_lower_bound": t6.sharp_log2_lower_bound}

    if n >= 4 and m >= 2:
        c7 = cor7(m, n)
        results.append(c7)
        out["cor7"] = {**c7.evidence(), "log2_lower_bound": c7.log2_lower_bound}
    else:
        out["cor7"] = None

    if m >= 32:
        p10 = prop10(m)
        results.append(p10)
        q = min(n // 2, p10.greedy_lower)
        out["prop10"] = p10.evidence()
        if q >= 1:
            out["eq8"] = {"s": p10.s, "q": q, "bits_needed": bits_needed(p10.s, q)}
        else:
            out["eq8"] = None
    else:
        out["prop10"] = None
        out["eq8"] = None
    return out, results


def _log2_display(x: int | Fraction) -> str:
    import mpmath
    x = Fraction(x)
    if x <= 0:
        return "-inf"
    with mpmath.workdps(15):
        return mpmath.nstr(mpmath.log(mpmath.mpf(x.numerator) / x.denominator, 2), 6)


def _show_int(x: int) -> str:
    return str(x) if x < 10**12 else f"~2^{_log2_display(x)}"


def format_table(obj: dict[str, Any]) -> str:
    """The table for people."""
    m, n, eps = obj["m"], obj["n"], obj["eps"]
    rows = [("Thm 1", f"softmin temperature tau = log({obj['thm1']['ratio']})",
             obj["thm1"]["tau_display"][:12]),
            ("Thm 2", "upper bound r*(m,n) <= 2^m", f"2^{m}"),
            ("Thm 6 (1)", "r*(m,1) = r*(m,2)", "1"),
            ("Lemma 3", f"min gap 2eps(n-1)/(n-2) = {obj['lemma3']['gap_threshold']}; "
             f"factor at d = {obj['lemma3']['d']}", obj["lemma3"]["factor"])]
    t6 = obj["thm6"]
    if t6 is None:
        rows.append(("Thm 6", "r >= 2^e (needs m >= 168; exact-check extension m >= 40)", "n/a"))
    else:
        name = "Thm 6" if obj["thm6_log2_lower_bound"] is not None else "Thm 6 ext."
        rows.append((name, f"M={t6['M']} Delta={t6['delta']} g=5 mu=4; code T >= 2^"
                     f"{_log2_display(t6['code_size_lower'])} (T^10>=2^M: {t6['code_hypothesis']})",
                     f"r >= 2^{t6['log2_lower_bound']}"))
        rows.append(("Thm 6 paper", "4 floor(M/40) - 1", f"{t6['paper_exponent']} "
                     f"({'agrees' if t6['agrees_with_paper'] else 'DIFFERS'})"))
        rows.append(("Thm 5 sharp", "strict Lemma 4 with the same code size",
                     f"r >= {_show_int(t6['sharp_rank_bound'])} "
                     f"(>= 2^{t6['sharp_log2_lower_bound']})"))
    c7 = obj["cor7"]
    if c7 is None:
        rows.append(("Cor 7", "growing n (needs n >= 4)", "n/a"))
    else:
        rows.append(("Cor 7", f"n={n}: Delta={c7['delta']} g=2 mu={c7['mu']}; "
                     f"code T >= 2^{_log2_display(c7['code_size_lower'])} (counting)",
                     f"r >= {_show_int(c7['rank_bound'])} (>= 2^{c7['log2_lower_bound']})"))
    p10 = obj["prop10"]
    if p10 is None:
        rows.append(("Prop 10", "multilevel code (needs m >= 32)", "n/a"))
    else:
        rows.append(("Prop 10", f"s={p10['s']} M={p10['M']} h={p10['h']}; greedy |C| >= "
                     f"2^{_log2_display(p10['greedy_lower'])}; paper form >= {_show_int(p10['paper_lower'])}",
                     _show_int(p10["greedy_lower"])))
    e8 = obj["eq8"]
    if e8 is not None:
        rows.append(("Thm 9/Eq 8", f"q = {e8['q']} pairs, s = {e8['s']}: bits >= ceil(q log2(s+1))",
                     str(e8["bits_needed"])))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    head = f"bounds at m = {m}, n = {n}, eps = {eps}"
    lines = [head, "-" * len(head)]
    lines += [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="certify bounds",
                                description="The paper's closed-form bounds, exactly.")
    p.add_argument("--m", required=True, help="token dimension m >= 1")
    p.add_argument("--n", default="3", help="exact context length n >= 3 (default 3)")
    p.add_argument("--eps", default="1/2", help="error level, 0 < eps <= 1/2 (default 1/2)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--out", metavar="CERT", help="write a certificate of the BOUND claims here; "
                   + _cli.OUT_FILE_HELP)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    m = as_int(args.m, "--m", minimum=1)
    n = as_int(args.n, "--n")
    if n < 3:
        raise InputError(f"--n must be >= 3 (Lemma 3 needs exact length n >= 3), got {n}")
    eps = check_eps(args.eps)
    if args.out:
        _outputs.check_out_file(args.out)
    obj, results = bounds_table(m, n, eps)
    claims = [bound_claim(r) for r in results]
    if args.out:
        cmd = ["certify", "bounds"] + list(sys.argv[1:] if argv is None else argv)
        _outputs.write_file(args.out, Certificate(claims=claims, command=cmd).dumps())
    if args.json:
        print(json.dumps(obj, indent=1))
    else:
        print(format_table(obj), file=sys.stderr)
    return 0 if all(c.verdict is Verdict.PROVED for c in claims) else 1


if __name__ == "__main__":
    sys.exit(run_command("certify.bounds", main))
