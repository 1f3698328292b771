"""Lemma 3 (gap domination factor), Lemma 4 (approximate identity rank, plain,
strict and per pair) and its nonnegative (Perron) refinement.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

from certify.checkers.statements import render
from certify.core.bounds.exact import HALF, _qs, as_fraction, as_int, ceil_q, check_eps, floor_q
from certify.core.errors import InputError

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
