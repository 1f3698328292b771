"""The vocabulary the claim kinds are declared in (:mod:`certify.checkers.kinds`).

* **Field types** as JSON Schema: hashes, exact rationals, bounded integers,
  integer rows, token lists.
* **Declarations**: a :class:`Field` is one key of a JSON object, with its type
  (its JSON Schema), how the checker re-derives it (:data:`HOWS`: recomputed,
  a witness checked exactly, bound by hash, stated by the claim, or taken as
  stated under a named assumption) and how a sentence prints it; a
  :class:`Shape` is a closed object of fields (every key required unless it is
  declared optional, with the reason in its ``$comment``). A shape writes its
  JSON Schema (:meth:`Shape.schema`) and closes a checker's object with the same
  key lists (:meth:`Shape.check_keys`), so the published schema and the checkers
  read one declaration.
* **Shared pieces**: features, scales, the parameters that bind a kernel to its
  source, the embedded family file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

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
#: the widest entry a packed integer matrix has: ENTRY's bound, in bytes of two's complement
PACKED_MAX_BYTES = 2304 // 8 + 1
#: an integer matrix packed (:func:`certify.checkers.common.packed_matrix`): its entries
#: row-major, each ``bytes`` bytes of little-endian two's complement, in standard base64
#: with padding (the only text of those bytes: re-encoded, it must be the same string).
#: A 128 x 128 Gram of 120-bit entries is 350 kB this way, 620 kB as JSON rows, and one
#: string once read instead of 16,384 integer objects.
PACKED_INTS = {"type": "object",
               "properties": {"packed": {"const": "int-le"},
                              "bytes": {"type": "integer", "minimum": 1, "maximum": PACKED_MAX_BYTES},
                              "shape": {"type": "array", "items": POS, "minItems": 2, "maxItems": 2},
                              "base64": {"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$"}},
               "required": ["packed", "bytes", "shape", "base64"], "additionalProperties": False}
#: a Gram's integer rows: JSON rows, or packed
GRAM_ROWS = {"oneOf": [INT_ROWS, PACKED_INTS],
             "$comment": "rows of integers, or the same integers packed (int-le, base64)"}
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


# ---------------------------------------------------------------- declarations

#: How the checker re-derives a field (every declared field names one):
#:
#: * ``recomputed``: the checker computes the value itself, from the claim's other
#:   fields or the data they bind, and compares it exactly;
#: * ``witness``: chosen by the producer and verified exactly (a minor, a null basis,
#:   a dual solution, a counterexample): any value that passes proves the verdict;
#: * ``bound by hash``: a content hash, or data a hash names: the data is hashed and
#:   compared (by the kind's checker, or by verify's binding against the files the
#:   certificate names);
#: * ``stated``: what the claim says or asks for (a parameter, the form of its
#:   evidence): the verdict is decided for this value, nothing re-derives it;
#: * ``assumption:NAME``: taken as stated; the claim then holds only under the named
#:   assumption (exit 4) unless a replay re-derives it.
RECOMPUTED = "recomputed"
WITNESS = "witness"
HASH = "bound by hash"
STATED = "stated"
ASSUMPTION = "assumption:"
HOWS = (RECOMPUTED, WITNESS, HASH, STATED)

#: how a sentence prints a field: as a name (any other value names another object:
#: a source, a token set, a hash, a count) or as a value (a rank, an eps, a flag)
NAME = "name"
VALUE = "value"

class Bad(Exception):
    """Malformed or inconsistent evidence (the message is the problem): raised by the
    checkers (:mod:`certify.checkers.common` re-exports it), and by a declaration whose
    object lacks a required key or has an undeclared one (:meth:`Shape.check_keys`)."""


def keys(obj: Any, what: str, required: Iterable[str], optional: Iterable[str] = ()) -> Mapping[str, Any]:
    """``obj`` is a JSON object whose keys are all of ``required`` and some of
    ``optional``, nothing else (a checker calls it through a declaration,
    :meth:`Shape.check_keys`, never with a list of its own)."""
    if not isinstance(obj, dict):
        raise Bad(f"{what} must be a JSON object")
    required, optional = set(required), set(optional)
    missing = sorted(required - set(obj))
    extra = sorted(set(obj) - required - optional)
    if missing or extra:
        raise Bad(f"{what}: " + "; ".join(
            ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else [])))
    return obj


#: the type of a field of a nested object that its checker closes and types itself
#: (:class:`Shape` with ``published=False``)
ANY: dict[str, Any] = {}


def assumption(name: str) -> str:
    """How a field taken as stated under the assumption ``name`` is re-derived."""
    return ASSUMPTION + name


@dataclass(frozen=True)
class Field:
    """One key of a JSON object: its JSON Schema, how the checker re-derives it
    (:data:`HOWS`, or ``assumption:NAME``), how a sentence prints it (:data:`NAME`,
    :data:`VALUE`, or None: not printed), and whether it may be absent (set by
    :func:`shape` from the side it is declared on)."""

    schema: Mapping[str, Any]
    how: str
    printed: str | None = None
    optional: bool = False

    def __post_init__(self) -> None:
        if self.how not in HOWS and not (self.how.startswith(ASSUMPTION)
                                         and len(self.how) > len(ASSUMPTION)):
            raise ValueError(f"a field is re-derived as one of {HOWS} or assumption:NAME, "
                             f"not {self.how!r}")
        if self.printed not in (None, NAME, VALUE):
            raise ValueError(f"a field is printed as {NAME!r}, {VALUE!r} or not at all")


@dataclass(frozen=True)
class Shape:
    """A closed JSON object: its fields in the order the schema lists them, the
    schema keywords that relate them (``rules``: ``dependentRequired``, ``allOf``,
    ``oneOf``, ``if``/``then``/``else``), the fields that may be taken as stated
    when the data is too large to embed (``trusted``, in the order a claim lists
    them), and whether the published schema spells it out (``published=False``: a
    nested object that the field holding it types as an object only, closed and
    typed by its checker)."""

    fields: Mapping[str, Field]
    rules: Mapping[str, Any] = field(default_factory=dict)
    trusted: tuple[str, ...] = ()
    published: bool = True

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(k for k, f in self.fields.items() if not f.optional)

    @property
    def optional(self) -> tuple[str, ...]:
        return tuple(k for k, f in self.fields.items() if f.optional)

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of this object (as :func:`obj` writes one)."""
        out: dict[str, Any] = {"type": "object",
                               "properties": {k: f.schema for k, f in self.fields.items()},
                               "required": sorted(self.required), "additionalProperties": False}
        out.update(self.rules)
        return out

    def check_keys(self, obj: Any, what: str, *, require: Iterable[str] = (),
                   forbid: Iterable[str] = ()) -> Mapping[str, Any]:
        """``obj`` is a JSON object with every required field of this shape, some of its
        optional ones, nothing else (:func:`keys`, which names ``what`` in the problem);
        ``require`` and ``forbid`` name optional fields that the claim's other fields
        make required or forbidden here."""
        require, forbid = tuple(require), tuple(forbid)
        odd = [k for k in require + forbid if k not in self.optional]
        if odd:
            raise ValueError(f"{what}: {odd} are not optional fields of this shape")
        return keys(obj, what, self.required + require,
                    tuple(k for k in self.optional if k not in forbid))


