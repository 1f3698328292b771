"""Checker of ``nonnegative`` claims: nonnegative features, every product, a
counterexample pair, or every matrix entry, exactly.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from certify.checkers.common import Bad, fmpz_mat, int_matrix, integer, keys, q_str, rational
from certify.checkers.rank.evidence import (_FEATURE_OPTIONAL, SOURCE_KEYS, _Features, _get_matrix,
                                            _indices, _matrix_keys, _scale)
from certify.checkers.rank.span import array_sha256


def check_nonnegative(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    keys(claim["parameters"], "parameters", (), SOURCE_KEYS)
    verdict, method = claim["verdict"], ev.get("method")
    if ev.get("form") == "matrix":
        if method != "entries":
            raise Bad(f"matrix form needs method 'entries', got {method!r}")
        _matrix_keys(ev, ("form", "method", "shape", "scale", "matrix_sha256", "argmin", "min_sign"), matrix)
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
    base = ("form", "features_sha256", "method")
    if method == "none":
        keys(ev, "nonnegative evidence", base)
        return [] if verdict == "unknown" else ["without evidence the verdict must be unknown"]
    fields = {"features_nonnegative": ("min_phi_q", "min_phi_k"), "all_products": ("num_checked",),
              "counterexample": ("pair", "value", "phi_q_row", "phi_q_exponent", "phi_k_row",
                                 "phi_k_exponent")}.get(method)
    if fields is None:
        raise Bad(f"unknown nonnegative method {method!r}")
    keys(ev, "nonnegative evidence", base + fields, _FEATURE_OPTIONAL)
    F = _Features(ev, cert, "nonnegative", method)
    problems = []
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
            P = fmpz_mat(F.phi_q) * fmpz_mat(F.phi_k).transpose()
            if min(int(v) for v in P.entries()) < 0:
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
    val = sum((Fraction(a * b) for a, b in zip(qrow, krow)), Fraction(0)) * Fraction(2) ** (qe + ke)
    if val != rational(ev["value"], "value") or val >= 0:
        problems.append("the counterexample does not recompute to a negative value")
    if verdict != "refuted":
        problems.append("a counterexample refutes the claim but the verdict is not refuted")
    return problems
