"""Checker of ``eps_rank`` claims: the count of eigenvalues above ``eps^2`` and the
enclosures by verified float congruences (:mod:`.inertia`) where they decide,
else by Descartes' rule on the exact characteristic polynomial (exact root
counting); the projection witness by an exact definiteness test.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from certify.checkers.common import Bad, boolean, fmpz_mat, int_matrix, integer, keys, rational
from certify.checkers.kernel import is_positive_definite, is_psd
from certify.checkers.rank import inertia
from certify.checkers.rank.evidence import (
    _FEATURE_OPTIONAL,
    _GRAM,
    ENCLOSURE_WIDTH_LOG2,
    SOURCE_KEYS,
    _check_grams,
    _get_matrix,
    _matrix_keys,
    _rational_matrix,
)


def _sign_changes(coeffs) -> int:
    s = [1 if c > 0 else -1 for c in coeffs if c != 0]
    return sum(1 for a, b in zip(s, s[1:]) if a != b)


def _charpoly(M):
    """``det(lambda I - M)``: ``fmpz_poly`` for an integer matrix, else ``fmpq_poly``."""
    import flint
    return M.charpoly() if isinstance(M, flint.fmpz_mat) else flint.fmpq_mat(M).charpoly()


def _shift(P, c: Fraction, sign: int = 1):
    """``P(c + sign mu)`` up to a positive factor: for ``c = a/b`` the integer
    polynomial ``b^n P((a + sign nu)/b)`` (roots ``nu = sign (b lambda - a)``)."""
    import flint
    co = P.coeffs()
    n = len(co) - 1
    if all(isinstance(x, (int, flint.fmpz)) for x in co):
        R = flint.fmpz_poly([int(x) * c.denominator ** (n - i) for i, x in enumerate(co)])
        return R(flint.fmpz_poly([c.numerator, sign]))
    return flint.fmpq_poly(P)(flint.fmpq_poly([flint.fmpq(c.numerator, c.denominator), sign]))


def _count_above(P, c: Fraction) -> int:
    """Roots ``> c`` of the real-rooted ``P`` (Descartes' rule on ``P(c + mu)``, exact)."""
    return _sign_changes(_shift(P, c).coeffs())


def _check_enclosures(P, r: int, scale_exp: int, enc: Any, own=None) -> None:
    """Every eigenvalue ``lambda_i`` (largest first, with multiplicity) of
    ``core 2^scale_exp`` lies in ``enc[i]``: the checker's own rigorous float
    enclosures ``own`` (or None) lie inside, else ``#{lambda > hi_i} <= i`` and
    ``#{lambda >= lo_i} >= i + 1``, counted exactly by Descartes' rule on the
    real-rooted characteristic polynomial ``P()`` of ``core`` shifted to ``hi``
    (and reflected at ``lo``)."""
    if not isinstance(enc, list) or len(enc) != r:
        raise Bad(f"sigma_sq_enclosures must list {r} intervals")
    pairs = [(rational(e[0], "enclosure"), rational(e[1], "enclosure")) if isinstance(e, list)
             and len(e) == 2 else (_ for _ in ()).throw(Bad("an enclosure is not [lo, hi]"))
             for e in enc]
    s = Fraction(2) ** scale_exp
    top = max((hi for _, hi in pairs), default=Fraction(0))
    width = max(top, Fraction(1)) / (1 << ENCLOSURE_WIDTH_LOG2)
    for i, (lo, hi) in enumerate(pairs):
        if not lo <= hi or hi - lo > width:
            raise Bad(f"enclosure {i} is empty or wider than 2^-{ENCLOSURE_WIDTH_LOG2} of the largest")
    if own is not None and all(lo <= a and b <= hi for (lo, hi), (a, b) in zip(pairs, own)):
        return
    P = P()
    for i, (lo, hi) in enumerate(pairs):
        above = _sign_changes(_shift(P, hi / s).coeffs())              # roots > hi
        below = _sign_changes(_shift(P, lo / s, -1).coeffs())          # roots < lo
        if above > i or r - below < i + 1:
            raise Bad(f"sigma_sq_enclosures[{i}] does not contain the {i + 1}-th eigenvalue")


def check_eps_rank(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    keys(claim["parameters"], "parameters", ("eps",), SOURCE_KEYS)
    eps = rational(ev["eps"], "eps")
    if eps != rational(claim["parameters"]["eps"], "parameters.eps") or eps <= 0:
        raise Bad("evidence eps must equal parameters.eps and be > 0")
    k = integer(ev.get("k", 0), "k", 0)
    exact = boolean(ev.get("exact", False), "exact")
    problems: list[str] = []
    if ev.get("form") == "factor":
        keys(ev, "factor evidence", ("form",) + _GRAM + ("eps", "k", "exact", "sigma_sq_enclosures"),
             _FEATURE_OPTIONAL)
        GQ, GK, eq, ek, F = _check_grams(ev, cert, "eps_rank")
        gq, gk = ev["gram_q"], ev["gram_k"]                     # the integer rows just checked
        # re-derived from embedded features, the Grams are PSD by construction; taken as
        # stated, they are tested (the real-rooted count needs it)
        if not F.have and not ((inertia.positive_definite(gq) or is_psd(GQ))
                               and (inertia.positive_definite(gk) or is_psd(GK))):
            return ["Gram matrices are not PSD: the real-rooted count does not apply"]
        memo: list = []

        def P():                                                # exact, only where floats cannot decide
            if not memo:
                memo.append(_charpoly(GQ * GK))
            return memo[0]

        got = inertia.count_above(gq, eq, gk, ek, eps * eps)
        if got is None:
            got = _count_above(P(), eps * eps / Fraction(2) ** (eq + ek))
        if got != k:
            problems.append(f"the exact count gives {got} singular values > eps, evidence says {k}")
        if not exact:
            problems.append("the count is exact: exact must be true")
        if ev["sigma_sq_enclosures"]:
            _check_enclosures(P, GQ.nrows(), eq + ek, ev["sigma_sq_enclosures"],
                              inertia.enclosures(gq, eq, gk, ek))
    elif ev.get("form") == "matrix" and ev.get("method") == "gram":
        _matrix_keys(ev, ("form", "shape", "scale", "matrix_sha256", "eps", "k", "exact", "method"), matrix)
        A = _rational_matrix(_get_matrix(ev, matrix), ev["scale"])
        G = A.transpose() * A if A.ncols() <= A.nrows() else A * A.transpose()
        got = _count_above(_charpoly(G), eps * eps)
        if got != k:
            problems.append(f"Gram count gives {got}, evidence says {k}")
        if not exact:
            problems.append("the Gram count is exact: exact must be true")
    elif ev.get("form") == "matrix" and ev.get("method") == "projection":
        wit = ("witness_y", "witness_y_exponent") if k else ()
        _matrix_keys(ev, ("form", "shape", "scale", "matrix_sha256", "eps", "k", "exact", "method") + wit,
                     matrix)
        rows = _get_matrix(ev, matrix)
        if ev["scale"]["kind"] != "dyadic":
            return ["projection needs a dyadic matrix"]
        if exact:
            problems.append("a projection witness proves only k values > eps: exact must be false")
        if k:
            Y = fmpz_mat(int_matrix(ev["witness_y"], "witness_y", (len(rows[0]), k)))
            integer(ev["witness_y_exponent"], "witness_y_exponent")
            W = fmpz_mat(rows) * Y
            H = W.transpose() * W
            YtY = Y.transpose() * Y
            b = max(sum(abs(int(YtY[i, j])) for j in range(k)) for i in range(k))
            c = eps * eps * b / Fraction(2) ** (2 * int(ev["scale"]["exponent"]))
            Hs = H * c.denominator
            for i in range(k):
                Hs[i, i] = Hs[i, i] - c.numerator
            if not is_positive_definite(Hs):
                if claim["verdict"] == "unknown":
                    return problems
                problems.append("projection check fails: H - eps^2 b I is not positive definite")
    elif ev.get("form") == "matrix" and ev.get("method") == "none":
        keys(ev, "matrix evidence", ("form", "shape", "scale", "matrix_sha256", "eps", "method", "k",
                                     "exact"), ("matrix", "tokens"))
        if k != 0 or exact:
            return ["without a method nothing is counted: k must be 0 and exact false"]
        return [] if claim["verdict"] == "unknown" else ["without a method the verdict must be unknown"]
    else:
        return [f"unknown eps_rank evidence (form {ev.get('form')!r}, method {ev.get('method')!r})"]
    if claim["verdict"] != "proved" and not problems:
        problems.append(f"the evidence proves the claim but its verdict is {claim['verdict']}")
    return problems