def shape(required: Mapping[str, Field], optional: Mapping[str, Field] | None = None, *,
          trusted: tuple[str, ...] = (), published: bool = True, **rules: Any) -> Shape:
    """A :class:`Shape` whose fields are ``required`` then ``optional`` (``if_``,
    ``then_``, ``else_`` stand for the keywords ``if``, ``then``, ``else``)."""
    fields = {**{k: Field(f.schema, f.how, f.printed, False) for k, f in required.items()},
              **{k: Field(f.schema, f.how, f.printed, True) for k, f in (optional or {}).items()}}
    # a trusted name is a field, or the form's own name (all_products: the products themselves)
    own = {f.schema.get("const") for f in fields.values()}
    bad = [k for k in trusted if k not in fields and k not in own]
    if bad:
        raise ValueError(f"trusted fields {bad} are not declared")
    return Shape(fields, {k.rstrip("_"): v for k, v in rules.items()}, trusted, published)


# ---------------------------------------------------------------- shared pieces

FEATURE_HASHES = shape({"phi_q": Field(HEX64, HASH), "phi_k": Field(HEX64, HASH),
                        "dtype": Field(STR, HASH),
                        "layout": Field({"const": "row-major little-endian (K, r)"}, RECOMPUTED)})
FEATURES_SHA256 = FEATURE_HASHES.schema()
EMBEDDED_FEATURES = shape({"phi_q": Field(INT_ROWS, HASH), "phi_q_exponent": Field(EXPONENT, HASH),
                           "phi_k": Field(INT_ROWS, HASH), "phi_k_exponent": Field(EXPONENT, HASH)})
