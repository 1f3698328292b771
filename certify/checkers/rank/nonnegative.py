"""Checker of ``nonnegative`` claims: nonnegative features, every product, a
counterexample pair, every matrix entry, or a lemma on the factor form's
structure (the quadratic kernel of Based, the key box), exactly.

Quadratic kernel (``method = "quadratic_kernel"``). The layout (``constant``,
``linear``, ``quadratic`` = ``[feature, i, j]`` per pair ``i <= j`` of linear
positions) must partition the ``r`` features (``r``: their number, the
embedded features' width, or a trusted summary) and list every pair once. The
lemma and its per-side summaries (``min_const``, ``max_linear_sq``,
``max_quadratic_sq``, ``max_residual_sq``; ``_q`` and ``_k``) are the kernel's
(:func:`certify.checkers.kernel.attention.quadratic_margin`, a positive value
proves the claim); with the features at hand every summary is recomputed
exactly (:func:`certify.checkers.kernel.inertia.quadratic_summaries`: the
minima must be equal, the upper bounds at least the exact maxima).

Key box (``method = "key_box"``): ``key_lo <= phi_k(z) <= key_hi`` coordinatewise
and ``min_query_bound <= min_x sum_c min(q_c lo_c, q_c hi_c)``, which must be
``>= 0``; recomputed exactly from the features at hand.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from certify.checkers.common import Bad, int_matrix, integer, q_str, rational
from certify.checkers.kernel import array_sha256, box_minimum, product_min
from certify.checkers.kernel.attention import kernel_value, quadratic_margin
from certify.checkers.kernel.inertia import quadratic_summaries
from certify.checkers.kinds import BY_NAME, NONNEGATIVE_SUMMARIES
from certify.checkers.rank.evidence import (
    _Features,
    _get_matrix,
    _indices,
    _matrix_keys,
    _scale,
)

#: a nonnegative claim's parameters and evidence forms (declared in certify.checkers.kinds): the
#: matrix form, the factor form without evidence ("none"), and one factor form per method
_DECLARED = BY_NAME["nonnegative"]
_METHODS = tuple(m for m in _DECLARED.evidence if m not in ("matrix", "none"))


def check_nonnegative(claim: Mapping[str, Any], cert: Mapping[str, Any], matrix: Any = None) -> list[str]:
    ev = claim["evidence"]
    _DECLARED.params().check_keys(claim["parameters"], "parameters")
    verdict, method = claim["verdict"], ev.get("method")
    if ev.get("form") == "matrix":
        if method != "entries":
            raise Bad(f"matrix form needs method 'entries', got {method!r}")
        _matrix_keys(ev, _DECLARED.form("matrix"), matrix)
        if isinstance(matrix, np.ndarray) and matrix.dtype == np.int64 and matrix.ndim == 2:
            if [*matrix.shape] != _indices(ev["shape"], "shape") or \
                    array_sha256(matrix, _scale(ev["scale"], matrix.shape[0])) != ev["matrix_sha256"]:
                raise Bad("matrix_sha256 is not the hash of the scale and the matrix")
            idx, ncols = int(np.argmin(matrix)), matrix.shape[1]     # the first minimum
            low = int(matrix.ravel()[idx])
        else:
            rows = _get_matrix(ev, matrix)
            flat = [v for r in rows for v in r]
            idx, ncols = flat.index(min(flat)), len(rows[0])
            low = flat[idx]
        sign = (low > 0) - (low < 0)
        problems = []
        if _indices(ev["argmin"], "argmin") != list(divmod(idx, ncols)):
            problems.append(f"argmin is not the first minimum entry {list(divmod(idx, ncols))}")
        if integer(ev["min_sign"], "min_sign") != sign:
            problems.append(f"min_sign is {ev['min_sign']}, the minimum entry's sign is {sign}")
        expect = "proved" if sign >= 0 else "refuted"
        if verdict != expect:
            problems.append(f"minimum entry sign gives {expect}, verdict is {verdict}")
        return problems
    if ev.get("form") != "factor":
        raise Bad(f"unknown form {ev.get('form')!r}")
    if method == "none":
        _DECLARED.form("none").check_keys(ev, "nonnegative evidence")
        return [] if verdict == "unknown" else ["without evidence the verdict must be unknown"]
    if method not in _METHODS:
        raise Bad(f"unknown nonnegative method {method!r}")
    _DECLARED.form(method).check_keys(ev, "nonnegative evidence")
    F = _Features(ev, cert, "nonnegative", method)
    problems = []
    if method == "quadratic_kernel":
        return _check_quadratic(ev, F, verdict)
    if method == "key_box":
        return _check_box(ev, F, verdict)
    if method == "features_nonnegative":
        mq, mk = rational(ev["min_phi_q"], "min_phi_q"), rational(ev["min_phi_k"], "min_phi_k")
        if F.have:
            rq = min(min(r) for r in F.phi_q) * Fraction(2) ** F.eq
            rk = min(min(r) for r in F.phi_k) * Fraction(2) ** F.ek
            if (mq, mk) != (rq, rk):
                problems.append(f"min_phi_q, min_phi_k are {q_str(mq)}, {q_str(mk)}; re-derived "
                                f"{q_str(rq)}, {q_str(rk)}")
        if mq < 0 or mk < 0:
            problems.append("a feature minimum is negative: the method does not apply")
        elif verdict != "proved":
            problems.append("nonnegative features prove the claim but the verdict is not proved")
        return problems
    if method == "all_products":
        n = integer(ev["num_checked"], "num_checked")
        if F.have:
            K = len(F.phi_q)
            if n != K * K:
                problems.append(f"num_checked is {n}, not K^2 = {K * K}")
            least = product_min(F.phi_q, F.phi_k)
            if least is not None and least < 0:
                problems.append("a product <phi_q(x), phi_k(z)> is negative")
        if verdict != "proved":
            problems.append("all products checked but the verdict is not proved")
        return problems
    i, j = _indices(ev["pair"], "pair")
    qr, kr = ev["phi_q_row"], ev["phi_k_row"]
    qrow = int_matrix([qr], "phi_q_row")[0]
    krow = int_matrix([kr], "phi_k_row", (1, len(qrow)))[0]
    qe, ke = integer(ev["phi_q_exponent"], "phi_q_exponent"), integer(ev["phi_k_exponent"], "phi_k_exponent")
    if F.have:
        if not (0 <= i < len(F.phi_q) and 0 <= j < len(F.phi_k)) or len(qrow) != len(F.phi_q[0]):
            raise Bad(f"pair {[i, j]} is not a pair of tokens of the kernel")
        if any(Fraction(v) * Fraction(2) ** qe != F.value("q", i, c) for c, v in enumerate(qrow)) or \
                any(Fraction(v) * Fraction(2) ** ke != F.value("k", j, c) for c, v in enumerate(krow)):
            problems.append(f"phi_q_row / phi_k_row are not the kernel's features of the pair {[i, j]}")
    val = kernel_value(qrow, krow) * Fraction(2) ** (qe + ke)
    if val != rational(ev["value"], "value") or val >= 0:
        problems.append("the counterexample does not recompute to a negative value")
    if verdict != "refuted":
        problems.append("a counterexample refutes the claim but the verdict is not refuted")
    return problems


#: the quadratic-kernel lemma's summaries, declared in certify.checkers.kinds
_SUMMARIES = NONNEGATIVE_SUMMARIES


def _check_quadratic(ev: Mapping[str, Any], F: _Features, verdict: str) -> list[str]:
    c = integer(ev["constant"], "constant", 0)
    lin = _indices(ev["linear"], "linear")
    quad = int_matrix(ev["quadratic"], "quadratic", (None, 3)) if ev["quadratic"] else []
    d = len(lin)
    pairs = sorted((i, j) for _, i, j in quad)
    if d == 0 or pairs != [(i, j) for i in range(d) for j in range(i, d)]:
        raise Bad("quadratic must list the pairs i <= j of the linear positions once each")
    feats = [c] + lin + [f for f, _, _ in quad]
    r = integer(ev["r"], "r", 1)
    if F.have and r != len(F.phi_q[0]):
        raise Bad(f"r is {r}, the embedded features have {len(F.phi_q[0])} columns")
    if sorted(feats) != list(range(r)):
        raise Bad("constant, linear and quadratic features must partition the r features")
    gd, go = rational(ev["g_diag"], "g_diag"), rational(ev["g_off"], "g_off")
    S = {f"{k}_{s}": rational(ev[f"{k}_{s}"], f"{k}_{s}") for k in _SUMMARIES for s in ("q", "k")}
    problems = []
    if F.have:
        for side, rows, e in (("q", F.phi_q, F.eq), ("k", F.phi_k, F.ek)):
            got = quadratic_summaries(np.array(rows, dtype=object), e, c, lin, quad, gd, go)
            if S[f"min_const_{side}"] != got["min_const"]:
                problems.append(f"min_const_{side} is not the constant feature's minimum "
                                f"{q_str(got['min_const'])}")
            for key in ("max_linear_sq", "max_quadratic_sq", "max_residual_sq"):
                if S[f"{key}_{side}"] < got[key]:
                    problems.append(f"{key}_{side} is below the features' maximum {q_str(got[key])}")
    if go == 0:
        return problems + ["g_off = 0: no quadratic term"]
    if S["min_const_q"] <= 0 or S["min_const_k"] <= 0:
        return problems + ["the constant features are not positive: the lemma does not apply"]
    margin = quadratic_margin(gd, go, S)
    if margin <= 0:
        problems.append(f"the quadratic-kernel bound is {float(margin):.3g} <= 0: not proved")
    elif verdict != "proved":
        problems.append("the quadratic-kernel bound proves the claim but the verdict is not proved")
    return problems


def _check_box(ev: Mapping[str, Any], F: _Features, verdict: str) -> list[str]:
    lo = [rational(v, "key_lo") for v in ev["key_lo"]] if isinstance(ev["key_lo"], list) else None
    hi = [rational(v, "key_hi") for v in ev["key_hi"]] if isinstance(ev["key_hi"], list) else None
    if lo is None or hi is None or len(lo) != len(hi) or not lo:
        raise Bad("key_lo and key_hi must list one bound per feature")
    bound = rational(ev["min_query_bound"], "min_query_bound")
    problems = []
    if F.have:
        if len(F.phi_k[0]) != len(lo):
            raise Bad("key_lo / key_hi do not have one entry per feature")
        sk, sq = Fraction(2) ** F.ek, Fraction(2) ** F.eq
        for c in range(len(lo)):
            col = [r[c] * sk for r in F.phi_k]
            if lo[c] > min(col) or hi[c] < max(col):
                problems.append(f"key feature {c} leaves [key_lo, key_hi]")
                break
        low = min(box_minimum([x * sq for x in r], lo, hi) for r in F.phi_q)
        if bound > low:
            problems.append(f"min_query_bound exceeds the exact minimum {q_str(low)}")
    if bound < 0:
        problems.append("min_query_bound is negative: the box does not prove the claim")
    elif verdict != "proved":
        problems.append("the key box proves the claim but the verdict is not proved")
    return problems
