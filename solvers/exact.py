"""Exact rank over Q: lossless float -> integer conversion, a modular lower
bound with a nonsingular-minor witness, and an exact upper-bound witness.

Numbers. Every finite binary float is a dyadic rational ``mant * 2^e``; a
matrix of floats is ``N * 2^E`` for one integer matrix ``N`` and one exponent
``E`` (:func:`dyadic`). Rationals are made integral row by row (row scaling
keeps the rank). NaN and Inf are bad input.

Lower bound. ``rank_p(N) <= rank_Q(N)`` for every prime ``p``: a minor whose
determinant is nonzero mod ``p`` is nonzero over Z. The evidence is the prime
and the row and column indices of an ``r x r`` minor that is nonsingular mod
``p``; a checker recomputes that one determinant mod ``p``.

Upper bound (matrix form). With ``M = N[R, C]`` nonsingular, every column is in
the span of the columns ``C`` iff ``N[:, C] Y = N[:, notC]`` for the unique
``Y = M^-1 N[R, notC]``; then ``[-Y; I]`` (rows permuted) is a null-space basis
with an identity block, so ``rank <= r``. Checked by exact multiplication.

Upper bound (factor form). Over Q (an ordered field),
``rank(A B^T) = rank(A^T A B^T B)``: ``A^T A x = 0`` implies
``|A x|^2 = x^T A^T A x = 0``, so ``ker(A^T A) = ker(A)``; hence
``ker(A^T A B^T) = ker(A B^T)`` and, transposing,
``ker(B^T B A^T A) = ker(B A^T A)``, so the ranks of ``A B^T``, ``A^T A B^T``
and ``A^T A B^T B`` agree. The ``r x r`` core is then handled exactly.
Gram matrices of huge factors (the whole cube) are accumulated exactly in
batches (:class:`GramAccumulator`), never forming the ``K x K`` matrix.

A verdict is ``proved`` only when the two bounds meet.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Sequence

import numpy as np

from certify.core.verdict import Verdict
from certify.core.errors import InputError
from certify.core.numbers import check_matrix

_LIMB = 20                 # bits per limb in the exact float Gram product
_CHUNK = 1 << 12           # rows per BLAS product: 2^12 * 2^40 = 2^52 < 2^53 stays exact


# ---------------------------------------------------------------- integer matrices

@dataclass(frozen=True, eq=False)
class IntMatrix:
    """An integer matrix: ``values`` is int64 when every entry fits, else an object
    array of Python ints. ``scale`` records what it represents: the source matrix
    is ``values * 2^exponent`` (dyadic) or ``diag(1/row_den) values`` (rational)."""

    values: np.ndarray
    exponent: int = 0
    row_den: tuple[int, ...] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.values.shape)  # type: ignore[return-value]

    def entries(self) -> list[int]:
        return [int(v) for v in self.values.ravel().tolist()]

    def rows(self) -> list[list[int]]:
        return [[int(v) for v in row] for row in self.values.tolist()]

    def fmpz(self, rows: Sequence[int] | None = None, cols: Sequence[int] | None = None):
        return fmpz_matrix(_take(self.values, rows, cols))

    def nmod(self, p: int, rows: Sequence[int] | None = None, cols: Sequence[int] | None = None):
        return nmod_matrix(_take(self.values, rows, cols), p)

    def max_bits(self) -> int:
        if self.values.size == 0:
            return 0
        if self.values.dtype == object:
            return max(int(v).bit_length() for v in self.values.ravel())
        return int(np.abs(self.values).max()).bit_length()


def _take(a: np.ndarray, rows, cols) -> np.ndarray:
    if rows is not None:
        a = a[np.asarray(rows, dtype=np.int64)]
    if cols is not None:
        a = a[:, np.asarray(cols, dtype=np.int64)]
    return a


def fmpz_matrix(a: np.ndarray):
    import flint
    a = np.asarray(a)
    n1, n2 = a.shape
    return flint.fmpz_mat(n1, n2, [int(v) for v in a.ravel().tolist()])


def nmod_matrix(a: np.ndarray, p: int):
    """Reduce an integer array (int64 or object) mod ``p`` into a flint ``nmod_mat``."""
    import flint
    a = np.asarray(a)
    n1, n2 = a.shape
    if a.dtype == object:
        flat = [int(v) % p for v in a.ravel().tolist()]
    else:
        flat = (a.astype(np.int64) % np.int64(p)).ravel().tolist() if p < (1 << 63) else \
            [int(v) % p for v in a.ravel().tolist()]
    return flint.nmod_mat(n1, n2, flat, p)


# ---------------------------------------------------------------- float/rational -> integers

def _mantissas(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``arr = mant * 2^exp`` exactly with odd ``mant`` (int64) for nonzero entries
    (mant = 0, exp = 0 for zeros). ``arr`` is a finite float array."""
    x = arr.astype(np.float64)               # float16/32 -> float64 is exact
    f, e = np.frexp(x)
    mant = (f * float(1 << 53)).astype(np.int64)   # exact: |f| < 1, 53-bit significand
    exp = e.astype(np.int64) - 53
    nz = mant != 0
    low = mant & -mant                          # lowest set bit (a power of two)
    tz = np.zeros_like(mant)
    tz[nz] = np.frexp(low[nz].astype(np.float64))[1] - 1
    mant = np.where(nz, mant >> tz, 0)
    exp = np.where(nz, exp + tz, 0)
    return mant, exp


