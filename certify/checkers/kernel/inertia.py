"""Eigenvalue counts and enclosures of ``GQ GK`` decided in floating point with rigorous error bounds (numpy
and fractions only); ``None`` where floats cannot decide, and the caller then runs the exact
characteristic polynomial.

The statements.
``GQ``, ``GK`` are exact symmetric ``r x r`` matrices (integers times powers of two), at least one of them
positive semidefinite (both are Gram matrices ``PhiQ^T PhiQ``, ``PhiK^T PhiK``); the eigenvalues
``lambda_i`` of ``GQ GK`` are then real (say ``GK`` is semidefinite: they are those of ``GK^1/2 GQ
GK^1/2``), and for ``c > 0``

    Z(c) = [[GK, I], [I, GQ / c]]            (2r x 2r, symmetric)

(1) is nonsingular iff ``c`` is not an eigenvalue (``det Z = det(GK GQ / c - I)`` since the lower blocks
    ``I`` and ``GQ / c`` commute), and then
(2) ``n_+(Z) = r + #{i : lambda_i > c}``.

Proof of (2): if ``GK`` is positive definite, ``GK = L L^T``, the Schur complement gives ``In(Z) = In(GK)
+ In(GQ / c - GK^-1)`` and ``GQ / c - GK^-1 = L^-T (L^T GQ L / c - I) L^-1``, whose inertia is that of
``L^T GQ L - c I``, a symmetric matrix with the eigenvalues ``lambda_i - c``. If ``GK`` is only
semidefinite, replace it by ``GK + t I`` (``t > 0``, definite): the eigenvalues of ``GQ (GK + t I)`` are
real and continuous in ``t`` and none is ``c`` at ``t = 0``, so for small ``t`` none is ``c`` (``Z`` stays
nonsingular, so its inertia does not change) and none crosses ``c`` (the count does not change). With
``GQ`` semidefinite instead, the same holds for the permuted matrix ``[[GQ, I], [I, GK / c]]``, which is
congruent to ``Z`` (swap the blocks, scale them by ``sqrt(c)`` and ``1 / sqrt(c)``). With ``c = eps^2``
the count is the number of singular values of ``PhiQ PhiK^T`` above ``eps``, and (1) says that no singular
value equals eps.

Congruence and diagonal dominance decide inertia. For any square ``X``, ``B = X^T Z X``; if ``W B W`` is
strictly diagonally dominant for a positive diagonal ``W`` (``|B_ii| w_i > sum_{j != i} |B_ij| w_j`` for
every ``i``), then ``W B W`` and ``B`` are nonsingular and their inertia is read off the signs of the
diagonal (Gershgorin: ``D + t (WBW - D)``, ``t`` in ``[0, 1]``, stays dominant, hence nonsingular, and no
eigenvalue crosses 0); ``det B = det(X)^2 det Z != 0`` makes ``X`` nonsingular, and Sylvester's law of
inertia gives ``In(Z) = In(B)``. ``X`` is any float matrix (here numpy's ``eigh``, taken as exact dyadic
rationals): a poor ``X`` can only make the test fail, never pass wrongly.

Eigenvalue enclosures (``GK`` positive definite, else the roles swapped): for ``X`` nonsingular the pencil
``(A, B) = (X^T GK GQ GK X, X^T GK X)`` has the eigenvalues of ``GQ GK`` (``GK GQ GK x = mu GK x`` iff
``GQ GK x = mu x``). With ``||B - I||_2 <= rho_B < 1`` (so ``B`` is definite, hence ``X`` nonsingular and
``GK = X^-T B X^-1`` definite), ``D = diag(A)`` and ``||A - D||_2 <= rho_A``, Weyl's inequality puts the
i-th largest eigenvalue of ``A`` within ``rho_A`` of the i-th largest ``d_i``, and Ostrowski's theorem
(``lambda_i(S A S^T) = theta_i lambda_i(A)``, ``theta_i`` between the extreme eigenvalues of ``S S^T =
B^-1``, i.e. in ``[1/(1+rho_B), 1/(1-rho_B)]``) gives the i-th largest eigenvalue of ``GQ GK`` in ``[d_i -
rho_A, d_i + rho_A]`` scaled by ``theta``. The 2-norms are bounded by the largest row sum of absolute
values (symmetric matrices). ``(GQ, GK)`` is first replaced by the similar pair ``(S^-1 GQ S^-1, S GK S)``
(``S`` a diagonal of powers of two equilibrating ``GK``): ``S^-1 GQ GK S`` has the same eigenvalues.

The error bound.
Every matrix is held as a midpoint and a radius ``(M, R)``: the exact matrix is within ``R`` of the float
matrix ``M``, entry by entry. Binary64, round to nearest, unit roundoff ``u = 2^-53``, ``gamma_n = n u /
(1 - n u)``.

* Input: an exact entry ``v = n / d 2^e`` is ``y 2^(e-t)`` plus less than ``2^(e-t)`` (``y = floor(n 2^t /
  d)``, ``t`` chosen so that ``y`` has about 62 bits), and ``float(y)`` (correctly rounded) is within half
  an ulp, less than ``spacing(|M|)``: ``R = 2^(e-t) + spacing(|M|)``, rounded up. Before that the matrices
  are equilibrated by exact congruences or similarities with powers of two (``diag(2^s_i)``, bringing the
  diagonal near 1), which change neither inertia nor eigenvalues.
* Product, any summation order, with or without fused multiply-adds (so BLAS may be used; a dot product of
  length ``n`` rounds each term at most ``n`` times): ``|fl(A B) - A B| <= gamma_n |A| |B| + n 2^-1022``,
  the last term for underflow, with or without flush to zero. For nonnegative ``P, Q`` this gives ``P Q <=
  (fl(P Q) + 2^-1000) / (1 - gamma_n)`` (``n 2^-1022 <= 2^-1000`` for ``n <= 2^20``). For ``(A, RA) (B,
  RB)`` the exact product differs from ``fl(A B)`` by at most ``gamma_n |A||B| + RA (|B| + RB) + |A| RB +
  2^-1000``.
* Every bound is evaluated with one IEEE operation at a time and moved one ulp up (``nextafter``), which
  covers that operation's rounding; constants such as ``gamma_n / (1 - gamma_n)`` are computed in
  Fractions and rounded up.
* No operand of a product is subnormal: a midpoint below ``2^-1000`` in magnitude is replaced by 0 and
  ``2^-1000`` added to its radius, and every radius is at least ``2^-1000``; so flushing subnormal
  operands to zero cannot change a product either.
* Any non-finite value makes the test fail (``None``).
The dominance test then uses ``|B_ii| >= |M_ii| - R_ii`` and ``|B_ij| <= |M_ij| + R_ij`` with the weights
``w_i = |M_ii|^-1/2``, all rounded the safe way; the enclosures' last steps are exact Fractions.

"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from certify.checkers.kernel.attention import kernel_value

U = Fraction(1, 1 << 53)
TINY = 2.0 ** -1000
#: longest dot product the bounds are stated for (n 2^-1022 <= 2^-1000)
MAX_N = 1 << 20

_up = lambda x: np.nextafter(x, np.inf)                 # the next float up


def _constants(n: int) -> tuple[float, float]:
    """The least floats ``>= gamma_n / (1 - gamma_n)`` and ``>= 1 / (1 - gamma_n)``."""
    if not 1 <= n <= MAX_N:
        raise ValueError(f"dimension {n} outside the bounds' range")
    g = n * U / (1 - n * U)
    ceil = lambda q: float(q) if Fraction(float(q)) >= q else float(np.nextafter(float(q), np.inf))
    return ceil(g / (1 - g)), ceil(1 / (1 - g))


def _flush(M: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """No subnormal operand: tiny midpoints become 0 (their size moves into the radius)."""
    small = np.abs(M) < TINY
    return np.where(small, 0.0, M), np.where(small, _up(R + TINY), np.maximum(R, TINY))


def _upper_product(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """An entrywise upper bound of the exact ``P Q`` for nonnegative float ``P, Q``."""
    return _up(_up(P @ Q + TINY) * _constants(P.shape[1])[1])


def _mul(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(A, RA) (B, RB)``: the midpoint ``fl(A B)`` and a rigorous radius."""
    (A, RA), (B, RB) = a, b
    absA, absB = np.abs(A), np.abs(B)
    R = _up(_constants(A.shape[1])[0] * _upper_product(absA, absB))
    R = _up(R + _upper_product(RA, _up(absB + RB)))
    R = _up(R + _upper_product(absA, RB))
    return _flush(A @ B, _up(R + TINY))


