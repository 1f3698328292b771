"""Exact column-span check by many word-size primes: the upper bound of the
exact rank of a large integer matrix, at the cost of float64 matrix products.

Claim. ``M = N[R, C]`` (``r x r``) is nonsingular, ``D = det M``. For a row ``i``
and a column ``j`` the bordered minor is
``beta_ij = det [[M, N[R, j]], [N[i, C], N[i, j]]] = D (N_ij - N[i, C] M^-1 N[R, j])``
(Schur complement). Every ``beta_ij`` is zero iff the Schur complement of
``M`` is zero iff ``rank N = r`` (every column lies in the span of the
columns ``C``).

Bound (the sharper one: the ``(r+1)``-minors' own rows and columns, not the
whole matrix). Hadamard's inequality on the rows of the bordered matrix gives
``beta_ij^2 <= prod_{k in R} (a_k + m_k) * max_i (a_i + m_i)`` with
``a_k = sum_{c in C} N_kc^2`` and ``m_k = max_j N_kj^2``; on its columns,
``beta_ij^2 <= prod_{c in C} (b_c + w_c) * max_j (b_j + w_j)`` with
``b_j = sum_{k in R} N_kj^2``, ``w_j = max_i N_ij^2``. ``bound_sq`` is the
smaller of the two (:func:`bordered_minor_bound_sq`, the checker derives the
same number). If ``beta_ij = 0 mod p`` for primes whose product ``P`` has
``P^2 > bound_sq``, then ``|beta_ij| < P`` and ``P | beta_ij``, so ``beta_ij = 0``.

A second bound from the witness's actual sizes (:func:`schur_bound_sq`; the
producer's alone, the checker keeps the Hadamard bound and picks its own primes):
``|beta_ij| = |D| |N_ij - N[i, C] M^-1 N[R, j]| <= |D| (max|N| + a mu b)`` by
Cauchy-Schwarz, with ``a = max_i ||N[i, C]||``, ``b = max_j ||N[R, j]||`` and
``mu >= ||M^-1||_2``. ``D`` is computed exactly anyway, and ``mu`` is proved from
any approximate inverse: ``X`` (integers, a float inverse scaled by ``2^e``) with
``E = 2^e I - M X`` computed exactly has ``M (X / 2^e) = I - E / 2^e``; when
``||E||_F < 2^e`` the right side is invertible, ``M^-1 = (X / 2^e) (I - E / 2^e)^-1``
and ``||M^-1||_2 <= ||X||_F / (2^e - ||E||_F)`` (``||.||_2 <= ||.||_F``, Neumann
series). For a random-like minor ``|D|`` is far below Hadamard's product of row
norms (by about ``1.44 r`` bits for a product of two random factors), so the count
of primes drops by 5-15 %; the smaller of the two bounds is used, and when the
float inverse is poor (``||E||_F >= 2^e``) only Hadamard's.

A count from the witness's own sizes (:func:`denominator_guess`, used first when
``2^s > 2 (r + 1) max|N|`` has ``s <= 44``): with ``d`` the least common denominator
of ``M^-1 N[R, :] G`` for a few random columns ``G`` (exact; about half the bits of
``D`` for a product of two random factors, since ``M^-1 N[R, :] = V_C^-1 V`` when
``N = U V``), let ``X`` be the integer ``|X| < P/2`` congruent to ``d M^-1 N[R, C']``
modulo ``P``. The CRT gives ``sum_k (d c_k Y_pk mod p_k) / p_k = X / P (mod 1)``
(``c_k = (P/p_k)^-1 mod p_k``), summed in float64 reduced mod 1 after each term
(``<= 2^-52`` of rounding each); ``|sum| <= 2^-s - K 2^-50`` proves ``|X| <= P 2^-s``.
With ``P >= 2^s |d|`` and every congruence below, ``E = N[:, C] X - d N[:, C']`` is
``0 mod P`` and ``|E| <= (r + 1) max|N| P 2^-s < P/2``, so ``E = 0`` and
``N = N[:, C] [d I | X] / d``: rank at most ``r``. Any ``d`` is sound (a wrong one
fails the size test, and the bound's count follows). The primes are counted from
``log2 |d| + log2 max|M^-1 N[R, :]| (float) + 16 + s`` bits.

Modulo one prime ``p`` (``p`` not dividing ``D``): ``beta_ij = 0 mod p`` iff
``N_ij = (N[:, C] Y)_ij mod p`` with ``Y = M^-1 N[R, :] mod p``. Only rows outside
``R`` and columns outside ``C`` are compared (the Schur complement vanishes on the
others identically). Per prime, with the compiled kernels of
:mod:`solvers.exact.modkernel`: ``M^-1 mod p`` by Gauss-Jordan on float64 residues
(``r^3``, a few ms at ``r = 256``; no Python-level entries), ``Y`` by one BLAS
product and one reduction, then ``T = N[:, C]_p Y_p`` tile by tile (BLAS) with the
fused test of each tile in cache. Residues are balanced (``|x| <= (p-1)/2``), so
the float64 products have integer partial sums of at most ``r ((p-1)/2)^2`` and
are exact in any summation order; ``p`` is the largest prime with
``r ((p-1)/2)^2 + max|N| <= 2^53 - 2^27``, so the difference ``T - N`` is exact
too, and ``q = rint(T / p)``, ``q p - T == 0`` everywhere iff ``T = 0 mod p`` (the
quotient's float error is below ``2/p``, and ``q p`` is exact). When the entries
are small, ``N[:, C]`` and ``N[R, :]`` enter the products unreduced instead
(partial sums at most ``r ((p-1)/2) max|N|``), which allows larger primes (up to
``2^26``: 26 bits instead of 24 at ``r = 256`` and ``|N| < 2^14``, 10 % fewer
primes) and saves their reductions. The cost per prime is then the product
``(n1 - r) (n2 - r) r`` plus ``r^2 n2`` and ``r^3``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

import numpy as np

from solvers.exact import modkernel as mk
from solvers.exact.draws import Draws
from solvers.exact.integers import int_max_abs, int_max_abs_along

if TYPE_CHECKING:
    from solvers.exact.integers import IntMatrix

#: every integer a check handles stays at most this large: float64 is exact up to 2^53,
#: and the margin 2^27 > 2p covers ``q p`` in the divisibility test (primes below 2^26)
FLOAT_LIMIT = (1 << 53) - (1 << 27)
MAX_PRIME = (1 << 26) - 1


def bordered_minor_bound_sq(V: np.ndarray, rows: Sequence[int], cols: Sequence[int]) -> int:
    """``B^2`` with ``|det N[R + {i}, C + {j}]| <= B`` for every row ``i`` and column
    ``j`` (int64 ``V``): the smaller of the row-wise and the column-wise Hadamard
    bound of the bordered minors (module docstring)."""
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    m = [v * v for v in int_max_abs_along(V, 1)]                         # m_k = max_j N_kj^2
    w = [v * v for v in int_max_abs_along(V, 0)]                         # w_j = max_i N_ij^2
    a = row_sq(V[:, C])                                             # a_k = ||N[k, C]||^2
    b = row_sq(V[R].T)                                              # b_j = ||N[R, j]||^2
    by_rows = math.prod(a[k] + m[k] for k in rows) * max(x + y for x, y in zip(a, m))
    by_cols = math.prod(b[c] + w[c] for c in cols) * max(x + y for x, y in zip(b, w))
    return min(by_rows, by_cols)


def row_sq(X: np.ndarray) -> list[int]:
    """Exact squared Euclidean norms of the rows of an int64 array (Python ints)."""
    if X.shape[1] == 0:
        return [0] * X.shape[0]
    big = int_max_abs(X)
    if big < (1 << 26):                                          # squares and sums fit int64
        if X.shape[1] * (1 << 52) < (1 << 63):
            return [int(v) for v in (X * X).sum(1).tolist()]
    w = max(16, -(-big.bit_length() // 2))
    if 2 * w + X.shape[1].bit_length() <= 62:
        # X = hi 2^w + lo, 0 <= lo < 2^w, |hi| <= 2^w: every product at most 2^2w, every
        # row sum below 2^62 in int64; X^2 = hi^2 2^2w + 2 hi lo 2^w + lo^2
        lo, hi = X & ((1 << w) - 1), X >> w
        hh, hl, ll = ((hi * hi).sum(1).tolist(), (hi * lo).sum(1).tolist(), (lo * lo).sum(1).tolist())
        return [(int(a) << 2 * w) + (int(b) << w + 1) + int(c) for a, b, c in zip(hh, hl, ll)]
    O = X.astype(object)
    return [int(v) for v in (O * O).sum(1).tolist()]


def _planes(A: np.ndarray, h: int) -> list[tuple[np.ndarray, int]]:
    """``A = sum_d P_d 2^(h d)`` for int64 ``A``: float64 planes, ``|P_d| < 2^h`` (sign-magnitude)."""
    sign, mag = np.sign(A), np.abs(A)
    out, shift = [], 0
    while True:
        out.append((((mag & ((1 << h) - 1)) * sign).astype(np.float64), shift))
        mag = mag >> h
        shift += h
        if not mag.any():
            return out


def exact_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A B`` over Z (object array of Python ints) for int64 ``A``, ``B`` (``|.| < 2^62``):
    planes of ``h`` bits with ``k 2^(2h) <= 2^52`` (``k`` the inner dimension), every
    float64 product of two planes exact."""
    k = A.shape[1]
    h = (52 - max(k, 1).bit_length()) // 2
    out = np.zeros((A.shape[0], B.shape[1]), dtype=object)
    for Pa, sa in _planes(A, h):
        for Pb, sb in _planes(B, h):
            out += (Pa @ Pb).astype(np.int64).astype(object) << (sa + sb)
    return out


