"""Every claim kind, declared once.

A :class:`Kind` says what a claim of that kind is: its parameters and its
evidence as typed declarations (:class:`certify.checkers.fields.Shape`, one per
evidence form: every field with its JSON type and bounds, whether it may be
absent and why, how the checker re-derives it -- recomputed, a witness checked
exactly, bound by hash, stated, or a named assumption -- and how its sentence
prints it), the nested objects its checker closes (:attr:`Kind.parts`), how its
referent is bound, and the checker module that re-derives its verdict.

Everything that used to be kept by hand in several lists is generated from
here: the published schema (:func:`certify.checkers.schema.build`, written by
``make schema``), the renderer's field table
(:data:`certify.checkers.statements.FIELDS`, from the fields declared printed),
the checker table of :mod:`certify.checkers.verify`, the trusted table of the
rank checkers (each evidence form's ``trusted``), and every key list a checker
closes an object with: a checker reads a claim through its declaration
(``kinds.BY_NAME[kind].form(name).check_keys(evidence, ...)``) before any
arithmetic, so a field added here reaches the schema and the checker together
(``tests/test_declarations.py``).

Adding a field to a kind touches its declaration here, its check and its
sentence, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from certify.checkers.fields import (
    ANY,
    BITS,
    BOOL,
    EMBEDDED_FEATURES,
    ENTRY,
    EXPONENT,
    FAMILY_FILE,
    FEATURE_HASHES,
    FEATURE_OPTIONAL,
    FEATURES_SHA256,
    GRAM_FIELDS,
    GRAM_ROWS,
    GRAMS_CLAIM,
    HASH,
    HEX64,
    INDEX_LIST,
    INT_ROWS,
    KERNEL_PARAMS_RULES,
    MATRIX_SHA256,
    NAME,
    NAT,
    OBJ,
    ONE_FEATURE_SOURCE,
    ONE_GRAM_SOURCE,
    POS,
    PRIME,
    RATIONAL,
    RECOMPUTED,
    SCALE,
    SCALES,
    SHAPE,
    STATED,
    STR,
    TOKENS,
    VALUE,
    WITNESS,
    Field,
    Shape,
    assumption,
    claim,
    forms,
    kernel_params,
    nullable,
    shape,
)

# ---------------------------------------------------------------- fields several forms share

_FORM_FACTOR = {"form": Field({"const": "factor"}, STATED)}
_FORM_MATRIX = {"form": Field({"const": "matrix"}, STATED)}
_FEATURES_SHA256 = Field(FEATURES_SHA256, HASH, NAME)
#: the stated Grams of a factor-form rank claim (recomputed from embedded features, or
#: taken as stated: ``trusted``)
_GRAM = {"num_tokens": Field(POS, RECOMPUTED), "r": Field(POS, RECOMPUTED),
         "features_sha256": _FEATURES_SHA256,
         "gram_q": Field(GRAM_ROWS, RECOMPUTED), "gram_q_exponent": Field(EXPONENT, RECOMPUTED),
         "gram_k": Field(GRAM_ROWS, RECOMPUTED), "gram_k_exponent": Field(EXPONENT, RECOMPUTED)}
#: the same, for a claim that may name another claim's Grams instead (``grams_claim``)
_GRAM_OR_CLAIM = {k: f for k, f in _GRAM.items() if k not in GRAM_FIELDS}
_GRAM_OPTIONAL = {**{k: _GRAM[k] for k in GRAM_FIELDS}, "grams_claim": GRAMS_CLAIM}
_GRAMS_TRUSTED = ("gram_q", "gram_k", "num_tokens")
#: an exact matrix: its shape, scale and hash (the matrix embedded, or re-read from its source)
_MATRIX = {"shape": Field(SHAPE, RECOMPUTED), "scale": Field(SCALE, HASH),
           "matrix_sha256": Field(MATRIX_SHA256, HASH, NAME)}
_EMBEDDED = {"matrix": Field({**INT_ROWS, "$comment": "absent only when the matrix is re-read from "
                                                      "its present source file"}, HASH),
             "tokens": Field(TOKENS, HASH)}


def _nested_rank_parts(scale: bool = True) -> dict[str, Shape]:
    """The nested objects a rank kind's checker closes (shared pieces): the features'
    hashes, the embedded features and (with a matrix form) the matrix's scale."""
    return {"features_sha256": FEATURE_HASHES, "features": EMBEDDED_FEATURES,
            **({f"scale:{k}": s for k, s in SCALES.items()} if scale else {})}


# ---------------------------------------------------------------- exact_rank

_MINOR = {"prime": Field(PRIME, WITNESS), "minor_rows": Field(INDEX_LIST, RECOMPUTED),
          "minor_cols": Field(INDEX_LIST, RECOMPUTED), "rank_lower": Field(NAT, RECOMPUTED, VALUE),
          "rank_upper": Field(NAT, RECOMPUTED, VALUE)}
