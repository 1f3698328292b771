"""Constant-weight codes with directed distance.

A code is a ``(W, M)`` uint8 array whose rows are indicator vectors of
``h``-subsets of ``[M]``. The directed distance of two words is
``|S \\ U|``; for words of equal weight it is symmetric
(``|S \\ U| = h - |S & U| = |U \\ S|``).

Constructions:

* :func:`greedy_packing` -- the greedy packing of Thm 6 / Prop 10: scan the
  ``h``-subsets of ``[M]`` in lexicographic order and keep each one at directed
  distance ``>= delta`` from all kept so far. Deterministic.
* :func:`paper51_code` -- the Sec. 5.1 code: fifteen 24-bit words of weight 12
  with pairwise directed distance 6, except one complementary pair at 12.
  Built from the Paley Hadamard matrix of order 24 (see its docstring).
"""

from __future__ import annotations

import itertools
from math import comb
from typing import TYPE_CHECKING

import numpy as np

from certify.core.errors import InputError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def _check_params(M: int, h: int, delta: int | None = None) -> None:
    if not isinstance(M, (int, np.integer)) or M < 1:
        raise InputError(f"code length M must be an integer >= 1, got {M!r}")
    if not isinstance(h, (int, np.integer)) or not 0 <= h <= M:
        raise InputError(f"code weight h must satisfy 0 <= h <= M = {M}, got {h!r}")
    if delta is not None and (not isinstance(delta, (int, np.integer)) or delta < 0):
        raise InputError(f"distance must be an integer >= 0, got {delta!r}")


def as_words(words: ArrayLike) -> np.ndarray:
    """Validate a code given as a ``(W, M)`` 0/1 array (or nested lists)."""
    arr = np.asarray(words)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"a code must be a non-empty (W, M) 0/1 array, got shape {arr.shape}")
    if not np.all((arr == 0) | (arr == 1)):
        raise InputError("code words must have 0/1 entries")
    return arr.astype(np.uint8)


def directed_distances(words: ArrayLike) -> np.ndarray:
    """``D[i, j] = |S_i \\ S_j|`` for all pairs (diagonal 0), shape ``(W, W)``."""
    w = as_words(words).astype(np.int64)
    return w @ (1 - w).T


def verify_code(words: ArrayLike, h: int | None = None, delta: int = 1) -> np.ndarray:
    """Check constant weight ``h`` (when given), distinct words, and
    ``|S \\ U| >= delta`` for all distinct pairs. Returns the words; raises
    :class:`InputError` naming the first violation."""
    w = as_words(words)
    weights = w.sum(axis=1)
    if h is not None and not np.all(weights == h):
        i = int(np.argmax(weights != h))
        raise InputError(f"code word {i} has weight {int(weights[i])}, expected {h}")
    D = directed_distances(w)
    np.fill_diagonal(D, np.iinfo(np.int64).max)
    if D.size and D.min() < delta:
        i, j = (int(v) for v in np.unravel_index(np.argmin(D), D.shape))
        raise InputError(f"code words {i} and {j} are at directed distance "
                         f"{int(D[i, j])} < {delta}")
    return w


