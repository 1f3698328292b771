"""Rank upper bounds from a column-span witness, decided exactly over Q.

Statement: let ``F`` be an integer n1 x n2 matrix and ``R``, ``C`` index lists of
equal length ``r`` with ``M = F[R, C]`` nonsingular over Q. If for every other
column ``j`` the solution ``y = M^(-1) F[R, j]`` satisfies ``F[:, C] y = F[:, j]``
over Q, every column of ``F`` lies in the Q-span of the columns ``C``, hence
``rank F <= r``. :func:`columns_in_span` decides this hypothesis exactly: flint
solves ``M Y = F[R, other]`` as ``Y = Yn / den`` with integer ``Yn`` and checks
``F[:, C] Yn = den F[:, other]`` in integers (blocks of 256 columns bound memory).
With ``C`` empty it checks that ``F`` is zero (``rank F <= 0``).
"""


def columns_in_span(F, R: list[int], C: list[int]) -> bool:
    """Does every column of the flint ``fmpz_mat`` ``F`` lie in the span of its columns
    ``C``, witnessed by the nonsingular minor ``F[R, C]``? False if that minor is singular."""
    import flint
    n1, n2 = F.nrows(), F.ncols()
    if not C:
        return all(F[i, j] == 0 for i in range(n1) for j in range(n2))
    if len(R) != len(C) or len(set(R)) != len(R) or len(set(C)) != len(C) \
            or any(not 0 <= i < n1 for i in R) or any(not 0 <= j < n2 for j in C):
        return False
    M = flint.fmpz_mat([[F[i, j] for j in C] for i in R])
    FC = flint.fmpz_mat([[F[i, j] for j in C] for i in range(n1)])
    chosen = set(C)
    other = [j for j in range(n2) if j not in chosen]
    for s in range(0, len(other), 256):
        blk = other[s:s + 256]
        try:
            Yn, den = M.solve(flint.fmpz_mat([[F[i, j] for j in blk] for i in R])).numer_denom()
        except ZeroDivisionError:       # flint: the minor is singular
            return False
        if FC * Yn != flint.fmpz_mat([[F[i, j] for j in blk] for i in range(n1)]) * den:
            return False
    return True