_FREIVALDS = shape({"challenge": Field(HEX64, RECOMPUTED),
                    "vector_bits": Field({"type": "integer", "minimum": 1, "maximum": 32}, RECOMPUTED),
                    "vectors": Field({"type": "integer", "minimum": 1, "maximum": 4096}, RECOMPUTED),
                    "primes": Field({"type": "array", "minItems": 1, "maxItems": 64,
                                     "items": {"type": "integer", "minimum": 1 << 61,
                                               "maximum": (1 << 62) - 1}}, WITNESS)})

EXACT_RANK = {
    "factor": shape({**_FORM_FACTOR, **_GRAM, **_MINOR,
                     "null_basis": Field(nullable(INT_ROWS, "null when the witness is trivial"), WITNESS),
                     "null_prime": Field(nullable(PRIME, "null when the witness is trivial"), WITNESS),
                     "null_minor_rows": Field(INDEX_LIST, RECOMPUTED),
                     "null_minor_cols": Field(INDEX_LIST, RECOMPUTED),
                     "upper_witness": Field({"enum": ["null_space", "trivial"]}, STATED)},
                    FEATURE_OPTIONAL, trusted=_GRAMS_TRUSTED, **ONE_FEATURE_SOURCE),
    "matrix": shape({**_FORM_MATRIX, **_MATRIX, **_MINOR,
                     "upper_witness": Field({"enum": ["column_span", "trivial", "freivalds"]}, STATED)},
                    {**_EMBEDDED,
                     "freivalds": Field({**_FREIVALDS.schema(),
                                         "$comment": "present exactly when upper_witness is "
                                                     "'freivalds': the challenge (the claim's content "
                                                     "hash), the plan and the primes"}, WITNESS)},
                    allOf=[{"if": {"properties": {"upper_witness": {"const": "freivalds"}}},
                            "then": {"required": ["freivalds"]},
                            "else": {"not": {"required": ["freivalds"]}}}]),
}
_EXACT_PARAMS = kernel_params(
    {"shape": Field(SHAPE, RECOMPUTED, NAME), "form": Field({"enum": ["factor", "matrix"]}, STATED),
     "dtype": Field(STR, RECOMPUTED, VALUE)},
    {"upper_bound": Field({"const": "freivalds", "$comment": "present exactly with a Freivalds upper "
                                                             "bound (matrix form), which the sentence "
                                                             "names with its error probability"},
                          STATED, VALUE),
     "error_log2": Field({"type": "integer", "minimum": 1, "maximum": 1 << 16,
                          "$comment": "the error probability is <= 2^-error_log2; with upper_bound"},
                         STATED, VALUE)},
    dependentRequired={**KERNEL_PARAMS_RULES["dependentRequired"], "upper_bound": ["error_log2"],
                       "error_log2": ["upper_bound"]})


def _exact_rank(k: Kind) -> dict[str, Any]:
    return claim(k.name, k.params().schema(),
                 forms(({"form": {"const": "factor"}}, k.form("factor").schema()),
                       ({"form": {"const": "matrix"}}, k.form("matrix").schema())))


# ---------------------------------------------------------------- eps_rank

_EPS = {"eps": Field(RATIONAL, STATED), "k": Field(NAT, RECOMPUTED, VALUE),
        "exact": Field(BOOL, RECOMPUTED, VALUE)}
_EPS_MATRIX = {**_FORM_MATRIX, **_MATRIX, **_EPS}
EPS_RANK = {
    "factor": shape({**_FORM_FACTOR, **_GRAM_OR_CLAIM, **_EPS,
                     "sigma_sq_enclosures": Field({"type": "array"}, WITNESS)},
                    {**FEATURE_OPTIONAL, **_GRAM_OPTIONAL}, trusted=_GRAMS_TRUSTED,
                    allOf=[ONE_FEATURE_SOURCE, ONE_GRAM_SOURCE]),
    "gram": shape({**_EPS_MATRIX, "method": Field({"const": "gram"}, STATED)}, _EMBEDDED),
    "projection": shape({**_EPS_MATRIX, "method": Field({"const": "projection"}, STATED)},
                        {**_EMBEDDED,
                         "witness_y": Field({**INT_ROWS, "$comment": "present exactly when k > 0"},
                                            WITNESS),
                         "witness_y_exponent": Field({**EXPONENT, "$comment": "present exactly when "
                                                                              "k > 0"}, WITNESS)},
                        dependentRequired={"witness_y": ["witness_y_exponent"],
                                           "witness_y_exponent": ["witness_y"]}),
    "none": shape({**_EPS_MATRIX, "method": Field({"const": "none"}, STATED)}, _EMBEDDED),
}


def _eps_rank(k: Kind) -> dict[str, Any]:
    matrix = {"form": {"const": "matrix"}}
    return claim(k.name, k.params().schema(),
                 forms(({"form": {"const": "factor"}}, k.form("factor").schema()),
                       *(({**matrix, "method": {"const": m}}, k.form(m).schema())
                         for m in ("gram", "projection", "none"))))


# ---------------------------------------------------------------- numerical_rank

