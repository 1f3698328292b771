"""Evidence shared by the rank claims: Grams and features (embedded when small,
named as trusted when large), the exact integer matrix of a matrix-form
kernel and its hash, and the parameters that bind a claim to its source.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from certify.core.files import sha256_bytes
from certify.core.kernel import Kernel
from certify.rank.options import RankOptions
from certify.rank.summary import FactorSummary
from solvers import exact as ex


def int_rows(a) -> list[list[int]]:
    return [[int(v) for v in row] for row in np.asarray(a).tolist()]


def gram_evidence(s: FactorSummary) -> dict[str, Any]:
    return {"form": "factor", "num_tokens": s.num_tokens, "r": s.r,
            "features_sha256": {"phi_q": s.sha_q, "phi_k": s.sha_k, "dtype": s.dtype,
                                "layout": "row-major little-endian (K, r)"},
            "gram_q": int_rows(s.gram_q), "gram_q_exponent": s.eq,
            "gram_k": int_rows(s.gram_k), "gram_k_exponent": s.ek}


#: what a claim takes as stated when the features are too large to embed
#: (certify.checkers.rank documents and prints these as trusted)
TRUSTED_GRAMS = ["gram_q", "gram_k", "num_tokens"]


def feature_evidence(s: FactorSummary, embed_limit: int, trusted: list[str]) -> dict[str, Any]:
    """The features themselves when small enough, else the list of fields the
    checker must take as stated (identified by ``features_sha256``)."""
    if s.phi_q is None or s.num_tokens * s.r > embed_limit:
        return {"trusted": list(trusted), "trusted_entries": s.num_tokens * s.r}
    dq, dk = ex.dyadic(s.phi_q), ex.dyadic(s.phi_k)
    return {"features": {"phi_q": dq.rows(), "phi_q_exponent": dq.exponent,
                         "phi_k": dk.rows(), "phi_k_exponent": dk.exponent}}


def attempts_info(res: ex.ExactRank) -> dict[str, Any]:
    return {"prime_attempts": [[a.prime, a.rank_mod_p] for a in res.attempts], **res.details}


def rank_params(kernel: Kernel, opt: RankOptions) -> dict[str, Any]:
    return {"token_set": kernel.token_set, "shape": list(kernel.shape), "form": kernel.form.value,
            "source": kernel.provenance.source,
            "source_sha256": kernel.provenance.source_sha256, "adapter": kernel.provenance.adapter,
            "dtype": kernel.provenance.dtype}


def source_params(kernel: Kernel) -> dict[str, Any]:
    """What every claim about a kernel names, so that verify binds it to its source."""
    return {"token_set": kernel.token_set, "source": kernel.provenance.source,
            "source_sha256": kernel.provenance.source_sha256, "adapter": kernel.provenance.adapter}


def integer_matrix(kernel: Kernel) -> ex.IntMatrix:
    if kernel.matrix is not None:
        return ex.dyadic(kernel.matrix, "kernel matrix")
    return ex.rational_rows([list(r) for r in kernel.rational], "kernel matrix")


def matrix_sha256(N: ex.IntMatrix) -> str:
    """sha256 of the exact kernel matrix: the canonical JSON of its scale and a
    newline, then the integer rows as int64 little-endian bytes when they fit,
    else their compact JSON (the checker recomputes it the same way)."""
    head = (json.dumps(scale_evidence(N), sort_keys=True, separators=(",", ":")) + "\n").encode()
    if N.values.dtype != object:
        return "int64:" + sha256_bytes(head + np.ascontiguousarray(N.values, dtype="<i8").tobytes())
    return "json:" + sha256_bytes(head + json.dumps(N.rows(), separators=(",", ":")).encode())


def scale_evidence(N: ex.IntMatrix) -> dict[str, Any]:
    if N.row_den is not None:
        return {"kind": "row_denominators", "row_den": list(N.row_den)}
    return {"kind": "dyadic", "exponent": N.exponent}
