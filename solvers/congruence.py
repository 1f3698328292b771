"""Verified floating-point congruences: the eigenvalue count of ``GQ GK`` above a
threshold and enclosures of its eigenvalues, decided in float64 with rigorous
rounding-error bounds, or ``None`` where floats cannot decide (the caller then
takes the exact characteristic polynomial, :mod:`solvers.spectral`).

For symmetric ``GQ, GK`` with one of them positive semidefinite (Gram
matrices) and ``c > 0``, ``Z(c) = [[GK, I], [I, GQ / c]]`` is nonsingular iff
``c`` is not an eigenvalue of ``GQ GK``, and then ``n_+(Z) = r + #{lambda > c}``
(the Schur complement ``GQ / c - GK^-1`` is congruent to ``L^T GQ L - c I`` when
``GK = L L^T`` is definite; a semidefinite ``GK`` is the limit of ``GK + t I``,
along which a nonsingular ``Z`` keeps its inertia). The inertia of ``Z`` is that
of ``B = X^T Z X`` for any nonsingular ``X`` (Sylvester), and a strictly
diagonally dominant ``W B W`` (``W`` a positive diagonal) has the inertia of its
diagonal (Gershgorin along ``D + t (WBW - D)``); ``B`` nonsingular forces ``X``
nonsingular. ``X`` comes from ``numpy.linalg.eigh`` and is taken as exact.

Enclosures: with ``GK`` definite and ``X`` nonsingular, the pencil
``(X^T GK GQ GK X, X^T GK X) = (A, B)`` has the eigenvalues of ``GQ GK``; with
``||B - I|| <= rho_B < 1`` and ``||A - diag(A)|| <= rho_A`` (largest absolute row
sums), Weyl and Ostrowski place the i-th largest in ``[d_i - rho_A, d_i +
rho_A]`` times ``[1/(1 + rho_B), 1/(1 - rho_B)]``.

Rounding: a matrix is a :class:`Ball` (midpoint, radius; the exact matrix lies
within the radius entry by entry). Inputs are correctly rounded rationals
(Python's integer true division), radius one ``spacing``. A product computed by
BLAS in any order, with or without FMA, satisfies ``|fl(AB) - AB| <= gamma_n
|A||B| + n 2^-1022`` (``gamma_n = n u / (1 - n u)``, ``u = 2^-53``; the last
term covers underflow with or without flush to zero); the exact product of two
balls is within ``gamma_n |A||B| + RA (|B| + RB) + |A| RB + 2^-1000`` of
``fl(AB)`` for ``n <= 2^20``, and a nonnegative product ``PQ`` is at most
``(fl(PQ) + 2^-1000) / (1 - gamma_n)``. Every bound is evaluated one IEEE
operation at a time and then moved one ulp up (``nextafter``). Midpoints below
``2^-1000`` are flushed to zero into the radius, so no operand is subnormal.
The independent checker (``certify.checkers.kernel.inertia``) implements the
same criterion on its own.

Where binary64 cannot decide (a singular value too close to ``eps`` for the
spectrum's range), :func:`count_above_balls` proves the same criterion in
python-flint ``arb`` balls at 106, 212 and 424 bits, refining ``X`` step by
step; the checker's own ball implementation is
``certify.checkers.kernel.balls``, which shares no code with this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

FLOOR = 2.0 ** -1000
LARGEST_N = 1 << 20
_U = Fraction(1, 1 << 53)

#: an integer matrix as rows (lists of ints, an object array, or JSON rows)
IntRows = Sequence[Sequence[int]]


def _next_up(x: Any) -> Any:
    return np.nextafter(x, np.inf)


def _round_up(q: Fraction) -> float:
    f = float(q)
    return f if Fraction(f) >= q else float(np.nextafter(f, np.inf))


def _gamma_terms(n: int) -> tuple[float, float]:
    """Floats ``>= gamma_n / (1 - gamma_n)`` and ``>= 1 / (1 - gamma_n)``."""
    if not 0 < n <= LARGEST_N:
        raise ValueError(f"inner dimension {n} is outside 1..2^20")
    gamma = _U * n / (1 - _U * n)
    return _round_up(gamma / (1 - gamma)), _round_up(1 / (1 - gamma))


def _nonneg_product_bound(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Entrywise ``>=`` the exact ``P @ Q`` of nonnegative float matrices."""
    _, inv = _gamma_terms(P.shape[1])
    return _next_up(_next_up(np.matmul(P, Q) + FLOOR) * inv)