def _exact(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A float matrix taken as exact (radius: only what flushing adds)."""
    return _flush(np.asarray(X, dtype=np.float64), np.zeros_like(X, dtype=np.float64))


def product_enclosure(P: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(C, R)`` with the exact ``P Q^T`` within ``R`` of ``C`` entrywise, for float ``P`` and ``Q`` taken
    as exact (the product bound of the module docstring)."""
    return _mul(_exact(P), _exact(np.ascontiguousarray(Q.T)))


def negative_pair(Q: np.ndarray, K: np.ndarray, rows: int = 256,
                  limit: int = 4096) -> tuple[int, ...] | None:
    """``(i, j)`` with ``<Q_i, K_j> < 0``, ``()`` when every product is ``>= 0``, or None when
    more than ``limit`` pairs are left to Fractions (float64 rows taken as exact): an entry of
    ``Q K^T`` enclosed by ``C +- R`` (:func:`product_enclosure`) is negative if ``C < -R``,
    nonnegative if ``C >= R`` (exact float comparisons), else decided exactly."""
    unsure: list[tuple[int, int]] = []
    for a in range(0, Q.shape[0], rows):
        C, R = product_enclosure(Q[a:a + rows], K)
        for i, j in np.argwhere(C < -R)[:1]:                 # the first negative entry of the block
            return a + int(i), int(j)
        unsure += [(a + int(i), int(j)) for i, j in np.argwhere(C < R)]
        if len(unsure) > limit:
            return None
    for i, j in unsure:
        if kernel_value(Q[i].tolist(), K[j].tolist()) < 0:
            return i, j
    return ()


def quadratic_summaries(X: np.ndarray, e: int, c: int, lin: list[int], quad: list, gd: Fraction,
                        go: Fraction) -> dict[str, Fraction]:
    """One side's summaries of the quadratic-kernel lemma (:mod:`certify.checkers.kernel.attention`) from the
    feature rows ``X`` (``quad``: ``[feature, i, j]``): exact for an integer array times ``2^e``; for float64
    (``e = 0``; ``g_diag``, ``g_off`` doubles, ``|g| <= 2^20``) ``min_const`` exact and rigorous upper bounds:
    a row's squares and their sum (in this order) round to nearest, so its exact sum of squares is at most
    the computed one times ``1 + 2 (n + 1) u``, plus ``(n + 1) 2^-1074``; and ``|w - g xi xj| <= |fl(r)| + 8u
    (|fl(r)| + |fl(g fl(xi xj))|) + 2^-1000`` (``r = w - g xi xj``: the product, the scaling and the
    subtraction each round by at most ``u`` relative and ``2^-1075`` absolute, times ``|g|`` for the product,
    so the exact residual is at most ``|fl(r)| (1 + 2u) + 3u |fl(g p)| + 2^-1050``)."""
    f = [q[0] for q in quad]                            # the quadratic feature of each pair
    pi, pj = [lin[q[1]] for q in quad], [lin[q[2]] for q in quad]     # its two linear features
    g = np.array([gd if i == j else go for _, i, j in quad], dtype=object)
    if X.dtype.kind != "f":
        Y = X.astype(object) * Fraction(2) ** e
        res = Y[:, f] - g * Y[:, pi] * Y[:, pj]
        sq = _max_sq_exact
    else:
        if any(Fraction(float(v)) != v or abs(v) > 2 ** 20 for v in (gd, go)):
            raise ValueError("g_diag and g_off must be doubles of magnitude <= 2^20")
        Y = X.astype(np.float64, copy=False)                                  # read only
        gp = g.astype(np.float64)[None, :] * (Y[:, pi] * Y[:, pj])
        r = Y[:, f] - gp
        res = np.abs(r) + 2.0 ** -50 * (np.abs(r) + np.abs(gp)) + TINY
        sq = _max_sq_upper
    return {"min_const": Fraction(Y[:, c].min()), "max_linear_sq": sq(Y[:, lin]),
            "max_quadratic_sq": sq(Y[:, f]), "max_residual_sq": sq(res)}


def _max_sq_exact(X: np.ndarray) -> Fraction:
    """The largest squared norm of a row of an exact (object) array."""
    return Fraction(max((X * X).sum(axis=1)))


def _max_sq_upper(X: np.ndarray) -> Fraction:
    """An upper bound of the largest exact squared norm of a row of a float64 array: the
    squares and their sum in this order, times ``1 + 2 (n + 1) u``, plus ``(n + 1) 2^-1074``
    (:func:`quadratic_summaries`)."""
    n = X.shape[1]
    computed = sum(X[:, j] * X[:, j] for j in range(n)).max(initial=0.0)    # 0 + x = x
    return Fraction(float(computed)) * (1 + 2 * (n + 1) * U) + Fraction(n + 1, 1 << 1074)


def _inertia(Z: tuple[np.ndarray, np.ndarray]) -> tuple[int, int] | None:
    """``(n_+, n_-)`` of the exact symmetric matrix within ``Z = (M, R)``, when a weighted diagonal dominance
    of ``B = X^T Z X`` (``X``: numpy's eigenvectors of ``M``) proves them (module docstring); else None."""
    if not np.all(np.isfinite(Z[0])):
        return None
    try:
        X = _exact(np.linalg.eigh(Z[0])[1])
    except np.linalg.LinAlgError:
        return None
    B, R = _mul((X[0].T, X[1].T), _mul(Z, X))
    if not (np.all(np.isfinite(B)) and np.all(np.isfinite(R))):
        return None
    d = np.abs(np.diag(B))
    lo = np.nextafter(d - np.diag(R), -np.inf)                        # <= |exact B_ii|
    if not np.all(lo > 0):
        return None
    w = 1.0 / np.sqrt(d)
    O = _up(np.abs(B) + R)
    np.fill_diagonal(O, 0.0)
    rhs = _upper_product(O, w[:, None])[:, 0]                         # >= sum_{j != i} |exact B_ij| w_j
    if not (np.all(np.isfinite(rhs)) and np.all(np.nextafter(lo * w, -np.inf) > rhs)):   # <= |B_ii| w_i
        return None
    return int(np.sum(np.diag(B) > 0)), int(np.sum(np.diag(B) < 0))


def _scaled_floats(rows: list[list[int]], e: int, rs: list, cs: list, num: int = 1,
                   den: int = 1) -> tuple | None:
    """``(M, R)`` for the exact ``rows[i][j] num / den 2^(e + rs[i] + cs[j])``: each entry to
    about 62 bits by integer floor division (error below one unit of its last place), then
    correctly rounded to a float (``spacing`` covers it); None outside the exponent range.
    Python ints, elementwise in object arrays."""
    n = np.frompyfunc(int, 1, 1)(np.array(rows, dtype=object).reshape(len(rows), -1)) * num
    t = 62 - (np.frompyfunc(int.bit_length, 1, 1)(n).astype(np.int64) - den.bit_length())
    up = (n << np.maximum(t, 0).astype(object)) // den            # t >= 0: shift n up
    down = n // (den << np.maximum(-t, 0).astype(object))         # t < 0: shift the divisor up
    y = np.where(t >= 0, up, down)
    scales = np.add.outer(np.array(rs, dtype=np.int64), np.array(cs, dtype=np.int64))
    ex = np.where(n != 0, e + scales - t, -1074)
    if ex.size and (ex.max() > 900 or ex.min() < -2000):     # an exact zero (-1074): the radius stays TINY
        return None
    M = np.ldexp(y.astype(np.float64), ex)
    return _flush(M, _up(np.ldexp(1.0, np.maximum(ex, -1074)) + np.spacing(np.abs(M))))


def _equilibrated(G: list[list[int]], e: int, num: int = 1, den: int = 1,
                  lg: int = 0) -> tuple[list[int], tuple | None]:
    """``(s, Z)``: ``s_i`` with ``G_ii 2^(e - lg + 2 s_i)`` near 1 (zero diagonal: the largest entry's) and
    ``Z`` the floats of ``G num / den 2^e`` under the exact congruence ``diag(2^s_i)``."""
    top = max(max((abs(int(v)).bit_length() for row in G for v in row), default=0), 1) \
        if not all(G[i][i] for i in range(len(G))) else 1     # used only for a zero diagonal entry
    s = [-((abs(int(G[i][i])).bit_length() if G[i][i] else top) + e - lg) // 2 for i in range(len(G))]
    return s, _scaled_floats(G, e, s, s, num, den)


def count_above(GQ: list[list[int]], eq: int, GK: list[list[int]], ek: int, eps_sq: Fraction) -> int | None:
    """``#{lambda_i(GQ 2^eq GK 2^ek) > eps_sq}`` by the inertia of ``Z(eps_sq)`` (module docstring), or None
    when floats cannot decide. ``GQ, GK``: symmetric integer rows, at least one positive semidefinite (the
    caller's hypothesis)."""
    r = len(GQ)
    if r == 0 or eps_sq <= 0 or 2 * r > MAX_N:
        return None
    lg = eps_sq.numerator.bit_length() - eps_sq.denominator.bit_length()   # within 1 of log2 eps^2
    sk, Zk = _equilibrated(GK, ek)
    sq, Zq = _equilibrated(GQ, eq, eps_sq.denominator, eps_sq.numerator, lg)     # GQ / eps^2
    cpl = np.ldexp(1.0, np.array(sk) + np.array(sq))
    if Zk is None or Zq is None or cpl.min() < TINY or cpl.max() > 2.0 ** 900:
        return None
    off, zero = np.diag(cpl), np.zeros((r, r))
    Z = _flush(np.block([[Zk[0], off], [off, Zq[0]]]), np.block([[Zk[1], zero], [zero, Zq[1]]]))
    signs = _inertia(Z)
    if signs is None or sum(signs) != 2 * r or not 0 <= signs[0] - r <= r:
        return None                                     # not decided, or Z singular
    return signs[0] - r


def positive_definite(G: list[list[int]]) -> bool:
    """True when ``G`` (symmetric integer rows; a positive scale does not matter) is proved positive
    definite; False means only that floats did not prove it."""
    Z = _equilibrated(G, 0)[1] if 0 < len(G) <= MAX_N else None
    return not G or (Z is not None and _inertia(Z) == (len(G), 0))


def _enclosures_pd(GB: list, eb: int, GA: list, ea: int) -> list[tuple[Fraction, Fraction]] | None:
    """Enclosures of the eigenvalues of ``GA 2^ea GB 2^eb``, largest first, with ``GB`` positive definite
    (proved on the way), or None; ``2^m`` brings ``GA`` near 1 (module docstring)."""
    r = len(GB)
    s, Bm = _equilibrated(GB, eb)
    m = max((abs(int(GA[i][j])).bit_length() + ea - s[i] - s[j] for i in range(r) for j in range(r)
             if GA[i][j]), default=0)
    Am = _scaled_floats(GA, ea - m, [-v for v in s], [-v for v in s])
    if Bm is None or Am is None:
        return None
    try:
        kappa, Uv = np.linalg.eigh(Bm[0])
        if not kappa.min() > 0:
            return None
        X1 = Uv / np.sqrt(kappa)
        Y1 = Bm[0] @ X1
        A1 = Y1.T @ (Am[0] @ Y1)
        X = _exact(X1 @ np.linalg.eigh((A1 + A1.T) / 2)[1])
    except np.linalg.LinAlgError:
        return None
    Y = _mul(Bm, X)                                     # GB' X
    A = _mul((Y[0].T, Y[1].T), _mul(Am, Y))             # X^T GB' GA' GB' X
    B = _mul((X[0].T, X[1].T), Y)                       # X^T GB' X
    if not all(np.all(np.isfinite(v)) for v in (*A, *B)):
        return None
    EB = _up(_up(np.abs(B[0] - np.eye(r))) + B[1])      # >= |exact B - I|
    EA = _up(np.abs(A[0]) + A[1])
    np.fill_diagonal(EA, np.diag(A[1]))                 # >= |exact A - diag(mid A)|
    rho_b, rho_a = (Fraction(float(_upper_product(E, np.ones((r, 1))).max())) for E in (EB, EA))
    if not rho_b < 1:
        return None
    th = 1 / (1 + rho_b), 1 / (1 - rho_b)              # the range of theta (Ostrowski)
    end = lambda v, up: v * th[(v >= 0) == up] * Fraction(2) ** m      # the lower / upper end of v theta
    return [(end(d - rho_a, False), end(d + rho_a, True))
            for d in sorted((Fraction(float(v)) for v in np.diag(A[0])), reverse=True)]


def enclosures(GQ: list, eq: int, GK: list, ek: int) -> list[tuple[Fraction, Fraction]] | None:
    """Rigorous ``[lo, hi]`` for every eigenvalue of ``GQ 2^eq GK 2^ek``, largest first with multiplicity
    (module docstring), or None when floats cannot decide (neither Gram is proved definite, or the bounds
    are too loose)."""
    big = not GQ or 2 * len(GQ) > MAX_N
    return None if big else _enclosures_pd(GK, ek, GQ, eq) or _enclosures_pd(GQ, eq, GK, ek)