FEATURES = EMBEDDED_FEATURES.schema()
#: the exact scale of an integer matrix, one shape per kind of scale
SCALES = {"dyadic": shape({"kind": Field({"const": "dyadic"}, STATED),
                           "exponent": Field(EXPONENT, HASH)}),
          "row_denominators": shape({"kind": Field({"const": "row_denominators"}, STATED),
                                     "row_den": Field({"type": "array", "items": DENOMINATOR}, HASH)})}
SCALE = {"oneOf": [s.schema() for s in SCALES.values()]}
MATRIX_SHA256 = {"type": "string", "pattern": "^(int64|json):[0-9a-f]{64}$"}
SHAPE = {"type": "array", "items": NAT, "minItems": 2, "maxItems": 2}

#: where a factor-form claim's features come from: exactly one of these
FEATURE_SOURCES = {
    "features": Field(FEATURES, HASH),
    "features_claim": Field({**NAT, "$comment": "the index of the claim of this certificate that "
                                                "embeds the same features (they are embedded once)"},
                            HASH),
    "trusted": Field({"type": "array", "items": STR, "minItems": 1,
                      "$comment": "summaries taken as stated: only for data too large to embed, by a "
                                  "size verify measures (a named trusted: assumption)"},
                     assumption("trusted")),
}
ONE_FEATURE_SOURCE: dict[str, Any] = {"oneOf": [{"required": [k]} for k in FEATURE_SOURCES]}
#: the four fields of a factor-form claim's stated Grams
GRAM_FIELDS = ("gram_q", "gram_q_exponent", "gram_k", "gram_k_exponent")
#: an eps-rank claim states its Grams, or names the claim of the same head that does (the
#: exact-rank claim of the same features: a head's Grams are written once)
GRAMS_CLAIM = Field({**NAT, "$comment": "the index of the claim of this certificate that states "
                                        "these features' Grams (same features_sha256, num_tokens "
                                        "and r; the Grams are written once)"}, HASH)
#: what a claim named by ``grams_claim`` has in common with the claim naming it
GRAMS_CLAIM_SAME = ("features_sha256", "num_tokens", "r")
ONE_GRAM_SOURCE: dict[str, Any] = {"oneOf": [{"required": list(GRAM_FIELDS)}, {"required": ["grams_claim"]}]}
FEATURE_OPTIONAL = {
    **FEATURE_SOURCES,
    "trusted_entries": Field({**NAT, "$comment": "the size of trusted summaries, when there are some"},
                             assumption("trusted")),
    "tokens": Field(TOKENS, HASH),
}

#: the embedded family file (format certify-attention/family/1) of the feasibility and
#: audit kinds, closed by :func:`certify.checkers.common.family`: every field is bound by
#: the file's own ``sha256``, recomputed over the rest, and the claim's ``family_sha256``
FAMILY_FILE = shape({**{k: Field(ANY, HASH) for k in ("format", "name", "m", "n", "tokens", "inputs",
                                                       "scored", "targets", "params", "words",
                                                       "jumps")},
                     "sha256": Field(ANY, RECOMPUTED)}, published=False)

# ---------------------------------------------------------------- parameters

