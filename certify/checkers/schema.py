"""The certificate format as a closed JSON Schema (draft 2020-12), and its validation.

``certify verify`` validates every certificate against the schema of its version
before any semantic check: a missing field, an unknown field, a value of the
wrong type, range or pattern is a failure of the claim it sits in (exit 1, the
JSON path named), never a field the checker quietly skips. What a field means is
then re-derived by the claim kind's checker; the schema only guarantees that
everything the checker relies on is *there* and has its shape.

Every field is required unless its definition says why it may be absent (the
``$comment`` beside it). One definition per claim kind, and per evidence form
(``form`` / ``method`` / ``type`` / the bound's name), generated from the kinds'
declarations (:mod:`certify.checkers.kinds`), through which the checkers also
close their objects (:meth:`certify.checkers.fields.Shape.check_keys`), so the
schema and the checkers cannot drift apart; the published copy,
``certificate.schema.json`` beside this module, is this dictionary written out
by ``make schema`` (:func:`write`; ``certify verify --schema`` prints it; a test
runs the writer and compares the bytes). One rule stands beside the schema, for
every depth of a claim's parameters and evidence (objects the schema types only
as objects included): no JSON float, only integers, strings, booleans and null
(:func:`inexact_values`; in the schema it would make jsonschema walk every
embedded matrix).

Deeply nested objects (a feasibility witness or derivation, an audited head's
tables, a transcript model) are typed as objects here; they are declared too
(the ``parts`` of :class:`certify.checkers.kinds.Kind`, every field with how it is
re-derived), and their keys are checked, closed, by the kind's checker through
that declaration.
"""

from __future__ import annotations

import json
import numbers
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from certify.checkers import kinds as _kinds
from certify.checkers import scratch
from certify.checkers.fields import HEX64, INT, OBJ, obj

#: certificate versions this checker reads, newest last
VERSIONS = ("certify-attention/certificate/3",)
#: the statement renderer each version fixes (certify.checkers.statements)
RENDERER_OF = {"certify-attention/certificate/3": "certify-attention/statements/3"}
#: versions no longer read, with why: their rules let sentences say more than was checked
#: (a producer-chosen Freivalds error, a renderer that printed only part of a claim, a
#: third-party kernel without its stated arguments), so no branch of this checker keeps them
RETIRED = {"certify-attention/certificate/1":
           "its rules are retired (a Freivalds error chosen by the producer, a renderer that "
           "printed part of a claim, third-party kernels without stated arguments)",
           "certify-attention/certificate/2":
           "its matrix hash (matrix_sha256) bound a matrix's entries but not its shape, so one hash "
           "named two matrices"}
SCHEMA_FILE = Path(__file__).with_name("certificate.schema.json")

