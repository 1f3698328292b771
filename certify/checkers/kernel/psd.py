"""Positive (semi)definiteness by one method: the signs of the characteristic polynomial.

Statement: let ``M`` be a symmetric rational n x n matrix and
``det(lambda I - M) = sum_i a_i lambda^i`` (``a_n = 1``). ``M`` is positive
semidefinite iff ``(-1)^(n-i) a_i >= 0`` for every ``i``, and positive definite
iff moreover ``a_0 != 0``.

Proof: ``M`` is symmetric, so its eigenvalues ``l_1..l_n`` are real and
``(-1)^(n-i) a_i = e_(n-i)(l)`` (elementary symmetric functions). If every
``l_j >= 0`` every ``e_k >= 0``. Conversely if every ``e_k >= 0``, for ``t > 0``
``prod_j (t + l_j) = sum_k e_k t^(n-k) >= t^n > 0``, so no ``l_j`` equals ``-t``:
no eigenvalue is negative. Positive definite adds ``det M = e_n = (-1)^n a_0 != 0``.
The polynomial is computed exactly by python-flint (``fmpz_mat`` / ``fmpq_mat``
``charpoly``); a non-square or non-symmetric input is refused (False).
"""
from fractions import Fraction


def _matrix(M):
    """``M`` as a flint integer or rational matrix (rows of ints / Fractions / flint
    numbers, or a flint matrix)."""
    import flint
    if isinstance(M, (flint.fmpz_mat, flint.fmpq_mat)):
        return M
    rows = [list(r) for r in M]
    if any(len(r) != len(rows) for r in rows):
        return None
    if all(isinstance(v, (int, flint.fmpz)) and not isinstance(v, bool) for r in rows for v in r):
        return flint.fmpz_mat(len(rows), len(rows[0]) if rows else 0, [int(v) for r in rows for v in r])

    def q(v):
        if isinstance(v, (flint.fmpq, flint.fmpz)):
            return flint.fmpq(v)
        v = Fraction(v)
        return flint.fmpq(v.numerator, v.denominator)
    return flint.fmpq_mat(len(rows), len(rows), [q(v) for r in rows for v in r])


def _signed_coefficients(M) -> list | None:
    """``[(-1)^(n-i) a_i]`` of symmetric ``M`` (None when not square and symmetric)."""
    A = _matrix(M)
    if A is None or A.nrows() != A.ncols() or A != A.transpose():
        return None
    n = A.nrows()
    return [((-1) ** (n - i)) * c for i, c in enumerate(A.charpoly().coeffs())]


def is_psd(M) -> bool:
    """Is ``M`` symmetric positive semidefinite? Exact."""
    s = _signed_coefficients(M)
    return s is not None and all(c >= 0 for c in s)


def is_positive_definite(M) -> bool:
    """Is ``M`` symmetric positive definite? Exact."""
    s = _signed_coefficients(M)
    return s is not None and all(c >= 0 for c in s) and s[0] != 0