#: numpy's default (``S.max() * max(M, N) * eps`` of float64) or a stated rational
TOL = {"type": "string", "pattern": "^(default|[0-9]{1,4000}(/[1-9][0-9]{0,3999})?)$"}
_SIGMA_MAX = {"type": "array", "items": RATIONAL, "minItems": 2, "maxItems": 2}
NUMERICAL_RANK = {
    "matrix": shape({**_FORM_MATRIX, "shape": Field(SHAPE, RECOMPUTED),
                     "values_sha256": Field({"type": "string", "pattern": "^float64:[0-9a-f]{64}$"}, HASH),
                     "sigma_max": Field(nullable(_SIGMA_MAX, "null exactly when the tolerance is a stated "
                                                             "rational; else [lo, hi] holds sigma_1"),
                                        WITNESS),
                     "tol_lower": Field(RATIONAL, RECOMPUTED), "tol_upper": Field(RATIONAL, RECOMPUTED),
                     "k_lower": Field(NAT, RECOMPUTED, VALUE), "k_upper": Field(NAT, RECOMPUTED, VALUE)},
                    {"matrix": Field({**INT_ROWS, "$comment": "absent only when the matrix is re-read "
                                                              "from its present source file"}, HASH),
                     "matrix_exponent": Field({**EXPONENT, "$comment": "with matrix: its entries are "
                                                                       "matrix 2^matrix_exponent"}, HASH),
                     "tokens": Field(TOKENS, HASH)},
                    dependentRequired={"matrix": ["matrix_exponent"], "matrix_exponent": ["matrix"]}),
}


def _numerical_rank(k: Kind) -> dict[str, Any]:
    return claim(k.name, k.params().schema(), k.form("matrix").schema())


# ---------------------------------------------------------------- code_rank

_LEMMA4 = {"words": Field({"type": "array", "items": BITS, "minItems": 1}, HASH),
           "t": Field(NAT, RECOMPUTED, VALUE), "kept": Field(INDEX_LIST, RECOMPUTED),
           "frobenius_sq": Field(RATIONAL, RECOMPUTED), "bound": Field(RATIONAL, RECOMPUTED),
           "rank_lower": Field(NAT, RECOMPUTED, VALUE),
           "min_lambda": Field(nullable(RATIONAL, "null when no pair of kept words bounds |C_ij|"),
                               RECOMPUTED)}
CODE_RANK = {
    "factor": shape({**_LEMMA4, "query_features": Field(INT_ROWS, RECOMPUTED),
                     "query_exponent": Field(EXPONENT, RECOMPUTED),
                     "key_features": Field(INT_ROWS, RECOMPUTED),
                     "key_exponent": Field(EXPONENT, RECOMPUTED)},
                    if_={"required": ["trusted"]}, else_={"required": ["features_sha256"]},
                    optional={"features_sha256": Field({**FEATURES_SHA256,
                                                        "$comment": "absent when the features are "
                                                                    "taken as stated"}, HASH, NAME),
                              **FEATURE_OPTIONAL,
                              "word_rows": Field({"type": "array",
                                                  "items": {**INDEX_LIST, "minItems": 2, "maxItems": 2},
                                                  "$comment": "each word's (query row, key row) among "
                                                              "the kernel's tokens, when it has more "
                                                              "tokens than words"}, WITNESS)},
                    trusted=("query_features", "key_features")),
    "matrix": shape({**_LEMMA4, "B": Field({"type": "array", "items": {"type": "array"}},
                                           assumption("trusted")),
                     "trusted": Field({"type": "array", "items": STR}, assumption("trusted"))},
                    {"trusted_entries": Field(NAT, assumption("trusted")), "tokens": Field(TOKENS, HASH)},
                    trusted=("B",)),
}
_CODE_PARAMS = kernel_params({"code": Field(STR, STATED, NAME), "code_sha256": Field(HEX64, HASH, NAME),
                              "num_words": Field(POS, RECOMPUTED, NAME), "M": Field(POS, RECOMPUTED)})


def _code_rank(k: Kind) -> dict[str, Any]:
    return claim(k.name, k.params().schema(),
                 {"type": "object", "oneOf": [
                     {"if": {"required": ["B"]}, "then": k.form("matrix").schema(), "else": False},
                     {"if": {"required": ["B"]}, "then": False, "else": k.form("factor").schema()}]})


# ---------------------------------------------------------------- nonnegative

#: the quadratic-kernel lemma's evidence (nonnegative, method quadratic_kernel)
NONNEGATIVE_SUMMARIES = ("min_const", "max_linear_sq", "max_quadratic_sq", "max_residual_sq")
_QUADRATIC = {"r": Field(ANY, RECOMPUTED), "constant": Field(ANY, WITNESS),
              "linear": Field(ANY, WITNESS), "quadratic": Field(ANY, WITNESS),
              "g_diag": Field(ANY, WITNESS), "g_off": Field(ANY, WITNESS),
              **{f"{k}_{side}": Field(ANY, RECOMPUTED if k == "min_const" else WITNESS)
                 for k in NONNEGATIVE_SUMMARIES for side in ("q", "k")}}