def dyadic(a, what: str = "matrix") -> IntMatrix:
    """Lossless integer form of a float or integer matrix: ``a = N * 2^E``.

    >>> d = dyadic(np.array([[0.5, 0.75], [3.0, 0.0]]))
    >>> d.values.tolist(), d.exponent
    ([[2, 3], [12, 0]], -2)
    """
    arr = check_matrix(a, what)
    if arr.dtype.kind in "biu":
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.max() >= (1 << 63):
            return IntMatrix(np.array([[int(v) for v in row] for row in arr.tolist()], dtype=object))
        return IntMatrix(arr.astype(np.int64))
    mant, exp = _mantissas(arr)
    nz = mant != 0
    if not nz.any():
        return IntMatrix(np.zeros(arr.shape, dtype=np.int64))
    E = int(exp[nz].min())
    shift = np.where(nz, exp - E, 0)
    bits = np.zeros_like(mant)
    bits[nz] = np.frexp(np.abs(mant[nz]).astype(np.float64))[1]   # bit length (<= 53)
    if int((bits + shift).max()) <= 62:
        return IntMatrix(mant << shift, exponent=E)
    vals = np.empty(arr.shape, dtype=object)
    for idx, (m_, s_) in enumerate(zip(mant.ravel().tolist(), shift.ravel().tolist())):
        vals.flat[idx] = int(m_) << int(s_)
    return IntMatrix(vals, exponent=E)


