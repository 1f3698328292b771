"""Checker of ``eps_rank`` claims: the count of eigenvalues above ``eps^2`` and the
enclosures by verified float congruences (:mod:`certify.checkers.kernel.inertia`) where they decide,
the count else by the same congruences in arb balls at 106 to 424 bits
(:mod:`certify.checkers.kernel.balls`), else by Descartes' rule on the exact characteristic polynomial (exact root
counting, :mod:`certify.checkers.kernel.roots`); the projection witness by an
exact definiteness test. The arithmetic is the kernel's; this module routes.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Mapping

from certify.checkers.common import Bad, boolean, int_matrix, integer, rational
from certify.checkers.gram import replayed_gram
from certify.checkers.kernel import (
    balls,
    fmpz_matrix,
    gram_matrix,
    inertia,
    is_psd,
    product,
    roots,
    scaled_matrix,
)
from certify.checkers.kernel.psd import is_psd_by_rank
from certify.checkers.kinds import BY_NAME
from certify.checkers.rank.evidence import ENCLOSURE_WIDTH_LOG2, _check_grams, _get_matrix, _matrix_keys

#: an eps_rank claim's parameters and evidence forms (declared in certify.checkers.kinds)
_DECLARED = BY_NAME["eps_rank"]


def _check_enclosures(P: Callable[[], Any], r: int, scale_exp: int, enc: Any,
                      own: list[tuple[Fraction, Fraction]] | None = None) -> None:
    """Every eigenvalue ``lambda_i`` (largest first, with multiplicity) of
    ``core 2^scale_exp`` lies in ``enc[i]``: the checker's own rigorous float
    enclosures ``own`` (or None) lie inside, else the kernel's exact count
    (:func:`certify.checkers.kernel.roots.enclosures_hold`) on the real-rooted
    characteristic polynomial ``P()`` of ``core``."""
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
    bad = roots.enclosures_hold(P, r, s, pairs)
    if bad is not None:
        raise Bad(f"sigma_sq_enclosures[{bad}] does not contain the {bad + 1}-th eigenvalue")


def _psd(g: list[list[int]], G: Any) -> bool:
    """A stated Gram (integer rows ``g``, ``fmpz_mat`` ``G``) is PSD: by the verified
    float test when it is definite, else through a definite principal part of the
    same rank (:func:`certify.checkers.kernel.psd.is_psd_by_rank`), else by exact
    elimination."""
    return inertia.positive_definite(g) or is_psd_by_rank(
        G, lambda S: inertia.positive_definite([[g[i][j] for j in S] for i in S])) or is_psd(G)


def check_eps_rank(claim: Mapping[str, Any], cert: Mapping[str, Any], matrix: Any = None) -> list[str]:
    ev = claim["evidence"]
    _DECLARED.params().check_keys(claim["parameters"], "parameters")
    eps = rational(ev["eps"], "eps")
    if eps != rational(claim["parameters"]["eps"], "parameters.eps") or eps <= 0:
        raise Bad("evidence eps must equal parameters.eps and be > 0")
    k = integer(ev.get("k", 0), "k", 0)
    exact = boolean(ev.get("exact", False), "exact")
    problems: list[str] = []
    if ev.get("form") == "factor":
        _DECLARED.form("factor").check_keys(ev, "factor evidence")
        GQ, GK, eq, ek, F = _check_grams(ev, cert, "eps_rank")
        gq, gk = ev["gram_q"], ev["gram_k"]                     # the integer rows just checked
        # re-derived from embedded features, or found equal to the Gram of features replayed
        # in this certificate's check (same dtype, shape and sha256), the Grams are PSD by
        # construction; taken as stated, they are tested (the real-rooted count needs it)
        fs = ev["features_sha256"]
        if not F.have and not all(replayed_gram(fs, s, g, ev[f"gram_{s}_exponent"], (ev["num_tokens"], len(g)))
                                  or _psd(g, G)
                                  for s, g, G in (("q", gq, GQ), ("k", gk, GK))):
            return ["Gram matrices are not PSD: the real-rooted count does not apply"]
        memo: list = []

        def P() -> Any:                                               # exact, only where floats cannot decide
            if not memo:
                memo.append(roots.charpoly(product(GQ, GK)))
            return memo[0]

        got = inertia.count_above(gq, eq, gk, ek, eps * eps)
        if got is None:                                               # near eps for binary64: balls
            got = balls.count_above(gq, eq, gk, ek, eps * eps)
        if got is None:
            got = roots.count_above(P(), eps * eps / Fraction(2) ** (eq + ek))
        if got != k:
            problems.append(f"the exact count gives {got} singular values > eps, evidence says {k}")
        if not exact:
            problems.append("the count is exact: exact must be true")
        if ev["sigma_sq_enclosures"]:
            _check_enclosures(P, GQ.nrows(), eq + ek, ev["sigma_sq_enclosures"],
                              inertia.enclosures(gq, eq, gk, ek))
    elif ev.get("form") == "matrix" and ev.get("method") == "gram":
        _matrix_keys(ev, _DECLARED.form("gram"), matrix)
        A = scaled_matrix(_get_matrix(ev, matrix), ev["scale"])
        got = roots.count_above(roots.charpoly(gram_matrix(A)), eps * eps)
        if got != k:
            problems.append(f"Gram count gives {got}, evidence says {k}")
        if not exact:
            problems.append("the Gram count is exact: exact must be true")
    elif ev.get("form") == "matrix" and ev.get("method") == "projection":
        projection = _DECLARED.form("projection")
        wit = tuple(f for f in projection.optional if f.startswith("witness_"))     # present iff k > 0
        _matrix_keys(ev, projection, matrix, require=wit if k else (), forbid=() if k else wit)
        rows = _get_matrix(ev, matrix)
        if ev["scale"]["kind"] != "dyadic":
            return ["projection needs a dyadic matrix"]
        if exact:
            problems.append("a projection witness proves only k values > eps: exact must be false")
        if k:
            Y = fmpz_matrix(int_matrix(ev["witness_y"], "witness_y", (len(rows[0]), k)))
            integer(ev["witness_y_exponent"], "witness_y_exponent")
            if not roots.projection_margin_definite(rows, Y, eps * eps, int(ev["scale"]["exponent"])):
                if claim["verdict"] == "unknown":
                    return problems
                problems.append("projection check fails: H - eps^2 b I is not positive definite")
    elif ev.get("form") == "matrix" and ev.get("method") == "none":
        _DECLARED.form("none").check_keys(ev, "matrix evidence")
        if k != 0 or exact:
            return ["without a method nothing is counted: k must be 0 and exact false"]
        return [] if claim["verdict"] == "unknown" else ["without a method the verdict must be unknown"]
    else:
        return [f"unknown eps_rank evidence (form {ev.get('form')!r}, method {ev.get('method')!r})"]
    if claim["verdict"] != "proved" and not problems:
        problems.append(f"the evidence proves the claim but its verdict is {claim['verdict']}")
    return problems


