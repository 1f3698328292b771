"""The ``code_rank`` claim (Lemma 4 / Thm 5): the row-normalized
``B[S, U] = alpha(x_S, x_{U^c})`` over a constant-weight code has rank
``>= ceil(t^2 / ||C||_F^2)`` (per-pair Lambda).
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import numpy as np

from certify.checkers.binding import builtin_code_name
from certify.checkers.common import canonical_sha256
from certify.core.certificate import Claim, ClaimKind
from certify.core.errors import InputError
from certify.core.kernel import Form, Kernel
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict
from certify.rank.evidence import TRUSTED, feature_evidence, features_sha256, source_params, token_evidence
from certify.rank.options import RankOptions
from certify.rank.summary import FactorSummary
from solvers import exact as ex
from solvers import spectral as sp


def code_rank_claim(kernel: Kernel, words: np.ndarray, name: str | None, opt: RankOptions,
                    summary: FactorSummary | None = None) -> Claim:
    from certify.core.codes import as_words
    t0 = time.perf_counter()
    W = as_words(words)
    if kernel.m != W.shape[1]:
        raise InputError(f"the code has {W.shape[1]}-bit words; the kernel reads m = {kernel.m}")
    comp = (1 - W).astype(np.uint8)
    ev: dict[str, Any] = {"words": ["".join(map(str, w)) for w in W.tolist()]}
    if kernel.form is Form.FACTOR:
        fq, _ = kernel.features_at(W)            # phiQ(x_S)
        _, fk = kernel.features_at(comp)         # phiK(x_{U^c})
        dq, dk = ex.dyadic(fq), ex.dyadic(fk)
        prod = ex.exact_products(dq, dk)
        scale = Fraction(2) ** (dq.exponent + dk.exponent)
        B = [[Fraction(int(v)) * scale for v in row] for row in prod]
        ev.update({"query_features": dq.rows(), "query_exponent": dq.exponent,
                   "key_features": dk.rows(), "key_exponent": dk.exponent})
        trusted = list(TRUSTED["code_rank", "factor"])
        located = None                  # where the word rows sit among the embedded features
        if summary is not None and kernel.tokens is not None and kernel.token_set != f"cube:{W.shape[1]}":
            try:
                located = (kernel.token_rows(W), kernel.token_rows(comp))
            except InputError:          # a word or complement is not one of the tokens
                located = None
        if summary is None:             # no pass over the token set: rows taken as stated
            ev["trusted"] = trusted
        else:
            ev["features_sha256"] = features_sha256(summary)
            if kernel.token_set == f"cube:{W.shape[1]}" or located is not None:
                ev.update(feature_evidence(summary, opt.embed_limit, trusted))
            else:
                ev["trusted"] = trusted
            if located is not None and kernel.tokens is not None and "trusted" not in ev:
                ev["tokens"] = ["".join(map(str, t)) for t in kernel.tokens.tolist()]
                ev["word_rows"] = [[int(a), int(b)] for a, b in zip(*located)]
    else:
        rows, cols = kernel.token_rows(W), kernel.token_rows(comp)
        if kernel.rational is not None:
            B = [[kernel.rational[i][j] for j in cols] for i in rows]
        else:
            S = kernel.stored_matrix
            assert S is not None                # a matrix-form kernel stores one or the other
            B = [[Fraction(float(S[i, j])) if S.dtype.kind == "f"
                  else Fraction(int(S[i, j])) for j in cols] for i in rows]
        ev["B"] = [[q_to_str(v) for v in row] for row in B]
        ev["trusted"] = list(TRUSTED["code_rank", "matrix"])
    b = sp.unit_diagonal_rank_bound(B)
    ev.update({"t": b.t, "kept": list(b.kept), "frobenius_sq": q_to_str(b.frobenius_sq),
               "bound": q_to_str(b.bound), "rank_lower": b.rank_lower,
               "min_lambda": None if b.min_lambda is None else q_to_str(b.min_lambda)})
    verdict, reason = Verdict.PROVED, None
    if b.t == 0:
        verdict, reason = Verdict.UNKNOWN, "every diagonal entry alpha(x_S, x_(S^c)) is zero"
    name = builtin_code_name(ev["words"]) or name          # a built-in code has one name
    return Claim(ClaimKind.CODE_RANK, None, verdict,
                 parameters={"code": name, "code_sha256": canonical_sha256(ev["words"]),
                             "num_words": int(len(W)), "M": int(W.shape[1]),
                             **source_params(kernel)},
                 evidence={**ev, **token_evidence(kernel)}, method="Lemma 4 with per-pair Lambda_SU = |B_SS / B_SU| (trace/nuclear/Frobenius)",
                 reason=reason, timings={"code_rank": time.perf_counter() - t0})
