"""Exact counts of the eigenvalues above a threshold, by Descartes' rule.

Statement. If the characteristic polynomial ``P(lambda) = det(lambda I - M)`` of ``M`` has only real roots
(``M = GQ GK`` with ``GQ``, ``GK`` symmetric and one of them PSD; ``M`` a Gram matrix), the number of
roots ``> c`` counted with multiplicity equals the number of sign changes of the coefficients of ``P(c +
mu)`` (Descartes' rule of signs is exact for polynomials whose roots are all real: the roots in ``mu > 0``
are then counted exactly). The roots ``< c``: sign changes of ``P(c - mu)``. ``P`` is python-flint's exact
``charpoly`` (``fmpz_poly`` for an integer matrix, ``fmpq_poly`` for a rational one); the shift by ``c = a
/ b`` is taken on ``b^n P((a + mu) / b)``, a positive multiple with the same sign pattern.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable


def charpoly(M: Any) -> Any:
    """``det(lambda I - M)``: ``fmpz_poly`` for an integer matrix, else ``fmpq_poly``."""
    import flint
    return M.charpoly() if isinstance(M, flint.fmpz_mat) else flint.fmpq_mat(M).charpoly()


def _sign_changes(coeffs: Any) -> int:
    s = [1 if c > 0 else -1 for c in coeffs if c != 0]
    return sum(1 for a, b in zip(s, s[1:]) if a != b)


def _shift(P: Any, c: Fraction, sign: int = 1) -> Any:
    """``P(c + sign mu)`` up to a positive factor (module docstring)."""
    import flint
    co = P.coeffs()
    if all(isinstance(x, (int, flint.fmpz)) for x in co):
        R = flint.fmpz_poly([int(x) * c.denominator ** (len(co) - 1 - i) for i, x in enumerate(co)])
        return R(flint.fmpz_poly([c.numerator, sign]))
    return flint.fmpq_poly(P)(flint.fmpq_poly([flint.fmpq(c.numerator, c.denominator), sign]))


def count_above(P: Any, c: Fraction) -> int:
    """Roots ``> c`` of the real-rooted ``P``, with multiplicity (module docstring)."""
    return _sign_changes(_shift(P, c).coeffs())


def enclosures_hold(P: Callable[[], Any], r: int, scale: Fraction,
                    pairs: list[tuple[Fraction, Fraction]]) -> int | None:
    """The first ``i`` whose interval ``pairs[i] / scale`` does not contain the ``i``-th largest of the ``r``
    real roots of ``P()`` (with multiplicity), or None when every one does: ``#{lambda > hi_i} <= i`` and
    ``#{lambda >= lo_i} >= i + 1``."""
    Q = P()
    for i, (lo, hi) in enumerate(pairs):
        below = _sign_changes(_shift(Q, lo / scale, -1).coeffs())         # roots < lo
        if count_above(Q, hi / scale) > i or r - below < i + 1:
            return i
    return None


def projection_margin_definite(rows: Any, Y: Any, eps_sq: Fraction, exponent: int) -> bool:
    """With ``A = rows 2^exponent`` (integer rows) and an integer ``n x k`` matrix ``Y``: ``H - eps^2 b I``
    is positive definite, ``H = (A Y)^T (A Y)``, ``b = max_i sum_j |(Y^T Y)_ij|`` (``>= ||Y^T Y||_2``).
    Then ``A`` has at least ``k`` singular values ``> eps``: for unit ``v`` in the range of ``Y``, ``v = Y
    w``, ``||A v||^2 = w^T H w > eps^2 b ||w||^2 >= eps^2 ||Y w||^2``, so ``A`` exceeds ``eps`` on a
    ``k``-dimensional space (Courant-Fischer)."""
    from certify.checkers.kernel.matrices import fmpz_matrix
    from certify.checkers.kernel.psd import is_positive_definite
    k, W, YtY = Y.ncols(), fmpz_matrix(rows) * Y, Y.transpose() * Y
    H = W.transpose() * W
    b = max(sum(abs(int(YtY[i, j])) for j in range(k)) for i in range(k))
    c = eps_sq * b / Fraction(2) ** (2 * exponent)
    return is_positive_definite([[int(H[i, j]) - (c if i == j else 0) for j in range(k)] for i in range(k)])
