"""Eigenvalue counts of ``GQ GK`` above a threshold decided in python-flint ``arb`` balls at 106, 212 and
424 bits: the rung between the float test (:mod:`certify.checkers.kernel.inertia`), which cannot decide a
singular value whose squared distance to ``eps^2`` is below binary64's resolution of the spectrum, and the
exact characteristic polynomial (:mod:`certify.checkers.kernel.roots`), the last resort.

The statement is the float test's: for exact symmetric ``GQ, GK`` (one of them semidefinite) and ``c >
0``, ``Z(c) = [[GK, I], [I, GQ / c]]`` is nonsingular iff ``c`` is not an eigenvalue of ``GQ GK``, and then
``n_+(Z) = r + #{lambda_i > c}``; for any square ``X``, a strictly diagonally dominant ``W B W`` (``B = X^T
Z X``, ``W`` a positive diagonal) makes ``B`` nonsingular with the inertia of its diagonal, hence ``X``
nonsingular and ``In(Z) = In(B)`` (Sylvester; proofs in the float test's docstring).

Balls. Every matrix here is an ``arb_mat``: each entry a ball that contains the exact value (python-flint's
containment guarantee: the exact entries of ``GK 2^ek`` and ``GQ 2^eq / c`` are rounded into balls that
contain them, and the sum or product of balls contains every sum or product of values they contain). The
test forms ``B_0 = Z`` and ``B_(k+1) = Y_k^T B_k Y_k`` with float64 matrices ``Y_k`` taken as exact dyadic
rationals, so ``B_k`` contains ``X_k^T Z X_k`` for the exact ``X_k = Y_0 ... Y_(k-1)``. It passes when, for
the upper bounds ``u_ij >= |b_ij|`` (``j != i``) and lower bounds ``l_i <= |b_ii|`` that arb gives
(``abs_upper``, ``abs_lower``: exact numbers) and weights ``w_i``, powers of two, every ball ``l_i w_i -
sum_j u_ij w_j`` is ``> 0`` and no diagonal ball contains 0: then every matrix in the balls, in particular
``X_k^T Z X_k``, is dominant under ``W``, and the signs of its diagonal are the signs of the diagonal balls.

The transform. ``Y_0`` is ``diag(2^s)`` (the float test's equilibration) times numpy's eigenvectors of the
float equilibrated ``Z``; ``Y_k`` is ``diag(2^h)`` times numpy's eigenvectors of the midpoints of
``diag(2^h) B_k diag(2^h)``, ``h_i`` about ``-log2 |b_ii| / 2``: each step undoes the float error of the
ones before (about 50 bits of the spectrum's range per step), up to ``bits / 53 + 1`` steps at a precision
while no diagonal ball contains 0. Only the speed depends on the ``Y_k``: they are any float matrices, and
nothing but the balls decides, so a poor ``Y_k`` can only make the test fail (None), never pass wrongly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from certify.checkers.kernel.inertia import MAX_N, TINY, _equilibrated

#: the precisions tried, in bits (binary64 has 53)
PRECISIONS = (106, 212, 424)


def _power(k: int) -> Any:
    """``2^k`` as an exact ``arb``."""
    import flint
    return flint.arb(flint.fmpz(1) << k if k >= 0 else flint.fmpq(1, 1 << -k))


def _z(GQ: list, eq: int, GK: list, ek: int, c: Fraction) -> Any:
    """``Z(c)`` of the module docstring in balls at the working precision."""
    import flint
    r = len(GQ)
    K = (flint.arb_mat(flint.fmpz_mat(GK)) * _power(ek)).tolist()
    Q = (flint.arb_mat(flint.fmpz_mat(GQ)) * (_power(eq) / flint.arb(flint.fmpq(c.numerator, c.denominator))))
    one, zero = flint.arb(1), flint.arb(0)
    eye = [[one if i == j else zero for j in range(r)] for i in range(r)]
    return flint.arb_mat([k + e for k, e in zip(K, eye)] + [e + q for e, q in zip(eye, Q.tolist())])


def _signs(B: Any) -> tuple[int, int] | None:
    """``(n_+, n_-)`` of every matrix in the balls ``B`` when the weighted dominance of the module
    docstring proves them, else None."""
    import flint
    n, rows = B.nrows(), B.tolist()
    low = [rows[i][i].abs_lower() for i in range(n)]
    if not all(v > 0 for v in low):
        return None
    w = [_power(-(_log2(v) // 2)) for v in low]
    U = flint.arb_mat([[x.abs_upper() if i != j else flint.arb(0) for j, x in enumerate(row)]
                       for i, row in enumerate(rows)])
    s = (U * flint.arb_mat(n, 1, w)).tolist()
    if not all(low[i] * w[i] - s[i][0] > 0 for i in range(n)):
        return None
    pos = sum(1 for i in range(n) if rows[i][i] > 0)
    return pos, n - pos


def _log2(v: Any) -> int:
    """About ``log2 |v|`` for a nonzero exact ``arb``."""
    m, e = v.mid().man_exp()
    return int(e) + int(m).bit_length()


def _step(B: Any) -> Any:
    """``Y^T B Y`` with ``Y = diag(2^h) V``, ``V`` numpy's eigenvectors of the equilibrated midpoints (module
    docstring), or None when those are not finite floats."""
    import flint
    rows = B.tolist()
    h = np.array([-(_log2(rows[i][i].mid()) // 2) if rows[i][i].mid() != 0 else 0 for i in range(len(rows))])
    M = np.ldexp(np.array(B.mid().tolist(), dtype=np.float64), h[:, None] + h[None, :])
    if not np.all(np.isfinite(M)):
        return None
    Y = flint.arb_mat(np.ldexp(np.linalg.eigh((M + M.T) / 2)[1], h[:, None]).tolist())
    return Y.transpose() * B * Y


def count_above(GQ: list[list[int]], eq: int, GK: list[list[int]], ek: int, eps_sq: Fraction) -> int | None:
    """``#{lambda_i(GQ 2^eq GK 2^ek) > eps_sq}`` by the inertia of ``Z(eps_sq)`` decided in balls at
    :data:`PRECISIONS` (module docstring), or None when no precision decides (``eps_sq`` may be an
    eigenvalue: the caller then runs the exact count). ``GQ, GK``: symmetric integer rows, at least one
    positive semidefinite (the caller's hypothesis)."""
    r = len(GQ)
    if r == 0 or eps_sq <= 0 or 2 * r > MAX_N:
        return None
    lg = eps_sq.numerator.bit_length() - eps_sq.denominator.bit_length()
    sk, Zk = _equilibrated(GK, ek)
    sq, Zq = _equilibrated(GQ, eq, eps_sq.denominator, eps_sq.numerator, lg)
    cpl = np.ldexp(1.0, np.array(sk) + np.array(sq))
    if Zk is None or Zq is None or cpl.min() < TINY or cpl.max() > 2.0 ** 900:
        return None
    off = np.diag(cpl)
    try:
        V = np.linalg.eigh(np.block([[Zk[0], off], [off, Zq[0]]]))[1]
    except np.linalg.LinAlgError:
        return None
    Y0 = np.ldexp(V, np.array(sk + sq)[:, None]).tolist()
    import flint
    old = flint.ctx.prec
    try:
        for bits in PRECISIONS:
            flint.ctx.prec = bits                       # python-flint's working precision, restored after
            Y = flint.arb_mat(Y0)
            B = Y.transpose() * _z(GQ, eq, GK, ek, eps_sq) * Y
            for _ in range(bits // 53 + 1):
                signs = _signs(B)
                if signs is not None:                   # n_+ outside r..2r: the hypothesis fails
                    return signs[0] - r if r <= signs[0] <= 2 * r else None
                if any(B[i, i].abs_lower() == 0 for i in range(2 * r)):
                    break                               # the radii swamp a diagonal: more bits
                B = _step(B)
                if B is None:
                    break
    finally:
        flint.ctx.prec = old
    return None
