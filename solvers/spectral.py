"""Certified singular values: exact counts, ball enclosures, Lemma 4 bounds.

Factor form ``A = PhiQ PhiK^T`` with Gram matrices ``GQ = PhiQ^T PhiQ`` and
``GK = PhiK^T PhiK`` (``r x r``): the nonzero eigenvalues of ``A^T A`` are those
of the core ``GQ GK``, which is similar to the PSD matrix
``GK^1/2 GQ GK^1/2``, so every root of its characteristic polynomial is real
and ``>= 0``. For a polynomial with only real roots, Descartes' rule of signs is
exact: the number of sign changes of ``charpoly(core - c I)`` equals the number
of eigenvalues ``> c``. With ``c = eps^2`` this counts the singular values
``> eps`` exactly, i.e. the exact eps-rank: by Eckart-Young-Mirsky the distance
in spectral norm from ``A`` to the matrices of rank ``< k`` is ``sigma_k``, so
``sigma_k > eps`` means every matrix within ``eps`` has rank ``>= k``.
The PSD hypothesis is checked exactly (:func:`is_psd`).

Large matrices (no small factor): a float SVD proposes ``Y`` (the top ``k``
right singular vectors, as exact dyadics); ``sigma_k(A) >= sigma_k(A Y) / ||Y||_2``
and ``sigma_k(A Y)^2 = lambda_min(Y^T A^T A Y)``. So the exact check
``H - eps^2 b I > 0`` with ``H = (A Y)^T (A Y)`` and ``b >= ||Y||_2^2``
(``b = ||Y^T Y||_inf``) proves ``sigma_k(A) > eps``.

Enclosures: roots of the exact characteristic polynomial isolated in ball
arithmetic (python-flint / Arb), so every interval provably holds
``sigma_i^2``.

Factor form at r in the hundreds (:func:`eps_rank_grams`): the count and the
enclosures are first decided in floating point with rigorous rounding-error
bounds (:mod:`solvers.congruence`: the inertia of ``[[GK, I], [I, GQ / eps^2]]``
by a verified congruence, and pencil bounds for the eigenvalues), an
``O(r^3)`` float computation; where floats cannot decide, the same congruence
in arb balls at 106, 212 and 424 bits; the exact characteristic polynomial
(``O(r^4)`` and more in the size of the entries) runs only where no precision
decides, i.e. when a singular value lies within about 2^-400 of ``eps``.

Lemma 4 (unit-diagonal bound): for ``C = D^-1 B`` with ``D = diag(B)`` nonzero,
``t = tr C <= ||C||_* <= sqrt(rank C) ||C||_F``, so
``rank B >= t^2 / (t + sum_{i != j} (B_ij / B_ii)^2)``; with per-pair
``Lambda_ij = |B_ii / B_ij|`` this is ``t^2 / (t + sum Lambda_ij^-2)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from certify.core.verdict import Verdict

if TYPE_CHECKING:
    from solvers.exact.integers import IntMatrix

# ---------------------------------------------------------------- exact helpers

def is_psd(G: Any) -> bool:
    """Exact: the rational/integer matrix ``G`` (list of rows or flint matrix) is
    symmetric positive semidefinite. A symmetric matrix has real eigenvalues, so
    it is PSD iff the coefficients of ``det(lambda I - G) = sum_i a_i lambda^i``
    alternate in sign, ``(-1)^(n-i) a_i >= 0``: then ``p(-mu)`` has the sign of
    ``(-1)^n`` for every ``mu > 0`` (no negative root), and conversely the
    ``a_i`` are signed elementary symmetric functions of the eigenvalues. One
    exact characteristic polynomial (python-flint), ``O(n^3)``; an exact Gram
    ``A^T A`` of real features is PSD by construction and needs no test."""
    import flint
    if isinstance(G, (flint.fmpz_mat, flint.fmpq_mat)):
        if G.nrows() != G.ncols() or G != G.transpose():
            return False
        M = G
    else:
        rows = [[Fraction(v) for v in r] for r in G]
        n = len(rows)
        if any(len(r) != n for r in rows) or any(rows[i][j] != rows[j][i] for i in range(n) for j in range(i)):
            return False
        if all(v.denominator == 1 for r in rows for v in r):
            M = flint.fmpz_mat([[int(v) for v in r] for r in rows]) if n else None  # type: ignore[assignment]
        else:
            M = flint.fmpq_mat([[flint.fmpq(v.numerator, v.denominator) for v in r] for r in rows])
        if M is None:
            return True
    n = M.nrows()
    coeffs = M.charpoly().coeffs()
    return all(((-1) ** (n - i)) * c >= 0 for i, c in enumerate(coeffs))


def sign_changes(coeffs: Sequence) -> int:
    """Sign changes of a coefficient sequence, zeros skipped."""
    signs = [1 if c > 0 else -1 for c in coeffs if c != 0]
    return sum(1 for a, b in zip(signs, signs[1:]) if a != b)


def count_eigenvalues_above(core: Any, c: Fraction, charpoly: Any = None) -> int:
    """Number of eigenvalues ``> c`` of a square rational matrix whose eigenvalues
    are all real (caller's hypothesis, e.g. a product of two PSD matrices):
    Descartes' rule, exact for real-rooted polynomials, on ``P(mu + c)`` with
    ``P`` the characteristic polynomial (``charpoly`` when the caller has it)."""
    P = charpoly if charpoly is not None else characteristic_polynomial(core)
    return sign_changes(shifted(P, Fraction(c)).coeffs())


def characteristic_polynomial(M: Any) -> Any:
    """``det(lambda I - M)`` exactly: an ``fmpz_poly`` for an integer matrix (the
    faster multimodular routine), else an ``fmpq_poly``."""
    import flint
    if isinstance(M, flint.fmpz_mat):
        return M.charpoly()
    return flint.fmpq_mat(M).charpoly()


def shifted(P: Any, c: Fraction) -> Any:
    """``P(mu + c)`` up to a positive factor (same roots shifted by ``-c``, same
    coefficient signs): with ``c = a/b``, the integer polynomial
    ``b^n P((nu + a)/b)`` (roots ``nu = b lambda - a``), one Taylor shift."""
    import flint
    c = Fraction(c)
    co = P.coeffs()
    n = len(co) - 1
    if all(isinstance(x, flint.fmpz) or isinstance(x, int) for x in co):
        a, b = c.numerator, c.denominator
        R = flint.fmpz_poly([int(x) * b ** (n - i) for i, x in enumerate(co)])
        return R(flint.fmpz_poly([a, 1]))
    return flint.fmpq_poly(P)(flint.fmpq_poly([flint.fmpq(c.numerator, c.denominator), 1]))


def _arb_bounds(x: Any) -> tuple[Fraction, Fraction]:
    """Exact rational endpoints of an arb ball."""
    m, e = x.mid().man_exp()
    rm, re_ = x.rad().mid().man_exp()
    mid = Fraction(int(m)) * Fraction(2) ** int(e)
    rad = Fraction(int(rm)) * Fraction(2) ** int(re_)
    return mid - rad, mid + rad


def eigenvalue_enclosures(core: Any, *, prec: int = 64, charpoly: Any = None) -> list[tuple[Fraction, Fraction]]:
    """Rigorous enclosures of the eigenvalues of ``core`` (all real by hypothesis),
    largest first, with multiplicity: roots of the exact characteristic
    polynomial (``charpoly`` when the caller has it) isolated by Arb at ``prec``
    bits (restored afterwards)."""
    import flint
    poly = charpoly if charpoly is not None else characteristic_polynomial(core)
    old = flint.ctx.prec
    flint.ctx.prec = int(prec)
    try:
        roots = poly.complex_roots()
        out = []
        for z, mult in roots:
            lo, hi = _arb_bounds(z.real)
            out += [(lo, hi)] * int(mult)
    finally:
        flint.ctx.prec = old
    return sorted(out, key=lambda b: b[1], reverse=True)


# ---------------------------------------------------------------- eps-rank

@dataclass(frozen=True)
class EpsRank:
    """``k`` singular values provably ``> eps``; ``exact`` when also
    ``sigma_{k+1} <= eps`` is proved (then k is the eps-rank)."""

    k: int
    eps: Fraction
    exact: bool
    method: str
    verdict: Verdict
    reason: str | None = None
    sigma_sq_enclosures: tuple[tuple[Fraction, Fraction], ...] = ()


def eps_rank_core(core: Any, scale_exp: int, eps: Fraction, *, enclosures: bool = False,
                  prec: int = 64) -> EpsRank:
    """Exact eps-rank of ``A`` whose ``A^T A`` has the nonzero spectrum of
    ``core * 2^scale_exp`` (``core = IQ IK``, integer). Hypothesis (checked by
    the caller): the Gram factors are PSD."""
    eps = Fraction(eps)
    if eps < 0:
        raise ValueError("eps must be >= 0")
    c = eps * eps / Fraction(2) ** scale_exp
    P = characteristic_polynomial(core)                     # once, for the count and the roots
    k = count_eigenvalues_above(core, c, charpoly=P)
    enc: tuple[tuple[Fraction, Fraction], ...] = ()
    if enclosures:
        s = Fraction(2) ** scale_exp
        enc = tuple((lo * s, hi * s) for lo, hi in eigenvalue_enclosures(core, prec=prec, charpoly=P))
    return EpsRank(k=k, eps=eps, exact=True, method="descartes_charpoly_core", verdict=Verdict.PROVED,
                   sigma_sq_enclosures=enc)


#: published float enclosures are widened by this many times their own widest width (so that
#: an independent recomputation, on another machine, falls inside) and rounded outward to a grid
ENCLOSURE_PAD_FACTOR = 16
#: the checker's width limit: each interval at most 2^-20 of max(largest, 1)
ENCLOSURE_WIDTH_LOG2 = 20


def _published_enclosures(enc: Sequence[tuple[Fraction, Fraction]]) -> list[tuple[Fraction, Fraction]] | None:
    """Rigorous float enclosures widened on both sides by ``pad`` =
    ``ENCLOSURE_PAD_FACTOR`` times the widest of them (at least ``2^-50 max(top, 1)``)
    and rounded outward to multiples of a power of two at most ``pad / 4``, or None
    when a result would be wider than the checker accepts."""
    top = max(max(hi for _, hi in enc), Fraction(1))
    pad = max(ENCLOSURE_PAD_FACTOR * max(hi - lo for lo, hi in enc), top / (1 << 50))
    e = pad.numerator.bit_length() - pad.denominator.bit_length() - 3      # 2^e <= pad / 4
    q = Fraction(2) ** e
    out = [(math.floor((lo - pad) / q) * q, math.ceil((hi + pad) / q) * q) for lo, hi in enc]
    limit = max(max(hi for _, hi in out), Fraction(1)) / (1 << ENCLOSURE_WIDTH_LOG2)
    if any(hi - lo > limit for lo, hi in out):
        return None
    return out


def eps_rank_grams(gram_q: Any, eq: int, gram_k: Any, ek: int, eps: Fraction, *, enclosures: bool = False,
                   prec: int = 64, exact_enclosures: bool = True) -> EpsRank:
    """Exact eps-rank of ``A = PhiQ PhiK^T`` from its exact Grams ``GQ 2^eq``, ``GK 2^ek``
    (integer rows; PSD, as Grams of real features): the count by a verified float
    congruence when it decides (method ``inertia_congruence_core``), else by the
    same congruence proved in arb balls at 106 to 424 bits
    (:func:`solvers.congruence.count_above_balls`, method ``inertia_balls_core``), else by
    Descartes' rule on the exact characteristic polynomial of the core
    (``descartes_charpoly_core``); enclosures likewise (float pencil bounds, widened
    and rounded outward, else Arb roots of the characteristic polynomial; with
    ``exact_enclosures`` False, none where the float bounds give none)."""
    from solvers import congruence

    eps = Fraction(eps)
    if eps < 0:
        raise ValueError("eps must be >= 0")
    gq = [[int(v) for v in row] for row in np.asarray(gram_q, dtype=object).tolist()]
    gk = [[int(v) for v in row] for row in np.asarray(gram_k, dtype=object).tolist()]
    P = None

    def charpoly() -> Any:
        import flint
        nonlocal P
        if P is None:
            P = characteristic_polynomial(flint.fmpz_mat(gq) * flint.fmpz_mat(gk))
        return P

    k = congruence.count_above(gq, eq, gk, ek, eps * eps) if eps > 0 else None
    method = "inertia_congruence_core"
    if k is None and eps > 0:
        k = congruence.count_above_balls(gq, eq, gk, ek, eps * eps)
        method = "inertia_balls_core"
    if k is None:
        k = count_eigenvalues_above(None, eps * eps / Fraction(2) ** (eq + ek), charpoly=charpoly())
        method = "descartes_charpoly_core"
    enc: tuple = ()
    if enclosures:
        got = congruence.enclosures(gq, eq, gk, ek)
        pub = _published_enclosures(got) if got is not None else None
        if pub is None and exact_enclosures:
            s = Fraction(2) ** (eq + ek)
            pub = [(lo * s, hi * s) for lo, hi in eigenvalue_enclosures(None, prec=prec, charpoly=charpoly())]
        enc = tuple(pub or ())
    return EpsRank(k=k, eps=eps, exact=True, method=method, verdict=Verdict.PROVED, sigma_sq_enclosures=enc)


def psd_leading_minors(H: Any) -> bool:
    """Exact positive definiteness of a symmetric integer matrix: every leading
    principal minor ``> 0`` (Sylvester), read off a fraction-free LU."""
    n = H.nrows()
    if n == 0:
        return True
    for i in range(n):
        for j in range(i):
            if H[i, j] != H[j, i]:
                return False
    P, L, D, U = H.fflu()
    import flint
    if P != flint.fmpz_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)]):
        return False
    return all(U[i, i] > 0 for i in range(n))


def eps_rank_projection(N_values: np.ndarray, exponent: int, eps: Fraction, *,
                        k: int | None = None, margin: float = 1e-6) -> tuple[EpsRank, IntMatrix | None]:
    """Certified lower bound ``sigma_k(A) > eps`` for ``A = N 2^exponent`` (integer
    ``N``, any size), with ``k`` proposed by a float SVD unless given.
    Returns ``(EpsRank, Y)`` where ``Y`` is the dyadic witness (IntMatrix) or None."""
    import flint

    from solvers.exact import dyadic

    eps = Fraction(eps)
    A = N_values.astype(np.float64) * 2.0 ** exponent
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    if k is None:
        k = int(np.sum(s > float(eps) * (1 + margin) + margin * s[0]))
    if k == 0:
        return EpsRank(k=0, eps=eps, exact=False, method="float_svd_projection", verdict=Verdict.PROVED), None
    Y = dyadic(Vt[:k].T)                                          # (n, k) = Yi 2^ey
    W = flint.fmpz_mat(N_values.shape[0], N_values.shape[1],
                       [int(v) for v in np.asarray(N_values).ravel().tolist()]) * Y.fmpz()
    H = W.transpose() * W                                         # = (A Y)^T (A Y) 2^-(2 exponent + 2 ey)
    YtY = Y.fmpz().transpose() * Y.fmpz()                         # = Y^T Y 2^-(2 ey)
    b = max(sum(abs(int(YtY[i, j])) for j in range(k)) for i in range(k))   # ||Yi^T Yi||_inf
    # sigma_k(A)^2 >= lambda_min(H) 2^(2 exponent + 2 ey) / (b 2^(2 ey)) > eps^2
    # <=> H - eps^2 b 2^(-2 exponent) I > 0; clear the denominator of the shift.
    c = eps * eps * b / Fraction(2) ** (2 * exponent)
    Hs = H * c.denominator
    for i in range(k):
        Hs[i, i] = Hs[i, i] - c.numerator
    ok = psd_leading_minors(Hs)
    if ok:
        return EpsRank(k=k, eps=eps, exact=False, method="float_svd_projection",
                       verdict=Verdict.PROVED), Y
    return EpsRank(k=k, eps=eps, exact=False, method="float_svd_projection", verdict=Verdict.UNKNOWN,
                   reason=f"projection check failed for k = {k} (margin too thin)"), Y


# ---------------------------------------------------------------- Lemma 4

@dataclass(frozen=True)
class UnitDiagonalBound:
    """Lemma 4 on ``C = diag(B)^-1 B`` restricted to rows with a nonzero diagonal."""

    t: int
    kept: tuple[int, ...]              # indices with B_ii != 0
    frobenius_sq: Fraction             # ||C||_F^2 = t + sum (B_ij / B_ii)^2
    bound: Fraction                    # t^2 / ||C||_F^2
    rank_lower: int                    # ceil(bound)
    min_lambda: Fraction | None        # min over pairs of |B_ii / B_ij| (None: all off-diagonal zero)


def unit_diagonal_rank_bound(B: Sequence[Sequence[Fraction]]) -> UnitDiagonalBound:
    """``rank B >= t^2 / ||C||_F^2`` (see the module docstring), exact."""
    n = len(B)
    kept = [i for i in range(n) if B[i][i] != 0]
    t = len(kept)
    frob = Fraction(t)
    lam = None
    for i in kept:
        for j in kept:
            if i != j and B[i][j] != 0:
                q = Fraction(B[i][j]) / B[i][i]
                frob += q * q
                li = 1 / abs(q)
                lam = li if lam is None or li < lam else lam
    if t == 0:
        return UnitDiagonalBound(0, (), Fraction(0), Fraction(0), 0, None)
    bound = Fraction(t * t) / frob
    return UnitDiagonalBound(t=t, kept=tuple(kept), frobenius_sq=frob, bound=bound,
                             rank_lower=math.ceil(bound), min_lambda=lam)