def build() -> dict[str, Any]:
    """The certificate schema (version ``certify-attention/certificate/3``)."""
    kinds = _kinds.schemas()
    claim = {"type": "object", "required": ["kind"],
             "$comment": "beside this schema (certify.checkers.schema.inexact_values): a claim's parameters "
                         "and evidence hold no float at any depth: JSON integers and 'p/q' strings only",
             "properties": {"kind": {"enum": sorted(kinds)}},
             "allOf": [{"if": {"properties": {"kind": {"const": k}}},
                        "then": {"$ref": f"#/$defs/{k}"}} for k in sorted(kinds)]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://certify-attention.invalid/schema/certificate-2.json",
        "title": "certify-attention certificate, version 2",
        "$comment": __doc__.split("\n\n")[1].replace("\n", " "),
        **obj({
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


def published() -> dict[str, Any]:
    """The published schema file (shipped in the package), read once within one
    certificate's check (:mod:`certify.checkers.scratch`), else at every call."""
    return scratch.remember(("published_schema", str(SCHEMA_FILE)), lambda: json.loads(SCHEMA_FILE.read_text()))


class _Unsupported(Exception):
    """The schema uses a keyword :func:`_valid` does not implement (it then never decides)."""


#: keywords that do not constrain an instance, and those :func:`_valid` implements
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "$defs", "then", "else"})
_TYPES: dict[str, Any] = {
    "object": lambda x: isinstance(x, dict), "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str), "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "number": lambda x: isinstance(x, numbers.Number) and not isinstance(x, bool),
    # the format's integers are JSON integers: an integral float such as 64.0 is not one (draft 6
    # and later would accept it; both checkers read the same number as an int, so this format
    # refuses it, and _validator() tells jsonschema the same)
    "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema's ``const`` and ``enum`` read it: ``True`` is not ``1``."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(k in b and _equal(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)) or isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _valid(s: Any, x: Any, root: Mapping[str, Any]) -> bool:
    """``x`` satisfies the (draft 2020-12) schema ``s`` of the document ``root``: the
    keywords the published schema uses, each read as jsonschema reads it (its
    ``_keywords`` module); any other keyword raises :class:`_Unsupported`."""
    if s is True or s is False:
        return s
    for k, v in s.items():
        if k == "$id" and s is not root:
            raise _Unsupported("$id below the root (a new base for $ref)")
        if k in _ANNOTATIONS:
            continue
        if k == "type":
            if not any(_TYPES[t](x) for t in ([v] if isinstance(v, str) else v)):
                return False
        elif k == "properties":
            if isinstance(x, dict) and not all(_valid(sub, x[p], root) for p, sub in v.items() if p in x):
                return False
        elif k == "additionalProperties":
            if isinstance(x, dict):
                props = s.get("properties", {})
                if "patternProperties" in s:
                    raise _Unsupported(k)
                if not all(_valid(v, x[p], root) for p in x if p not in props):
                    return False
        elif k == "required":
            if isinstance(x, dict) and not all(p in x for p in v):
                return False
        elif k == "dependentRequired":
            if isinstance(x, dict) and not all(d in x for p, ds in v.items() if p in x for d in ds):
                return False
        elif k == "const":
            if not _equal(x, v):
                return False
        elif k == "enum":
            if not any(_equal(e, x) for e in v):
                return False
        elif k in ("minimum", "maximum"):
            if _TYPES["number"](x) and (x < v if k == "minimum" else x > v):
                return False
        elif k in ("minLength", "pattern"):
            if isinstance(x, str) and (len(x) < v if k == "minLength" else not re.search(v, x)):
                return False
        elif k in ("minItems", "maxItems"):
            if isinstance(x, list) and (len(x) < v if k == "minItems" else len(x) > v):
                return False
        elif k == "items":
            if "prefixItems" in s:
                raise _Unsupported(k)
            if isinstance(x, list) and not all(_valid(v, e, root) for e in x):
                return False
        elif k == "allOf":
            if not all(_valid(sub, x, root) for sub in v):
                return False
        elif k == "anyOf":
            if not any(_valid(sub, x, root) for sub in v):
                return False
        elif k == "oneOf":
            if sum(1 for sub in v if _valid(sub, x, root)) != 1:
                return False
        elif k == "not":
            if _valid(v, x, root):
                return False
        elif k == "if":
            branch = "then" if _valid(v, x, root) else "else"
            if branch in s and not _valid(s[branch], x, root):
                return False
        elif k == "$ref":
            if not isinstance(v, str) or not v.startswith("#/$defs/") or "/" in v[8:]:
                raise _Unsupported(f"$ref {v!r}")
            if not _valid(root["$defs"][v[8:]], x, root):
                return False
        else:
            raise _Unsupported(k)
    return True


def conforms(cert: Any) -> bool:
    """True when ``cert`` satisfies the published schema, decided without jsonschema
    (:func:`_valid`); False when it does not, or when the schema uses a keyword
    :func:`_valid` does not implement. :func:`violations` runs jsonschema only after a
    False: a certificate that conforms (the common case) is checked without importing
    it (about 0.03 CPU s per process). ``tests/test_schema_deletion.py`` holds the two
    validators to the same answer on every committed certificate, every mutation of
    the deletion test and random mutations at any depth.

    Why an early False needs no more care: every keyword used constrains by
    conjunction (a schema holds when each of its keywords does), so a keyword
    :func:`_valid` never reaches, in a subschema where another one already fails,
    cannot make that subschema hold; and when it returns True it has read every
    keyword of every subschema the answer depends on."""
    schema = published()
    try:
        return _valid(schema, cert, schema)
    except (_Unsupported, KeyError, TypeError, re.error):
        return False


def _strict_validator() -> Any:
    """jsonschema's 2020-12 validator with the format's integers: JSON integers only (an
    integral float is not one), as :data:`_TYPES` reads them."""
    import jsonschema
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, x: isinstance(x, int) and not isinstance(x, bool))
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)


