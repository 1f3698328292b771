"""Every claim kind, declared once.

A :class:`Kind` says what a claim of that kind is: the JSON Schema of its
parameters and evidence (every field required, or optional with the reason in
its ``$comment``; one variant per evidence form), the fields its sentence
prints, the fields that may be taken as stated when the data is too large to
embed, how its referent is bound, and the checker module that re-derives its
verdict. Everything that used to be kept by hand in several lists is generated
from here: the published schema (:func:`certify.checkers.schema.build`, written
by ``make schema``), the renderer's field table
(:data:`certify.checkers.statements.FIELDS`), the checker table of
:mod:`certify.checkers.verify`, the trusted table of the rank checkers, and
the key lists the checkers close their objects with (bound parameters,
transcript evidence, quadratic-kernel summaries).

Adding a field to a kind touches its declaration here, its check and its
sentence, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from certify.checkers.fields import (
    BITS,
    BOOL,
    ENTRY,
    EXPONENT,
    FEATURE_OPTIONAL,
    FEATURES_SHA256,
    HEX64,
    INDEX_LIST,
    INT_ROWS,
    KERNEL_PARAMS_OPTIONAL,
    KERNEL_PARAMS_REQUIRED,
    KERNEL_PARAMS_RULES,
    MATRIX_SHA256,
    NAT,
    OBJ,
    ONE_FEATURE_SOURCE,
    POS,
    PRIME,
    RATIONAL,
    SCALE,
    SHAPE,
    STR,
    TOKENS,
    claim,
    forms,
    kernel_params,
    nullable,
    obj,
)

# ---------------------------------------------------------------- key lists of nested evidence

#: bound name -> its parameters (besides ``bound``); exactly these are allowed
BOUND_PARAMETERS: dict[str, tuple[str, ...]] = {
    "lemma3": ("n", "eps", "d"), "lemma4": ("t", "lam", "strict"),
    "lemma4_per_pair": ("t", "Lambda", "strict"), "thm5": ("code_size", "delta", "g", "n", "eps"),
    "thm6": ("m", "extended"), "cor7": ("m", "n"), "eq8": ("L", "H", "r", "dv", "p", "s", "q"),
    "prop10": ("m",),
}

#: a transcript claim's parameters, the evidence every type has, and each type's own
TRANSCRIPT_PARAMETERS = ("M", "s", "h", "q", "layers", "heads", "rank", "dv", "feature_map", "quantizer")
TRANSCRIPT_COMMON = ("capacity", "type", "family", "model")
TRANSCRIPT_EVIDENCE: dict[str, tuple[str, ...]] = {
    "none": (),
    "all": ("exact_checked",),
    "error": ("kappa", "index", "input", "position", "target", "output"),
    "collision": ("kappa_a", "kappa_b", "index_a", "index_b", "input_a", "input_b", "targets_a",
                  "targets_b", "transcript"),
}

#: the quadratic-kernel lemma's evidence (nonnegative, method quadratic_kernel)
NONNEGATIVE_SUMMARIES = ("min_const", "max_linear_sq", "max_quadratic_sq", "max_residual_sq")
NONNEGATIVE_QUADRATIC = ("r", "constant", "linear", "quadratic", "g_diag", "g_off") + tuple(
    f"{k}_{side}" for k in NONNEGATIVE_SUMMARIES for side in ("q", "k"))

# ---------------------------------------------------------------- parameters and evidence

def _exact_rank() -> dict[str, Any]:
    gram = {"num_tokens": POS, "r": POS, "features_sha256": FEATURES_SHA256, "gram_q": INT_ROWS,
            "gram_q_exponent": EXPONENT, "gram_k": INT_ROWS, "gram_k_exponent": EXPONENT}
    minor = {"prime": PRIME, "minor_rows": INDEX_LIST,
             "minor_cols": INDEX_LIST, "rank_lower": NAT, "rank_upper": NAT}
    factor = obj({"form": {"const": "factor"}, **gram, **minor,
                   "null_basis": nullable(INT_ROWS, "null when the witness is trivial"),
                   "null_prime": nullable(PRIME,
                                           "null when the witness is trivial"),
                   "null_minor_rows": INDEX_LIST, "null_minor_cols": INDEX_LIST,
                   "upper_witness": {"enum": ["null_space", "trivial"]}},
                  FEATURE_OPTIONAL, **ONE_FEATURE_SOURCE)
    freivalds = obj({"challenge": HEX64,
                      "vector_bits": {"type": "integer", "minimum": 1, "maximum": 32},
                      "vectors": {"type": "integer", "minimum": 1, "maximum": 4096},
                      "primes": {"type": "array", "minItems": 1, "maxItems": 64,
                                 "items": {"type": "integer", "minimum": 1 << 61,
                                           "maximum": (1 << 62) - 1}}})
    matrix = obj({"form": {"const": "matrix"}, "shape": SHAPE, "scale": SCALE,
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
    params = kernel_params(shape=SHAPE, form={"enum": ["factor", "matrix"]}, dtype=STR)
    params["properties"].update(
        upper_bound={"const": "freivalds", "$comment": "present exactly with a Freivalds upper "
                                                       "bound (matrix form), which the sentence "
                                                       "names with its error probability"},
        error_log2={"type": "integer", "minimum": 1, "maximum": 1 << 16,
                    "$comment": "the error probability is <= 2^-error_log2; with upper_bound"})
    params["dependentRequired"] = {**params["dependentRequired"], "upper_bound": ["error_log2"],
                                   "error_log2": ["upper_bound"]}
    return claim("exact_rank", params,
                  forms(({"form": {"const": "factor"}}, factor),
                         ({"form": {"const": "matrix"}}, matrix)))


def _eps_rank() -> dict[str, Any]:
    gram = {"num_tokens": POS, "r": POS, "features_sha256": FEATURES_SHA256, "gram_q": INT_ROWS,
            "gram_q_exponent": EXPONENT, "gram_k": INT_ROWS, "gram_k_exponent": EXPONENT}
    common = {"eps": RATIONAL, "k": NAT, "exact": BOOL}
    factor = obj({"form": {"const": "factor"}, **gram, **common,
                   "sigma_sq_enclosures": {"type": "array"}}, FEATURE_OPTIONAL, **ONE_FEATURE_SOURCE)
    mat = {"form": {"const": "matrix"}, "shape": SHAPE, "scale": SCALE, "matrix_sha256": MATRIX_SHA256,
           **common}
    embedded = {"matrix": {**INT_ROWS, "$comment": "absent only when the matrix is re-read from its "
                                                   "present source file"}, "tokens": TOKENS}
    gram_m = obj({**mat, "method": {"const": "gram"}}, embedded)
    proj = obj({**mat, "method": {"const": "projection"}},
                {**embedded, "witness_y": {**INT_ROWS, "$comment": "present exactly when k > 0"},
                 "witness_y_exponent": {**EXPONENT, "$comment": "present exactly when k > 0"}},
                dependentRequired={"witness_y": ["witness_y_exponent"],
                                   "witness_y_exponent": ["witness_y"]})
    none = obj({**mat, "method": {"const": "none"}}, embedded)
    return claim("eps_rank", kernel_params(eps=RATIONAL),
                  forms(({"form": {"const": "factor"}}, factor),
                         ({"form": {"const": "matrix"}, "method": {"const": "gram"}}, gram_m),
                         ({"form": {"const": "matrix"}, "method": {"const": "projection"}}, proj),
                         ({"form": {"const": "matrix"}, "method": {"const": "none"}}, none)))


def _code_rank() -> dict[str, Any]:
    lemma = {"words": {"type": "array", "items": BITS, "minItems": 1}, "t": NAT,
             "kept": INDEX_LIST, "frobenius_sq": RATIONAL, "bound": RATIONAL, "rank_lower": NAT,
             "min_lambda": nullable(RATIONAL, "null when no pair of kept words bounds |C_ij|")}
    rows = {"query_features": INT_ROWS, "query_exponent": EXPONENT, "key_features": INT_ROWS,
            "key_exponent": EXPONENT}
    factor = obj({**lemma, **rows},
                  if_={"required": ["trusted"]}, else_={"required": ["features_sha256"]},
                  optional={"features_sha256": {**FEATURES_SHA256, "$comment": "absent when the features "
                                                                      "are taken as stated"},
                   **FEATURE_OPTIONAL,
                   "word_rows": {"type": "array", "items": {**INDEX_LIST, "minItems": 2, "maxItems": 2},
                                 "$comment": "each word's (query row, key row) among the kernel's "
                                             "tokens, when it has more tokens than words"}})
    matrix = obj({**lemma, "B": {"type": "array", "items": {"type": "array"}},
                   "trusted": {"type": "array", "items": STR}},
                  {"trusted_entries": NAT, "tokens": TOKENS})
    params = obj({**KERNEL_PARAMS_REQUIRED, "code": STR, "code_sha256": HEX64, "num_words": POS,
                   "M": POS}, KERNEL_PARAMS_OPTIONAL, **KERNEL_PARAMS_RULES)
    return claim("code_rank", params,
                  {"type": "object", "oneOf": [
                      {"if": {"required": ["B"]}, "then": matrix, "else": False},
                      {"if": {"required": ["B"]}, "then": False, "else": factor}]})


def _nonnegative() -> dict[str, Any]:
    matrix = obj({"form": {"const": "matrix"}, "method": {"const": "entries"}, "shape": SHAPE,
                   "scale": SCALE, "matrix_sha256": MATRIX_SHA256,
                   "argmin": {**INDEX_LIST, "minItems": 2, "maxItems": 2},
                   "min_sign": {"enum": [-1, 0, 1]}},
                  {"matrix": {**INT_ROWS, "$comment": "absent only when the matrix is re-read from "
                                                      "its present source file"}, "tokens": TOKENS})
    base = {"form": {"const": "factor"}, "features_sha256": FEATURES_SHA256}
    methods: dict[str, dict[str, Any]] = {
        "features_nonnegative": {"min_phi_q": RATIONAL, "min_phi_k": RATIONAL},
        "all_products": {"num_checked": NAT},
        "counterexample": {"pair": {**INDEX_LIST, "minItems": 2, "maxItems": 2}, "value": RATIONAL,
                           "phi_q_row": {"type": "array", "items": ENTRY}, "phi_q_exponent": EXPONENT,
                           "phi_k_row": {"type": "array", "items": ENTRY}, "phi_k_exponent": EXPONENT},
        "quadratic_kernel": {k: {} for k in NONNEGATIVE_QUADRATIC},
        "key_box": {"key_lo": {"type": "array"}, "key_hi": {"type": "array"},
                    "min_query_bound": RATIONAL},
    }
    variants: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = [
        ({"form": {"const": "matrix"}}, matrix),
        ({"form": {"const": "factor"}, "method": {"const": "none"}},
         obj({**base, "method": {"const": "none"}}, {"tokens": TOKENS}))]
    for name, fields in methods.items():
        variants.append(({"form": {"const": "factor"}, "method": {"const": name}},
                         obj({**base, "method": {"const": name}, **fields}, FEATURE_OPTIONAL,
                              **ONE_FEATURE_SOURCE)))
    return claim("nonnegative", kernel_params(), forms(*variants))


def _audit(kind: str) -> dict[str, Any]:
    req = {"family": STR, "family_sha256": HEX64, "head_sha256": HEX64, "rank": POS, "eps": RATIONAL}
    if kind == "gap_domination":
        req["n"] = {**POS, "minimum": 3}
    why = ("a head read from weights names its file, the file's sha256, the adapter and the "
           "weights' canonical hash, all four; a head built in memory names none (its tables' "
           "hash binds it)")
    params = obj(req, {"model": {**STR, "$comment": "the weights file's own name"},
                        "source": {**STR, "$comment": why}, "source_sha256": {**HEX64, "$comment": why},
                        "adapter": {**STR, "$comment": why}, "weights_sha256": {**HEX64, "$comment": why}},
                  dependentRequired={k: sorted({"source", "source_sha256", "adapter",
                                                "weights_sha256"} - {k})
                                     for k in ("source", "source_sha256", "adapter", "weights_sha256",
                                               "model")})
    if kind == "correctness":
        ev = obj({"family": OBJ, "head": OBJ, "scored_positions": NAT, "failures": NAT,
                   "max_error": RATIONAL,
                   "counterexample": nullable(OBJ, "null exactly when no input fails")})
    else:
        ev = obj({"family": OBJ, "head": OBJ, "jumps": NAT, "applicable": NAT,
                   "violated_jumps": {"type": "array"},
                   "violation": nullable(OBJ, "null exactly when no jump violates the bound")})
    return claim(kind, params, ev)


def _feasibility(kind: str) -> dict[str, Any]:
    params = obj({"rank": POS, "features": {"enum": ["real", "nonnegative"]},
                   "class": {"enum": ["paper", "used-pairs"]}, "scope": {"enum": ["family", "cube"]},
                   "family": STR, "family_sha256": HEX64, "error": RATIONAL})
    if kind == "feasible":
        ev = {"type": "object", "oneOf": [
            obj({"family": OBJ, "witness": OBJ, "margin": RATIONAL}),
            {**obj({}), "$comment": "empty only for an unknown claim (nothing found)"}]}
    else:
        ev = obj({"family": OBJ, "derivation": OBJ})
    return claim(kind, params, ev)


def _transcript() -> dict[str, Any]:
    params = obj({**{k: {} for k in TRANSCRIPT_PARAMETERS}, "weights_sha256": HEX64})
    for k in ("M", "s", "h", "q", "layers", "heads", "rank", "dv"):
        params["properties"][k] = POS
    params["properties"]["feature_map"] = STR
    params["properties"]["quantizer"] = OBJ
    variants = []
    for typ, fields in TRANSCRIPT_EVIDENCE.items():
        req: dict[str, Any] = {**{k: {} for k in TRANSCRIPT_COMMON}, **{k: {} for k in fields}}
        req.update(type={"const": typ}, capacity=OBJ, family=OBJ, model=OBJ)
        opt: dict[str, Any] = {}
        if typ == "collision":
            opt = {"query_outputs": {"type": "array", "$comment": "an exact collision records both"},
                   "failing": {**OBJ, "$comment": "an exact collision records both"}}
        if typ == "all":
            opt = {"assumptions": {"type": "array", "items": STR,
                                   "$comment": "the step the checker cannot replay, when named"}}
        body = obj(req, opt, **({"dependentRequired": {"query_outputs": ["failing"],
                                                        "failing": ["query_outputs"]}}
                                 if typ == "collision" else {}))
        variants.append(({"type": {"const": typ}}, body))
    return claim("transcript", params, forms(*variants))


def _bound() -> dict[str, Any]:
    variants = []
    for name, keys in BOUND_PARAMETERS.items():
        params = obj({"bound": {"const": name}, **{k: {} for k in keys}})
        variants.append({"properties": {"parameters": params}})
    out = claim("bound", {"type": "object", "required": ["bound"]},
                   {**OBJ, "$comment": "every field is re-derived from the parameters and compared "
                                       "by the bound's checker, which refuses missing and unknown "
                                       "fields"})
    out["allOf"] = [{"oneOf": variants}]
    return out


# ---------------------------------------------------------------- what sentences print

#: ``(where, key)`` fields a sentence prints; every one is re-derived by the kind's
#: checker or bound by verify (:mod:`certify.checkers.binding`)
_KERNEL = (("parameters", "token_set"), ("parameters", "num_tokens"),
           ("parameters", "tokens_sha256"), ("parameters", "source"),
           ("parameters", "source_sha256"), ("parameters", "layer"), ("parameters", "head"),
           ("parameters", "stated"),
           ("evidence", "features_sha256"), ("evidence", "matrix_sha256"))
_FAMILY = (("parameters", "family"), ("parameters", "family_sha256"))
_MODEL = (("parameters", "source"), ("parameters", "weights_sha256"), ("parameters", "head_sha256"))
_HEAD = (("parameters", "rank"), ("parameters", "features"), ("parameters", "class"),
         ("parameters", "error"), ("parameters", "scope"))


# ---------------------------------------------------------------- the declarations

@dataclass(frozen=True)
class Kind:
    """One claim kind (module docstring)."""

    name: str
    #: the module under ``certify.checkers`` whose ``check`` re-derives the verdict
    checker: str
    #: how the claim's referent is bound (:func:`certify.checkers.binding.referent`)
    binding: str
    #: the JSON Schema of a claim of this kind (parameters and evidence)
    schema: Callable[[], dict[str, Any]]
    #: the fields its sentence prints, as ``(where, key)``; ``None``: every field it has
    sentence: tuple[tuple[str, str], ...] | None
    #: evidence form or method -> the fields taken as stated when the data is too large
    #: to embed (a named ``trusted:`` assumption, or recomputed by the replay)
    trusted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


_GRAMS = ("gram_q", "gram_k", "num_tokens")

KINDS: tuple[Kind, ...] = (
    Kind("bound", "closed_form", "closed form: nothing but its parameters", _bound,
         None),                   # every parameter and evidence value (statements._BOUNDS)
    Kind("exact_rank", "rank", "a kernel: file, extraction or embedded data", _exact_rank,
         _KERNEL + (("parameters", "shape"), ("parameters", "dtype"), ("evidence", "rank_lower"),
                    ("evidence", "rank_upper"),
                    ("parameters", "upper_bound"), ("parameters", "error_log2")),
         {"factor": _GRAMS}),
    Kind("eps_rank", "rank", "a kernel: file, extraction or embedded data", _eps_rank,
         _KERNEL + (("parameters", "eps"), ("evidence", "k"), ("evidence", "exact")),
         {"factor": _GRAMS}),
    Kind("code_rank", "rank", "a kernel: file, extraction or embedded data", _code_rank,
         tuple(f for f in _KERNEL if f != ("evidence", "matrix_sha256")) + (("parameters", "code"), ("parameters", "code_sha256"), ("parameters", "num_words"),
                    ("evidence", "t"), ("evidence", "rank_lower")),
         {"factor": ("query_features", "key_features"), "matrix": ("B",)}),
    Kind("nonnegative", "rank", "a kernel: file, extraction or embedded data", _nonnegative,
         _KERNEL,
         {"features_nonnegative": ("min_phi_q", "min_phi_k"), "all_products": ("all_products",),
          "counterexample": ("phi_q_row", "phi_k_row"),
          "quadratic_kernel": ("r", "min_const_q", "min_const_k", "max_linear_sq_q", "max_linear_sq_k",
                               "max_quadratic_sq_q", "max_quadratic_sq_k", "max_residual_sq_q",
                               "max_residual_sq_k"),
          "key_box": ("key_lo", "key_hi", "min_query_bound")}),
    Kind("feasible", "feasibility", "a family: built-in name pinned or rebuilt, else its hash",
         lambda: _feasibility("feasible"), _FAMILY + _HEAD),
    Kind("infeasible", "feasibility", "a family: built-in name pinned or rebuilt, else its hash",
         lambda: _feasibility("infeasible"), _FAMILY + _HEAD),
    Kind("correctness", "audit", "a head: weights file and canonical hash, or its tables' hash",
         lambda: _audit("correctness"),
         _MODEL + _FAMILY + (("parameters", "eps"), ("evidence", "scored_positions"),
                             ("evidence", "family"))),
    Kind("gap_domination", "audit", "a head: weights file and canonical hash, or its tables' hash",
         lambda: _audit("gap_domination"),
         _MODEL + _FAMILY + (("parameters", "eps"), ("parameters", "n"), ("evidence", "applicable"))),
    Kind("transcript", "transcript", "a model: the hash of its exact weights, embedded", _transcript,
         (("parameters", "M"), ("parameters", "s"), ("parameters", "h"), ("parameters", "q"),
          ("parameters", "quantizer"), ("parameters", "weights_sha256"))),
)

BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}

#: claim kind -> checker module under ``certify.checkers``
CHECKERS: dict[str, str] = {k.name: k.checker for k in KINDS}

#: claim kind -> the fields its sentence prints (a kind whose sentence prints every
#: field it has is not listed)
FIELDS: dict[str, tuple[tuple[str, str], ...]] = {k.name: k.sentence for k in KINDS
                                                  if k.sentence is not None}


def trusted_table() -> dict[tuple[str, str], list[str]]:
    """``(kind, form or method) -> fields`` that may be trusted (the rank checkers' table)."""
    return {(k.name, form): list(f) for k in KINDS for form, f in k.trusted.items()}


def schemas() -> dict[str, dict[str, Any]]:
    """claim kind -> its JSON Schema."""
    return {k.name: k.schema() for k in KINDS}
