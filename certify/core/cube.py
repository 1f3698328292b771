"""The Boolean cube, Min-IP targets (Eq. 1) and the strict error criterion (Eq. 2).

Conventions. A token is a row of a ``uint8`` array with entries in {0, 1}. On
the whole cube ``{0,1}^m`` token index ``i`` has coordinate ``k`` equal to bit
``k`` of ``i`` (little-endian), so ``all_tokens(m)[i]`` is the binary expansion
of ``i`` read from the least significant bit.

Targets: ``t_i(X) = min_j <x_i, x_j>`` over the whole sequence, the self term,
repeats and ties included.

>>> import numpy as np
>>> X = np.array([[[1, 1, 0], [0, 1, 1], [1, 0, 0]]], dtype=np.uint8)
>>> min_ip_targets(X).tolist()
[[1, 0, 0]]
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Iterator

import numpy as np

from certify.core.errors import InputError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def check_dimension(m: int, *, limit: int | None = None) -> int:
    """Validate a token dimension ``m >= 1`` (and ``<= limit`` when given)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise InputError(f"token dimension m must be an integer >= 1, got {m!r}")
    if limit is not None and m > limit:
        raise InputError(f"token dimension m = {m} exceeds the limit {limit} here")
    return int(m)


def all_tokens(m: int) -> np.ndarray:
    """All ``2^m`` tokens of ``{0,1}^m``, shape ``(2^m, m)``, little-endian order."""
    m = check_dimension(m, limit=26)
    idx = np.arange(1 << m, dtype=np.int64)
    return ((idx[:, None] >> np.arange(m)) & 1).astype(np.uint8)


def token_index(tokens: np.ndarray) -> np.ndarray:
    """Inverse of :func:`all_tokens`: cube index of each token, shape ``tokens.shape[:-1]``."""
    tokens = np.asarray(tokens)
    m = tokens.shape[-1]
    return (tokens.astype(np.int64) << np.arange(m)).sum(-1)


def check_binary(X: np.ndarray, what: str = "tokens") -> np.ndarray:
    """Validate a 0/1 array and return it as ``uint8``."""
    X = np.asarray(X)
    if X.size == 0:
        raise InputError(f"{what}: empty array")
    if X.dtype == bool:
        return X.astype(np.uint8)
    if not np.issubdtype(X.dtype, np.integer):
        if not np.all(np.isfinite(X)) or not np.all(X == np.round(X)):
            raise InputError(f"{what}: entries must be 0 or 1")
    if not np.all((X == 0) | (X == 1)):
        raise InputError(f"{what}: entries must be 0 or 1")
    return X.astype(np.uint8)


def overlaps(X: np.ndarray) -> np.ndarray:
    """Pairwise inner products within each sequence: ``(..., N, m) -> (..., N, N)``."""
    X = np.asarray(X, dtype=np.int64)
    return X @ np.swapaxes(X, -1, -2)


def min_ip_targets(X: np.ndarray) -> np.ndarray:
    """Min-IP targets of Eq. 1 for a batch of equal-length sequences.

    ``X``: ``(B, N, m)`` or ``(N, m)`` 0/1 array. Returns ``(B, N)`` (or ``(N,)``)
    int64 with ``t[b, i] = min_j <X[b, i], X[b, j]>``.
    """
    X = np.asarray(X)
    if X.ndim not in (2, 3):
        raise InputError(f"sequences must have shape (B, N, m) or (N, m), got {X.shape}")
    return overlaps(X).min(axis=-1)


def targets_from_indices(tokens: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Min-IP targets for sequences given as token indices.

    ``tokens``: ``(K, m)``; ``inputs``: ``(I, N)`` indices into ``tokens``.
    Small token sets use the ``K x K`` overlap table; large ones (where an
    integer ``K x K`` product is slow and big) gather the tokens of a chunk of
    inputs at a time, so neither ``(K, K)`` nor all of ``(I, N, m)`` is built.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    inputs = np.asarray(inputs, dtype=np.int64)
    if len(tokens) <= 2048:
        G = tokens @ tokens.T                                   # (K, K)
        return G[inputs[:, :, None], inputs[:, None, :]].min(axis=-1)   # (I, N)
    out = np.empty(inputs.shape, dtype=np.int64)
    step = max(1, (1 << 22) // max(1, inputs.shape[1] * tokens.shape[1]))
    for s in range(0, len(inputs), step):
        X = tokens[inputs[s:s + step]]                          # (c, N, m)
        out[s:s + step] = np.einsum("bim,bjm->bij", X, X).min(axis=-1)
    return out


def strict_success(pred: ArrayLike, target: ArrayLike, eps: Fraction | float = Fraction(1, 2)) -> np.ndarray:
    """Eq. 2 elementwise: ``|pred - target| < eps`` (strict).

    Works on floats (a numeric check) and on object arrays of ``Fraction``
    (the exact check that decides).
    """
    pred = np.asarray(pred)
    target = np.asarray(target)
    if pred.dtype == object:
        diff = np.vectorize(lambda a, b: abs(Fraction(a) - Fraction(b)), otypes=[object])(pred, target)
        return np.vectorize(lambda d: d < eps, otypes=[bool])(diff)
    return np.abs(pred.astype(np.float64) - target) < float(eps)


def max_error(pred: ArrayLike, target: ArrayLike) -> Fraction | float:
    """``max |pred - target|`` over all entries (exact for Fraction object arrays)."""
    pred = np.asarray(pred)
    if pred.dtype == object:
        return max(abs(Fraction(a) - Fraction(b)) for a, b in zip(pred.ravel(), np.asarray(target).ravel()))
    return float(np.max(np.abs(pred.astype(np.float64) - np.asarray(target))))


def enumerate_sequences(m: int, n: int, min_length: int = 1,
                        batch: int = 1 << 16) -> Iterator[np.ndarray]:
    """Every sequence of length ``min_length..n`` over ``{0,1}^m``, in batches.

    Yields ``(B, N, m)`` uint8 arrays, lengths in increasing order; within a
    length, sequences in lexicographic order of their token indices. There are
    ``sum_N 2^(m N)`` sequences: meant for small m and n (``m * n <= 24``).
    """
    m = check_dimension(m)
    if n < 1 or min_length < 1 or min_length > n:
        raise InputError(f"need 1 <= min_length <= n, got min_length={min_length}, n={n}")
    if m * n > 24:
        raise InputError(f"2^(m n) = 2^{m * n} sequences is too many to enumerate")
    cube = all_tokens(m)
    K = 1 << m
    for N in range(min_length, n + 1):
        total = K ** N
        for start in range(0, total, batch):
            idx = np.arange(start, min(start + batch, total), dtype=np.int64)
            digits = (idx[:, None] // (K ** np.arange(N - 1, -1, -1))) % K   # (B, N)
            yield cube[digits]
