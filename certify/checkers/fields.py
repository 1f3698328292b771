"""The JSON Schema vocabulary the claim kinds are declared in
(:mod:`certify.checkers.kinds`): field types (hashes, exact rationals, integer
rows, token lists), closed objects (every key required unless it is listed as
optional with the reason in its ``$comment``), and the pieces several kinds
share (features, scales, the parameters that bind a kernel to its source).
"""

from __future__ import annotations

from typing import Any, Mapping

HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
RATIONAL = {"type": "string", "pattern": "^-?[0-9]{1,4000}(/[1-9][0-9]{0,3999})?$"}
#: the bounds every integer field of the format has, checked by the schema before any
#: allocation or shift: a power-of-two exponent of float data is within +-4096 (float64's
#: exponents span -1074..1023, a Gram's twice that), a count, size or index below 2^40, an
#: integer that is neither (a seed, an entry) within int64 or, for a denominator, 2^1024
MAX_EXPONENT = 1 << 12
MAX_COUNT = 1 << 40
INT = {"type": "integer", "minimum": -(1 << 63), "maximum": (1 << 63) - 1}
EXPONENT = {"type": "integer", "minimum": -MAX_EXPONENT, "maximum": MAX_EXPONENT,
            "$comment": "a power-of-two exponent: shifted by, so bounded before any shift"}
NAT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
POS = {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}
DENOMINATOR = {"type": "integer", "minimum": 1, "maximum": 1 << 1024}
#: an integer entry of float data written over a common power of two (53 bits of mantissa
#: spread over float64's exponent range): below 2^2304 in absolute value
ENTRY = {"type": "integer", "minimum": -(1 << 2304), "maximum": 1 << 2304}
#: a prime modulus of a modular elimination: word-size
PRIME = {"type": "integer", "minimum": 2, "maximum": (1 << 64) - 1}
BOOL = {"type": "boolean"}
STR = {"type": "string", "minLength": 1}
INDEX_LIST = {"type": "array", "items": NAT}
INT_ROWS = {"type": "array", "items": {"type": "array"},
            "$comment": "rows of integers: the entries and the shape are checked by the kind's "
                        "checker (certify.checkers.common.int_matrix), not here, to keep "
                        "validation linear in the rows"}
BITS = {"type": "string", "pattern": "^[01]+$"}
TOKENS = {"type": "array", "items": BITS, "minItems": 1,
          "$comment": "the explicit token list (bit strings in row order); present only when the "
                      "sentence names the tokens by their hash and they are few enough to embed"}
OBJ = {"type": "object"}
NULL = {"type": "null"}


def nullable(schema: Mapping[str, Any], why: str) -> dict[str, Any]:
    return {"anyOf": [dict(schema), NULL], "$comment": why}


def obj(required: Mapping[str, Any], optional: Mapping[str, Any] | None = None, **extra: Any
         ) -> dict[str, Any]:
    """A closed object: every key of ``required`` must be there, some of ``optional``
    (``if_``/``then_``/``else_`` stand for the keywords ``if``/``then``/``else``)."""
    props = {**required, **(optional or {})}
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "required": sorted(required), "additionalProperties": False}
    out.update({k.rstrip("_"): v for k, v in extra.items()})
    return out


# ---------------------------------------------------------------- shared pieces

FEATURES_SHA256 = obj({"phi_q": HEX64, "phi_k": HEX64, "dtype": STR,
                        "layout": {"const": "row-major little-endian (K, r)"}})
FEATURES = obj({"phi_q": INT_ROWS, "phi_q_exponent": EXPONENT, "phi_k": INT_ROWS,
                "phi_k_exponent": EXPONENT})
SCALE = {"oneOf": [obj({"kind": {"const": "dyadic"}, "exponent": EXPONENT}),
                   obj({"kind": {"const": "row_denominators"},
                         "row_den": {"type": "array", "items": DENOMINATOR}})]}
MATRIX_SHA256 = {"type": "string", "pattern": "^(int64|json):[0-9a-f]{64}$"}
SHAPE = {"type": "array", "items": NAT, "minItems": 2, "maxItems": 2}

#: where a factor-form claim's features come from: exactly one of these
FEATURE_SOURCES = {
    "features": FEATURES,
    "features_claim": {**NAT, "$comment": "the index of the claim of this certificate that embeds "
                                         "the same features (they are embedded once)"},
    "trusted": {"type": "array", "items": STR, "minItems": 1,
                "$comment": "summaries taken as stated: only for data too large to embed, by a size "
                            "verify measures (a named trusted: assumption)"},
}
ONE_FEATURE_SOURCE = {"oneOf": [{"required": [k]} for k in FEATURE_SOURCES]}
FEATURE_OPTIONAL = {
    **FEATURE_SOURCES,
    "trusted_entries": {**NAT, "$comment": "the size of trusted summaries, when there are some"},
    "tokens": TOKENS,
}

