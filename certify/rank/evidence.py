"""Evidence shared by the rank claims: Grams and features (embedded when small,
named as trusted when large), the exact integer matrix of a matrix-form
kernel and its hash, and the parameters that bind a claim to its source.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from certify.checkers.kernel.hashing import array_sha256, rows_sha256
from certify.checkers.kinds import trusted_table
from certify.core.files import sha256_bytes
from certify.core.kernel import Kernel
from certify.rank.options import RankOptions
from solvers import exact as ex

if TYPE_CHECKING:
    from certify.rank.summary import FactorSummary


def int_rows(a) -> list[list[int]]:
    return [[int(v) for v in row] for row in np.asarray(a).tolist()]


def packed_ints(a) -> dict[str, Any]:
    """An integer matrix packed (the format's ``int-le`` form,
    :data:`certify.checkers.fields.PACKED_INTS`): every entry in the fewest bytes of
    little-endian two's complement that hold them all, row-major, in base64."""
    import base64
    arr = np.asarray(a)
    flat = [int(v) for v in arr.ravel().tolist()]
    w = max([1] + [((v if v >= 0 else ~v).bit_length() + 8) // 8 for v in flat])
    raw = b"".join(v.to_bytes(w, "little", signed=True) for v in flat)
    return {"packed": "int-le", "bytes": w, "shape": [int(n) for n in arr.shape],
            "base64": base64.b64encode(raw).decode("ascii")}


def features_sha256(s: FactorSummary) -> dict[str, Any]:
    return {"phi_q": s.sha_q, "phi_k": s.sha_k, "dtype": s.dtype, "layout": "row-major little-endian (K, r)"}


def gram_evidence(s: FactorSummary) -> dict[str, Any]:
    """A factor-form claim's features hashes and stated Grams (packed: a 128 x 128 Gram of
    120-bit entries is 350 kB of text instead of 620 kB, one string instead of 16,384
    integer objects once read)."""
    return {"form": "factor", "num_tokens": s.num_tokens, "r": s.r, "features_sha256": features_sha256(s),
            "gram_q": packed_ints(s.gram_q), "gram_q_exponent": s.eq,
            "gram_k": packed_ints(s.gram_k), "gram_k_exponent": s.ek}


#: what a claim takes as stated when the features are too large to embed, per (kind, form or
#: method): the checker's own table (declared in certify.checkers.kinds, printed as trusted)
TRUSTED = trusted_table()
TRUSTED_GRAMS = TRUSTED["exact_rank", "factor"]


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


#: explicit token lists up to this many tokens are embedded in the evidence (the
#: checker re-derives their count and hash); longer ones are named by their hash
#: and bound by the extraction replay (an assumption until then)
EMBED_TOKENS = 1 << 16


def rank_params(kernel: Kernel, opt: RankOptions) -> dict[str, Any]:
    return {**source_params(kernel), "shape": list(kernel.shape), "form": kernel.form.value,
            "dtype": kernel.provenance.dtype}


def source_params(kernel: Kernel) -> dict[str, Any]:
    """What every claim about a kernel names, so that verify binds it: the source
    (a file with its sha256, or a construction), the token set, the token count,
    and the hash of an explicit token list."""
    out: dict[str, Any] = {"token_set": kernel.token_set, "source": kernel.provenance.source,
           "source_sha256": kernel.provenance.source_sha256, "adapter": kernel.provenance.adapter,
           "num_tokens": int(kernel.shape[0])}
    if kernel.tokens_sha256 is not None and not kernel.token_set.startswith("cube:"):
        out["tokens_sha256"] = kernel.tokens_sha256
    d = kernel.provenance.details or {}
    if isinstance(d.get("layer"), int) and isinstance(d.get("head"), int):
        out["layer"], out["head"] = int(d["layer"]), int(d["head"])   # one head of a model
    if isinstance(d.get("sequences_sha256"), str):
        # the inputs to one layer at the positions of stated sequences: which sequences, by content
        out["sequences"], out["sequences_sha256"] = str(d["sequences"]), d["sequences_sha256"]
    stated = (d.get("layout") or {}).get("stated") if isinstance(d.get("layout"), dict) else None
    if str(out["adapter"]).startswith("layout:"):
        # a third-party head's kernel arguments beyond the weights (config.json's, or assumed
        # defaults): always stated, empty when the weights alone fix the kernel
        out["stated"] = {k: {"value": v["value"], "from": v["from"]} for k, v in sorted((stated or {}).items())}
        if d.get("normalized") is False:
            # no normalizing denominator (fla's do_feature_map_norm=False): the sentence says so, and
            # the replay re-derives it from the config
            out["normalized"] = False
    return out


def token_evidence(kernel: Kernel) -> dict[str, Any]:
    """The explicit token list, when the sentence names it by its hash and it is
    small enough to embed (a cube or a built-in family's tokens are re-derived by
    the checker from the name)."""
    from certify.checkers.families import builtin_kind
    ts = kernel.token_set
    if kernel.tokens is None or ts.startswith("cube:") or ts == "index" \
            or (ts.startswith("family:") and builtin_kind(ts[7:]) is not None) \
            or kernel.num_tokens > EMBED_TOKENS:
        return {}
    return {"tokens": kernel.token_strings()}


def integer_matrix(kernel: Kernel) -> ex.IntMatrix:
    if kernel.stored_matrix is not None:
        return ex.dyadic(kernel.stored_matrix, "kernel matrix")
    assert kernel.rational is not None      # a matrix-form kernel stores one or the other
    return ex.rational_rows([list(r) for r in kernel.rational], "kernel matrix")


def matrix_sha256(N: ex.IntMatrix) -> str:
    """sha256 of the exact kernel matrix, binding its encoding, scale, shape and entries: the
    checker's own definition (:func:`certify.checkers.kernel.hashing.array_sha256` of int64
    values, :func:`~certify.checkers.kernel.hashing.rows_sha256` of Python integers)."""
    if N.values.dtype != object:
        return array_sha256(np.ascontiguousarray(N.values, dtype="<i8"), scale_evidence(N))
    return rows_sha256(N.rows(), scale_evidence(N))


#: domain separation of the Freivalds challenge (certify.checkers.rank.freivalds re-derives it)
FREIVALDS_DOMAIN = "certify-attention/freivalds-rank/2"


def freivalds_challenge(parameters: dict[str, Any], evidence: dict[str, Any]) -> str:
    """The Fiat-Shamir challenge of a Freivalds upper bound: sha256 (hex) of the
    canonical JSON (sorted keys, no spaces) of the domain, the claim's parameters
    and its evidence without ``freivalds`` (the test's output) and ``matrix``
    (which enters through ``matrix_sha256``): every field the producer chooses is
    fixed before its random vectors and primes are drawn."""
    ev = {k: v for k, v in evidence.items() if k not in ("freivalds", "matrix")}
    obj = {"domain": FREIVALDS_DOMAIN, "parameters": parameters, "evidence": ev}
    return sha256_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def scale_evidence(N: ex.IntMatrix) -> dict[str, Any]:
    if N.row_den is not None:
        return {"kind": "row_denominators", "row_den": list(N.row_den)}
    return {"kind": "dyadic", "exponent": N.exponent}
