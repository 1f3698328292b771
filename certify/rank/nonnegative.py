"""The ``nonnegative`` claim: ``alpha >= 0`` on the token set, exactly (a
negative entry is a counterexample; a refusal of a signed kernel is exit 3).

Factor form, in this order: nonnegative features (exact minima); every product
when ``K^2`` is within :data:`SIGNED_PRODUCT_LIMIT`; beyond it, the feature map's
structure (the quadratic-kernel lemma of :mod:`certify.rank.structure`, Based's
``1 + s + s^2/2``) or the key-box bound of the factor form; only then unknown.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from certify.core.certificate import Claim, ClaimKind
from certify.core.kernel import Kernel
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict
from certify.rank.evidence import (
    TRUSTED,
    feature_evidence,
    features_sha256,
    matrix_sha256,
    scale_evidence,
    source_params,
    token_evidence,
)
from certify.rank.options import SIGNED_PRODUCT_LIMIT, RankOptions
from certify.rank.summary import FactorSummary
from solvers import exact as ex


def nonnegative_claim_factor(kernel: Kernel, s: FactorSummary, opt: RankOptions) -> Claim:
    base = {"form": "factor", "features_sha256": features_sha256(s)}
    stmt = None                              # rendered from the parameters
    params = source_params(kernel)
    if s.min_q >= 0 and s.min_k >= 0:
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.PROVED, parameters=params,
                     evidence={**base, **feature_evidence(s, opt.embed_limit, TRUSTED["nonnegative", "features_nonnegative"]),
                               **token_evidence(kernel),
                               "method": "features_nonnegative",
                               "min_phi_q": q_to_str(s.min_q), "min_phi_k": q_to_str(s.min_k)},
                     method="every feature is >= 0 (exact minimum over all tokens)")
    K = kernel.num_tokens
    if K * K > SIGNED_PRODUCT_LIMIT:
        for make in (_quadratic_claim, _box_claim):
            claim = make(kernel, s, opt, base, params)
            if claim is not None:
                return claim
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.UNKNOWN, parameters=params,
                     evidence={**base, "method": "none", **token_evidence(kernel)},
                     method="signed features", reason=f"signed features on {K} tokens: {K}^2 products "
                     f"exceed the exact-check limit {SIGNED_PRODUCT_LIMIT}, and neither the feature "
                     "map's structure nor the key box bounds alpha below by 0")
    q = s.phi_q if s.phi_q is not None else np.concatenate([b[0] for b in kernel.feature_batches()])
    k = s.phi_k if s.phi_k is not None else np.concatenate([b[1] for b in kernel.feature_batches()])
    neg, exact_checked = _find_negative(q, k)
    if neg is None:
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.PROVED, parameters=params,
                     evidence={**base, **feature_evidence(s, opt.embed_limit, TRUSTED["nonnegative", "all_products"]),
                               **token_evidence(kernel),
                               "method": "all_products", "num_checked": K * K},
                     info={"pairs_summed_exactly": exact_checked},
                     method="every product: float64 with the rigorous bound gamma_r sum |q_i k_i|; "
                            "pairs the bound does not decide summed exactly")
    i, j, val = neg
    dq, dk = ex.dyadic(q[i:i + 1]), ex.dyadic(k[j:j + 1])
    ev = {**base, **feature_evidence(s, opt.embed_limit, TRUSTED["nonnegative", "counterexample"]),
          "method": "counterexample", "pair": [int(i), int(j)], "value": q_to_str(val),
          "phi_q_row": dq.rows()[0], "phi_q_exponent": dq.exponent,
          "phi_k_row": dk.rows()[0], "phi_k_exponent": dk.exponent}
    return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.REFUTED, parameters=params, evidence={**ev, **token_evidence(kernel)},
                 method="exact counterexample", reason=f"alpha(x_{i}, x_{j}) = {float(val):.6g} < 0")


#: the summaries a structure claim takes as stated when the features are not embedded
TRUSTED_QUADRATIC = TRUSTED["nonnegative", "quadratic_kernel"]
TRUSTED_BOX = TRUSTED["nonnegative", "key_box"]


def _quadratic_claim(kernel: Kernel, s: FactorSummary, opt: RankOptions, base, params) -> Claim | None:
    """Proved by the quadratic-kernel lemma, or None when it does not apply."""
    from certify.rank.structure import quadratic_margin
    st = s.structure
    if st is None or st["g"] is None:
        return None
    gd, go = (Fraction(x) for x in st["g"])
    if go == 0:
        return None
    margin = quadratic_margin(gd, go, st["q"], st["k"])
    if margin <= 0:
        return None
    ev = {**base, **feature_evidence(s, opt.embed_limit, TRUSTED_QUADRATIC), **token_evidence(kernel),
          "method": "quadratic_kernel",
          "r": s.r, **st["layout"].to_json(), "g_diag": q_to_str(gd), "g_off": q_to_str(go)}
    for side in ("q", "k"):
        for key, val in st[side].items():
            ev[f"{key}_{side}"] = q_to_str(val)
    return Claim(ClaimKind.NONNEGATIVE, None, Verdict.PROVED, parameters=params, evidence=ev,
                 info={"margin": float(margin), "c2": float(go * go / 2)},
                 method="quadratic kernel: alpha = a_q a_k + t + <w_q, w_k> >= c0 - 1/(4 c2) - "
                        "rounding terms > 0 (t = <v_q, v_k>, w close to g v_i v_j; summaries of every token)")


def _box_claim(kernel: Kernel, s: FactorSummary, opt: RankOptions, base, params) -> Claim | None:
    """Proved by the key box (two passes over the features), or None."""
    from certify.rank.structure import KeyBox, box_lower_bound
    box = KeyBox(kernel.feature_rank)
    for _, k in kernel.feature_batches(opt.batch_size):
        box.add(k)
    low = min((box_lower_bound(q, box.lo, box.hi) for q, _ in kernel.feature_batches(opt.batch_size)),
              default=np.inf)
    if not low >= 0:
        return None
    ev = {**base, **feature_evidence(s, opt.embed_limit, TRUSTED_BOX), **token_evidence(kernel), "method": "key_box",
          "key_lo": [q_to_str(Fraction(float(v))) for v in box.lo],
          "key_hi": [q_to_str(Fraction(float(v))) for v in box.hi],
          "min_query_bound": q_to_str(Fraction(low))}
    return Claim(ClaimKind.NONNEGATIVE, None, Verdict.PROVED, parameters=params, evidence=ev,
                 method="key box: <phi_q(x), phi_k(z)> >= sum_c min(q_c lo_c, q_c hi_c) >= 0 for every query")


def _exact_dot(a: np.ndarray, b: np.ndarray) -> Fraction:
    return sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b)), Fraction(0))


def _find_negative(q: np.ndarray, k: np.ndarray, block: int = 512):
    """A pair with ``<q_i, k_j> < 0`` (exact) or None, and how many pairs were
    summed exactly. Float64 products with the bound
    ``|fl(s) - s| <= gamma_r sum |q_i k_i|`` (``gamma_r = r u / (1 - r u)``, any
    summation order, plus an underflow margin): a pair with ``fl(s) - bound >= 0``
    is nonnegative; every other pair is summed exactly."""
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    r = q.shape[1]
    u = 2.0 ** -53
    gamma = (r * u) / (1 - r * u) * (1 + 8 * r * u)
    aq, ak = np.abs(q64), np.abs(k64)
    exact_checked = 0
    for s in range(0, len(q64), block):
        P = q64[s:s + block] @ k64.T
        E = gamma * (aq[s:s + block] @ ak.T) + 1e-300
        amb = np.argwhere(P - E < 0)
        amb = amb[np.argsort(P[amb[:, 0], amb[:, 1]])] if len(amb) else amb
        for a, b in amb:
            exact_checked += 1
            v = _exact_dot(q[s + a], k[b])
            if v < 0:
                return (s + int(a), int(b), v), exact_checked
    return None, exact_checked


def nonnegative_claim_matrix(kernel: Kernel, N: ex.IntMatrix, opt: RankOptions) -> Claim:
    vals = N.values
    if vals.dtype == object:
        flat = [int(v) for v in vals.ravel()]
        idx = flat.index(min(flat))                 # first minimum, as np.argmin
        mn = flat[idx]
    else:
        idx = int(np.argmin(vals))
        mn = int(vals.ravel()[idx])
    i, j = divmod(idx, vals.shape[1])
    ev = {"form": "matrix", "method": "entries", "shape": list(N.shape), "scale": scale_evidence(N),
          "matrix_sha256": matrix_sha256(N), "argmin": [i, j], "min_sign": (mn > 0) - (mn < 0)}
    if N.values.size <= opt.embed_limit:
        ev["matrix"] = N.rows()
    stmt, params = None, source_params(kernel)
    if mn < 0:
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.REFUTED, parameters=params, evidence={**ev, **token_evidence(kernel)}, method="exact entry",
                     reason=f"entry ({i}, {j}) is negative")
    return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.PROVED, parameters=params, evidence={**ev, **token_evidence(kernel)}, method="exact entries")