#: what binds a kernel claim to its source and token set (certify.checkers.binding)
KERNEL_PARAMS_REQUIRED = {
    "token_set": Field({"type": "string",
                        "pattern": "^(cube:[0-9]{1,3}|family:.+|vocab:[0-9]{1,12}"
                                   "|positions:[0-9]{1,9}x[0-9]{1,9}|tokens|index)$"},
                       STATED, NAME),
    "source": Field(STR, HASH, NAME),
    "source_sha256": Field(nullable(HEX64, "null only for a kernel built in memory: a named "
                                           "construction (adapter 'construction'), which "
                                           "--replay-extraction rebuilds, or data embedded in the "
                                           "evidence (adapter and source 'memory'), bound by its "
                                           "hash"), HASH, NAME),
    "adapter": Field(STR, STATED),
    "num_tokens": Field(POS, RECOMPUTED, NAME),
}
KERNEL_PARAMS_OPTIONAL = {
    "tokens_sha256": Field({**HEX64, "$comment": "the hash of an explicit token list: required for "
                                                 "the token sets 'tokens' and 'family:NAME', absent "
                                                 "for cube:M, vocab:N and index (their tokens are "
                                                 "implied)"}, HASH, NAME),
    "stated": Field({"type": "object",
                     "additionalProperties": obj({"value": {"type": ["string", "number", "boolean",
                                                                     "null", "array"]},
                                                  "from": {"enum": ["config.json",
                                                                    "library default, assumed"]}}),
                     "$comment": "a third-party head's kernel arguments, each stated by the config "
                                 "or assumed by name (--assume-default): present exactly for "
                                 "third-party layouts (adapter 'layout:...'; empty when the weights "
                                 "fix the kernel), printed by the sentence and re-derived by the "
                                 "extraction replay"}, assumption("extraction"), VALUE),
    "layer": Field({**NAT, "$comment": "one head of a model: layer and head come together"},
                   STATED, NAME),
    "head": Field({**NAT, "$comment": "one head of a model: layer and head come together"},
                  STATED, NAME),
    "sequences": Field({**STR, "$comment": "the token sequences of a positions:SxT token set: a file of the "
                                           "certificate's inputs (by its sha256) or the seeded probe "
                                           "random:S,T,SEED; --replay-extraction re-reads or regenerates the "
                                           "ids and compares their hash"}, assumption("extraction"), NAME),
    "sequences_sha256": Field({**HEX64, "$comment": "the content hash of the ids of a positions:SxT token "
                                                  "set (int64 little-endian after the header "
                                                  "'certify-attention/sequences/1 SxT'), re-derived by the "
                                                  "extraction replay"}, assumption("extraction"), NAME),
    "normalized": Field({"const": False,
                         "$comment": "present exactly for a third-party head without a normalizing "
                                     "denominator (its layer outputs sum_j alpha(x, z_j) v_j; fla's "
                                     "do_feature_map_norm=False): the sentence names it unnormalized "
                                     "and the extraction replay re-derives it from the config; "
                                     "absent for a normalized head"}, assumption("extraction"), VALUE),
}
KERNEL_PARAMS_RULES: dict[str, Any] = {
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
        {"if": {"properties": {"token_set": {"pattern": "^positions:"}}, "required": ["token_set"]},
         "then": {"required": ["sequences", "sequences_sha256", "layer"],
                  "properties": {"adapter": {"pattern": "^layout:"}},
                  "$comment": "the inputs to one layer of a model at the positions of stated sequences"},
         "else": {"not": {"anyOf": [{"required": ["sequences"]}, {"required": ["sequences_sha256"]}]}}},
        {"if": {"required": ["normalized"]},
         "then": {"properties": {"adapter": {"pattern": "^layout:"}}, "required": ["adapter"],
                  "$comment": "only a third-party head can lack a denominator"}},
        {"if": {"properties": {"adapter": {"enum": ["matrix-file", "memory", "construction"]}},
                "required": ["adapter"]},
         "then": {"properties": {"token_set": {"not": {"pattern": "^vocab:"},
                                               "$comment": "a vocabulary is a model's embedding "
                                                           "rows: a matrix, features or a "
                                                           "construction has none"}}}},
    ],
}


def kernel_params(more: Mapping[str, Field] | None = None, optional: Mapping[str, Field] | None = None,
                  **rules: Any) -> Shape:
    """The parameters of a kernel claim: the binding ones, then the kind's own (``more``
    required, ``optional``), with the binding rules and the kind's own ``rules``."""
    return shape({**KERNEL_PARAMS_REQUIRED, **(more or {})}, {**KERNEL_PARAMS_OPTIONAL, **(optional or {})},
                 **{**KERNEL_PARAMS_RULES, **rules})


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
