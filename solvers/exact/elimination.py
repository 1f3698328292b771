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

Column pivots from a projection (:func:`canonical_minor`). Row operations keep the
dependencies among columns, so when ``rank_p(G N) = rank_p(N)`` the pivot columns
of ``rref(G N mod p)`` are those of ``rref(N mod p)``. The rows of ``G N`` are
drawn block by block (``G`` uniform on a box of ``2^s`` values per entry, ``s >=
20``, or uniform mod ``p``) until a whole block lies in the span of the earlier
ones: a row falls into a proper subspace with probability at most ``2^-s``
(Schwartz-Zippel on a nonzero linear form), so a block of ``b`` rows does with
probability at most ``2^-(s b)`` while the rank is not reached. The pivot rows
are then the pivot columns of ``rref(N[:, C]^T mod p)`` (the canonical minor of
:func:`solvers.exact.modular.minor_mod_p`). Nothing here is trusted: a short rank
(an unlucky projection, or ``p`` dividing every maximal minor) makes the exact
span check fail, and the caller falls back to the full elimination.

Cost at ``n x n``, rank ``r``, blocks of ``b``: ``(r + b) n^2`` multiply-adds for
the projection, ``2 r^2 n`` for the reductions (BLAS), ``r b n`` compiled.
"""

from __future__ import annotations

import math
from typing import Iterable, Iterator

import numpy as np

from solvers.exact import modkernel as mk

#: rows per block of the elimination and of the projection
BLOCK = 64


def elimination_prime(n: int, rng: np.random.Generator) -> int:
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


def echelon_mod(blocks: Iterable[np.ndarray], n: int, p: int, *, stop_when_dependent: bool = False,
                compiled: bool = True) -> tuple[np.ndarray, list[int]]:
    """``(B, piv)``: the reduced row echelon form mod ``p`` (balanced, ``k x n``) of
    the rows of ``blocks`` (integer-valued float64 arrays ``(b, n)``, ``|x| <= 2^53 -
    2^27``) and its pivot columns (``B[i]`` has its leading 1 at ``piv[i]``; not
    sorted). ``stop_when_dependent``: stop after the first block that adds no pivot
    (module docstring); the rank ``n`` also stops it."""
    if not _fits(n, p):
        raise ValueError("the prime is too large for exact products of this length")
    buf = np.empty((min(n, 256), n))                             # B = buf[:k], grown by doubling
    piv: list[int] = []
    for V in blocks:
        V = mk.reduce(np.ascontiguousarray(V, dtype=np.float64), p, compiled=compiled)
        k = len(piv)
        if k:
            V -= V[:, piv] @ buf[:k]                             # exact: k h^2 + h
            mk.reduce(V, p, V, compiled=compiled)
            V[:, piv] = 0.0
        W, q = mk.rref(V, p, compiled=compiled)                  # (rank_b, n), W[:, q] = I
        if q:
            if k:
                B = buf[:k]
                B -= B[:, q] @ W                                 # exact: b h^2 + h
                mk.reduce(B, p, B, compiled=compiled)
                B[:, q] = 0.0
            if k + len(q) > len(buf):
                grown = np.empty((min(n, max(2 * len(buf), k + len(q))), n))
                grown[:k] = buf[:k]
                buf = grown
            buf[k:k + len(q)] = W
            piv += q
        if len(piv) >= n or (stop_when_dependent and not q):
            break
    return buf[:len(piv)], piv


def _projection_blocks(N: np.ndarray, Nf: np.ndarray | None, p: int, rng: np.random.Generator,
                       block: int, compiled: bool) -> Iterator[np.ndarray]:
    """Blocks of ``G N`` (``block x n2``, exact integers or residues mod ``p``), ``G``
    uniform on ``[0, 2^s)`` per entry (``s >= 20``, ``G N`` exact in float64) or
    uniform mod ``p`` on the residues of ``N``."""
    n1 = N.shape[0]
    max_abs = int(np.abs(N).max(initial=0))
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


def canonical_minor(N: np.ndarray, p: int, rng: np.random.Generator, *, Nf: np.ndarray | None = None,
                    block: int = BLOCK, compiled: bool = True) -> tuple[int, list[int], list[int]]:
    """``(rank_p(G N), rows, cols)`` for the int64 matrix ``N`` (module docstring):
    ``cols`` the pivot columns of ``rref(G N mod p)``, ``rows`` the pivot rows of
    ``N[:, cols] mod p``; ``N[rows, cols]`` is nonsingular mod ``p`` (checked). ``Nf``
    is ``N`` as float64 when the caller has it (``|N| < 2^53``)."""
    n1, n2 = N.shape
    if not _fits(max(n1, n2), p):
        raise ValueError("the prime is too large for exact products of this size")
    _, piv = echelon_mod(_projection_blocks(N, Nf, p, rng, block, compiled), n2, p,
                         stop_when_dependent=True, compiled=compiled)
    cols = sorted(piv)
    r = len(cols)
    if r == 0:
        return 0, [], []
    NCt = np.ascontiguousarray((Nf if Nf is not None else N.astype(np.float64))[:, cols].T)  # (r, n1)
    _, rpiv = echelon_mod((NCt[a:a + block] for a in range(0, r, block)), n1, p, compiled=compiled)
    rows = sorted(rpiv)
    if len(rows) != r:
        raise RuntimeError("internal error: the pivot columns of the projection are dependent mod p")
    if not nonsingular_mod(N[np.ix_(rows, cols)], p, compiled=compiled):
        raise RuntimeError("internal error: the canonical minor is singular mod p")
    return r, rows, cols


def nonsingular_mod(M: np.ndarray, p: int, *, compiled: bool = True) -> bool:
    """Whether the square integer matrix ``M`` is nonsingular mod ``p`` (its echelon
    form has full rank)."""
    r = M.shape[0]
    if r == 0:
        return True
    Mf = np.asarray(M, dtype=np.float64)
    _, piv = echelon_mod((Mf[a:a + BLOCK] for a in range(0, r, BLOCK)), r, p, compiled=compiled)
    return len(piv) == r