def _masks_to_words(masks: list[int], M: int) -> np.ndarray:
    arr = np.array(masks, dtype=np.uint64).reshape(-1, 1)
    return ((arr >> np.arange(M, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)


def greedy_packing(M: int, h: int, delta: int, limit: int | None = None,
                   max_candidates: int = 40_000_000) -> np.ndarray:
    """Greedy lexicographic packing of ``h``-subsets of ``[M]`` at directed
    distance ``>= delta`` (the construction in the proofs of Thm 6 and Prop 10).

    Subsets are scanned in ``itertools.combinations(range(M), h)`` order; each is
    kept when it is at distance ``>= delta`` from every word kept so far. Stops
    after ``limit`` words when given. Deterministic: same arguments, same code.
    """
    _check_params(M, h, delta)
    if M > 62:
        raise InputError(f"greedy packing enumerates binom(M, h) subsets; M = {M} is too large")
    total = comb(M, h)
    if total > max_candidates:
        raise InputError(f"binom({M}, {h}) = {total} subsets exceed the enumeration limit "
                         f"{max_candidates}")
    kept: list[int] = []
    kept_arr = np.zeros(0, dtype=np.uint64)
    combos = itertools.combinations(range(M), h)
    chunk = 8192
    while True:
        block = list(itertools.islice(combos, chunk))
        if not block:
            break
        idx = np.array(block, dtype=np.uint64).reshape(len(block), h)
        masks = (np.uint64(1) << idx).sum(axis=1, dtype=np.uint64) if h else np.zeros(len(block), np.uint64)
        if kept_arr.size:
            # |S \ U| = popcount(S & ~U) for candidate S and kept U
            dist = np.bitwise_count(masks[:, None] & ~kept_arr[None, :])
            ok = np.all(dist >= delta, axis=1)
        else:
            ok = np.ones(len(block), dtype=bool)
        new: list[int] = []
        for cand in masks[ok].tolist():
            if all((cand & ~u).bit_count() >= delta for u in new):
                new.append(cand)
                if limit is not None and len(kept) + len(new) >= limit:
                    break
        if new:
            kept.extend(new)
            kept_arr = np.array(kept, dtype=np.uint64)
        if limit is not None and len(kept) >= limit:
            break
    return _masks_to_words(kept, M)


def thm6_code(M: int, limit: int | None = None) -> np.ndarray:
    """The middle-layer packing of Thm 6 at even length ``M``: ``h = M/2``,
    ``Delta = floor(M/8)``. Enumerable only for small M (the theorem itself uses
    the counting bound in :mod:`certify.core.bounds`)."""
    if M < 2 or M % 2:
        raise InputError(f"Thm 6 uses even M >= 2, got {M}")
    return greedy_packing(M, M // 2, M // 8, limit=limit)


def prop10_parameters(m: int) -> tuple[int, int, int]:
    """``(s, M, h)`` of Prop 10: ``s = floor(m / log2 m)`` decided exactly as the
    largest ``s`` with ``m^s <= 2^m``; ``M = m - s - 2``; ``h = floor(M/2)``."""
    if m < 32:
        raise InputError(f"Prop 10 needs m >= 32, got {m}")
    s = 0
    while m ** (s + 1) <= 2 ** m:
        s += 1
    M = m - s - 2
    return s, M, M // 2


def paley_hadamard(q: int) -> np.ndarray:
    """Normalized Paley (type I) Hadamard matrix of order ``q + 1`` for a prime
    ``q = 3 (mod 4)``: ``H = I + [[0, 1^T], [-1, Q]]`` with the Jacobsthal matrix
    ``Q[i, j] = chi(j - i)``, then rows and columns signed so that the first
    row and column are all ``+1``. Checked: ``H H^T = (q + 1) I``."""
    if q < 3 or q % 4 != 3 or any(q % d == 0 for d in range(2, int(q ** 0.5) + 1)):
        raise InputError(f"Paley construction needs a prime q = 3 mod 4, got {q}")
    squares = {(i * i) % q for i in range(1, q)}
    chi = np.array([0] + [1 if a in squares else -1 for a in range(1, q)], dtype=np.int64)
    i, j = np.meshgrid(np.arange(q), np.arange(q), indexing="ij")
    Q = chi[(j - i) % q]
    n = q + 1
    S = np.zeros((n, n), dtype=np.int64)
    S[0, 1:] = 1
    S[1:, 0] = -1
    S[1:, 1:] = Q
    H = np.eye(n, dtype=np.int64) + S
    H = H * H[0][None, :]          # first row -> all +1
    H = H * H[:, 0][:, None]       # first column -> all +1
    assert np.array_equal(H @ H.T, n * np.eye(n, dtype=np.int64))
    return H


def paper51_code() -> np.ndarray:
    """The Sec. 5.1 code: fifteen 24-bit words of weight 12.

    Words 0..13 are the ``+1`` indicators of rows 1..14 of the normalized Paley
    Hadamard matrix of order 24 (``q = 23``); word 14 is the complement of
    word 0. Any two rows of a normalized Hadamard matrix other than the first
    agree in 12 places and share 6 of their ``+1`` places, so distinct words
    are at directed distance 6, except words 0 and 14 (complements) at 12.
    With chains of step 3 this gives 208 ordered pairs of 2 jumps and 2 of 4:
    424 jumps, 1,272 inputs, the counts of the paper. The paper does not say
    which code it used; any code with this distance distribution gives the
    same counts.
    """
    H = paley_hadamard(23)
    rows = (H[1:15] == 1).astype(np.uint8)
    words = np.vstack([rows, 1 - rows[:1]])
    return verify_code(words, h=12, delta=6)
