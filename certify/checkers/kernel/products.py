"""Signs of inner products of feature rows, decided exactly over Z.

Statement: for integer matrices ``Q`` (K1 x r) and ``K`` (K2 x r) with scales
``2^eq`` and ``2^ek``, :func:`products_nonnegative` returns True iff every
``<Q_x, K_z> 2^(eq + ek) >= 0``, i.e. iff ``Q K^T >= 0`` entrywise (a positive
scale does not change a sign). The product is formed exactly by python-flint;
a ragged or empty input is refused (False).
"""


def products_nonnegative(Q: list[list[int]], K: list[list[int]]) -> bool:
    """Is every entry of ``Q K^T`` (integer rows) >= 0?"""
    from certify.checkers.kernel.identity import fmpz_mat
    if not Q or not K or len({len(r) for r in Q} | {len(r) for r in K}) != 1:
        return False
    P = fmpz_mat(Q) * fmpz_mat(K).transpose()
    return min(int(v) for v in P.entries()) >= 0