# ---------------------------------------------------------------- parameters

#: what binds a kernel claim to its source and token set (certify.checkers.binding)
KERNEL_PARAMS_REQUIRED = {
    "token_set": {"type": "string",
                  "pattern": "^(cube:[0-9]{1,3}|family:.+|vocab:[0-9]{1,12}|tokens|index)$"},
    "source": STR,
    "source_sha256": nullable(HEX64, "null only for a kernel built in memory: a named "
                                      "construction (adapter 'construction'), which "
                                      "--replay-extraction rebuilds, or data embedded in the "
                                      "evidence (adapter and source 'memory'), bound by its hash"),
    "adapter": STR,
    "num_tokens": POS,
}
KERNEL_PARAMS_OPTIONAL = {
    "tokens_sha256": {**HEX64, "$comment": "the hash of an explicit token list: required for the "
                                           "token sets 'tokens' and 'family:NAME', absent for "
                                           "cube:M, vocab:N and index (their tokens are implied)"},
    "stated": {"type": "object",
               "additionalProperties": obj({"value": {"type": ["string", "number", "boolean",
                                                                "null", "array"]},
                                             "from": {"enum": ["config.json",
                                                               "library default, assumed"]}}),
               "$comment": "a third-party head's kernel arguments, each stated by the config or "
                           "assumed by name (--assume-default): present exactly for third-party "
                           "layouts (adapter 'layout:...'; empty when the weights fix the kernel), "
                           "printed by the sentence and re-derived by the extraction replay"},
    "layer": {**NAT, "$comment": "one head of a model: layer and head come together"},
    "head": {**NAT, "$comment": "one head of a model: layer and head come together"},
}
KERNEL_PARAMS_RULES = {
    "dependentRequired": {"layer": ["head"], "head": ["layer"]},
    "allOf": [
        {"if": {"properties": {"token_set": {"pattern": "^(tokens|family:.+)$"}}},
         "then": {"required": ["tokens_sha256"]},
         "else": {"not": {"required": ["tokens_sha256"]}}},
        {"if": {"properties": {"source_sha256": NULL}, "required": ["source_sha256"]},
         "then": {"properties": {"adapter": {"enum": ["construction", "memory"]}}}},
        {"if": {"properties": {"adapter": {"const": "memory"}}, "required": ["adapter"]},
         "then": {"properties": {"source": {"const": "memory"}, "source_sha256": NULL}}},
        {"if": {"properties": {"adapter": {"pattern": "^layout:"}}, "required": ["adapter"]},
         "then": {"required": ["stated", "layer", "head"]},
         "else": {"not": {"required": ["stated"]}}},
        {"if": {"properties": {"adapter": {"enum": ["matrix-file", "memory", "construction"]}},
                "required": ["adapter"]},
         "then": {"properties": {"token_set": {"not": {"pattern": "^vocab:"},
                                               "$comment": "a vocabulary is a model's embedding "
                                                           "rows: a matrix, features or a "
                                                           "construction has none"}}}},
    ],
}


def kernel_params(**more: Any) -> dict[str, Any]:
    return obj({**KERNEL_PARAMS_REQUIRED, **more}, KERNEL_PARAMS_OPTIONAL, **KERNEL_PARAMS_RULES)


# ---------------------------------------------------------------- claim kinds

def claim(kind: str, parameters: Mapping[str, Any], evidence: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **obj({"kind": {"const": kind}, "statement": STR,
                "verdict": {"enum": ["proved", "refuted", "unknown"]},
                "parameters": parameters, "evidence": evidence, "method": {"type": "string"},
                "reason": nullable(STR, "null exactly when the verdict is proved")},
               {"timings": {"type": "object", "additionalProperties": {"type": "number"},
                            "$comment": "seconds per step, for people: absent when none were "
                                        "recorded; never evidence"},
                "info": {**OBJ, "$comment": "diagnostics for people: never evidence, never "
                                            "re-checked, shown as uncertified; absent when there "
                                            "are none"}}),
        "if": {"properties": {"verdict": {"const": "proved"}}},
        "then": {"properties": {"reason": NULL}},
        "else": {"properties": {"reason": STR}},
    }


def forms(*variants: tuple[Mapping[str, Any], Mapping[str, Any]]) -> dict[str, Any]:
    """Evidence as one of several forms, each told apart by a discriminating key."""
    return {"type": "object", "oneOf": [
        {"if": {"properties": disc, "required": sorted(disc)}, "then": body,
         "else": False} if disc else body for disc, body in variants]}
