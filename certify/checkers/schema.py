"""The certificate format as a closed JSON Schema (draft 2020-12), and its validation.

``certify verify`` validates every certificate against the schema of its version
before any semantic check: a missing field, an unknown field, a value of the
wrong type, range or pattern is a failure of the claim it sits in (exit 1, the
JSON path named), never a field the checker quietly skips. What a field means is
then re-derived by the claim kind's checker; the schema only guarantees that
everything the checker relies on is *there* and has its shape.

Every field is required unless its definition says why it may be absent (the
``$comment`` beside it). One definition per claim kind, and per evidence form
(``form`` / ``method`` / ``type`` / the bound's name). The key lists come from the
checkers themselves (:mod:`certify.checkers.bounds`, ``.transcript``,
``.rank.nonnegative``), so the schema and the checkers cannot drift apart; the
published copy, ``certificate.schema.json`` beside this module, is this
dictionary written out (``certify verify --schema`` prints it; a test keeps the
two equal).

Deeply nested objects whose every key the kind's checker lists and closes
itself (a feasibility witness or derivation, an audited head's tables, a
transcript model) are typed as objects here; their keys are checked, closed,
by that checker (:func:`certify.checkers.common.keys`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

#: certificate versions this checker reads, newest last
VERSIONS = ("certify-attention/certificate/2",)
#: the statement renderer each version fixes (certify.checkers.statements)
RENDERER_OF = {"certify-attention/certificate/2": "certify-attention/statements/2"}
#: versions no longer read, with why: their rules let sentences say more than was checked
#: (a producer-chosen Freivalds error, a renderer that printed only part of a claim, a
#: third-party kernel without its stated arguments), so no branch of this checker keeps them
RETIRED = {"certify-attention/certificate/1":
           "its rules are retired (a Freivalds error chosen by the producer, a renderer that "
           "printed part of a claim, third-party kernels without stated arguments)"}
SCHEMA_FILE = Path(__file__).with_name("certificate.schema.json")

HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
RATIONAL = {"type": "string", "pattern": "^-?[0-9]{1,4000}(/[1-9][0-9]{0,3999})?$"}
INT = {"type": "integer"}
NAT = {"type": "integer", "minimum": 0}
POS = {"type": "integer", "minimum": 1}
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


def _nullable(schema: Mapping[str, Any], why: str) -> dict[str, Any]:
    return {"anyOf": [dict(schema), NULL], "$comment": why}


def _obj(required: Mapping[str, Any], optional: Mapping[str, Any] | None = None, **extra: Any
         ) -> dict[str, Any]:
    """A closed object: every key of ``required`` must be there, some of ``optional``
    (``if_``/``then_``/``else_`` stand for the keywords ``if``/``then``/``else``)."""
    props = {**required, **(optional or {})}
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "required": sorted(required), "additionalProperties": False}
    out.update({k.rstrip("_"): v for k, v in extra.items()})
    return out


# ---------------------------------------------------------------- shared pieces

FEATURES_SHA256 = _obj({"phi_q": HEX64, "phi_k": HEX64, "dtype": STR,
                        "layout": {"const": "row-major little-endian (K, r)"}})
FEATURES = _obj({"phi_q": INT_ROWS, "phi_q_exponent": INT, "phi_k": INT_ROWS, "phi_k_exponent": INT})
SCALE = {"oneOf": [_obj({"kind": {"const": "dyadic"}, "exponent": INT}),
                   _obj({"kind": {"const": "row_denominators"},
                         "row_den": {"type": "array", "items": POS}})]}
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
    "source_sha256": _nullable(HEX64, "null only for a kernel built in memory: a named "
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
               "additionalProperties": _obj({"value": {"type": ["string", "number", "boolean",
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


def _kernel_params(**more: Any) -> dict[str, Any]:
    return _obj({**KERNEL_PARAMS_REQUIRED, **more}, KERNEL_PARAMS_OPTIONAL, **KERNEL_PARAMS_RULES)


# ---------------------------------------------------------------- claim kinds

def _claim(kind: str, parameters: Mapping[str, Any], evidence: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **_obj({"kind": {"const": kind}, "statement": STR,
                "verdict": {"enum": ["proved", "refuted", "unknown"]},
                "parameters": parameters, "evidence": evidence, "method": {"type": "string"},
                "reason": _nullable(STR, "null exactly when the verdict is proved")},
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


def _forms(*variants: tuple[Mapping[str, Any], Mapping[str, Any]]) -> dict[str, Any]:
    """Evidence as one of several forms, each told apart by a discriminating key."""
    return {"type": "object", "oneOf": [
        {"if": {"properties": disc, "required": sorted(disc)}, "then": body,
         "else": False} if disc else body for disc, body in variants]}


def _exact_rank() -> dict[str, Any]:
    gram = {"num_tokens": POS, "r": POS, "features_sha256": FEATURES_SHA256, "gram_q": INT_ROWS,
            "gram_q_exponent": INT, "gram_k": INT_ROWS, "gram_k_exponent": INT}
    minor = {"prime": {"type": "integer", "minimum": 2}, "minor_rows": INDEX_LIST,
             "minor_cols": INDEX_LIST, "rank_lower": NAT, "rank_upper": NAT}
    factor = _obj({"form": {"const": "factor"}, **gram, **minor,
                   "null_basis": _nullable(INT_ROWS, "null when the witness is trivial"),
                   "null_prime": _nullable({"type": "integer", "minimum": 2},
                                           "null when the witness is trivial"),
                   "null_minor_rows": INDEX_LIST, "null_minor_cols": INDEX_LIST,
                   "upper_witness": {"enum": ["null_space", "trivial"]}},
                  FEATURE_OPTIONAL, **ONE_FEATURE_SOURCE)
    freivalds = _obj({"challenge": HEX64,
                      "vector_bits": {"type": "integer", "minimum": 1, "maximum": 32},
                      "vectors": {"type": "integer", "minimum": 1, "maximum": 4096},
                      "primes": {"type": "array", "minItems": 1, "maxItems": 64,
                                 "items": {"type": "integer", "minimum": 1 << 61,
                                           "maximum": (1 << 62) - 1}}})
    matrix = _obj({"form": {"const": "matrix"}, "shape": SHAPE, "scale": SCALE,
                   "matrix_sha256": MATRIX_SHA256, **minor,
                   "upper_witness": {"enum": ["column_span", "trivial", "freivalds"]}},
                  {"matrix": {**INT_ROWS, "$comment": "absent only when the matrix is re-read from "
                                                      "its present source file"},
                   "tokens": TOKENS,
                   "freivalds": {**freivalds, "$comment": "present exactly when upper_witness is "
                                                          "'freivalds': the challenge (the claim's "
                                                          "content hash), the plan and the primes"}},
                  allOf=[{"if": {"properties": {"upper_witness": {"const": "freivalds"}}},
                          "then": {"required": ["freivalds"]},
                          "else": {"not": {"required": ["freivalds"]}}}])
    params = _kernel_params(shape=SHAPE, form={"enum": ["factor", "matrix"]}, dtype=STR)
    params["properties"].update(
        upper_bound={"const": "freivalds", "$comment": "present exactly with a Freivalds upper "
                                                       "bound (matrix form), which the sentence "
                                                       "names with its error probability"},
        error_log2={"type": "integer", "minimum": 1,
                    "$comment": "the error probability is <= 2^-error_log2; with upper_bound"})
    params["dependentRequired"] = {**params["dependentRequired"], "upper_bound": ["error_log2"],
                                   "error_log2": ["upper_bound"]}
    return _claim("exact_rank", params,
                  _forms(({"form": {"const": "factor"}}, factor),
                         ({"form": {"const": "matrix"}}, matrix)))


def _eps_rank() -> dict[str, Any]:
    gram = {"num_tokens": POS, "r": POS, "features_sha256": FEATURES_SHA256, "gram_q": INT_ROWS,
            "gram_q_exponent": INT, "gram_k": INT_ROWS, "gram_k_exponent": INT}
    common = {"eps": RATIONAL, "k": NAT, "exact": BOOL}
    factor = _obj({"form": {"const": "factor"}, **gram, **common,
                   "sigma_sq_enclosures": {"type": "array"}}, FEATURE_OPTIONAL, **ONE_FEATURE_SOURCE)
    mat = {"form": {"const": "matrix"}, "shape": SHAPE, "scale": SCALE, "matrix_sha256": MATRIX_SHA256,
           **common}
    embedded = {"matrix": {**INT_ROWS, "$comment": "absent only when the matrix is re-read from its "
                                                   "present source file"}, "tokens": TOKENS}
    gram_m = _obj({**mat, "method": {"const": "gram"}}, embedded)
    proj = _obj({**mat, "method": {"const": "projection"}},
                {**embedded, "witness_y": {**INT_ROWS, "$comment": "present exactly when k > 0"},
                 "witness_y_exponent": {**INT, "$comment": "present exactly when k > 0"}},
                dependentRequired={"witness_y": ["witness_y_exponent"],
                                   "witness_y_exponent": ["witness_y"]})
    none = _obj({**mat, "method": {"const": "none"}}, embedded)
    return _claim("eps_rank", _kernel_params(eps=RATIONAL),
                  _forms(({"form": {"const": "factor"}}, factor),
                         ({"form": {"const": "matrix"}, "method": {"const": "gram"}}, gram_m),
                         ({"form": {"const": "matrix"}, "method": {"const": "projection"}}, proj),
                         ({"form": {"const": "matrix"}, "method": {"const": "none"}}, none)))


def _code_rank() -> dict[str, Any]:
    lemma = {"words": {"type": "array", "items": BITS, "minItems": 1}, "t": NAT,
             "kept": INDEX_LIST, "frobenius_sq": RATIONAL, "bound": RATIONAL, "rank_lower": NAT,
             "min_lambda": _nullable(RATIONAL, "null when no pair of kept words bounds |C_ij|")}
    rows = {"query_features": INT_ROWS, "query_exponent": INT, "key_features": INT_ROWS,
            "key_exponent": INT}
    factor = _obj({**lemma, **rows},
                  if_={"required": ["trusted"]}, else_={"required": ["features_sha256"]},
                  optional={"features_sha256": {**FEATURES_SHA256, "$comment": "absent when the features "
                                                                      "are taken as stated"},
                   **FEATURE_OPTIONAL,
                   "word_rows": {"type": "array", "items": {**INDEX_LIST, "minItems": 2, "maxItems": 2},
                                 "$comment": "each word's (query row, key row) among the kernel's "
                                             "tokens, when it has more tokens than words"}})
    matrix = _obj({**lemma, "B": {"type": "array", "items": {"type": "array"}},
                   "trusted": {"type": "array", "items": STR}},
                  {"trusted_entries": NAT, "tokens": TOKENS})
    params = _obj({**KERNEL_PARAMS_REQUIRED, "code": STR, "code_sha256": HEX64, "num_words": POS,
                   "M": POS}, KERNEL_PARAMS_OPTIONAL, **KERNEL_PARAMS_RULES)
    return _claim("code_rank", params,
                  {"type": "object", "oneOf": [
                      {"if": {"required": ["B"]}, "then": matrix, "else": False},
                      {"if": {"required": ["B"]}, "then": False, "else": factor}]})


def _nonnegative() -> dict[str, Any]:
    from certify.checkers.rank.nonnegative import _QUADRATIC
    matrix = _obj({"form": {"const": "matrix"}, "method": {"const": "entries"}, "shape": SHAPE,
                   "scale": SCALE, "matrix_sha256": MATRIX_SHA256,
                   "argmin": {**INDEX_LIST, "minItems": 2, "maxItems": 2},
                   "min_sign": {"enum": [-1, 0, 1]}},
                  {"matrix": {**INT_ROWS, "$comment": "absent only when the matrix is re-read from "
                                                      "its present source file"}, "tokens": TOKENS})
    base = {"form": {"const": "factor"}, "features_sha256": FEATURES_SHA256}
    methods = {
        "features_nonnegative": {"min_phi_q": RATIONAL, "min_phi_k": RATIONAL},
        "all_products": {"num_checked": NAT},
        "counterexample": {"pair": {**INDEX_LIST, "minItems": 2, "maxItems": 2}, "value": RATIONAL,
                           "phi_q_row": {"type": "array", "items": INT}, "phi_q_exponent": INT,
                           "phi_k_row": {"type": "array", "items": INT}, "phi_k_exponent": INT},
        "quadratic_kernel": {k: {} for k in _QUADRATIC},
        "key_box": {"key_lo": {"type": "array"}, "key_hi": {"type": "array"},
                    "min_query_bound": RATIONAL},
    }
    variants: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = [
        ({"form": {"const": "matrix"}}, matrix),
        ({"form": {"const": "factor"}, "method": {"const": "none"}},
         _obj({**base, "method": {"const": "none"}}, {"tokens": TOKENS}))]
    for name, fields in methods.items():
        variants.append(({"form": {"const": "factor"}, "method": {"const": name}},
                         _obj({**base, "method": {"const": name}, **fields}, FEATURE_OPTIONAL,
                              **ONE_FEATURE_SOURCE)))
    return _claim("nonnegative", _kernel_params(), _forms(*variants))


def _audit(kind: str) -> dict[str, Any]:
    req = {"family": STR, "family_sha256": HEX64, "head_sha256": HEX64, "rank": POS, "eps": RATIONAL}
    if kind == "gap_domination":
        req["n"] = {"type": "integer", "minimum": 3}
    why = ("a head read from weights names its file, the file's sha256, the adapter and the "
           "weights' canonical hash, all four; a head built in memory names none (its tables' "
           "hash binds it)")
    params = _obj(req, {"model": {**STR, "$comment": "the weights file's own name"},
                        "source": {**STR, "$comment": why}, "source_sha256": {**HEX64, "$comment": why},
                        "adapter": {**STR, "$comment": why}, "weights_sha256": {**HEX64, "$comment": why}},
                  dependentRequired={k: sorted({"source", "source_sha256", "adapter",
                                                "weights_sha256"} - {k})
                                     for k in ("source", "source_sha256", "adapter", "weights_sha256",
                                               "model")})
    if kind == "correctness":
        ev = _obj({"family": OBJ, "head": OBJ, "scored_positions": NAT, "failures": NAT,
                   "max_error": RATIONAL,
                   "counterexample": _nullable(OBJ, "null exactly when no input fails")})
    else:
        ev = _obj({"family": OBJ, "head": OBJ, "jumps": NAT, "applicable": NAT,
                   "violated_jumps": {"type": "array"},
                   "violation": _nullable(OBJ, "null exactly when no jump violates the bound")})
    return _claim(kind, params, ev)


def _feasibility(kind: str) -> dict[str, Any]:
    params = _obj({"rank": POS, "features": {"enum": ["real", "nonnegative"]},
                   "class": {"enum": ["paper", "used-pairs"]}, "scope": {"enum": ["family", "cube"]},
                   "family": STR, "family_sha256": HEX64, "error": RATIONAL})
    if kind == "feasible":
        ev = {"type": "object", "oneOf": [
            _obj({"family": OBJ, "witness": OBJ, "margin": RATIONAL}),
            {**_obj({}), "$comment": "empty only for an unknown claim (nothing found)"}]}
    else:
        ev = _obj({"family": OBJ, "derivation": OBJ})
    return _claim(kind, params, ev)


def _transcript() -> dict[str, Any]:
    from certify.checkers.transcript import _COMMON, _PARAM_KEYS, _TYPE_KEYS
    params = _obj({**{k: {} for k in _PARAM_KEYS}, "weights_sha256": HEX64})
    for k in ("M", "s", "h", "q", "layers", "heads", "rank", "dv"):
        params["properties"][k] = POS
    params["properties"]["feature_map"] = STR
    params["properties"]["quantizer"] = OBJ
    variants = []
    for typ, fields in _TYPE_KEYS.items():
        req = {**{k: {} for k in _COMMON}, **{k: {} for k in fields}}
        req.update(type={"const": typ}, capacity=OBJ, family=OBJ, model=OBJ)
        opt: dict[str, Any] = {}
        if typ == "collision":
            opt = {"query_outputs": {"type": "array", "$comment": "an exact collision records both"},
                   "failing": {**OBJ, "$comment": "an exact collision records both"}}
        if typ == "all":
            opt = {"assumptions": {"type": "array", "items": STR,
                                   "$comment": "the step the checker cannot replay, when named"}}
        body = _obj(req, opt, **({"dependentRequired": {"query_outputs": ["failing"],
                                                        "failing": ["query_outputs"]}}
                                 if typ == "collision" else {}))
        variants.append(({"type": {"const": typ}}, body))
    return _claim("transcript", params, _forms(*variants))


def _bound() -> dict[str, Any]:
    from certify.checkers.bounds import PARAMETERS
    variants = []
    for name, keys in PARAMETERS.items():
        params = _obj({"bound": {"const": name}, **{k: {} for k in keys}})
        variants.append({"properties": {"parameters": params}})
    claim = _claim("bound", {"type": "object", "required": ["bound"]},
                   {**OBJ, "$comment": "every field is re-derived from the parameters and compared "
                                       "by the bound's checker, which refuses missing and unknown "
                                       "fields"})
    claim["allOf"] = [{"oneOf": variants}]
    return claim


def build() -> dict[str, Any]:
    """The certificate schema (version ``certify-attention/certificate/2``)."""
    kinds = {"bound": _bound(), "exact_rank": _exact_rank(), "eps_rank": _eps_rank(),
             "code_rank": _code_rank(), "nonnegative": _nonnegative(),
             "correctness": _audit("correctness"), "gap_domination": _audit("gap_domination"),
             "feasible": _feasibility("feasible"), "infeasible": _feasibility("infeasible"),
             "transcript": _transcript()}
    claim = {"type": "object", "required": ["kind"],
             "properties": {"kind": {"enum": sorted(kinds)}},
             "allOf": [{"if": {"properties": {"kind": {"const": k}}},
                        "then": {"$ref": f"#/$defs/{k}"}} for k in sorted(kinds)]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://certify-attention.invalid/schema/certificate-2.json",
        "title": "certify-attention certificate, version 2",
        "$comment": __doc__.split("\n\n")[1].replace("\n", " "),
        **_obj({
            "schema": {"const": VERSIONS[0]},
            "renderer": {"const": RENDERER_OF[VERSIONS[0]],
                         "$comment": "fixed by the version: the renderer that prints every field "
                                     "of every claim shape of this version"},
            "created": {"type": "string"},
            "command": {"type": "array", "items": {"type": "string"}},
            "inputs": {"type": "object", "additionalProperties": HEX64,
                       "$comment": "every file and built-in family a claim names, by sha256"},
            "seeds": {"type": "object", "additionalProperties": INT},
            "environment": OBJ,
            "claims": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/claim"}},
        }),
        "$defs": {"claim": claim, **kinds},
    }


@lru_cache(maxsize=1)
def published() -> dict[str, Any]:
    """The published schema file (shipped in the package)."""
    return json.loads(SCHEMA_FILE.read_text())


@lru_cache(maxsize=1)
def _validator():
    import jsonschema
    schema = published()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@lru_cache(maxsize=1)
def _claim_validator():
    import jsonschema
    schema = published()
    return jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/claim"})


def _path(parts) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _leaves(error) -> Iterator[Any]:
    """The most specific errors under a combinator (oneOf/anyOf/if-then)."""
    if error.context:
        best = max(len(e.absolute_path) for e in error.context)
        for e in error.context:
            if len(e.absolute_path) == best:
                yield from _leaves(e)
    else:
        yield error


def claim_violations(claim: Any, index: int) -> list[str]:
    """The schema violations of one claim, at position ``index`` of its certificate
    (the same messages :func:`violations` gives it, without validating the rest)."""
    return _messages(_claim_validator().iter_errors(claim), ["claims", index]).get(index, [])


def violations(cert: Mapping[str, Any]) -> dict[int | None, list[str]]:
    """Schema violations, by claim index (``None``: outside any claim). Each names
    its JSON path, e.g. ``$.claims[3].parameters: 'source_sha256' is a required property``."""
    return _messages(_validator().iter_errors(cert), [])


def _messages(errors, prefix: list) -> dict[int | None, list[str]]:
    out: dict[int | None, list[str]] = {}
    for err in errors:
        leaves = list(_leaves(err))
        # a form that does not apply says "False schema does not allow": noise beside the
        # applying form's own errors
        leaves = [e for e in leaves if e.validator is not None] or leaves
        for leaf in leaves:
            parts = prefix + list(leaf.absolute_path)
            idx = parts[1] if len(parts) >= 2 and parts[0] == "claims" and isinstance(parts[1], int) \
                else None
            msg = " ".join(str(leaf.message).split())
            if len(msg) > 240:
                msg = msg[:240] + "..."
            out.setdefault(idx, []).append(f"schema: {_path(parts)}: {msg}")
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def text() -> str:
    """The schema as published (``certify verify --schema``)."""
    return json.dumps(build(), indent=1) + "\n"