_PAIR = {**INDEX_LIST, "minItems": 2, "maxItems": 2}
_NONNEGATIVE_METHODS: dict[str, tuple[dict[str, Field], tuple[str, ...]]] = {
    "features_nonnegative": ({"min_phi_q": Field(RATIONAL, RECOMPUTED),
                              "min_phi_k": Field(RATIONAL, RECOMPUTED)}, ("min_phi_q", "min_phi_k")),
    "all_products": ({"num_checked": Field(NAT, RECOMPUTED)}, ("all_products",)),
    "counterexample": ({"pair": Field(_PAIR, WITNESS), "value": Field(RATIONAL, RECOMPUTED),
                        "phi_q_row": Field({"type": "array", "items": ENTRY}, RECOMPUTED),
                        "phi_q_exponent": Field(EXPONENT, RECOMPUTED),
                        "phi_k_row": Field({"type": "array", "items": ENTRY}, RECOMPUTED),
                        "phi_k_exponent": Field(EXPONENT, RECOMPUTED)}, ("phi_q_row", "phi_k_row")),
    "quadratic_kernel": (_QUADRATIC, ("r",) + tuple(f"{k}_{side}" for k in NONNEGATIVE_SUMMARIES
                                                    for side in ("q", "k"))),
    "key_box": ({"key_lo": Field({"type": "array"}, WITNESS), "key_hi": Field({"type": "array"}, WITNESS),
                 "min_query_bound": Field(RATIONAL, WITNESS)}, ("key_lo", "key_hi", "min_query_bound")),
}
_FACTOR_BASE = {**_FORM_FACTOR, "features_sha256": _FEATURES_SHA256}
NONNEGATIVE = {
    "matrix": shape({**_FORM_MATRIX, "method": Field({"const": "entries"}, STATED), **_MATRIX,
                     "argmin": Field(_PAIR, RECOMPUTED), "min_sign": Field({"enum": [-1, 0, 1]}, RECOMPUTED)},
                    _EMBEDDED),
    "none": shape({**_FACTOR_BASE, "method": Field({"const": "none"}, STATED)},
                  {"tokens": Field(TOKENS, HASH)}),
    **{name: shape({**_FACTOR_BASE, "method": Field({"const": name}, STATED), **fields},
                   FEATURE_OPTIONAL, trusted=trusted, **ONE_FEATURE_SOURCE)
       for name, (fields, trusted) in _NONNEGATIVE_METHODS.items()},
}


def _nonnegative(k: Kind) -> dict[str, Any]:
    factor = {"form": {"const": "factor"}}
    return claim(k.name, k.params().schema(),
                 forms(({"form": {"const": "matrix"}}, k.form("matrix").schema()),
                       *(({**factor, "method": {"const": m}}, k.form(m).schema())
                         for m in k.evidence if m != "matrix")))


# ---------------------------------------------------------------- correctness, gap_domination

_WHY = ("a head read from weights names its file, the file's sha256, the adapter and the "
        "weights' canonical hash, all four; a head built in memory names none (its tables' "
        "hash binds it)")
_HEAD_SOURCE = ("source", "source_sha256", "adapter", "weights_sha256")


def _audit_params(kind: str) -> Shape:
    req = {"family": Field(STR, HASH, NAME), "family_sha256": Field(HEX64, HASH, NAME),
           "head_sha256": Field(HEX64, HASH, NAME), "rank": Field(POS, RECOMPUTED),
           "eps": Field(RATIONAL, STATED, VALUE)}
    if kind == "gap_domination":
        req["n"] = Field({**POS, "minimum": 3}, RECOMPUTED, VALUE)
    return shape(req, {"model": Field({**STR, "$comment": "the weights file's own name"}, STATED),
                       "source": Field({**STR, "$comment": _WHY}, HASH, NAME),
                       "source_sha256": Field({**HEX64, "$comment": _WHY}, HASH),
                       "adapter": Field({**STR, "$comment": _WHY}, STATED),
                       "weights_sha256": Field({**HEX64, "$comment": _WHY}, HASH, NAME)},
                 dependentRequired={k: sorted(set(_HEAD_SOURCE) - {k}) for k in _HEAD_SOURCE + ("model",)})


#: an output the head computes at one scored position, replayed exactly
_RECORD = shape({"input": Field(ANY, WITNESS), "position": Field(ANY, WITNESS),
                 **{k: Field(ANY, RECOMPUTED) for k in ("sequence", "numerator", "denominator", "t_hat",
                                                        "target")}}, published=False)
#: the audited head's tables, bound by the claim's head_sha256
_HEAD_TABLES = shape({k: Field(ANY, HASH) for k in ("query_tokens", "phi_q", "phi_k", "g")}, published=False)
_CORRECTNESS_PARTS = {"family": FAMILY_FILE, "head": _HEAD_TABLES, "counterexample": _RECORD}
_GAP_PARTS = {
    "family": FAMILY_FILE,
    "head": _HEAD_TABLES,
    "violation": shape({"jump": Field(ANY, WITNESS), "factor": Field(ANY, RECOMPUTED),
                        "alpha_xy": Field(ANY, RECOMPUTED), "alpha_xz": Field(ANY, RECOMPUTED),
                        "role": Field(ANY, WITNESS), "failing_input": Field(ANY, WITNESS)}, published=False),
    "violation.failing_input": _RECORD,
}
CORRECTNESS = shape({"family": Field(OBJ, HASH, VALUE), "head": Field(OBJ, HASH),
                     "scored_positions": Field(NAT, RECOMPUTED, VALUE), "failures": Field(NAT, RECOMPUTED),
                     "max_error": Field(RATIONAL, RECOMPUTED),
                     "counterexample": Field(nullable(OBJ, "null exactly when no input fails"), WITNESS)})
