"""Each claim kind is declared once (certify/checkers/kinds.py), and every table
that used to be kept by hand is generated from the declaration: the published
schema, the renderer's field table, the checker table, the trusted table and
the checkers' key lists (tests/test_declarations.py: no checker keeps a list of
its own)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, Iterator

from certify.checkers import closed_form as bounds_checker
from certify.checkers import kinds, schema, statements, verify
from certify.checkers import transcript as transcript_checker
from certify.checkers.rank import evidence
from certify.checkers.rank import nonnegative as nonneg_checker

ROOT = Path(__file__).resolve().parent.parent


def _properties(node: Any, under: str) -> Iterator[str]:
    """Every property name that appears under key ``under`` anywhere in a schema."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == under and isinstance(v, dict):
                props = v.get("properties")
                if isinstance(props, dict):
                    yield from props
                for sub in ("oneOf", "anyOf", "allOf"):
                    for alt in v.get(sub, []) if isinstance(v.get(sub), list) else []:
                        yield from _properties({under: alt}, under)
                for sub in ("then", "else"):
                    if isinstance(v.get(sub), dict):
                        yield from _properties({under: v[sub]}, under)
            yield from _properties(v, under)
    elif isinstance(node, list):
        for v in node:
            yield from _properties(v, under)


def test_the_published_schema_the_renderer_and_verify_read_the_declarations():
    names = [k.name for k in kinds.KINDS]
    assert len(names) == len(set(names)) == 12
    built = schema.build()
    assert sorted(built["$defs"]) == sorted(names + ["claim"])
    assert json.loads((ROOT / "certify/checkers/certificate.schema.json").read_text()) == built
    assert statements.FIELDS == kinds.FIELDS and verify.CHECKERS == kinds.CHECKERS
    assert set(statements._KINDS) == set(names)           # a sentence for every declared kind
    for k in kinds.KINDS:
        module = importlib.import_module(f"certify.checkers.{k.checker}")
        assert callable(module.check), k.name


def test_every_field_a_sentence_prints_is_a_declared_field_of_its_kind():
    for k in kinds.KINDS:
        s = k.schema()
        declared = {"parameters": set(_properties(s, "parameters")),
                    "evidence": set(_properties(s, "evidence"))}
        for where, key in k.sentence or ():
            assert key in declared[where], (k.name, where, key)


def test_the_trusted_table_names_declared_evidence_fields():
    table = kinds.trusted_table()
    assert evidence._TRUSTED == table
    assert table[("exact_rank", "factor")] == ["gram_q", "gram_k", "num_tokens"]
    for (name, _form), fields in table.items():
        ev = set(_properties(kinds.BY_NAME[name].schema(), "evidence"))
        for f in fields:
            # "all_products" names the products themselves (no field of that name)
            assert f in ev or f == "all_products", (name, f)


def test_the_checkers_close_their_objects_with_the_declared_shapes():
    assert bounds_checker.PARAMETERS is kinds.BOUNDS
    assert transcript_checker._DECLARED is kinds.BY_NAME["transcript"]
    assert nonneg_checker._DECLARED is kinds.BY_NAME["nonnegative"]
    assert evidence._EXACT_PARAMS is kinds.BY_NAME["exact_rank"].params()
    assert evidence.FREIVALDS_PARAMS == ("upper_bound", "error_log2")
    # a bound's schema variant per declared bound, with exactly its parameters
    variants = schema.build()["$defs"]["bound"]["allOf"][0]["oneOf"]
    got = {v["properties"]["parameters"]["properties"]["bound"]["const"]:
           set(v["properties"]["parameters"]["properties"]) for v in variants}
    assert got == {b: set(p.fields) for b, p in kinds.BOUNDS.items()}


def test_the_service_offers_every_declared_kind_and_names_it_in_words():
    """The service's kind filter (pages and API schema) is the declared list, and every kind
    has its words on the pages (a new kind cannot be left out of either)."""
    from certify.service import app, openapi
    names = [k.name for k in kinds.KINDS]
    assert list(app.KINDS) == names and openapi.KINDS == names
    assert set(app.KIND_LABELS) == set(names)
