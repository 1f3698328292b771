"""Each claim kind's parameters and evidence are declared once, as typed shapes
(certify/checkers/kinds.py, in the vocabulary of certify/checkers/fields.py), and
the checkers read a claim through them:

* no module of the checker outside the two declaration modules keeps a key list
  of field names of its own (a call of ``keys(...)``, or a tuple, list or set
  literal of three or more strings that are all declared field names), and the
  scan finds one planted in a real checker;
* every declared field says its JSON type, how the checker re-derives it and
  how a sentence prints it; the fields of each kind are exactly the properties
  the published schema gives its parameters and evidence;
* a field added to a declaration reaches the published schema and the checker's
  closed-key check together (a copy of the package with one line added);
* ``make schema`` is idempotent: its writer, run twice into a scratch file,
  gives the committed file's bytes.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

from waits import HANG_GUARD_S

from certify.checkers import kinds, schema
from certify.checkers.fields import ASSUMPTION, HASH, HOWS, RECOMPUTED, Shape
from tests.test_kinds import _properties  # the schema's property names under a key

ROOT = Path(__file__).resolve().parent.parent
CHECKERS = ROOT / "certify" / "checkers"
#: the declarations: the only modules of the checker that name fields in lists
DECLARATIONS = {CHECKERS / "fields.py", CHECKERS / "kinds.py"}


def _shapes() -> Iterator[tuple[str, str, Shape]]:
    """(kind, where, shape) for every declared shape: parameters, evidence forms, parts."""
    for k in kinds.KINDS:
        for group, shapes in (("parameters", k.parameters), ("evidence", k.evidence), ("part", k.parts)):
            for name, s in shapes.items():
                yield k.name, f"{group} {name}".strip(), s


def _declared_names() -> frozenset[str]:
    return frozenset(f for _, _, s in _shapes() for f in s.fields)


def key_lists(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """(line, what) for every key list in a module's source: a call of ``keys`` with
    arguments (the closed-key check given a list of its own; ``d.keys()`` has none),
    and a tuple, list or set literal of three or more strings that are all declared
    field names -- except the literal a tuple assignment unpacks one name per field
    (``M, s, h, q = (f(p, k) for k in ("M", "s", "h", "q"))``: four reads, each of a
    named field, not a list that closes an object)."""
    tree = ast.parse(source)
    unpacked: set[int] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple) and isinstance(value, (ast.GeneratorExp, ast.ListComp)) \
                and len(value.generators) == 1:
            it = value.generators[0].iter
            if isinstance(it, (ast.Tuple, ast.List)) and len(it.elts) == len(target.elts):
                unpacked.add(id(it))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name == "keys" and (node.args or node.keywords):
                found.append((node.lineno, "a call of keys(...)"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in unpacked:
            strs = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(strs) == len(node.elts) >= 3 and set(strs) <= names:
                found.append((node.lineno, f"the key list {strs}"))
    return found


# ---------------------------------------------------------------- no key list outside the declarations

def test_no_checker_module_keeps_a_key_list_of_its_own():
    names = _declared_names()
    modules = sorted(p for p in CHECKERS.rglob("*.py") if p not in DECLARATIONS)
    assert len(modules) >= 30 and all(p.exists() for p in DECLARATIONS)
    bad = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in modules
           for line, what in key_lists(p.read_text(), names)]
    assert not bad, "key lists outside the declarations (read them from certify/checkers/kinds.py):\n" + \
        "\n".join(bad)


def test_the_scan_finds_a_key_list_planted_in_a_checker():
    names = _declared_names()
    eps = (CHECKERS / "rank" / "eps.py").read_text()
    declared = '_DECLARED.form("factor").check_keys(ev, "factor evidence")'
    assert declared in eps and not key_lists(eps, names)
    # the list the checker kept before its declaration was read: found twice (the call, the tuple)
    planted = eps.replace(declared, 'keys(ev, "factor evidence", ("form", "num_tokens", "r", "eps", "k", '
                                    '"exact", "sigma_sq_enclosures"), ("features", "tokens"))')
    assert [what for _, what in key_lists(planted, names)] == [
        "a call of keys(...)",
        "the key list ['form', 'num_tokens', 'r', 'eps', 'k', 'exact', 'sigma_sq_enclosures']"]
    # a constant list, a set, a list; not: reads unpacked one per field, other strings, dict.keys()
    src = ('GRAMS = ["gram_q", "gram_k", "num_tokens"]\n'
           'if set(fs) != {"phi_q", "phi_k", "dtype", "layout"}: pass\n'
           'M, s, h, q = (p[k] for k in ("M", "s", "h", "q"))\n'
           'MAPS = ("identity", "relu", "elu1")\n'
           'ks = list(ev.keys())\n')
    assert [line for line, _ in key_lists(src, names)] == [1, 2]


# ---------------------------------------------------------------- the declarations are the schema



def _subschemas(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _subschemas(v)
    elif isinstance(node, list):
        for v in node:
            yield from _subschemas(v)


def test_each_kind_s_declared_fields_are_the_published_schema_s_properties():
    published = schema.published()["$defs"]
    for k in kinds.KINDS:
        s = published[k.name]
        params = {f for p in k.parameters.values() for f in p.fields}
        assert set(_properties(s, "parameters")) == params, k.name
        assert set(_properties(s, "evidence")) == {f for e in k.evidence.values() for f in e.fields}, k.name
        # every published shape is one object of the kind's schema, as declared (fields, order,
        # rules; a field holding it may say why beside it)
        subs = [json.dumps({key: v for key, v in x.items() if key != "$comment"}) for x in _subschemas(s)]
        for group in (k.parameters, k.evidence, k.parts):
            for name, shape in group.items():
                if shape.published:
                    assert json.dumps(shape.schema()) in subs, (k.name, name)
        # a nested part sits below a field of the evidence; one the schema does not spell out
        # below a field it types as an object only (its checker closes it)
        for path, shape in k.parts.items():
            top = path.split(".")[0].split(":")[0]
            holders = [e.fields[top].schema for e in k.evidence.values() if top in e.fields]
            assert holders, (k.name, path)
            if not shape.published:
                assert all("properties" not in json.dumps(h) for h in holders), (k.name, path)


def test_every_field_says_how_it_is_re_derived_and_a_sentence_prints_only_re_derived_evidence():
    count, assumptions = 0, set()
    for kind, where, s in _shapes():
        for name, f in s.fields.items():
            count += 1
            assert f.how in HOWS or f.how.startswith(ASSUMPTION), (kind, where, name, f.how)
            if f.how.startswith(ASSUMPTION):
                assumptions.add(f.how[len(ASSUMPTION):])
            if where.startswith("evidence") and f.printed:
                # a sentence never prints a producer's choice that nothing re-derives
                assert f.how in (RECOMPUTED, HASH), (kind, where, name, f.how)
    assert count >= 300
    # each assumption a field names is one verify prints (its prefix "NAME:" in the checker)
    source = "\n".join(p.read_text() for p in CHECKERS.rglob("*.py") if p not in DECLARATIONS)
    assert assumptions == {"trusted", "extraction", "replay"}
    for a in assumptions:
        assert f'"{a}:' in source or f"f\"{a}:" in source, a
    # the fields a claim may take as stated are declared taken as stated, or are re-derived
    for k in kinds.KINDS:
        for form, fields in k.trusted.items():
            assert k.form(form).fields["trusted"].how == f"{ASSUMPTION}trusted", (k.name, form)
            assert set(fields) <= set(k.form(form).fields) | {"all_products"}, (k.name, form)


def test_the_tables_generated_from_the_fields():
    # the sentence table lists exactly the fields declared printed; the trust test's name fields
    # are those printed as names (tests/test_trust.py edits each)
    for k in kinds.KINDS:
        if k.sentence is None:
            assert k.name == "bound" and k.prints_all
            continue
        printed = {(w, f) for w, shapes in (("parameters", k.parameters), ("evidence", k.evidence))
                   for s in shapes.values() for f, d in s.fields.items() if d.printed}
        assert set(kinds.FIELDS[k.name]) == printed
    assert {"token_set", "source_sha256", "code_sha256", "family_sha256", "quantizer"} <= kinds.name_fields()
    assert not {"eps", "rank", "error", "dtype"} & kinds.name_fields()


# ---------------------------------------------------------------- one declaration, schema and checker

_ADDED = '"note": Field(STR, WITNESS), '
_ANCHOR = '"sigma_sq_enclosures": Field({"type": "array"}, WITNESS)'

_TRIAL = r"""
import json, sys
from pathlib import Path
from certify.checkers import fields, schema, verify
from certify.checkers.rank import eps
assert Path(fields.__file__).resolve().is_relative_to(Path(sys.argv[2]).resolve())
schema.write()                                          # make schema, in the copy
built = schema.published()["$defs"]["eps_rank"]
factor = next(x for x in built["properties"]["evidence"]["oneOf"]
              if x["if"]["properties"]["form"] == {"const": "factor"})["then"]