GAP_DOMINATION = shape({"family": Field(OBJ, HASH), "head": Field(OBJ, HASH),
                        "jumps": Field(NAT, RECOMPUTED), "applicable": Field(NAT, RECOMPUTED, VALUE),
                        "violated_jumps": Field({"type": "array"}, RECOMPUTED),
                        "violation": Field(nullable(OBJ, "null exactly when no jump violates the bound"),
                                           WITNESS)})


def _audit(k: Kind) -> dict[str, Any]:
    return claim(k.name, k.params().schema(), k.form().schema())


# ---------------------------------------------------------------- feasible, infeasible

_FEASIBILITY_PARAMS = shape({"rank": Field(POS, STATED, VALUE),
                             "features": Field({"enum": ["real", "nonnegative"]}, STATED, VALUE),
                             "class": Field({"enum": ["paper", "used-pairs"]}, STATED, VALUE),
                             "scope": Field({"enum": ["family", "cube"]}, STATED, VALUE),
                             "family": Field(STR, HASH, NAME), "family_sha256": Field(HEX64, HASH, NAME),
                             "error": Field(RATIONAL, STATED, VALUE)})
FEASIBLE = {
    "witness": shape({"family": Field(OBJ, HASH), "witness": Field(OBJ, WITNESS),
                      "margin": Field(RATIONAL, RECOMPUTED)}),
    "none": shape({}),
}
_FEASIBLE_PARTS = {
    "family": FAMILY_FILE,
    "witness": shape({"features": Field(ANY, STATED), "rank": Field(ANY, STATED), "class": Field(ANY, STATED),
                      **{k: Field(ANY, WITNESS) for k in ("phi_q", "phi_k", "g", "extension")}},
                     published=False),
    "witness.extension:plus-one": shape({"rule": Field(ANY, STATED)}, published=False),
    "witness.extension:copy-query": shape({"rule": Field(ANY, STATED), "query": Field(ANY, WITNESS)},
                                          published=False),
}
INFEASIBLE = shape({"family": Field(OBJ, HASH), "derivation": Field(OBJ, WITNESS)})
#: the Lemma 3 chains of a family (re-derived exactly from it)
_CHAINS = {"lemma3": Field(ANY, RECOMPUTED), "edges": Field(ANY, WITNESS),
           "edge_columns": Field(ANY, RECOMPUTED), "queries": Field(ANY, WITNESS),
           "diagonal": Field(ANY, WITNESS), "pairs": Field(ANY, WITNESS)}
_INFEASIBLE_PARTS = {
    "family": FAMILY_FILE,
    "derivation": shape({**_CHAINS, **{k: Field(ANY, RECOMPUTED) for k in (
        "sum_inverse_lambda_sq", "bound", "perron", "max_infeasible_rank")}},
        {"packing": Field(ANY, RECOMPUTED)}, published=False),
    "derivation.perron": shape({k: Field(ANY, RECOMPUTED) for k in ("rho", "rank", "discriminant")},
                               published=False),
    "derivation.packing": shape({k: Field(ANY, RECOMPUTED) for k in ("kappa_sq", "rank")}, published=False),
    "derivation:convex-dual": shape({"method": Field(ANY, STATED), "chains": Field(ANY, WITNESS),
                                     "dual": Field(ANY, WITNESS)}, published=False),
    "derivation.chains": shape(_CHAINS, published=False),
    "derivation.dual": shape({"rank": Field(ANY, WITNESS),
                              **{k: Field(ANY, WITNESS) for k in ("W", "x", "y", "lambda", "mu")},
                              "margin": Field(ANY, RECOMPUTED)}, published=False),
}


def _feasible(k: Kind) -> dict[str, Any]:
    return claim(k.name, k.params().schema(), {"type": "object", "oneOf": [
        k.form("witness").schema(),
        {**k.form("none").schema(), "$comment": "empty only for an unknown claim (nothing found)"}]})


def _infeasible(k: Kind) -> dict[str, Any]:
    return claim(k.name, k.params().schema(), k.form().schema())


# ---------------------------------------------------------------- transcript

_TRANSCRIPT_PARAMS = shape({**{k: Field(POS, RECOMPUTED, NAME) for k in ("M", "s", "h", "q")},
                            **{k: Field(POS, RECOMPUTED) for k in ("layers", "heads", "rank", "dv")},
                            "feature_map": Field(STR, RECOMPUTED), "quantizer": Field(OBJ, RECOMPUTED, NAME),
                            "weights_sha256": Field(HEX64, HASH, NAME)})
#: the evidence every type has, and each type's own
_TRANSCRIPT_COMMON = {"capacity": Field(OBJ, RECOMPUTED), "type": Field(ANY, STATED),
                      "family": Field(OBJ, STATED), "model": Field(OBJ, HASH)}