def _isqrt_up(x: int) -> int:
    s = math.isqrt(x)
    return s if s * s == x else s + 1


def schur_bound_sq(V: np.ndarray, rows: Sequence[int], cols: Sequence[int], D: int) -> int | None:
    """``B^2`` with ``|det N[R + {i}, C + {j}]| <= B`` for every ``i, j`` from
    ``|D| (max|N| + a mu b)`` (module docstring), ``mu`` proved from a float inverse
    of ``M = N[R, C]`` by an exact residual; None when that inverse is too poor
    (``||E||_F >= 2^e``) or ``M`` is singular in float64."""
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    M = np.ascontiguousarray(V[np.ix_(R, C)])
    r = len(R)
    if not r or D == 0:
        return None
    with np.errstate(all="ignore"):
        try:
            X = np.linalg.inv(M.astype(np.float64))
        except np.linalg.LinAlgError:
            return None
    if not np.isfinite(X).all() or not X.any():
        return None
    e = 40 - int(np.frexp(float(np.abs(X).max()))[1])            # max |X 2^e| in [2^39, 2^40)
    Xi = np.rint(np.ldexp(X, e)).astype(np.int64)
    E = exact_matmul(M, Xi)                                      # (r, r) M X exactly
    E = -E
    one = 1 << e if e >= 0 else None
    if one is None:                                              # |M^-1| huge: Hadamard will do
        return None
    E[np.arange(r), np.arange(r)] += one                         # E = 2^e I - M X
    eF = _isqrt_up(int(sum(int(v) * int(v) for v in E.ravel().tolist())))
    if eF >= one:
        return None
    xF = _isqrt_up(int(sum(int(v) * int(v) for v in Xi.ravel().tolist())))
    a = _isqrt_up(max(row_sq(V[:, C])))                       # max_i ||N[i, C]||
    b = _isqrt_up(max(row_sq(np.ascontiguousarray(V[R].T))))  # max_j ||N[R, j]||
    m = int_max_abs(V)
    # |beta| <= |D| (m + a b xF / (one - eF)) = |D| (m (one - eF) + a b xF) / (one - eF)
    num, den = abs(D) * (m * (one - eF) + a * b * xF), one - eF
    B = -(-num // den)
    return B * B


@lru_cache(maxsize=64)
def _primes_below(limit: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes ``<= limit`` (deterministic), largest first."""
    import flint
    out: list[int] = []
    p = limit
    while len(out) < count and p > 2:
        if flint.fmpz(p).is_prime():
            out.append(p)
        p -= 1
    return tuple(out)


def prime_limit(r: int, max_abs: int) -> int:
    """Largest ``p <= MAX_PRIME`` with ``r ((p-1)/2)^2 + max_abs <= FLOAT_LIMIT``: both
    factors of each product balanced residues."""
    room = FLOAT_LIMIT - max_abs
    if room <= 0:
        return 0
    h = math.isqrt(room // max(r, 1))                      # (p - 1)/2 <= h
    return min(2 * h + 1, MAX_PRIME)


def raw_prime_limit(r: int, max_abs: int) -> int:
    """Largest ``p <= MAX_PRIME`` with ``r ((p-1)/2) max_abs + max_abs <= FLOAT_LIMIT``:
    one factor of each product a balanced residue, the other the matrix's own
    entries (``N[:, C]`` and ``N[R, :]`` unreduced), which is larger than
    :func:`prime_limit` when the entries are small."""
    room = FLOAT_LIMIT - max_abs
    if room <= 0 or max_abs == 0:
        return MAX_PRIME if room > 0 else 0
    h = room // (max(r, 1) * max_abs)
    return min(2 * h + 1, MAX_PRIME)


def span_primes(r: int, max_abs: int, bound_sq: int, D: int, top: int | None = None) -> list[int] | None:
    """Primes for the check: largest first below ``top`` (default
    :func:`prime_limit`), skipping divisors of ``D``, until their product ``P`` has
    ``P^2 > bound_sq``. None when the entries are too large for float-exact residues."""
    top = prime_limit(r, max_abs) if top is None else top
    if top < 1 << 12:
        return None
    want = 64
    while want <= 1 << 16:
        chosen, prod = [], 1
        for p in _primes_below(top, want):
            if D % p:
                chosen.append(p)
                prod *= p
                if prod * prod > bound_sq:
                    return chosen
        want *= 2
    return None


def balanced(x: np.ndarray, p: int) -> np.ndarray:
    """Balanced residues ``|y| <= (p-1)/2``, ``y = x mod p``, of integer-valued
    float64 ``x`` (:func:`solvers.exact.modkernel.balanced_numpy`)."""
    return mk.balanced_numpy(x, p)


def span_check_multimodular(N: IntMatrix, rows: Sequence[int], cols: Sequence[int], *,
                            tile_rows: int = 128, tile_cols: int = 1024,
                            Nf: np.ndarray | None = None, stats: dict | None = None,
                            compiled: bool = True) -> bool | None:
    """Exact: every column of the integer matrix ``N`` (an ``IntMatrix``) lies in the
    span of ``N[:, cols]``, given ``N[rows, cols]`` nonsingular (module docstring).
    True proves ``rank N <= len(cols)``; False means some bordered minor is not zero
    (the rank is larger). None: not applicable (entries beyond 2^51, object dtype,
    or a singular ``N[rows, cols]``). ``Nf`` is ``N`` as float64 when the caller has
    it; ``stats`` receives the bound's bits and the primes used; ``compiled=False``
    runs every step in numpy and python-flint even when the compiled kernels are built.

    Only the rows outside ``rows`` and the columns outside ``cols`` are compared: the
    Schur complement vanishes on the others identically (``M M^-1 N[R, :] = N[R, :]``,
    ``N[:, C] M^-1 M = N[:, C]``, over Q and modulo every prime not dividing ``D``)."""
    import flint

    V = N.values
    if V.dtype == object:
        return None
    n1, n2 = V.shape
    r = len(cols)
    if r == 0:
        return not np.any(V)
    if r == n2 or r == n1:
        return True
    max_abs = int_max_abs(V)
    if max_abs > 1 << 51:
        return None
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    Mi64 = np.ascontiguousarray(V[np.ix_(R, C)])
    MZ = flint.fmpz_mat(r, r, Mi64.ravel().tolist())
    D = int(MZ.det())
    if D == 0:
        return None
    hadamard_sq = bordered_minor_bound_sq(V, rows, cols)
    schur_sq = schur_bound_sq(V, rows, cols, D) if r >= 4 else None
    bound_sq = hadamard_sq if schur_sq is None else min(hadamard_sq, schur_sq)
    raw = raw_prime_limit(r, max_abs) > prime_limit(r, max_abs)     # small entries: larger primes
    top = raw_prime_limit(r, max_abs) if raw else prime_limit(r, max_abs)
    if Nf is None:
        Nf = V.astype(np.float64)                                 # exact: |N| <= 2^51
    s = (2 * (r + 1) * max_abs).bit_length()                      # 2^s > 2 (r + 1) max|N|
    guess = denominator_guess(MZ, V, R, C, Nf) if s <= 44 else None
    for d in ([guess[0]] if guess else []) + [None]:
        if d is None:
            primes = span_primes(r, max_abs, bound_sq, D, top)
        else:                                                     # P > 2^s max(|d|, est. max|d Y|)
            assert guess is not None
            bits = max(d.bit_length() + max(0, math.ceil(math.log2(guess[1]))) + 16, d.bit_length()) + s + 1
            primes = span_primes(r, max_abs, 1 << (2 * bits), D, top)
        if primes is None:
            return None
        if stats is not None:
            stats.update({"bound_bits": (math.isqrt(bound_sq) + 1).bit_length(),
                          "hadamard_bits": (math.isqrt(hadamard_sq) + 1).bit_length(),
                          "primes": len(primes), "prime_bits": primes[0].bit_length(),
                          "operands": "raw" if raw else "balanced", "denominator": d is not None})
        ok = _span_over_primes(V, Nf, R, C, Mi64, primes, raw, d, s, tile_rows, tile_cols, compiled)
        if ok is not None:
            return ok
    return None


def denominator_guess(MZ: object, V: np.ndarray, R: np.ndarray, C: np.ndarray,
                      Nf: np.ndarray) -> tuple[int, float] | None:
    """``(d, y)``: the least common denominator ``d`` of ``M^-1 N[R, :] G`` for eight
    random integer columns ``G`` (exact, python-flint; with high probability that of
    ``M^-1 N[R, :]``, about half the bits of ``det M`` for a product of two random
    factors) and the float ``y = max|M^-1 N[R, :]|``; None when the float solve fails.
    Only a guess: a wrong one fails the size test of the CRT lift."""
    import flint
    try:
        y = float(np.abs(np.linalg.solve(Nf[np.ix_(R, C)], Nf[R])).max())
    except np.linalg.LinAlgError:
        return None
    if not (math.isfinite(y) and y > 0):
        return None
    G = Draws(1).integers(-1 << 10, 1 << 10, (V.shape[1], 8))
    B = V[R] @ G if int_max_abs(V) * V.shape[1] < 1 << 52 else V[R].astype(object) @ G.astype(object)
    Y = MZ.solve(flint.fmpz_mat(len(R), 8, [int(v) for v in B.ravel().tolist()]))  # type: ignore[attr-defined]
    return int(Y.numer_denom()[1]), y


def _span_over_primes(V: np.ndarray, Nf: np.ndarray, R: np.ndarray, C: np.ndarray, Mi64: np.ndarray,
                      primes: list[int], raw: bool, d: int | None, s: int, tile_rows: int, tile_cols: int,
                      compiled: bool) -> bool | None:
    """The check modulo ``primes`` (module docstring): False at a nonzero residue; True
    when every residue is zero and (``d`` given) the CRT lift ``X`` of ``d M^-1 N[R, C']``
    has ``|X| <= P 2^-s`` (float sum of ``(d c_k Y_pk mod p_k) / p_k``, reduced mod 1
    after each term); None when that size test fails."""
    n1, n2 = V.shape
    r = len(C)
    max_abs = int_max_abs(V)
    keep_r = np.ones(n1, dtype=bool)
    keep_r[R] = False
    keep_c = np.ones(n2, dtype=bool)
    keep_c[C] = False
    oR, oC = np.flatnonzero(keep_r), np.flatnonzero(keep_c)
    NC = np.ascontiguousarray(Nf[np.ix_(oR, C)])                  # (n1 - r, r)
    NR = np.ascontiguousarray(Nf[np.ix_(R, oC)])                  # (r, n2 - r)
    # the compared block, once: int32 halves the memory traffic of the fused pass
    No = V[np.ix_(oR, oC)]
    No = No.astype(np.int32) if max_abs < 1 << 31 and compiled and mk.available() else No.astype(np.float64)
    Mf = Mi64.astype(np.float64)
    m1, m2 = len(oR), len(oC)
    tr, tc = max(1, min(tile_rows, m1)), max(1, min(tile_cols, m2))
    T = np.empty(tr * tc)                                         # tile buffer, reused
    NCp, NRp, Yp = np.empty_like(NC), np.empty_like(NR), np.empty_like(NR)
    F = np.zeros(NR.shape)                                        # sum_k (d c_k Y_pk mod p_k) / p_k mod 1
    P = math.prod(primes)
    eye = np.eye(r)
    # (n1 - r, r) @ (r, n2 - r) per prime; its partial sums stay below 2^53 - 2^27 - max|N|
    for p in primes:
        Minv = mk.inverse(Mf, p, compiled=compiled)               # (r, r) balanced
        Mp = Mf if raw else mk.reduce(Mf, p, compiled=compiled)
        if Minv is None or not np.array_equal(mk.reduce(Mp @ Minv, p, compiled=compiled), eye):
            raise RuntimeError("internal error: the minor's inverse modulo a prime not dividing det fails")
        if raw:                                                   # |N| small: the entries themselves
            NRp, NCp = NR, NC
        else:
            mk.reduce(NR, p, NRp, compiled=compiled)
            mk.reduce(NC, p, NCp, compiled=compiled)
        np.matmul(Minv, NRp, out=Yp)                              # exact: r h^2 or r h max|N|, < 2^53
        mk.reduce(Yp, p, Yp, compiled=compiled)                   # Y = M^-1 N[R, :] mod p
        if d is not None:                                         # |w Y| < 2^50: exact; / p rounded once
            w = d * pow(P // p % p, -1, p) % p
            F += mk.reduce(Yp * float(w - p if w > p // 2 else w), p, compiled=compiled) / p
            F -= np.rint(F)
        for c0 in range(0, m2, tc):
            c1 = min(m2, c0 + tc)
            Yc = np.ascontiguousarray(Yp[:, c0:c1])
            for a in range(0, m1, tr):
                b = min(m1, a + tr)
                shape = (b - a, c1 - c0)
                t = np.matmul(NCp[a:b], Yc, out=T[:shape[0] * shape[1]].reshape(shape))  # <= r h^2
                if mk.residue_nonzero(t, No, a, c0, p, compiled=compiled):     # T - N != 0 mod p
                    return False
    return True if d is None or float(np.abs(F).max(initial=0)) <= 2.0 ** -s - len(primes) * 2.0 ** -50 else None
