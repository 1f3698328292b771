"""Exact integer matrix products: identities and signs.

Statements. For integer matrices the products below are computed exactly by
python-flint (``fmpz_mat``, arbitrary precision), so

* ``product_identity(A, B, C, d)`` is true exactly when ``A B = d C`` over the
  integers (an exact column-span witness: the columns of ``C`` lie in the span
  of ``A``'s columns with coefficients ``B / d``, so the rank of ``[A | C]`` is
  the rank of ``A``);
* ``product_min(Q, K)`` is the least entry of ``Q K^T``; it is ``>= 0`` exactly
  when every inner product ``<q_x, k_z>`` of a row of ``Q`` with a row of ``K`` is
  nonnegative (scaled by a positive power of two, the sign is that of the kernel
  ``alpha(x, z) = <phi_q(x), phi_k(z)>``).
"""

from __future__ import annotations

from typing import Any


def _mat(M: Any) -> Any:
    import flint
    return M if isinstance(M, flint.fmpz_mat) else flint.fmpz_mat([[int(v) for v in row] for row in M])


def product_identity(A: Any, B: Any, C: Any, d: int = 1) -> bool:
    """``A B == d C`` exactly over the integers (module docstring)."""
    A, B, C = _mat(A), _mat(B), _mat(C)
    if A.ncols() != B.nrows() or (A.nrows(), B.ncols()) != (C.nrows(), C.ncols()):
        return False
    return bool(A * B == C * int(d))


def product_min(Q: Any, K: Any) -> int | None:
    """The least entry of ``Q K^T`` (``None`` when it is empty), exactly."""
    Q, K = _mat(Q), _mat(K)
    if Q.nrows() == 0 or K.nrows() == 0:
        return None
    if Q.ncols() != K.ncols():
        raise ValueError("Q and K need the same number of columns")
    P = Q * K.transpose()
    entries = P.entries()
    return min(int(v) for v in entries) if entries else None