def _validator() -> Any:
    """The validator of the published schema. The schema itself is not re-checked
    against the 2020-12 meta-schema here (0.2 CPU s in every process that verifies):
    it is the file ``make schema`` generates, and the suite checks that it equals the
    built schema and is a valid 2020-12 schema
    (``tests/test_fail_closed.py::test_published_schema_is_the_built_one_and_a_valid_2020_12_schema``)."""
    return scratch.remember("schema_validator", lambda: _strict_validator()(published()))


def _claim_validator() -> Any:
    schema = published()
    return scratch.remember("claim_validator", lambda: _strict_validator()(
        {"$defs": schema["$defs"], "$ref": "#/$defs/claim"}))


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _leaves(error: Any) -> Iterator[Any]:
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
    schema = published()
    floats = inexact_values(claim, index)
    try:
        if _valid({"$ref": "#/$defs/claim"}, claim, schema):
            return floats
    except (_Unsupported, KeyError, TypeError, re.error):
        pass
    return (_messages(_claim_validator().iter_errors(claim), ["claims", index]).get(index, []) or
            [f"schema: $.claims[{index}]: does not match the published schema"]) + floats


def violations(cert: Mapping[str, Any]) -> dict[int | None, list[str]]:
    """Schema violations, by claim index (``None``: outside any claim), and the floats of
    :func:`inexact_values`. Each names its JSON path, e.g. ``$.claims[3].parameters:
    'source_sha256' is a required property``."""
    claims = cert.get("claims") if isinstance(cert, Mapping) else None
    floats: dict[int | None, list[str]] = {
        i: v for i, c in enumerate(claims if isinstance(claims, list) else []) if (v := inexact_values(c, i))}
    if conforms(cert):
        return floats
    out = _messages(_validator().iter_errors(cert), []) or \
        {None: ["schema: $: does not match the published schema"]}
    for i, v in floats.items():
        out[i] = out.get(i, []) + v
    return out


def inexact_values(claim: Any, index: int) -> list[str]:
    """The first float in a claim's parameters or evidence, at any depth, as a violation
    (``[]`` when there is none). The format's numbers are exact: JSON integers and ``"p/q"``
    strings (docs/trust.md, "Verdicts and the certificate file"); an integral float such as
    ``11.0`` is not the integer 11 (Python's ``==`` would make it one), a fractional one is
    not exact. The schema's integer fields refuse floats already; this reaches the objects
    it types only as objects (a derivation, a witness, a transcript's model)."""
    if not isinstance(claim, Mapping):
        return []
    if not _holds_float([claim[k] for k in ("evidence", "parameters") if k in claim]):
        return []                             # the common case: no float, no path kept
    stack: list[tuple[Any, tuple[Any, ...]]] = [(claim[k], (k,)) for k in ("evidence", "parameters")
                                                if k in claim]
    while stack:
        v, where = stack.pop()
        if isinstance(v, dict):
            stack.extend((x, where + (k,)) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, where + (i,)) for i, x in enumerate(v))
        elif isinstance(v, float):
            return [f"schema: {_path(['claims', index, *where])}: {v!r:.30} is a float: a claim's "
                    "parameters and evidence hold JSON integers and 'p/q' strings, never floats"]
    return []


def _holds_float(values: list[Any]) -> bool:
    """A float at any depth of ``values`` (dicts and lists are entered). A list's element
    types are gathered as one set (in C), so a matrix of integers costs one pass per row,
    not one Python step per entry; :func:`_holds_float_plain` is the plain walk it must
    agree with (a test compares them)."""
    todo: list[Any] = [values]
    while todo:
        v = todo.pop()
        kinds = set(map(type, v.values() if isinstance(v, dict) else v))
        if any(issubclass(k, float) for k in kinds):
            return True
        if any(issubclass(k, (dict, list)) for k in kinds):
            todo.extend(x for x in (v.values() if isinstance(v, dict) else v) if isinstance(x, (dict, list)))
    return False


def _holds_float_plain(values: list[Any]) -> bool:
    """:func:`_holds_float`, one value at a time."""
    todo = list(values)
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, float):
            return True
    return False


def _messages(errors: Iterable[Any], prefix: list) -> dict[int | None, list[str]]:
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


def write(path: str | Path = SCHEMA_FILE) -> None:
    """Write the schema as published to ``path`` (``make schema``: the committed file).
    The bytes depend on the declarations only, so writing twice changes nothing."""
    Path(path).write_bytes(text().encode())
