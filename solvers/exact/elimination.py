"""The canonical minor modulo a word-size prime by blocked elimination in BLAS: the
rank's lower bound (and the minor the upper bound is checked on) in a few matrix
products, at every rank.

Echelon basis, block by block (:func:`echelon_mod`). ``B`` (``k x n``) is in
reduced row echelon form mod ``p`` with pivot columns ``piv`` (``B[:, piv] = I``).
A block ``V`` (``b x n``) is reduced against it, ``V <- V - V[:, piv] B`` (one
product: ``V[:, piv] = 0`` after), brought to reduced echelon form by itself
(``W``, new pivots ``q``, ``W[:, piv] = 0``; compiled, ``b^2 n``), and ``B`` is
cleared on the new pivots, ``B <- B - B[:, q] W`` (one product). The rows of ``B``
and ``W`` have distinct leading positions, so their union is an echelon basis of
the rows seen so far, and its pivot set is the pivot set of ``rref`` of those rows
(the leading positions of an echelon basis depend on the row space only).
Residues are balanced and ``k ((p-1)/2)^2 + (p-1)/2 <= 2^53 - 2^27`` for every
``k <= n``: each product is exact in float64.

The canonical minor (:func:`canonical_minor`). The rows of ``N`` are brought in
order, block by block. A row is outside the span of the rows before it exactly
when its reduced form is outside the span of the reduced rows of its block before
it (the reduction kills the span of the earlier blocks): those are the pivot
columns of ``rref(V^T mod p)`` for a block ``V`` that gains fewer pivots than it
has rows. These rows are the pivot rows of ``N mod p``, and of ``N[:, C] mod p``
(``N = N[:, C] F`` with ``F`` of full row rank: the same row dependencies); the
pivot columns ``C`` of the basis are those of ``rref(N mod p)``; ``N[R, C] = E``
with ``N[R, :] = E rref(N[R, :])`` is nonsingular mod ``p``. When a block gains
no pivot, the rows still to come are tested at once by ``b`` random
combinations of them (``G`` uniform on a box of ``2^s`` values per entry, ``s >=
20``, or uniform mod ``p``): a row outside the span leaves a combination outside
it with probability at least ``1 - 2^-s`` (Schwartz-Zippel on a nonzero linear
form), so all ``b`` miss it with probability at most ``2^-(s b)``; when the test
finds nothing the elimination stops. Nothing here is trusted: a short rank (an
unlucky test, or ``p`` dividing every maximal minor) makes the exact upper-bound
check fail, and the caller falls back to the full elimination.

Cost at ``n x n``, rank ``r``, blocks of ``b``, the rank reached after ``m`` rows:
about ``r^2 n / 2`` multiply-adds for the reductions of the blocks up to row ``m``
and as many for the basis updates (BLAS), ``b n (n - m)`` for the test, ``m b n``
compiled; no product with the whole matrix.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Iterator

import numpy as np

from solvers.exact import modkernel as mk
from solvers.exact.draws import IntegerDraws
from solvers.exact.integers import int_max_abs

#: rows per block of the elimination and of the projection
BLOCK = 64


def elimination_prime(n: int, rng: IntegerDraws) -> int:
    """A prime ``p < 2^26`` with ``n (p-1)^2 < 2^53``, drawn from the upper half of
    that range. Products of balanced residues over ``n`` terms need only a quarter
    of that (``n ((p-1)/2)^2 + p <= 2^53 - 2^27``); the stricter bound is the
    checker's, whose test of the canonical minor (``r (p-1)^2 < 2^53`` for its
    nonnegative residues) then takes two products instead of two eliminations."""
    import flint
    top = min(math.isqrt(((1 << 53) - 1) // max(n, 1)), mk.MAX_MODULUS - 1)
    x = int(rng.integers(top // 2, top)) | 1
    while not flint.fmpz(x).is_prime():
        x -= 2
    return x


def _fits(n: int, p: int) -> bool:
    h = (p - 1) // 2
    return 5 <= p < mk.MAX_MODULUS and n * h * h + h <= mk.FLOAT_LIMIT


class _Echelon:
    """A reduced row echelon basis mod ``p`` of the rows added so far (module
    docstring): ``B = buf[:k]`` balanced, ``B[:, piv] = I``."""

    def __init__(self, n: int, p: int, compiled: bool) -> None:
        if not _fits(n, p):
            raise ValueError("the prime is too large for exact products of this length")
        self.n, self.p, self.compiled = n, p, compiled
        self.buf = np.empty((min(n, 256), n))                    # grown by doubling
        self.piv: list[int] = []

    def reduce(self, V: np.ndarray) -> np.ndarray:
        """``V`` (integer-valued, ``|x| <= 2^53 - 2^27``) reduced mod ``p`` against the
        basis: ``V - V[:, piv] B``, zero on the pivots (a new array)."""
        V = mk.reduce(np.ascontiguousarray(V, dtype=np.float64), self.p, compiled=self.compiled)
        k = len(self.piv)
        if k:
            V -= V[:, self.piv] @ self.buf[:k]                   # exact: k h^2 + h
            mk.reduce(V, self.p, V, compiled=self.compiled)
            V[:, self.piv] = 0.0
        return V

    def add(self, V: np.ndarray) -> list[int]:
        """Add the rows of ``V`` (reduced, :meth:`reduce`; overwritten): its new pivots."""
        W, q = mk.rref(V, self.p, compiled=self.compiled)        # (rank_b, n), W[:, q] = I
        if q:
            k = len(self.piv)
            if k:
                B = self.buf[:k]
                B -= B[:, q] @ W                                 # exact: b h^2 + h
                mk.reduce(B, self.p, B, compiled=self.compiled)
                B[:, q] = 0.0
            if k + len(q) > len(self.buf):
                grown = np.empty((min(self.n, max(2 * len(self.buf), k + len(q))), self.n))
                grown[:k] = self.buf[:k]
                self.buf = grown
            self.buf[k:k + len(q)] = W
            self.piv += q
        return q


def echelon_mod(blocks: Iterable[np.ndarray], n: int, p: int, *, stop_when_dependent: bool = False,
                compiled: bool = True) -> tuple[np.ndarray, list[int]]:
    """``(B, piv)``: the reduced row echelon form mod ``p`` (balanced, ``k x n``) of
    the rows of ``blocks`` (integer-valued float64 arrays ``(b, n)``, ``|x| <= 2^53 -
    2^27``) and its pivot columns (``B[i]`` has its leading 1 at ``piv[i]``; not
    sorted). ``stop_when_dependent``: stop after the first block that adds no pivot
    (module docstring); the rank ``n`` also stops it."""
    basis = _Echelon(n, p, compiled)
    for V in blocks:
        q = basis.add(basis.reduce(V))
        if len(basis.piv) >= n or (stop_when_dependent and not q):
            break
    return basis.buf[:len(basis.piv)], basis.piv


def _projection_blocks(N: np.ndarray, Nf: np.ndarray | None, p: int, rng: IntegerDraws,
                       block: int, compiled: bool) -> Iterator[np.ndarray]:
    """Blocks of ``G N`` (``block x n2``, exact integers or residues mod ``p``), ``G``
    uniform on ``[0, 2^s)`` per entry (``s >= 20``, ``G N`` exact in float64) or
    uniform mod ``p`` on the residues of ``N``."""
    n1 = N.shape[0]
    max_abs = int_max_abs(N)
    s = 52 - max(max_abs, 1).bit_length() - max(n1, 1).bit_length()
    if Nf is not None and s >= 20:
        s = min(s, 30)
        while True:
            G = rng.integers(0, 1 << s, (block, n1)).astype(np.float64)
            yield G @ Nf                                          # |G N| < n1 2^s max|N| <= 2^52
    Np = mk.reduce(N if N.dtype != object else N.astype(np.float64), p, compiled=compiled)
    h = (p - 1) // 2
    while True:
        G = rng.integers(-h, h + 1, (block, n1)).astype(np.float64)
        yield G @ Np                                              # exact: n1 h^2 <= 2^53


def canonical_minor(N: np.ndarray, p: int, rng: IntegerDraws, *, Nf: np.ndarray | None = None,
                    block: int = BLOCK, compiled: bool = True) -> tuple[int, list[int], list[int]]:
    """``(rank, rows, cols)`` for the int64 matrix ``N`` (module docstring): ``cols``
    the pivot columns of ``rref(N mod p)``, ``rows`` the pivot rows of
    ``N[:, cols] mod p``; ``N[rows, cols]`` is nonsingular mod ``p``. ``Nf`` is ``N``
    as float64 when the caller has it (``|N| < 2^53``).

    The rows of ``N`` are eliminated in order, block by block (:func:`echelon_mod`'s
    step); a row is a pivot row exactly when it is outside the span of the rows
    before it (:func:`_independent_rows`), and those rows are also the pivot rows of
    ``N[:, cols]`` (the two have the same row dependencies, ``N = N[:, cols] F`` with
    ``F`` of full row rank). When a block adds no pivot, the rows still to come are
    tested at once by a block of random combinations (:func:`_projection_blocks`):
    all in the span, and the elimination stops, unless the test fails (it misses a
    row outside the span with probability at most ``2^-(s b)``, and then the rank
    falls short, which the exact checks catch). After a failed test the next one
    waits twice as many blocks."""
    n1, n2 = N.shape
    if not _fits(max(n1, n2), p):
        raise ValueError("the prime is too large for exact products of this size")
    Nf = Nf if Nf is not None else N.astype(np.float64)
    basis, a, more = _Echelon(n2, p, compiled), 0, rows_left_test(N, Nf, p, rng, block, compiled)
    rows: list[int] = []
    while a < n1 and len(basis.piv) < n2:
        V = basis.reduce(Nf[a:a + block])
        q = basis.add(V.copy())
        if len(q) == len(V):
            rows += range(a, a + len(V))
        elif q:
            rows += [a + i for i in _independent_rows(V, p, compiled)]
        a += len(V)
        if not q and a < n1 and not more(a, basis.reduce):
            break
    cols = sorted(basis.piv)
    if len(rows) != len(cols):
        raise RuntimeError("internal error: pivot rows and columns differ in number")
    return len(cols), rows, cols


def rows_left_test(N: np.ndarray, Nf: np.ndarray, p: int, rng: IntegerDraws, block: int = BLOCK,
                   compiled: bool = True) -> Callable[[int, Callable[[np.ndarray], np.ndarray]], bool]:
    """``more(i, reduce)``: whether the rows ``i..`` of ``N`` may hold a row outside the span
    of the rows before them, asked after a block that added none: False when ``block``
    random combinations of them (:func:`_projection_blocks`) all reduce to zero against the
    basis (``reduce``), which misses a row outside it with probability at most
    ``2^-(s b)`` (module docstring); after a True the next test waits twice as many blocks."""
    wait, backoff = 0, 1

    def more(i: int, reduce: Callable[[np.ndarray], np.ndarray]) -> bool:
        nonlocal wait, backoff
        if wait:
            wait -= 1
            return True
        if not reduce(next(_projection_blocks(N[i:], Nf[i:], p, rng, block, compiled))).any():
            return False
        wait, backoff = backoff, 2 * backoff
        return True
    return more


def _independent_rows(V: np.ndarray, p: int, compiled: bool) -> list[int]:
    """The rows of ``V`` (residues mod ``p``) outside the span of the rows before them:
    the pivot columns of ``rref(V^T mod p)``."""
    return mk.rref(np.ascontiguousarray(V.T), p, compiled=compiled)[1]


def nonsingular_mod(M: np.ndarray, p: int, *, compiled: bool = True) -> bool:
    """Whether the square integer matrix ``M`` is nonsingular mod ``p`` (its echelon
    form has full rank)."""
    r = M.shape[0]
    if r == 0:
        return True
    Mf = np.asarray(M, dtype=np.float64)
    _, piv = echelon_mod((Mf[a:a + BLOCK] for a in range(0, r, BLOCK)), r, p, compiled=compiled)
    return len(piv) == r