_COLLISION_WHY = "an exact collision records both"
TRANSCRIPT = {
    "none": shape({**_TRANSCRIPT_COMMON, "type": Field({"const": "none"}, STATED)}),
    "all": shape({**_TRANSCRIPT_COMMON, "type": Field({"const": "all"}, STATED),
                  "exact_checked": Field(ANY, RECOMPUTED)},
                 {"assumptions": Field({"type": "array", "items": STR,
                                        "$comment": "the step the checker cannot replay, when named"},
                                       assumption("replay"))}),
    "error": shape({**_TRANSCRIPT_COMMON, "type": Field({"const": "error"}, STATED),
                    "kappa": Field(ANY, WITNESS), "index": Field(ANY, RECOMPUTED),
                    "input": Field(ANY, RECOMPUTED), "position": Field(ANY, WITNESS),
                    **{k: Field(ANY, RECOMPUTED) for k in ("target", "output")}}),
    "collision": shape({**_TRANSCRIPT_COMMON, "type": Field({"const": "collision"}, STATED),
                        "kappa_a": Field(ANY, WITNESS), "kappa_b": Field(ANY, WITNESS),
                        **{k: Field(ANY, RECOMPUTED) for k in ("index_a", "index_b", "input_a", "input_b",
                                                              "targets_a", "targets_b", "transcript")}},
                       {"query_outputs": Field({"type": "array", "$comment": _COLLISION_WHY}, RECOMPUTED),
                        "failing": Field({**OBJ, "$comment": _COLLISION_WHY}, RECOMPUTED)},
                       dependentRequired={"query_outputs": ["failing"], "failing": ["query_outputs"]}),
}
_TRANSCRIPT_PARTS = {
    "family": shape({**{k: Field(ANY, STATED) for k in ("M", "s", "h", "q")}, "words": Field(ANY, STATED)},
                    published=False),
    "model": shape({"config": Field(ANY, STATED), "weights": Field(ANY, HASH),
                    "weights_sha256": Field(ANY, HASH), "quantizer": Field(ANY, STATED),
                    "source": Field(ANY, STATED)}, published=False),
    "model.config": shape({k: Field(ANY, STATED) for k in ("m", "d", "layers", "heads", "rank", "dv",
                                                          "feature_map", "positions")}, published=False),
    "model.weights.*": shape({k: Field(ANY, HASH) for k in ("shape", "exp", "ints")}, published=False),
    "model.quantizer:uniform": shape({k: Field(ANY, STATED) for k in ("kind", "bits", "lo", "hi")},
                                     {"calibrated": Field(ANY, STATED)}, published=False),
    "model.quantizer:float": shape({k: Field(ANY, STATED) for k in ("kind", "format")}, published=False),
    "capacity": shape({k: Field(ANY, RECOMPUTED) for k in ("coordinates", "alphabet", "assignments",
                                                           "holds", "bits_available", "bits_needed")},
                      published=False),
    "failing": shape({k: Field(ANY, RECOMPUTED) for k in ("input", "position", "target", "output")},
                     published=False),
}


def _transcript(k: Kind) -> dict[str, Any]:
    return claim(k.name, k.params().schema(),
                 forms(*(({"type": {"const": t}}, s.schema()) for t, s in k.evidence.items())))


# ---------------------------------------------------------------- bound

def _bound_params(name: str, *keys: str) -> Shape:
    """A closed form's parameters: its name and its inputs (each printed by its sentence)."""
    return shape({"bound": Field({"const": name}, STATED, VALUE),
                  **{k: Field(ANY, STATED, VALUE) for k in keys}})


#: bound name -> its parameters
BOUNDS = {
    "lemma3": _bound_params("lemma3", "n", "eps", "d"),
    "lemma4": _bound_params("lemma4", "t", "lam", "strict"),
    "lemma4_per_pair": _bound_params("lemma4_per_pair", "t", "Lambda", "strict"),
    "thm5": _bound_params("thm5", "code_size", "delta", "g", "n", "eps"),
    "thm6": _bound_params("thm6", "m", "extended"),
    "cor7": _bound_params("cor7", "m", "n"),
    "eq8": _bound_params("eq8", "L", "H", "r", "dv", "p", "s", "q"),
    "prop10": _bound_params("prop10", "m"),
}


def _bound(k: Kind) -> dict[str, Any]:
    out = claim(k.name, {"type": "object", "required": ["bound"]},
                {**OBJ, "$comment": "every field is re-derived from the parameters and compared by the "
                                    "bound's checker, which refuses missing and unknown fields"})
    out["allOf"] = [{"oneOf": [{"properties": {"parameters": p.schema()}} for p in k.parameters.values()]}]
    return out


# ---------------------------------------------------------------- theorem

#: Thm 1's temperature: a rational ``tau >= 0`` (``e^-tau`` decided with arb balls) or
#: ``log(q)`` with a rational ``q >= 1`` (``e^-tau = 1/q``: every weight rational, exact)
TAU = {"type": "string",
       "pattern": r"^([0-9]{1,40}(/[1-9][0-9]{0,39})?|log\([1-9][0-9]{0,39}(/[1-9][0-9]{0,39})?\))$"}
