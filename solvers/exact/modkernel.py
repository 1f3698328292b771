"""Residues modulo a word-size prime held as float64, so that the large products of
the exact rank run in BLAS: balanced reduction, the inverse of a matrix and the
reduced row echelon form of a block modulo ``p`` (``5 <= p < 2^26``).

Each function runs the compiled kernel (``_modkernel.c``) when it is built, and
otherwise the same computation in numpy / python-flint (``compiled=False`` forces
that path; the tests compare the two; ``CERTIFY_NO_COMPILED=1`` forces it for the
process, :mod:`certify.core.compiled`). Every value is an integer stored in a
double; residues are balanced, ``|x| <= (p - 1) / 2``. Inputs must satisfy
``|x| <= 2^53 - 2^27`` (then ``x - round(x / p) p`` is exact: see the C file).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

#: largest magnitude of an input entry (float64 integers are exact up to 2^53; the
#: margin covers ``q p`` in a reduction)
FLOAT_LIMIT = (1 << 53) - (1 << 27)
#: the moduli the kernels take: primes in [5, 2^26)
MAX_MODULUS = 1 << 26


def _compiled() -> Any:
    if os.environ.get("CERTIFY_NO_COMPILED", "") not in ("", "0"):     # the pure path on purpose
        return None
    try:
        from solvers.exact import _modkernel  # compiled, no stub (typed Any by the package's __getattr__)
    except ImportError:          # built without a C compiler: numpy and flint below
        return None
    return _modkernel if hasattr(_modkernel, "rref_mod") else None


_K = _compiled()


def available() -> bool:
    """Whether the compiled kernels are built."""
    return _K is not None


def _check_p(p: int) -> None:
    if not 5 <= p < MAX_MODULUS:
        raise ValueError("the modulus must be a prime in [5, 2^26)")


def balanced_numpy(x: np.ndarray, p: int) -> np.ndarray:
    """Balanced residues of integer-valued float64 ``x`` (one correction step: the
    quotient's error is below 1, ``q p`` and ``x - q p`` are integers below 2^53)."""
    y = x - np.rint(x * (1.0 / p)) * p
    h = (p - 1) // 2
    y[y > h] -= p
    y[y < -h] += p
    return y


def reduce(x: np.ndarray, p: int, out: np.ndarray | None = None, *, compiled: bool = True) -> np.ndarray:
    """``x mod p``, balanced, as float64 (``x``: float64, int64 or int32 with
    ``|x| <= 2^53 - 2^27``; ``out`` may be ``x`` itself when it is float64)."""
    _check_p(p)
    if _K is not None and compiled and x.dtype in (np.float64, np.int64, np.int32):
        x = np.ascontiguousarray(x)
        if out is None or not (out.flags.c_contiguous and out.dtype == np.float64 and out.shape == x.shape):
            out = np.empty(x.shape, dtype=np.float64)
        _K.reduce_balanced(x, out, float(p))
        return out
    xf = np.asarray(x, dtype=np.float64)
    if xf.size and float(np.abs(xf).max()) > FLOAT_LIMIT:
        raise ValueError("reduce: an entry beyond 2^53 - 2^27")
    y = balanced_numpy(xf, p)
    if out is not None and out.shape == y.shape and out.dtype == np.float64:
        out[...] = y
        return out
    return y


def inverse(M: np.ndarray, p: int, *, compiled: bool = True) -> np.ndarray | None:
    """``M^-1 mod p`` (balanced float64) of an integer-valued square matrix, or None
    when ``M`` is singular mod ``p``. C: Gauss-Jordan in place; else python-flint."""
    _check_p(p)
    r = M.shape[0]
    if M.shape != (r, r):
        raise ValueError("inverse needs a square matrix")
    if _K is not None and compiled:
        A = np.array(M, dtype=np.float64, order="C")
        return A if _K.inverse_mod(A, float(p)) else None
    import flint
    Mi = reduce(np.asarray(M, dtype=np.float64), p, compiled=False)
    Mi[Mi < 0] += p
    try:
        inv = flint.nmod_mat(r, r, Mi.astype(np.int64).ravel().tolist(), p).inv()
    except ZeroDivisionError:
        return None
    out = np.fromiter(map(int, inv.entries()), dtype=np.float64, count=r * r).reshape(r, r)
    return balanced_numpy(out, p)


def rref(V: np.ndarray, p: int, *, compiled: bool = True) -> tuple[np.ndarray, list[int]]:
    """``(E, pivots)``: ``E`` (``rank x n``, balanced float64) the reduced row echelon
    form of the integer-valued ``V`` mod ``p`` without its zero rows, ``pivots`` its
    pivot columns (increasing). ``V`` is not changed."""
    _check_p(p)
    if _K is not None and compiled:
        A = np.array(V, dtype=np.float64, order="C")
        piv = _K.rref_mod(A, float(p))
        return A[:len(piv)], piv
    import flint
    b, n = V.shape
    R = reduce(np.asarray(V, dtype=np.float64), p, compiled=False)
    R[R < 0] += p
    E, rk = flint.nmod_mat(b, n, R.astype(np.int64).ravel().tolist(), p).rref()
    out = np.fromiter(map(int, E.entries()), dtype=np.float64, count=b * n).reshape(b, n)[:rk]
    piv, j = [], 0
    for i in range(rk):
        while out[i, j] == 0:
            j += 1
        piv.append(j)
        j += 1
    return balanced_numpy(out, p), piv


def residue_nonzero(T: np.ndarray, N: np.ndarray, row0: int, col0: int, p: int, *,
                    compiled: bool = True) -> bool:
    """Whether some entry of ``T - N[row0:, col0:][:T.shape]`` is not divisible by
    ``p`` (``T`` float64 integers, ``N`` float64 or int32, ``|T - N| <= 2^53 - 2^27``)."""
    if _K is not None and compiled:
        return bool(_K.residue_nonzero(T, N, row0, col0, float(p)))
    t = T - N[row0:row0 + T.shape[0], col0:col0 + T.shape[1]]
    q = np.rint(t * (1.0 / p)) * p
    return bool((q != t).any())
