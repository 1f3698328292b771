"""Integer matrix identities, decided exactly over Z with python-flint.

Statement: for integer matrices ``A`` (m x k), ``B`` (k x n) and ``C`` (m x n),
:func:`product_equals` returns True iff ``A B = C`` entrywise in Z (no
floating point, no reduction modulo a prime); :func:`product_is_zero` iff
``A B = 0``; :func:`scaled_product_equals` iff ``A B 2^e1 = C 2^e2`` (both sides
multiplied by ``2^(-min(e1, e2))``, an integer identity). A rank or factorization claim whose witness is such an identity
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


def scaled_product_equals(A, B, e1: int, C, e2: int) -> bool:
    """``A B 2^e1 == C 2^e2`` exactly over Z (dyadic scales, either sign); False on a
    shape mismatch. With ``B = A^T`` this is "C 2^e2 is the Gram matrix of A 2^(e1/2)"."""
    if A.ncols() != B.nrows() or (A.nrows(), B.ncols()) != (C.nrows(), C.ncols()):
        return False
    P = A * B
    if e1 >= e2:
        return P * (1 << (e1 - e2)) == C
    return P == C * (1 << (e2 - e1))
