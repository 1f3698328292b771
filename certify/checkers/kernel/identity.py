"""Integer matrix identities, decided exactly over Z with python-flint.

Statement: for integer matrices ``A`` (m x k), ``B`` (k x n) and ``C`` (m x n),
:func:`product_equals` returns True iff ``A B = C`` entrywise in Z (no
floating point, no reduction modulo a prime); :func:`product_is_zero` iff
``A B = 0``. A rank or factorization claim whose witness is such an identity
holds exactly when these return True.
"""


def fmpz_mat(rows: list[list[int]]):
    """The python-flint integer matrix of ``rows`` (an empty matrix keeps its column
    count); every entry goes through ``int`` so a float or bool never enters silently."""
    import flint
    n1 = len(rows)
    n2 = len(rows[0]) if n1 else 0
    return flint.fmpz_mat(n1, n2, [int(v) for r in rows for v in r])


def product_equals(A, B, C) -> bool:
    """``A B == C`` exactly over Z (flint integer matrices); False on a shape mismatch."""
    if A.ncols() != B.nrows() or (A.nrows(), B.ncols()) != (C.nrows(), C.ncols()):
        return False
    return A * B == C


def product_is_zero(A, B) -> bool:
    """``A B == 0`` exactly over Z; False on a shape mismatch."""
    import flint
    if A.ncols() != B.nrows():
        return False
    return A * B == flint.fmpz_mat(A.nrows(), B.ncols())