_CUBE_PARAMS = {"m": Field({**POS, "maximum": 16}, STATED, VALUE),
                "n": Field({**POS, "maximum": 8}, STATED, VALUE), "eps": Field(RATIONAL, STATED, VALUE)}
#: theorem -> its parameters (the object it is about: a construction by its parameters, or
#: a head by the hash of its tables on an embedded family)
THEOREMS = {
    "thm1": shape({"theorem": Field({"const": "thm1"}, STATED, VALUE), **_CUBE_PARAMS,
                   "tau": Field(TAU, STATED, VALUE)}),
    "thm6": shape({"theorem": Field({"const": "thm6"}, STATED, VALUE), **_CUBE_PARAMS}),
    "thm8": shape({"theorem": Field({"const": "thm8"}, STATED, VALUE),
                   "family": Field(STR, HASH, NAME), "family_sha256": Field(HEX64, HASH, NAME),
                   "head_sha256": Field(HEX64, HASH, NAME), "rank": Field(POS, RECOMPUTED, VALUE),
                   "eps": Field(RATIONAL, STATED, VALUE),
                   "n": Field({**POS, "minimum": 3}, RECOMPUTED, VALUE)}),
}
_CUBE_WHY = ("the exact largest |t_hat - t| when every weight is rational (tau = log(q)); null when "
             "the weights e^(-tau <x,z>) are irrational (each error is then decided against eps "
             "with arb balls, not stated)")
#: the evidence of a construction decided on every input over the cube, and of a head with
#: position-dependent key maps on a family with positions
THEOREM_EVIDENCE = {
    "cube": shape({"sequences": Field(NAT, RECOMPUTED, VALUE), "positions": Field(NAT, RECOMPUTED),
                   "classes": Field(NAT, RECOMPUTED), "failures": Field(NAT, RECOMPUTED),
                   "max_error": Field(nullable(RATIONAL, _CUBE_WHY), RECOMPUTED),
                   "counterexample": Field(nullable(OBJ, "null exactly when no class fails; else the "
                                                         "first failing class"), WITNESS)}),
    "positional": shape({"family": Field(OBJ, HASH), "head": Field(OBJ, HASH),
                         "scored_positions": Field(NAT, RECOMPUTED, VALUE),
                         "failures": Field(NAT, RECOMPUTED),
                         "max_error": Field(nullable(RATIONAL, "null when a denominator is <= 0"),
                                            RECOMPUTED),
                         "counterexample": Field(nullable(OBJ, "null exactly when no input fails; else "
                                                               "the first failing input"), WITNESS),
                         "min_contribution": Field(RATIONAL, RECOMPUTED),
                         "jumps": Field(NAT, RECOMPUTED), "dominated": Field(NAT, RECOMPUTED),
                         "effective_rank": Field(NAT, RECOMPUTED, VALUE),
                         "lemma4_bound": Field(RATIONAL, RECOMPUTED),
                         "rank_bound": Field(NAT, RECOMPUTED, VALUE)}),
}
#: theorem -> its evidence form
THEOREM_FORM = {"thm1": "cube", "thm6": "cube", "thm8": "positional"}
_THEOREM_PARTS = {
    "family": FAMILY_FILE,
    "head": shape({k: Field(ANY, HASH) for k in ("query_tokens", "phi_q", "phi_k", "g")}, published=False),
    "counterexample:cube": shape({"query": Field(ANY, WITNESS), "others": Field(ANY, WITNESS)},
                                 published=False),
    "counterexample:positional": _RECORD,
}


def _theorem(k: Kind) -> dict[str, Any]:
    out = claim(k.name, {"type": "object", "required": ["theorem"],
                         "properties": {"theorem": {"enum": list(k.parameters)}}},
                {**OBJ, "$comment": "the form the theorem's object takes (by the theorem, below)"})
    out["allOf"] = [{"if": {"properties": {"parameters": {"properties": {"theorem": {"const": name}},
                                                          "required": ["theorem"]}},
                            "required": ["parameters"]},
                     "then": {"properties": {"parameters": p.schema(),
                                             "evidence": k.form(THEOREM_FORM[name]).schema()}}}
                    for name, p in k.parameters.items()]
    return out


# ---------------------------------------------------------------- the declarations