@dataclass(frozen=True)
class Ball:
    """An exact real matrix within ``rad`` of ``mid`` entry by entry."""

    mid: np.ndarray
    rad: np.ndarray

    @classmethod
    def make(cls, mid: np.ndarray, rad: np.ndarray) -> "Ball":
        """Flush midpoints below 2^-1000 into the radius; radii at least 2^-1000."""
        tiny = np.abs(mid) < FLOOR
        return cls(np.where(tiny, 0.0, mid), np.where(tiny, _next_up(rad + FLOOR), np.maximum(rad, FLOOR)))

    @classmethod
    def point(cls, a: np.ndarray) -> "Ball":
        a = np.asarray(a, dtype=np.float64)
        return cls.make(a, np.zeros_like(a))

    @property
    def T(self) -> "Ball":
        return Ball(self.mid.T, self.rad.T)

    def finite(self) -> bool:
        return bool(np.isfinite(self.mid).all() and np.isfinite(self.rad).all())

    def __matmul__(self, other: "Ball") -> "Ball":
        g, _ = _gamma_terms(self.mid.shape[1])
        am, bm = np.abs(self.mid), np.abs(other.mid)
        rad = _next_up(g * _nonneg_product_bound(am, bm))
        rad = _next_up(rad + _nonneg_product_bound(am, other.rad))
        rad = _next_up(rad + _nonneg_product_bound(self.rad, _next_up(bm + other.rad)))
        return Ball.make(self.mid @ other.mid, _next_up(rad + FLOOR))