def rational_rows(rows: Sequence[Sequence[Fraction]], what: str = "matrix") -> IntMatrix:
    """Integer matrix with the rank of a rational matrix: each row times the lcm of
    its denominators (``row_den``)."""
    if not rows or not rows[0]:
        raise InputError(f"{what}: empty matrix")
    n2 = len(rows[0])
    if any(len(r) != n2 for r in rows):
        raise InputError(f"{what}: ragged matrix")
    vals = np.empty((len(rows), n2), dtype=object)
    dens = []
    for i, row in enumerate(rows):
        L = 1
        for v in row:
            L = L * v.denominator // math.gcd(L, v.denominator)
        dens.append(L)
        for j, v in enumerate(row):
            vals[i, j] = v.numerator * (L // v.denominator)
    return IntMatrix(_compact(vals), row_den=tuple(dens))


def _compact(vals: np.ndarray) -> np.ndarray:
    """int64 when every entry fits, else keep the object array."""
    flat = vals.ravel().tolist()
    if all(-(1 << 62) <= int(v) < (1 << 62) for v in flat):
        return np.array(flat, dtype=np.int64).reshape(vals.shape)
    return vals


def dyadic_to_fraction(mant: int, exponent: int) -> Fraction:
    return Fraction(mant) * (Fraction(2) ** exponent)


# ---------------------------------------------------------------- primes, minors mod p

def random_prime(rng: np.random.Generator, bits: int = 60) -> int:
    """A uniformly drawn ``bits``-bit start, then the next prime (deterministic test)."""
    import flint
    if not 8 <= bits <= 63:
        raise ValueError("prime size must be 8..63 bits")
    x = int(rng.integers(1 << (bits - 1), 1 << bits)) | 1
    while not flint.fmpz(x).is_prime():
        x += 2
    return x


def _pivots(R, rank: int, ncols: int) -> list[int]:
    """Pivot columns of an rref ``nmod_mat``: O(rank + ncols) entry reads."""
    piv, j = [], 0
    for i in range(rank):
        while int(R[i, j]) == 0:
            j += 1
        piv.append(j)
        j += 1
    return piv


def minor_mod_p(N: IntMatrix, p: int) -> tuple[int, list[int], list[int]]:
    """``(rank mod p, rows, cols)`` with ``N[rows, cols]`` nonsingular mod ``p``."""
    n1, n2 = N.shape
    R, rk = N.nmod(p).rref()
    if rk == 0:
        return 0, [], []
    cols = _pivots(R, rk, n2)
    sub = N.nmod(p, cols=cols).transpose()          # (rk, n1)
    R2, rk2 = sub.rref()
    rows = _pivots(R2, rk2, n1)
    if rk2 != rk or N.nmod(p, rows, cols).det() == 0:   # cannot happen; never trust silently
        raise RuntimeError("internal error: modular minor is singular")
    return rk, rows, cols


def span_check(N: IntMatrix, rows: Sequence[int], cols: Sequence[int], *, block: int = 256) -> bool:
    """Exact: every column of ``N`` lies in the span of ``N[:, cols]``, given that
    ``N[rows, cols]`` is nonsingular. True proves ``rank(N) <= len(cols)``.
    Columns are checked in blocks (``Y`` has entries of ~r log|N| bits)."""
    n2 = N.shape[1]
    cset = set(cols)
    other = [j for j in range(n2) if j not in cset]
    if not other:
        return True
    M = N.fmpz(rows, cols)
    NC = N.fmpz(None, cols)
    for s in range(0, len(other), block):
        blk = other[s:s + block]
        Yn, den = M.solve(N.fmpz(rows, blk)).numer_denom()     # (r, b), N[R,C] Y = N[R,blk]
        if NC * Yn != N.fmpz(None, blk) * den:
            return False
    return True


# ---------------------------------------------------------------- fast path: float proposal, multimodular span

def float_minor(N: IntMatrix, *, seed: int = 0, oversample: int = 8
                ) -> tuple[list[int], list[int]] | None:
    """Propose ``r x r`` row and column indices of a well-conditioned minor from
    float64 sketches (only a proposal: the caller checks it exactly). Sketch
    ``A G`` and ``G^T A`` with ``k`` Gaussian columns, ``k`` doubled until the
    numerical rank is below ``k``; columns and rows by pivoted QR. O(n^2 k)."""
    from scipy.linalg import qr

    if N.values.dtype == object or N.max_bits() > 53:
        return None
    A = N.values.astype(np.float64)
    n1, n2 = A.shape
    rng = np.random.default_rng(seed)
    k = 32
    while True:
        k = min(k, min(n1, n2))
        G = rng.standard_normal((n1, k))
        Y = G.T @ A                                               # (k, n2)
        sv = np.linalg.svd(Y, compute_uv=False)
        tol = sv[0] * max(n1, n2) * np.finfo(np.float64).eps * 16 if sv.size else 0
        r = int((sv > tol).sum())
        if r < k or k == min(n1, n2):
            break
        k *= 2
    if r == 0:
        return None
    _, _, cp = qr(Y, mode="economic", pivoting=True)
    cols = sorted(int(c) for c in cp[:r])
    _, _, rp = qr(A[:, cols].T, mode="economic", pivoting=True)
    rows = sorted(int(i) for i in rp[:r])
    return rows, cols


def _float_exact_primes(r: int, bound: int) -> list[int]:
    """Primes ``p`` with ``r (p - 1)^2 < 2^53`` (a float64 product of residues with
    ``r`` terms is exact), largest first, until their product exceeds ``2 bound``."""
    import flint
    p = int(math.isqrt((1 << 53) // max(r, 1)))
    out, prod = [], 1
    while prod <= 2 * bound:
        p -= 1
        while not flint.fmpz(p).is_prime():
            p -= 1
        if p < 3:
            raise ValueError("no room for float-exact primes")
        out.append(p)
        prod *= p
    return out


def _fmod_exact(c: np.ndarray, p: int) -> np.ndarray:
    """Residues in [0, p) of nonnegative integer-valued float64 ``c < 2^53``:
    ``c - floor(c / p) p`` is exact (every term an integer below 2^53); the
    quotient may be off by one from rounding, corrected after."""
    d = c - np.floor(c / p) * p
    d[d < 0] += p
    d[d >= p] -= p
    return d


def _mod_f(a: np.ndarray, p: int) -> np.ndarray:
    """Residues in [0, p) as float64 (int64 input, |a| < 2^53)."""
    af = a.astype(np.float64)
    return _fmod_exact(af - np.floor(af / p) * p, p)


def _hadamard_cols(cols_sq: list[int]) -> int:
    """An integer upper bound of ``prod sqrt(c)`` for squared column norms ``c``."""
    out = 1
    for c in cols_sq:
        out *= math.isqrt(c) + 1
    return out


def span_check_multimodular(N: IntMatrix, rows: Sequence[int], cols: Sequence[int],
                            ) -> bool | None:
    """Exact: every column of ``N`` lies in the span of ``N[:, cols]``, given
    ``M = N[rows, cols]`` nonsingular (``D = det M != 0``). With
    ``Yn = adj(M) N[rows, :]`` (Cramer: ``Yn[i, j]`` is ``det M`` with column
    ``i`` replaced by ``N[rows, j]``, so ``|Yn[i, j]| <= H`` := the product of
    the ``r`` largest column norms of ``N[rows, :]``, Hadamard), the claim is the
    integer identity ``N[:, cols] Yn = D N``. Both sides are bounded by
    ``B = max(r max|N[:, cols]| H, |D| max|N|)``, so it holds iff it holds modulo
    primes whose product exceeds ``2 B``. Modulo ``p``:
    ``Yn = D M^-1 N[rows, :]`` (``p`` does not divide ``D``), and each product
    is a float64 product of residues, exact because ``r (p - 1)^2 < 2^53``.
    None: not applicable (entries beyond int64)."""
    import flint

    if N.values.dtype == object:
        return None
    r = len(cols)
    n2 = N.shape[1]
    cset = set(cols)
    other = np.array([j for j in range(n2) if j not in cset], dtype=np.int64)
    if other.size == 0:
        return True
    if r == 0:
        return not np.any(N.values)
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    D = int(N.fmpz(rows, cols).det())
    if D == 0:
        return None
    NR = N.values[R]                                                   # (r, n2)
    csq = sorted((int(v) for v in (NR.astype(object) ** 2).sum(0)), reverse=True)[:r]
    H = _hadamard_cols(csq)
    NC = N.values[:, C]                                                # (n1, r)
    NO = N.values[:, other]                                            # (n1, n2 - r)
    B = max(r * int(np.abs(NC).max()) * H, abs(D) * int(np.abs(NO).max(initial=0)))
    NOf = NO.astype(np.float64)                                        # exact: |N| < 2^53
    NRO = NR[:, other]
    rblock = max(1, (1 << 15) // max(1, other.size))
    buf = np.empty((rblock, other.size))
    buf2 = np.empty((rblock, other.size))
    for p in _float_exact_primes(r, B):
        if D % p == 0:
            return None
        # mod p, multiplying by D^-1: N[:, C] (M^-1 N[R, other]) == N[:, other]
        Mi = flint.nmod_mat(N.nmod(p, rows, cols).inv())
        Mi = np.array([int(v) for v in Mi.entries()], dtype=np.float64).reshape(r, r)
        Yp = _fmod_exact(Mi @ _mod_f(NRO, p), p)                       # (r, n2 - r)
        NCp = _mod_f(NC, p)
        inv = 1.0 / p
        for a in range(0, NOf.shape[0], rblock):                       # rows in cache-sized blocks
            b = min(NOf.shape[0], a + rblock)
            diff = np.matmul(NCp[a:b], Yp, out=buf[:b - a])            # < r (p-1)^2 < 2^53
            diff -= NOf[a:b]                                           # exact integers
            q = np.multiply(diff, inv, out=buf2[:b - a])
            np.rint(q, out=q)
            q *= p
            q -= diff                                                  # 0 iff diff = 0 mod p
            if np.any(q):
                return False
    return True


def _small_prime(n1: int, rng: np.random.Generator) -> int:
    """A prime ``p`` with ``n1 (p - 1)^2 < 2^53`` (float-exact products over ``n1``
    terms), drawn at random from the upper half of that range."""
    import flint
    top = int(math.isqrt((1 << 53) // max(n1, 1)))
    x = int(rng.integers(top // 2, top)) | 1
    while not flint.fmpz(x).is_prime():
        x -= 2
    return x


def sketched_pivot_minor(N: IntMatrix, p: int, k: int, rng: np.random.Generator
                         ) -> tuple[int, list[int], list[int]] | None:
    """The canonical minor mod ``p`` (pivot columns of ``rref(N mod p)``, then the
    pivot rows of ``N[:, cols]``), computed from the ``k x n2`` sketch ``G N mod
    p``: row operations keep column dependencies, so when ``rank_p(G N) =
    rank_p(N)`` the pivot columns agree. Returns ``(rank_p(G N), rows, cols)``,
    or None when the sketch is full (``k`` too small). The caller proves
    ``rank(N) <= rank_p(G N)`` (span check), which gives the equality."""
    n1, n2 = N.shape
    G = rng.integers(0, p, (k, n1)).astype(np.float64)
    GN = _fmod_exact(G @ _mod_f(N.values, p), p)                    # exact: n1 (p-1)^2 < 2^53
    R, rk = nmod_matrix(GN.astype(np.int64), p).rref()
    if rk >= k and k < n1:
        return None
    if rk == 0:
        return 0, [], []
    cols = _pivots(R, rk, n2)
    sub = N.nmod(p, cols=cols).transpose()                            # (rk, n1)
    R2, rk2 = sub.rref()
    if rk2 != rk:
        return None
    return rk, _pivots(R2, rk2, n1), cols


def exact_rank_fast(N: IntMatrix, *, seed: int = 0, bits: int = 60) -> ExactRank | None:
    """Two-sided exact rank for int64 matrices: the canonical minor mod a small
    prime from a sketch (:func:`sketched_pivot_minor`, ``k`` from a float64
    rank estimate), checked nonsingular mod p (lower bound), and the
    multimodular span check (upper bound). None when a step does not verify
    (the caller falls back to the full modular elimination)."""
    t0 = time.perf_counter()
    timings = {}
    if N.values.dtype == object or N.max_bits() > 52 or min(N.shape) == 0:
        return None
    rng = np.random.default_rng(seed)
    A = N.values.astype(np.float64)
    n1, n2 = A.shape
    k = 32
    while True:                                          # float rank estimate of a sketch
        k = min(k, n1, n2)
        sv = np.linalg.svd(rng.standard_normal((k, n1)) @ A, compute_uv=False)
        r_est = int((sv > sv[0] * max(n1, n2) * 2.0 ** -40).sum()) if sv[0] > 0 else 0
        if r_est < k or k == min(n1, n2):
            break
        k *= 2
    timings["proposal"] = time.perf_counter() - t0
    t = time.perf_counter()
    p = _small_prime(n1, rng)
    minor = sketched_pivot_minor(N, p, min(n1, r_est + 8), rng)
    timings["modular"] = time.perf_counter() - t
    if minor is None:
        return None
    rk, rows, cols = minor
    if rk and N.nmod(p, rows, cols).det() == 0:
        return None
    t = time.perf_counter()
    ok = span_check_multimodular(N, rows, cols) if rk < min(n1, n2) else True
    timings["span_check"] = time.perf_counter() - t
    if not ok:
        return None
    return _result((p, rk, rows, cols), rk, "trivial" if rk == min(n1, n2) else "column_span",
                   (PrimeAttempt(p, rk),), timings, t0)


# ---------------------------------------------------------------- results

@dataclass(frozen=True)
class PrimeAttempt:
    prime: int
    rank_mod_p: int


@dataclass(frozen=True)
class ExactRank:
    """Two-sided exact rank. ``verdict`` is proved iff ``lower == upper``."""

    lower: int
    upper: int
    verdict: Verdict
    prime: int | None                  # prime of the recorded minor
    minor_rows: tuple[int, ...]
    minor_cols: tuple[int, ...]
    upper_witness: str                 # "trivial" | "column_span" | "null_space" | "none"
    attempts: tuple[PrimeAttempt, ...]
    reason: str | None = None
    null_basis: tuple[tuple[int, ...], ...] | None = None     # factor form: core null vectors (columns)
    null_minor_rows: tuple[int, ...] = ()
    null_minor_cols: tuple[int, ...] = ()
    null_prime: int | None = None
    timings: dict = field(default_factory=dict)


def exact_rank(N: IntMatrix, *, seed: int = 0, max_primes: int = 4, bits: int = 60,
               fast_path: bool = True) -> ExactRank:
    """Rank over Q of an integer matrix, two-sided (see the module docstring).

    Fast path first (:func:`exact_rank_fast`): a float-proposed minor checked
    exactly, and the multimodular span check; it returns only exact results and
    falls back to the path below when its proposal does not verify.

    Primes are drawn from ``np.random.default_rng(seed)``. A modular rank that
    falls short of the true rank (a prime dividing every maximal minor) is caught
    by the exact span check failing; another prime is then tried.
    """
    fast = exact_rank_fast(N, seed=seed, bits=bits) if fast_path else None
    if fast is not None:
        return fast
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n1, n2 = N.shape
    trivial = min(n1, n2)
    attempts: list[PrimeAttempt] = []
    best: tuple[int, int, list[int], list[int]] | None = None
    timings = {"modular": 0.0, "span_check": 0.0}
    for _ in range(max_primes):
        p = random_prime(rng, bits)
        t = time.perf_counter()
        rk, rows, cols = minor_mod_p(N, p)
        timings["modular"] += time.perf_counter() - t
        attempts.append(PrimeAttempt(p, rk))
        if best is not None and rk <= best[1]:
            continue
        best = (p, rk, rows, cols)
        if rk == trivial:
            return _result(best, trivial, "trivial", attempts, timings, t0)
        t = time.perf_counter()
        ok = span_check(N, rows, cols)
        timings["span_check"] += time.perf_counter() - t
        if ok:
            return _result(best, rk, "column_span", attempts, timings, t0)
    assert best is not None
    p, rk, rows, cols = best
    timings["total"] = time.perf_counter() - t0
    return ExactRank(lower=rk, upper=trivial, verdict=Verdict.UNKNOWN, prime=p,
                     minor_rows=tuple(rows), minor_cols=tuple(cols), upper_witness="trivial",
                     attempts=tuple(attempts), timings=timings,
                     reason=f"modular rank {rk} not matched by an exact witness after "
                            f"{len(attempts)} primes; rank in [{rk}, {trivial}]")


def _result(best, upper, witness, attempts, timings, t0) -> ExactRank:
    p, rk, rows, cols = best
    timings["total"] = time.perf_counter() - t0
    return ExactRank(lower=rk, upper=upper, verdict=Verdict.PROVED if rk == upper else Verdict.UNKNOWN,
                     prime=p, minor_rows=tuple(rows), minor_cols=tuple(cols),
                     upper_witness=witness, attempts=tuple(attempts), timings=timings,
                     reason=None if rk == upper else f"rank in [{rk}, {upper}]")


def core_rank(GQ: IntMatrix, GK: IntMatrix, *, seed: int = 0, max_primes: int = 4,
              bits: int = 60) -> ExactRank:
    """Exact rank of ``PhiQ PhiK^T`` from its Gram matrices: the rank of the
    ``r x r`` integer core ``GQ GK`` (same rank, see the module docstring).

    Lower bound: a minor of the core nonsingular mod p. Upper bound: an exact
    null-space basis ``X`` of the core (``core X = 0``) whose columns are
    independent (a minor of ``X`` nonsingular mod a prime): ``rank <= r - k``.
    """
    t0 = time.perf_counter()
    core = GQ.fmpz() * GK.fmpz()
    C = IntMatrix(_compact(_obj(core)))
    r = C.shape[0]
    rng = np.random.default_rng(seed)
    X, nullity = core.nullspace()
    basis = [[int(X[i, j]) for j in range(nullity)] for i in range(r)]   # (r, k)
    if nullity:
        B = IntMatrix(_compact(np.array(basis, dtype=object)))
        if core * B.fmpz() != _zero(r, nullity):
            raise RuntimeError("internal error: null-space basis fails core X = 0")
    attempts, best, null_minor = [], None, None
    for _ in range(max_primes):
        p = random_prime(rng, bits)
        rk, rows, cols = minor_mod_p(C, p)
        attempts.append(PrimeAttempt(p, rk))
        if best is None or rk > best[1]:
            best = (p, rk, rows, cols)
        if nullity and null_minor is None:
            nk, nrows, ncols = minor_mod_p(B, p)
            if nk == nullity:
                null_minor = (p, nrows, ncols)
        if best[1] == r - nullity and (null_minor is not None or not nullity):
            break
    p, rk, rows, cols = best
    upper = r - nullity if (null_minor is not None or not nullity) else r
    timings = {"total": time.perf_counter() - t0}
    verdict = Verdict.PROVED if rk == upper else Verdict.UNKNOWN
    return ExactRank(lower=rk, upper=upper, verdict=verdict, prime=p, minor_rows=tuple(rows),
                     minor_cols=tuple(cols), upper_witness="null_space" if nullity else "trivial",
                     attempts=tuple(attempts), timings=timings,
                     reason=None if verdict is Verdict.PROVED else f"rank in [{rk}, {upper}]",
                     null_basis=tuple(tuple(row) for row in basis) if nullity else None,
                     null_minor_rows=tuple(null_minor[1]) if null_minor else (),
                     null_minor_cols=tuple(null_minor[2]) if null_minor else (),
                     null_prime=null_minor[0] if null_minor else None)


def _obj(F) -> np.ndarray:
    """flint integer matrix -> object array of Python ints."""
    out = np.empty((F.nrows(), F.ncols()), dtype=object)
    for i, row in enumerate(F.tolist()):
        out[i, :] = [int(v) for v in row]
    return out


def _zero(n1: int, n2: int):
    import flint
    return flint.fmpz_mat(n1, n2)


# ---------------------------------------------------------------- exact Gram matrices

class GramAccumulator:
    """Exact ``X^T X`` over row batches of a float matrix ``X (K, r)``.

    Each batch is written as ``N D`` with integer ``N`` and a power of two per
    column; ``N`` is split into 20-bit limbs and the limb products are float64
    BLAS products over at most 2^12 rows: every partial sum is an integer below
    2^52, so each product is exact. The total is kept as Python ints with one
    exponent: ``gram = G * 2^exponent``.

    >>> acc = GramAccumulator(2)
    >>> acc.add(np.array([[0.5, 1.0], [0.25, -3.0]]))
    >>> G, e = acc.result(); (G.tolist(), e)
    ([[5, -4], [-4, 160]], -4)
    """

    def __init__(self, r: int) -> None:
        self.r = int(r)
        self._total: np.ndarray | None = None        # object (r, r)
        self._exp = 0
        self.rows = 0

    def add(self, X: np.ndarray) -> None:
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.r:
            raise ValueError(f"batch must have shape (B, {self.r}), got {X.shape}")
        if X.dtype.kind == "f" and not np.all(np.isfinite(X)):
            raise InputError("features contain NaN or Inf")
        self.rows += X.shape[0]
        G, e = batch_gram(X)
        if G is None:
            return
        if self._total is None:
            self._total, self._exp = G, e
        elif e >= self._exp:
            self._total = self._total + _shift_obj(G, e - self._exp)
        else:
            self._total = _shift_obj(self._total, self._exp - e) + G
            self._exp = e

    def result(self) -> tuple[np.ndarray, int]:
        """``(G, e)`` with ``X^T X = G 2^e``, ``G`` not all even (canonical)."""
        if self._total is None:
            return np.zeros((self.r, self.r), dtype=object) * 0, 0
        return normalize_pow2(self._total, self._exp)


def normalize_pow2(G: np.ndarray, e: int) -> tuple[np.ndarray, int]:
    """Strip the common power of two of an integer object array: ``G 2^e``."""
    tz = [(int(v) & -int(v)).bit_length() - 1 for v in G.ravel() if int(v) != 0]
    if not tz:
        return G, 0
    s = min(tz)
    if s == 0:
        return G, e
    out = np.empty(G.shape, dtype=object)
    for idx, v in enumerate(G.ravel().tolist()):
        out.flat[idx] = int(v) >> s
    return out, e + s


def _shift_obj(G: np.ndarray, s: int) -> np.ndarray:
    return G * (1 << s) if s else G


def _chunk_grams(Z: np.ndarray) -> np.ndarray:
    """``sum_c Z_c^T Z_c`` over row chunks of 2^12, each product in float64 and
    exact (integer-valued inputs, every partial sum below 2^53, any summation
    order), summed in int64. Uses torch on one thread (scoped, restored) when
    available: small products are much faster there than with a contended
    multi-threaded BLAS."""
    B, c = Z.shape
    pad = (-B) % _CHUNK
    if pad:
        Z = np.concatenate([Z, np.zeros((pad, c))])
    Zb = Z.reshape(-1, _CHUNK, c)                          # (nchunks, 2^12, c)
    try:
        import torch
    except ImportError:          # pragma: no cover - torch is a dependency; numpy is the fallback
        return np.matmul(Zb.transpose(0, 2, 1), Zb).astype(np.int64).sum(0)
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t = torch.from_numpy(Zb)
        prods = torch.bmm(t.transpose(1, 2), t)            # (nchunks, c, c) exact integers < 2^52
        return prods.to(torch.int64).sum(0).numpy()        # < 2^62 for up to 2^10 chunks
    finally:
        torch.set_num_threads(old)


def batch_gram(X: np.ndarray) -> tuple[np.ndarray | None, int]:
    """Exact ``X^T X = G * 2^e`` for one float (or integer) batch; ``(None, 0)`` if X = 0.

    Column ``j`` is ``Y_j 2^(E_j)`` with integer-valued float64 ``Y_j`` (power-of-two
    scaling is exact). ``|Y|`` is cut into 20-bit limbs by exact float steps
    (``floor`` of a power-of-two scaling, and a subtraction whose exact result is
    a representable integer below 2^20). Limb products summed over at most 2^12
    rows stay below 2^52, so each float64 product ``Z^T Z`` is exact.
    """
    X = np.asarray(X)
    B, r = X.shape
    if X.dtype.kind in "biu":
        if np.abs(X).max(initial=0) >= (1 << 53):
            F = fmpz_matrix(X.astype(object))
            return _obj(F.transpose() * F), 0
        X = X.astype(np.float64)
    p = {np.dtype(np.float16): 11, np.dtype(np.float32): 24}.get(X.dtype, 53)   # significand bits
    x = X.astype(np.float64)
    nz = x != 0
    if not nz.any():
        return None, 0
    big = np.iinfo(np.int64).max
    e = np.frexp(x)[1].astype(np.int64)            # x = f 2^e, |f| in [1/2, 1): x is a multiple of 2^(e - p)
    colE = np.where(nz, e - p, big).min(axis=0)    # (r,) per-column exponent
    colE = np.where(colE == big, 0, colE)
    y = np.ldexp(np.abs(x), (-colE)[None, :].astype(np.int32))   # exact integers (B, r)
    top = int(np.frexp(y.max(axis=0))[1].max())
    if top > 1000 or not np.all(np.isfinite(y)):    # huge spread: exact integer fallback
        mant, exp = _mantissas(X)
        F = fmpz_matrix(_dyadic_cols(mant, exp, colE))
        G = _obj(F.transpose() * F)
    else:
        L = max(1, -(-top // _LIMB))
        sign = np.sign(x)
        Z = np.empty((B, L * r), dtype=np.float64)  # (B, L r): limb k of column j at k r + j
        t = y
        for k in range(L):
            nxt = np.floor(np.ldexp(t, -_LIMB))
            Z[:, k * r:(k + 1) * r] = (t - np.ldexp(nxt, _LIMB)) * sign
            t = nxt
        if B > (_CHUNK << 10):
            raise ValueError(f"batch of {B} rows is too large for the exact int64 sum (max {_CHUNK << 10})")
        Po = _chunk_grams(Z).astype(object)
        G = np.zeros((r, r), dtype=object)
        for k in range(L):
            for l in range(L):
                G = G + Po[k * r:(k + 1) * r, l * r:(l + 1) * r] * (1 << (_LIMB * (k + l)))
    # undo the per-column powers of two: entry (i, j) carries 2^(E_i + E_j)
    e0 = int(colE.min())
    Dv = np.array([(1 << int(c - e0)) for c in colE.tolist()], dtype=object)
    G = G * Dv[:, None] * Dv[None, :]
    return G, 2 * e0


def _dyadic_cols(mant: np.ndarray, exp: np.ndarray, colE: np.ndarray) -> np.ndarray:
    out = np.empty(mant.shape, dtype=object)
    sh = exp - colE[None, :]
    for idx, (m_, s_) in enumerate(zip(mant.ravel().tolist(), sh.ravel().tolist())):
        out.flat[idx] = int(m_) << int(s_) if m_ else 0
    return out


def exact_products(Q: IntMatrix, K: IntMatrix) -> list[list[int]]:
    """``Q K^T`` exactly (small matrices: code-rank blocks, counterexamples)."""
    return (Q.fmpz() * K.fmpz().transpose()).tolist()


def as_int_lists(values: np.ndarray) -> list[list[int]]:
    return [[int(v) for v in row] for row in np.asarray(values).tolist()]


def iter_int(values: Iterable) -> list[int]:
    return [int(v) for v in values]