@dataclass(frozen=True)
class Kind:
    """One claim kind (module docstring)."""

    name: str
    #: the module under ``certify.checkers`` whose ``check`` re-derives the verdict
    checker: str
    #: how the claim's referent is bound (:func:`certify.checkers.binding.referent`)
    binding: str
    #: its parameters: one shape (key ``""``), or one per variant (a bound's name)
    parameters: Mapping[str, Shape]
    #: its evidence, one shape per form (the form, method or type that tells them
    #: apart; key ``""`` when there is one); bound evidence is every re-derived value
    evidence: Mapping[str, Shape]
    #: builds the claim's JSON Schema from the shapes (the rules between its forms)
    compose: Callable[[Kind], dict[str, Any]]
    #: the nested objects its checker closes, by their path below the evidence
    #: (``witness.extension:copy-query``: a variant; ``model.weights.*``: each value)
    parts: Mapping[str, Shape] = field(default_factory=dict)
    #: its sentence prints every field the claim has (no field table)
    prints_all: bool = False

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a claim of this kind."""
        return self.compose(self)

    def params(self, variant: str = "") -> Shape:
        """Its parameters (of one variant: a bound's name)."""
        return self.parameters[variant]

    def form(self, name: str = "") -> Shape:
        """The declaration of one evidence form."""
        return self.evidence[name]

    def part(self, path: str) -> Shape:
        """The declaration of a nested object of its evidence."""
        return self.parts[path]

    @property
    def sentence(self) -> tuple[tuple[str, str], ...] | None:
        """The fields its sentence prints, as ``(where, key)``; None: every field it has."""
        if self.prints_all:
            return None
        out = [("parameters", k) for s in self.parameters.values() for k, f in s.fields.items() if f.printed]
        out += [("evidence", k) for s in self.evidence.values() for k, f in s.fields.items() if f.printed]
        return tuple(dict.fromkeys(out))

    @property
    def trusted(self) -> dict[str, tuple[str, ...]]:
        """Evidence form -> the fields taken as stated when the data is too large to embed
        (a named ``trusted:`` assumption, or recomputed by the replay)."""
        return {form: s.trusted for form, s in self.evidence.items() if s.trusted}


_KERNEL = "a kernel: file, extraction or embedded data"
_FAMILY = "a family: built-in name pinned or rebuilt, else its hash"
_HEAD = "a head: weights file and canonical hash, or its tables' hash"

KINDS: tuple[Kind, ...] = (
    Kind("bound", "closed_form", "closed form: nothing but its parameters", BOUNDS, {}, _bound,
         prints_all=True),               # every parameter and evidence value (statements._BOUNDS)
    Kind("exact_rank", "rank", _KERNEL, {"": _EXACT_PARAMS}, EXACT_RANK, _exact_rank,
         {**_nested_rank_parts(), "freivalds": _FREIVALDS}),
    Kind("eps_rank", "rank", _KERNEL, {"": kernel_params({"eps": Field(RATIONAL, STATED, VALUE)})},
         EPS_RANK, _eps_rank, _nested_rank_parts()),
    Kind("numerical_rank", "rank", _KERNEL, {"": kernel_params({"tol": Field(TOL, STATED, VALUE)})},
         NUMERICAL_RANK, _numerical_rank),
    Kind("code_rank", "rank", _KERNEL, {"": _CODE_PARAMS}, CODE_RANK, _code_rank,
         _nested_rank_parts(scale=False)),
    Kind("nonnegative", "rank", _KERNEL, {"": kernel_params()}, NONNEGATIVE, _nonnegative,
         _nested_rank_parts()),
    Kind("feasible", "feasibility", _FAMILY, {"": _FEASIBILITY_PARAMS}, FEASIBLE, _feasible, _FEASIBLE_PARTS),
    Kind("infeasible", "feasibility", _FAMILY, {"": _FEASIBILITY_PARAMS}, {"": INFEASIBLE}, _infeasible,
         _INFEASIBLE_PARTS),
    Kind("correctness", "audit", _HEAD, {"": _audit_params("correctness")}, {"": CORRECTNESS}, _audit,
         _CORRECTNESS_PARTS),
    Kind("gap_domination", "audit", _HEAD, {"": _audit_params("gap_domination")}, {"": GAP_DOMINATION},
         _audit, _GAP_PARTS),
    Kind("transcript", "transcript", "a model: the hash of its exact weights, embedded",
         {"": _TRANSCRIPT_PARAMS}, TRANSCRIPT, _transcript, _TRANSCRIPT_PARTS),
    Kind("theorem", "theorems", "a construction: nothing but its parameters; or a head: its tables' hash "
         "on a family (built-in name pinned or rebuilt, else its hash)", THEOREMS, THEOREM_EVIDENCE,
         _theorem, _THEOREM_PARTS),
)

BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}

#: claim kind -> checker module under ``certify.checkers``
CHECKERS: dict[str, str] = {k.name: k.checker for k in KINDS}

#: claim kind -> the fields its sentence prints (a kind whose sentence prints every
#: field it has is not listed)
FIELDS: dict[str, tuple[tuple[str, str], ...]] = {k.name: s for k in KINDS
                                                  if (s := k.sentence) is not None}


def trusted_table() -> dict[tuple[str, str], list[str]]:
    """``(kind, form or method) -> fields`` that may be trusted (the rank checkers' table)."""
    return {(k.name, form): list(f) for k in KINDS for form, f in k.trusted.items()}


def schemas() -> dict[str, dict[str, Any]]:
    """claim kind -> its JSON Schema."""
    return {k.name: k.schema() for k in KINDS}


def name_fields() -> frozenset[str]:
    """The parameters some sentence prints as a name: any other value names another object."""
    return frozenset(k for kind in KINDS for s in kind.parameters.values()
                     for k, f in s.fields.items() if f.printed == NAME)
