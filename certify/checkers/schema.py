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
declarations (:mod:`certify.checkers.kinds`), whose key lists the checkers also
close their objects with, so the schema and the checkers cannot drift apart;
the published copy, ``certificate.schema.json`` beside this module, is this
dictionary written out by ``make schema`` (``certify verify --schema`` prints
it; a test keeps the two equal).

Deeply nested objects whose every key the kind's checker lists and closes
itself (a feasibility witness or derivation, an audited head's tables, a
transcript model) are typed as objects here; their keys are checked, closed,
by that checker (:func:`certify.checkers.common.keys`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from certify.checkers import kinds as _kinds
from certify.checkers.fields import HEX64, INT, OBJ, obj

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

def build() -> dict[str, Any]:
    """The certificate schema (version ``certify-attention/certificate/2``)."""
    kinds = _kinds.schemas()
    claim = {"type": "object", "required": ["kind"],
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


@lru_cache(maxsize=1)
def published() -> dict[str, Any]:
    """The published schema file (shipped in the package)."""
    return json.loads(SCHEMA_FILE.read_text())


@lru_cache(maxsize=1)
def _validator() -> Any:
    # the published file is checked against the 2020-12 metaschema by the tests
    # (tests/test_fail_closed.py), not in every process: 0.18 CPU s of each command
    import jsonschema
    return jsonschema.Draft202012Validator(published())


@lru_cache(maxsize=1)
def _claim_validator() -> Any:
    import jsonschema
    schema = published()
    return jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/claim"})


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
    return _messages(_claim_validator().iter_errors(claim), ["claims", index]).get(index, [])


def violations(cert: Mapping[str, Any]) -> dict[int | None, list[str]]:
    """Schema violations, by claim index (``None``: outside any claim). Each names
    its JSON path, e.g. ``$.claims[3].parameters: 'source_sha256' is a required property``."""
    return _messages(_validator().iter_errors(cert), [])


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