path = Path(sys.argv[1]); cert = json.loads(path.read_text()); i = int(sys.argv[3])
claim = cert["claims"][i]
noted = {**claim, "evidence": {**claim["evidence"], "note": "checked"}}
out = {"required": "note" in factor["required"], "property": factor["properties"].get("note"),
       "with": verify.check_claim(i, noted, cert, path.parent).holds,
       "without": list(verify.check_claim(i, claim, cert, path.parent).problems)}
try:
    eps.check_eps_rank(claim, cert)
except Exception as exc:
    out["checker without"] = str(exc)
print(json.dumps(out))
"""


def test_a_field_added_to_a_declaration_reaches_the_schema_and_the_checker_together(tmp_path):
    """One line added to eps_rank's factor declaration (a required field ``note``), in a
    copy of the package: the schema ``make schema`` writes requires it, and a claim with
    it holds there, one without it fails (the schema and the checker's own closed-key
    check both name it); in this tree the same field is refused as undeclared."""
    from certify.checkers.common import Bad
    from certify.checkers.rank import eps
    path = ROOT / "reports" / "gallery" / "custom" / "certificate.json"
    cert, i = json.loads(path.read_text()), 1
    claim = cert["claims"][i]
    assert claim["kind"] == "eps_rank" and claim["evidence"]["form"] == "factor"
    # here: the field is not declared, so both the schema and the checker refuse it
    from certify.checkers import verify
    noted = {**claim, "evidence": {**claim["evidence"], "note": "checked"}}
    assert verify.check_claim(i, claim, cert, path.parent).holds
    r = verify.check_claim(i, noted, cert, path.parent)
    assert not r.holds and "'note' was unexpected" in r.problems[0]
    try:
        eps.check_eps_rank(noted, cert)
        raise AssertionError("the checker accepted an undeclared field")
    except Bad as exc:
        assert str(exc) == "factor evidence: unexpected ['note']"
    # the copy, with the field declared
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "certify", copy / "certify", ignore=shutil.ignore_patterns("__pycache__"))
    text = (copy / "certify/checkers/kinds.py").read_text()
    assert text.count(_ANCHOR) == 1
    (copy / "certify/checkers/kinds.py").write_text(text.replace(_ANCHOR, _ADDED + _ANCHOR))
    run = subprocess.run([sys.executable, "-c", _TRIAL, str(path), str(copy), str(i)], cwd=copy,
                         env={**os.environ, "PYTHONPATH": str(copy)},
                         capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["required"] and out["property"] == {"type": "string", "minLength": 1}
    assert out["with"] is True
    assert any("'note' is a required property" in p for p in out["without"]), out["without"]
    assert out["checker without"] == "factor evidence: missing ['note']"


# ---------------------------------------------------------------- make schema

def test_make_schema_writes_the_committed_bytes_and_twice_changes_nothing(tmp_path):
    target = tmp_path / "certificate.schema.json"
    for _ in range(2):
        subprocess.run([sys.executable, "-c", "import sys; from certify.checkers import schema; "
                                              "schema.write(sys.argv[1])", str(target)],
                       cwd=ROOT, check=True, timeout=HANG_GUARD_S)
        assert target.read_bytes() == schema.SCHEMA_FILE.read_bytes()
