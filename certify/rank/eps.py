"""The ``eps_rank`` claim: ``k`` singular values ``> eps``, so every matrix within
``eps`` in spectral norm has rank ``>= k`` (factor form: the exact count on the
Grams, by a verified float congruence, the same congruence in arb balls at up to
424 bits, or, within about 2^-400 of the threshold, Descartes' rule on the
characteristic polynomial; certified enclosures for people).
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import numpy as np

from certify.core.certificate import Claim, ClaimKind
from certify.core.kernel import Kernel
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict
from certify.rank.evidence import (
    TRUSTED_GRAMS,
    feature_evidence,
    gram_evidence,
    matrix_sha256,
    scale_evidence,
    source_params,
    token_evidence,
)
from certify.rank.options import SPECTRAL_EXACT_LIMIT, RankOptions
from certify.rank.summary import FactorSummary
from solvers import exact as ex
from solvers import spectral as sp


def eps_rank_factor_claim(kernel: Kernel, s: FactorSummary, eps: Fraction, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    # GQ, GK are exact Grams PhiQ^T PhiQ, PhiK^T PhiK of real features: PSD by
    # construction, so the core GQ GK is real-rooted and both counts apply
    res = sp.eps_rank_grams(s.gram_q, s.eq, s.gram_k, s.ek, eps, enclosures=opt.enclosures and s.r <= 128,
                            prec=opt.enclosure_prec, exact_enclosures=opt.enclosure_fallback)
    ev = {**gram_evidence(s), **feature_evidence(s, opt.embed_limit, TRUSTED_GRAMS),
          "eps": q_to_str(eps), "k": res.k, "exact": True,
          "sigma_sq_enclosures": [[q_to_str(lo), q_to_str(hi)] for lo, hi in res.sigma_sq_enclosures]}
    return Claim(ClaimKind.EPS_RANK, None, res.verdict,
                 parameters={"eps": q_to_str(eps), **source_params(kernel)}, evidence={**ev, **token_evidence(kernel)},
                 method=res.method,
                 timings={"eps_rank": time.perf_counter() - t0})


def _exact_rational_matrix(N: ex.IntMatrix):
    """The kernel matrix itself as an fmpq_mat (undoing the integer scaling)."""
    import flint
    A = flint.fmpq_mat(N.fmpz())
    if N.row_den is not None:
        for i, d in enumerate(N.row_den):
            for j in range(A.ncols()):
                A[i, j] = A[i, j] / d
    else:
        A = A * (flint.fmpq(2) ** N.exponent if N.exponent >= 0 else flint.fmpq(1, 2 ** -N.exponent))
    return A


def eps_rank_matrix_claim(kernel: Kernel, N: ex.IntMatrix, eps: Fraction, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    n1, n2 = N.shape
    ev: dict[str, Any] = {"form": "matrix", "shape": [n1, n2], "scale": scale_evidence(N),
                          "matrix_sha256": matrix_sha256(N), "eps": q_to_str(eps)}
    if N.values.size <= opt.embed_limit:
        ev["matrix"] = N.rows()
    if min(n1, n2) <= SPECTRAL_EXACT_LIMIT:
        A = _exact_rational_matrix(N)
        G = A.transpose() * A if n2 <= n1 else A * A.transpose()
        k = sp.count_eigenvalues_above(G, eps * eps)
        res = sp.EpsRank(k=k, eps=eps, exact=True, method="descartes_charpoly_gram", verdict=Verdict.PROVED)
        ev.update({"k": k, "exact": True, "method": "gram"})
    else:
        if N.row_den is not None:
            ev["method"] = "none"
            ev.update({"k": 0, "exact": False})
            return Claim(ClaimKind.EPS_RANK, None, Verdict.UNKNOWN,
                         parameters={"eps": q_to_str(eps), **source_params(kernel)}, evidence={**ev, **token_evidence(kernel)},
                         method="none",
                         reason=f"rational matrix larger than {SPECTRAL_EXACT_LIMIT}: no certified method")
        res, Y = sp.eps_rank_projection(np.asarray(N.values), N.exponent, eps)
        ev.update({"k": res.k, "exact": False, "method": "projection"})
        if Y is not None and Y.values.size <= opt.embed_limit:
            ev.update({"witness_y": Y.rows(), "witness_y_exponent": Y.exponent})
    return Claim(ClaimKind.EPS_RANK, None, res.verdict,
                 parameters={"eps": q_to_str(eps), **source_params(kernel)},
                 evidence={**ev, **token_evidence(kernel)}, method=res.method, reason=res.reason,
                 timings={"eps_rank": time.perf_counter() - t0})