def _half_log2(v: int, e: int) -> int:
    """About ``-log2(|v| 2^e) / 2``."""
    return -((abs(int(v)).bit_length() + e) // 2)


def equilibrating_exponents(G: IntRows, e: int) -> list[int]:
    """``s_i`` with ``G_ii 2^(e + 2 s_i)`` near 1 (a zero diagonal entry uses the
    largest entry of ``G``)."""
    top = max((abs(int(v)) for row in G for v in row), default=1) or 1
    return [_half_log2(G[i][i] if int(G[i][i]) else top, e) for i in range(len(G))]


def rational_ball(G: IntRows, num: int, den: int, e: int, rows: Sequence[int], cols: Sequence[int]) -> Ball | None:
    """The exact ``G_ij num / den 2^(e + rows_i + cols_j)`` as a Ball (each entry
    correctly rounded by integer true division, radius one ``spacing``), or None
    when an entry leaves the float range."""
    n1, n2 = len(G), len(G[0]) if len(G) else 0
    mid = np.zeros((n1, n2))
    for i in range(n1):
        gi = G[i]
        for j in range(n2):
            a = int(gi[j]) * num
            if not a:
                continue
            x = e + rows[i] + cols[j]
            try:
                mid[i, j] = (a << x) / den if x >= 0 else a / (den << -x)
            except OverflowError:
                return None
    if not np.isfinite(mid).all():
        return None
    return Ball.make(mid, np.spacing(np.abs(mid)))


def dominance_inertia(B: Ball) -> tuple[int, int] | None:
    """``(n_+, n_-)`` of the exact symmetric matrix in ``B`` when ``W B W``
    (``w_i = |B_ii|^-1/2``) is provably strictly diagonally dominant, else None."""
    if not B.finite():
        return None
    diag = np.diag(B.mid)
    low = np.nextafter(np.abs(diag) - np.diag(B.rad), -np.inf)          # <= |B_ii| exact
    if not (low > 0).all():
        return None
    w = 1.0 / np.sqrt(np.abs(diag))
    off = _next_up(np.abs(B.mid) + B.rad)
    np.fill_diagonal(off, 0.0)
    row = _nonneg_product_bound(off, w.reshape(-1, 1)).ravel()          # >= sum_j |B_ij| w_j
    left = np.nextafter(low * w, -np.inf)
    if not (np.isfinite(row).all() and (left > row).all()):
        return None
    return int((diag > 0).sum()), int((diag < 0).sum())


def inertia_by_congruence(Z: Ball) -> tuple[int, int] | None:
    """Inertia of the exact symmetric matrix in ``Z`` via ``X^T Z X`` with ``X``
    numpy's eigenvectors of the midpoint, or None."""
    if not Z.finite():
        return None
    try:
        X = Ball.point(np.linalg.eigh(Z.mid)[1])
    except np.linalg.LinAlgError:
        return None
    return dominance_inertia(X.T @ (Z @ X))


def count_above(gram_q: IntRows, eq: int, gram_k: IntRows, ek: int, threshold: Fraction) -> int | None:
    """``#{lambda(GQ 2^eq GK 2^ek) > threshold}`` (``threshold > 0``) from the
    inertia of the equilibrated ``Z(threshold)``, or None (module docstring)."""
    r = len(gram_q)
    threshold = Fraction(threshold)
    if not r or threshold <= 0 or 2 * r > LARGEST_N:
        return None
    lt = threshold.numerator.bit_length() - threshold.denominator.bit_length()
    sk = equilibrating_exponents(gram_k, ek)
    sq = equilibrating_exponents(gram_q, eq - lt)
    Zk = rational_ball(gram_k, 1, 1, ek, sk, sk)
    Zq = rational_ball(gram_q, threshold.denominator, threshold.numerator, eq, sq, sq)
    if Zk is None or Zq is None:
        return None
    expo = np.array(sk) + np.array(sq)
    if expo.min() < -1000 or expo.max() > 1000:
        return None
    link = np.diag(np.ldexp(1.0, expo))
    zero = np.zeros((r, r))
    Z = Ball.make(np.block([[Zk.mid, link], [link, Zq.mid]]), np.block([[Zk.rad, zero], [zero, Zq.rad]]))
    got = inertia_by_congruence(Z)
    if got is None or got[0] + got[1] != 2 * r or not r <= got[0] <= 2 * r:
        return None
    return got[0] - r


def _pencil_enclosures(GB: IntRows, eb: int, GA: IntRows, ea: int) -> list[tuple[Fraction, Fraction]] | None:
    """Eigenvalues of ``GA 2^ea GB 2^eb`` (largest first) when ``GB`` is proved
    definite: the similar pair ``(S^-1 GA S^-1 2^-m, S GB S)`` with ``S``
    equilibrating ``GB``, then the pencil bounds of the module docstring."""
    r = len(GB)
    s = equilibrating_exponents(GB, eb)
    t = [-v for v in s]
    nz = [(abs(int(GA[i][j])).bit_length() + ea + t[i] + t[j]) for i in range(r) for j in range(r)
          if int(GA[i][j])]
    m = max(nz) if nz else 0
    Bb = rational_ball(GB, 1, 1, eb, s, s)
    Ab = rational_ball(GA, 1, 1, ea - m, t, t)
    if Bb is None or Ab is None:
        return None
    try:
        kap, V1 = np.linalg.eigh(Bb.mid)
        if not kap.min() > 0:
            return None
        X1 = V1 * (1.0 / np.sqrt(kap))
        Y1 = Bb.mid @ X1
        H = Y1.T @ Ab.mid @ Y1
        X = Ball.point(X1 @ np.linalg.eigh((H + H.T) / 2)[1])
    except np.linalg.LinAlgError:
        return None
    Y = Bb @ X
    A, B = Y.T @ (Ab @ Y), X.T @ Y
    if not (A.finite() and B.finite()):
        return None
    ones = np.ones((r, 1))
    dev_b = _next_up(_next_up(np.abs(B.mid - np.eye(r))) + B.rad)
    rho_b = Fraction(float(_nonneg_product_bound(dev_b, ones).max()))
    dev_a = _next_up(np.abs(A.mid) + A.rad)
    np.fill_diagonal(dev_a, np.diag(A.rad))
    rho_a = Fraction(float(_nonneg_product_bound(dev_a, ones).max()))
    if rho_b >= 1:
        return None
    small, big = 1 / (1 + rho_b), 1 / (1 - rho_b)
    unit = Fraction(2) ** m
    out = []
    for d in sorted((Fraction(float(x)) for x in np.diag(A.mid)), reverse=True):
        lo, hi = d - rho_a, d + rho_a
        out.append((lo * (small if lo >= 0 else big) * unit, hi * (big if hi >= 0 else small) * unit))
    return out


def enclosures(gram_q: IntRows, eq: int, gram_k: IntRows, ek: int) -> list[tuple[Fraction, Fraction]] | None:
    """Rigorous intervals for the eigenvalues of ``GQ 2^eq GK 2^ek``, largest first
    with multiplicity, or None (neither Gram proved definite, or not finite)."""
    if not len(gram_q) or 2 * len(gram_q) > LARGEST_N:
        return None
    return _pencil_enclosures(gram_k, ek, gram_q, eq) or _pencil_enclosures(gram_q, eq, gram_k, ek)


# ---------------------------------------------------------------- the same test in arb balls

#: working precisions (bits) of the ball rung, tried in this order
BALL_PRECISIONS = (106, 212, 424)


def _exact_arb(x: int, shift: int, num: int = 1, den: int = 1) -> Any:
    """The ball of ``x num / den 2^shift`` at the working precision (exact when it fits)."""
    import flint
    q = flint.fmpq(x * num << shift, den) if shift >= 0 else flint.fmpq(x * num, den << -shift)
    return flint.arb(q)


def _z_in_balls(gram_q: IntRows, eq: int, gram_k: IntRows, ek: int, threshold: Fraction) -> Any:
    """``[[GK 2^ek, I], [I, GQ 2^eq / threshold]]`` as an ``arb_mat``, entry by entry from the exact
    rationals (python-flint rounds each into a ball that contains it)."""
    import flint
    r = len(gram_q)
    rows = []
    for i in range(r):
        rows.append([_exact_arb(int(v), ek) for v in gram_k[i]] + [flint.arb(int(i == j)) for j in range(r)])
    for i in range(r):
        rows.append([flint.arb(int(i == j)) for j in range(r)]
                    + [_exact_arb(int(v), eq, threshold.denominator, threshold.numerator) for v in gram_q[i]])
    return flint.arb_mat(rows)


def _ball_inertia(B: Any) -> tuple[int, int] | None:
    """``(n_+, n_-)`` of every symmetric matrix inside the ``arb_mat`` ``B`` when ``W B W`` is
    strictly diagonally dominant for ``w_i = 2^-round(log2 |b_ii| / 2)``, proved on the balls
    (``|b_ii| >= abs_lower``, ``|b_ij| <= abs_upper``, the weighted sums in balls), else None."""
    import flint
    n = B.nrows()
    entries = B.tolist()
    weights, margins = [], []
    for i in range(n):
        d = entries[i][i]
        if d.contains(0):
            return None
        m, e = d.mid().man_exp()
        k = (int(e) + int(m).bit_length()) // 2
        weights.append(flint.arb(flint.fmpq(1, 1 << k) if k >= 0 else flint.fmpz(1) << -k))
        margins.append(d.abs_lower())
    zero = flint.arb(0)
    bound = flint.arb_mat([[zero if i == j else entries[i][j].abs_upper() for j in range(n)]
                           for i in range(n)]) * flint.arb_mat([[w] for w in weights])
    for i in range(n):
        if not margins[i] * weights[i] > bound[i, 0]:
            return None
    positive = sum(1 for i in range(n) if entries[i][i] > 0)
    return positive, n - positive


def _refined(B: Any) -> Any | None:
    """One congruence step ``V^T B V``: ``V`` scales by ``2^-round(log2 |b_ii| / 2)`` and then
    rotates by numpy's eigenvectors of the scaled midpoints (any ``V`` is sound: only the ball
    test decides); None when the midpoints leave the float range."""
    import flint
    mids = np.array(B.mid().tolist(), dtype=np.float64)
    diag = np.abs(np.diag(mids))
    if not np.all(np.isfinite(mids)):
        return None
    scale = np.where(diag > 0, -np.round(np.log2(np.where(diag > 0, diag, 1.0)) / 2), 0.0).astype(np.int64)
    S = np.ldexp(mids, scale[:, None] + scale[None, :])
    V = np.ldexp(np.linalg.eigh((S + S.T) / 2)[1], scale[:, None])
    Vb = flint.arb_mat(V.tolist())
    return Vb.transpose() * (B * Vb)


def count_above_balls(gram_q: IntRows, eq: int, gram_k: IntRows, ek: int, threshold: Fraction) -> int | None:
    """``#{lambda(GQ 2^eq GK 2^ek) > threshold}`` from the inertia of ``Z(threshold)`` proved in
    python-flint balls at :data:`BALL_PRECISIONS`: ``B = X^T Z X`` is formed in balls, so it holds
    the exact congruent matrix for the exact dyadic ``X`` (a product of float matrices), and the
    weighted dominance of :func:`_ball_inertia` on the balls gives its inertia, hence ``Z``'s; ``X``
    starts from numpy's eigenvectors of the equilibrated float ``Z`` and is refined by
    :func:`_refined` (a poor ``X`` only fails). None when no precision decides (``threshold`` may
    be an eigenvalue: the caller takes the exact characteristic polynomial)."""
    import flint
    r = len(gram_q)
    threshold = Fraction(threshold)
    if not r or threshold <= 0 or 2 * r > LARGEST_N:
        return None
    lt = threshold.numerator.bit_length() - threshold.denominator.bit_length()
    s = np.array(equilibrating_exponents(gram_k, ek) + equilibrating_exponents(gram_q, eq - lt))
    Zk = rational_ball(gram_k, 1, 1, ek, s[:r].tolist(), s[:r].tolist())
    Zq = rational_ball(gram_q, threshold.denominator, threshold.numerator, eq, s[r:].tolist(), s[r:].tolist())
    if Zk is None or Zq is None or s.min() < -1000 or s.max() > 1000:
        return None
    link = np.diag(np.ldexp(1.0, s[:r] + s[r:]))
    try:
        X0 = np.ldexp(np.linalg.eigh(np.block([[Zk.mid, link], [link, Zq.mid]]))[1], s[:, None])
    except np.linalg.LinAlgError:
        return None
    saved = flint.ctx.prec
    try:
        for bits in BALL_PRECISIONS:
            flint.ctx.prec = bits
            X = flint.arb_mat(X0.tolist())
            B: Any = X.transpose() * (_z_in_balls(gram_q, eq, gram_k, ek, threshold) * X)
            for _ in range(1 + bits // 53):
                got = _ball_inertia(B)
                if got is not None:
                    return got[0] - r if r <= got[0] <= 2 * r else None
                if any(B[i, i].contains(0) for i in range(2 * r)):
                    break                              # this precision cannot separate a diagonal from 0
                B = _refined(B)
                if B is None:
                    break
    finally:
        flint.ctx.prec = saved
    return None
