"""The deletion test: every field of every claim kind, in every committed certificate,
deleted, set to null, to the wrong type, to an empty list or object, and to a
value from another claim. The rules (docs/design.md, "What a certificate means"):

* a mutation the schema refuses fails its claim (exit 1) with a problem naming
  the JSON path of the field;
* a mutation the schema accepts (a field it marks optional, or a value of the
  right shape) must leave the same verdict re-derived, or fail the claim;
* nothing reaches exit 4 through a mutation unless the printed assumption names
  the change (an assumption the original did not have fails this test).

Besides those, mutations generated from the kind's declaration
(certify/checkers/kinds.py): a key no declaration has, added to the parameters,
the evidence and every nested object the kind declares (it must fail, whether
the schema or the checker closes that object), and every declared field of each
nested object the claim carries, deleted. Every declared evidence form has a
representative, in the committed certificates or in the matrix certificates made
here, except the forms listed in :data:`UNREPRESENTED`.

The default profile mutates one claim of every distinct shape (kind, evidence form and
field set), each in its smallest certificate: every field deleted, set to a wrong type and to
another claim's value, and every declaration mutation (:data:`DEFAULT_FORMS`; null, an empty
list and an empty object, more wrong types of the same fields, with ``--runslow``); a
mutation the schema refuses must fail naming its path, one it accepts is re-checked by the
checker. ``--runslow`` runs every mutation, on those claims and on one claim per
(certificate, kind) of every committed certificate. Each claim is mutated and checked alone
(:func:`certify.checkers.verify.check_claim`) inside its own certificate, so the
references between claims (``features_claim``) stay as they were.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from committed import report_json

from certify.checkers import kinds, schema, scratch, verify

ROOT = Path(__file__).resolve().parent.parent


def _committed() -> list[Path]:
    out = []
    for path in report_json():
        try:
            obj = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(obj, dict) and str(obj.get("schema", "")).startswith("certify-attention/certificate"):
            out.append(path)
    return out


CERTS = _committed()


def _wrong_type(v: Any) -> Any:
    if isinstance(v, bool):
        return "true"
    if isinstance(v, int):
        return str(v) + ".5"
    if isinstance(v, str):
        return 7
    if isinstance(v, list):
        return {"0": v[:1]}
    if isinstance(v, dict):
        return [v]
    return "x"


#: the mutations of a field the default profile runs; the other empty values (null, [], {})
#: are more wrong types of the same field, run with ``--runslow``
DEFAULT_FORMS = ("deleted", "wrong type", "another claim's value")


def _mutations(claim: dict, others: list[dict], every_form: bool = True) -> Iterator[tuple[tuple, str, Any]]:
    """(path, what, new value or the marker DELETE) for every field of the claim,
    its parameters and its evidence (``every_form`` False: :data:`DEFAULT_FORMS` only)."""
    for mutation in _every_mutation(claim, others):
        if every_form or mutation[1] in DEFAULT_FORMS:
            yield mutation


def _every_mutation(claim: dict, others: list[dict]) -> Iterator[tuple[tuple, str, Any]]:
    for section in (None, "parameters", "evidence"):
        obj = claim if section is None else claim.get(section)
        if not isinstance(obj, dict):
            continue
        for key in list(obj):
            if section is None and key in ("parameters", "evidence"):
                continue
            path = (key,) if section is None else (section, key)
            v = obj[key]
            yield path, "deleted", DELETE
            if v is not None:
                yield path, "null", None
            yield path, "wrong type", _wrong_type(v)
            if v != []:
                yield path, "empty list", []
            if v != {}:
                yield path, "empty object", {}
            for o in others:
                src = o if section is None else o.get(section)
                if isinstance(src, dict) and key in src and src[key] != v:
                    yield path, "another claim's value", copy.deepcopy(src[key])
                    break


DELETE = object()
UNDECLARED = "undeclared"


def _nested(obj: Any, path: str) -> Iterator[tuple[tuple, dict]]:
    """The objects at a declared part's path below the evidence (``a.b``; ``:variant``
    ignored; ``*``: the first value of a map), with their key paths."""
    objs: list[tuple[tuple, Any]] = [((), obj)]
    for step in path.split(":")[0].split("."):
        nxt = []
        for where, o in objs:
            if isinstance(o, dict) and o:
                key = next(iter(o)) if step == "*" else step
                if key in o:
                    nxt.append((where + (key,), o[key]))
        objs = nxt
    return ((w, o) for w, o in objs if isinstance(o, dict))


def _declared_mutations(claim: dict) -> Iterator[tuple[tuple, str, Any]]:
    """Mutations generated from the claim kind's declaration (module docstring)."""
    kind = kinds.BY_NAME.get(claim.get("kind"))
    if kind is None:
        return
    for section in ("parameters", "evidence"):
        if isinstance(claim.get(section), dict):
            yield (section, UNDECLARED), "an undeclared key", 1
    for path, shape in kind.parts.items():
        for where, obj in _nested(claim.get("evidence"), path):
            if not set(shape.required) <= set(obj) <= set(shape.fields):
                continue                                   # another variant of that object
            base = ("evidence",) + where
            yield base + (UNDECLARED,), f"an undeclared key in {path}", 1
            for key in obj:
                yield base + (key,), f"{path}.{key} deleted", DELETE


def _apply(claim: dict, path: tuple, value: Any) -> dict:
    """The claim with one field replaced: copies along the path only (nothing below
    is ever changed in place)."""
    c = dict(claim)
    obj = c
    for p in path[:-1]:
        obj[p] = dict(obj[p])
        obj = obj[p]
    if value is DELETE:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return c


def _json_path(i: int, path: tuple) -> str:
    return f"$.claims[{i}]" + "".join(f".{p}" for p in path)


def _shape(claim: dict) -> tuple:
    """A claim's shape: kind, evidence form, and the keys of its parameters and evidence."""
    ev, p = claim.get("evidence") or {}, claim.get("parameters") or {}
    form = tuple(str(ev.get(k)) for k in ("form", "method", "type")) + (str(p.get("bound")),)
    return (claim["kind"], form, tuple(sorted(p)), tuple(sorted(ev)))


def _representatives() -> dict[tuple, tuple[Path, int]]:
    """Every distinct claim shape of the committed certificates, each in its smallest
    certificate (the default profile); ``--runslow`` mutates every certificate."""
    best: dict[tuple, tuple[int, Path, int]] = {}
    for path in CERTS:
        cert = json.loads(path.read_text())
        size = path.stat().st_size
        for i, c in enumerate(cert["claims"]):
            key = _shape(c)
            if key not in best or size < best[key][0]:
                best[key] = (size, path, i)
    return {k: (v[1], v[2]) for k, v in sorted(best.items(), key=lambda kv: str(kv[0]))}


REPRESENTATIVES = _representatives()


def _mutate_and_check(path: Path, only: set[int] | None = None, semantic: bool = True,
                      every_form: bool = True) -> None:
    """Mutate the claims of one certificate (``only``: those indices; else the first
    claim of each kind). ``semantic=False`` checks only the mutations the schema
    refuses (each must fail naming its path); the ones it accepts are re-checked
    by the kind's checker only with ``semantic``. The checks share one checker scratch, as
    the claims of one certificate do in ``verify`` (its keys are complete content, so a
    mutated claim never meets a value computed for another content)."""
    with scratch.session():
        _mutate_and_check_in_session(path, only, semantic, every_form)


def _mutate_and_check_in_session(path: Path, only: set[int] | None, semantic: bool,
                                 every_form: bool = True) -> None:
    cert = json.loads(path.read_text())
    base = path.parent
    seen: set[str] = set()
    failures: list[str] = []
    count = 0
    for i, claim in enumerate(cert["claims"]):
        if only is not None and i not in only:
            continue
        if only is None and claim["kind"] in seen:
            continue
        seen.add(claim["kind"])
        original = verify.check_claim(i, claim, cert, base)
        assert original.holds, (path, i, original.problems)
        others = [c for j, c in enumerate(cert["claims"]) if j != i]
        for fpath, what, value in [*_mutations(claim, others, every_form), *_declared_mutations(claim)]:
            mutated = _apply(claim, fpath, value)
            bad = schema.claim_violations(mutated, i)
            if not bad and not semantic:
                continue
            trial = {**cert, "claims": [*cert["claims"][:i], mutated, *cert["claims"][i + 1:]]}
            r = verify.check_claim(i, mutated, trial, base, schema_problems=bad)
            count += 1
            where = f"{path.name} claim {i} ({claim['kind']}) {'.'.join(fpath)} {what}"
            if bad:
                # refused by the schema: exit 1, naming the field's JSON path (or a parent's)
                if r.holds:
                    failures.append(f"{where}: schema refused it but the claim holds")
                elif not any(_json_path(i, fpath[:-1]) in p for p in r.problems):
                    failures.append(f"{where}: the problems do not name the path: {r.problems[:2]}")
                continue
            if not r.holds:
                continue                       # failed by the checker: fine
            if fpath[-1] == UNDECLARED:
                failures.append(f"{where}: an undeclared key is accepted")
                continue
            if r.verdict != original.verdict:
                failures.append(f"{where}: holds with verdict {r.verdict}, was {original.verdict}")
            new = set(r.assumptions) - set(original.assumptions)
            if new:
                failures.append(f"{where}: holds under a new assumption {sorted(new)}")
    assert count > 0
    assert not failures, f"{len(failures)} of {count} mutations pass against the rules:\n" + \
        "\n".join(failures[:40])


#: declared evidence forms of which neither the committed certificates nor the matrix
#: certificates made here hold a claim: the deletion test cannot mutate them (their checkers'
#: own tests exercise them: tests/test_rank.py, tests/test_nonnegative_structure.py, ...)
UNREPRESENTED = {("eps_rank", "none"), ("code_rank", "matrix"),
                 ("nonnegative", "none"), ("nonnegative", "counterexample"),
                 ("nonnegative", "quadratic_kernel"), ("nonnegative", "key_box"), ("transcript", "none")}


def _forms(claim: dict) -> list[tuple[str, str]]:
    """The declared evidence forms whose published schema the claim's evidence meets."""
    root = schema.published()
    kind = kinds.BY_NAME[claim["kind"]]
    return [(kind.name, f) for f, s in kind.evidence.items()
            if schema._valid(s.schema(), claim["evidence"], root)]


@pytest.fixture(scope="module")
def matrix_certs(tmp_path_factory) -> dict[str, Path]:
    """Certificates of a small nonnegative rank-4 matrix by the producer (``certify rank``):
    the matrix forms of exact_rank, eps_rank (gram) and nonnegative (entries); and, with the
    producer's exact-spectrum limit below the matrix's side (as for a matrix above 160),
    eps_rank by a projection witness (k = 4, eps 1/2) and by none (k = 0, eps 1000)."""
    import contextlib
    import io

    import numpy as np

    import certify.rank.eps
    from certify.cli.rank import main as rank_main
    folder = tmp_path_factory.mktemp("matrix")
    rng = np.random.default_rng(7)
    np.save(folder / "N.npy", (rng.integers(0, 4, (6, 4)) @ rng.integers(0, 4, (4, 6))).astype(np.float64))
    runs = {"entries": ["--eps", "1/2", "--require-nonnegative"], "projection": ["--eps", "1/2"],
            "projection-k0": ["--eps", "1000"]}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            pytest.MonkeyPatch.context() as mp:
        for name, args in runs.items():
            if name.startswith("projection"):
                mp.setattr(certify.rank.eps, "SPECTRAL_EXACT_LIMIT", 2)
            assert rank_main([str(folder / "N.npy"), "--out", str(folder / f"{name}.json"), *args]) == 0
    return {name: folder / f"{name}.json" for name in runs}


def test_every_declared_kind_and_form_is_represented(matrix_certs):
    assert {k[0] for k in REPRESENTATIVES} == {k.name for k in kinds.KINDS}
    covered = set()
    made = [(p, j) for p in matrix_certs.values() for j in range(len(json.loads(p.read_text())["claims"]))]
    for path, i in [*REPRESENTATIVES.values(), *made]:
        claim = json.loads(path.read_text())["claims"][i]
        forms = _forms(claim)
        assert len(forms) == (1 if claim["kind"] != "bound" else 0), (path, i, forms)
        covered.update(forms)
    declared = {(k.name, f) for k in kinds.KINDS for f in k.evidence}
    assert declared - covered == UNREPRESENTED


def test_every_matrix_form_made_here_fails_closed(matrix_certs, request):
    claims = {name: json.loads(p.read_text())["claims"] for name, p in matrix_certs.items()}
    assert {f for c in claims["entries"] for f in _forms(c)} == \
        {("exact_rank", "matrix"), ("eps_rank", "gram"), ("nonnegative", "matrix")}
    every_form = request.config.getoption("--runslow")
    _mutate_and_check(matrix_certs["entries"], every_form=every_form)
    for name in ("projection", "projection-k0"):             # its eps_rank claim (k > 0, k = 0)
        i = next(j for j, c in enumerate(claims[name]) if c["kind"] == "eps_rank")
        assert _forms(claims[name][i]) == [("eps_rank", "projection")]
        assert ("witness_y" in claims[name][i]["evidence"]) == (claims[name][i]["evidence"]["k"] > 0)
        _mutate_and_check(matrix_certs[name], only={i}, every_form=every_form)


@pytest.mark.parametrize("shape", list(REPRESENTATIVES), ids=lambda k: f"{k[0]}-{'-'.join(x for x in k[1] if x != 'None')}")
def test_every_claim_shape_fails_closed(shape, request):
    path, i = REPRESENTATIVES[shape]
    _mutate_and_check(path, only={i}, every_form=request.config.getoption("--runslow"))


@pytest.mark.slow
@pytest.mark.parametrize("path", CERTS, ids=lambda p: str(p.relative_to(ROOT / "reports")))
def test_every_required_field_of_every_certificate_fails_naming_its_path(path: Path):
    """Every committed certificate, every claim kind: each mutation the schema refuses
    fails its claim with the field's path (``--runslow``; the default profile runs
    every mutation on one claim of each shape, above)."""
    _mutate_and_check(path, semantic=False)


@pytest.mark.slow
@pytest.mark.parametrize("path", CERTS, ids=lambda p: str(p.relative_to(ROOT / "reports")))
def test_every_field_of_every_claim_kind_of_every_certificate_fails_closed(path: Path):
    _mutate_and_check(path)


# ---------------------------------------------------------------- the validator without jsonschema

def _jsonschema_valid(obj: Any) -> bool:
    return not any(True for _ in schema._validator().iter_errors(obj))


def _top_level_mutations(cert: dict) -> Iterator[dict]:
    for key in list(cert):
        rest = {k: v for k, v in cert.items() if k != key}
        yield rest
        for value in (None, 7, 1.0, True, "x", [], {}, _wrong_type(cert[key])):
            yield {**rest, key: value}
    yield {**cert, "extra": 1}
    yield {**cert, "claims": []}
    yield {**cert, "seeds": {"primes": 1.0}}                 # an integral float is an integer
    yield {**cert, "seeds": {"primes": True}}                # a bool is not
    yield {**cert, "seeds": {"primes": 1.5}}
    yield {**cert, "command": ["certify", 7]}
    yield {**cert, "inputs": {"m": "AB" * 32}}


@pytest.fixture
def scratch_session():
    """One checker scratch for the test: the published schema and its validators are read and
    built once (outside a check they are made afresh at every call, as the checker keeps no
    state between checks)."""
    from certify.checkers import scratch
    with scratch.session() as s:
        yield s


@pytest.mark.slow  # every committed certificate through jsonschema (8 CPU s); the any-depth comparison runs by default
def test_the_validator_without_jsonschema_decides_as_jsonschema_does(scratch_session):
    """``schema.conforms`` (no jsonschema import; what ``certify verify`` and the producer's
    own check run first) against jsonschema's Draft 2020-12 validator of the published
    schema: the same answer on every committed certificate, every top-level mutation of
    each, and every mutation of the deletion test on one claim of every shape (the claim
    schema, as ``claim_violations`` reads it)."""
    compared = refused = 0
    smallest = {path for path, _ in REPRESENTATIVES.values()}
    for path in CERTS:
        cert = json.loads(path.read_text())
        for obj in [cert, *(_top_level_mutations(cert) if path in smallest else ())]:
            ours, theirs = schema.conforms(obj), _jsonschema_valid(obj)
            assert ours == theirs, (path.name, ours, theirs, {k: obj.get(k) for k in ("seeds", "command")})
            compared += 1
            refused += not theirs
    for path, i in REPRESENTATIVES.values():
        cert = json.loads(path.read_text())
        claim = cert["claims"][i]
        others = [c for j, c in enumerate(cert["claims"]) if j != i]
        for fpath, what, value in [*_mutations(claim, others), *_declared_mutations(claim)]:
            mutated = _apply(claim, fpath, value)
            theirs = not any(True for _ in schema._claim_validator().iter_errors(mutated))
            ours = schema._valid({"$ref": "#/$defs/claim"}, mutated, schema.published())
            assert ours == theirs, (path.name, i, fpath, what)
            assert (schema.claim_violations(mutated, i) == []) == theirs
            compared += 1
            refused += not theirs
    assert compared > 2000 and 0 < refused < compared, (compared, refused)


def test_verify_of_a_conforming_certificate_does_not_import_jsonschema(tmp_path):
    """The saving the validator above is for: ``certify verify`` of a valid certificate
    loads no jsonschema; of one the schema refuses, it names the field as before."""
    import subprocess
    import sys
    src = ROOT / "reports" / "reference"
    cert = json.loads(sorted(p for p in CERTS if p.parent == src)[0].read_text())
    code = ("import json, sys; from certify.checkers import verify; "
            "c = json.load(open(sys.argv[1])); r = verify.verify_certificate(c); "
            "print(json.dumps([r.problems, [c.problems for c in r.claims], 'jsonschema' in sys.modules]))")
    for obj, imported in ((cert, False), ({**cert, "command": ["certify", 7]}, True)):
        (tmp_path / "c.json").write_text(json.dumps(obj))
        p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c.json")], capture_output=True,
                           text=True, cwd=ROOT)
        problems, _, loaded = json.loads(p.stdout)
        assert loaded is imported, p.stderr
        assert problems == ([] if not imported else ["schema: $.command[1]: 7 is not of type 'string'"])


_PALETTE: list[Any] = [None, 0, -1, 7, 1.0, 2.5, True, False, "", "x", "1/2", "0" * 64, 2 ** 70, [], {}, [1],
                       ["a"], {"a": 1}]


def _deep_mutation(cert: dict, rng: Any) -> dict:
    """``cert`` with one value at any depth deleted, replaced from :data:`_PALETTE`, given an
    unknown key, or (a list) shortened or grown."""
    c = copy.deepcopy(cert)
    paths, stack = [], [((), c)]
    while stack:
        path, obj = stack.pop()
        items = obj.items() if isinstance(obj, dict) else enumerate(obj[:3]) if isinstance(obj, list) else ()
        for k, v in items:
            paths.append(path + (k,))
            stack.append((path + (k,), v))
    path = rng.choice(paths)
    parent = c
    for k in path[:-1]:
        parent = parent[k]
    target, how = parent[path[-1]], rng.random()
    if how < 0.2 and isinstance(parent, dict):
        del parent[path[-1]]
    elif how < 0.3 and isinstance(target, dict):
        target["extra"] = rng.choice(_PALETTE)
    elif how < 0.4 and isinstance(target, list):
        target.append(copy.deepcopy(target[0]) if target and rng.random() < 0.5 else rng.choice(_PALETTE))
    else:
        parent[path[-1]] = copy.deepcopy(rng.choice(_PALETTE))
    return c


def test_the_validator_without_jsonschema_decides_as_jsonschema_does_at_any_depth(request, scratch_session):
    """Random mutations at any depth of the committed certificates (seeded): ``conforms`` and
    jsonschema give the same answer on each (400 by default, 4,000 with ``--runslow``)."""
    import random
    rng = random.Random(37)
    certs = [json.loads(p.read_text()) for p in CERTS if p.stat().st_size < 200_000]
    seen = {True: 0, False: 0}
    count = 4000 if request.config.getoption("--runslow") else 400
    for n in range(count):
        obj = _deep_mutation(rng.choice(certs), rng)
        theirs = _jsonschema_valid(obj)
        assert schema.conforms(obj) == theirs, n
        seen[theirs] += 1
    assert min(seen.values()) > count // 5, seen


def test_the_fast_float_scan_agrees_with_the_plain_walk():
    """schema._holds_float (a list's types gathered at once) against the plain walk:
    random nests of ints, bools, strings, None, floats, numpy floats, dicts and lists, and
    a float planted at a random depth of an integer matrix."""
    import random

    import numpy as np

    from certify.checkers.schema import _holds_float, _holds_float_plain
    rng = random.Random(11)
    leaves = [0, -3, 1 << 70, True, False, None, "1.5", "p/q", 2.0, float("nan"), np.float64(1.0)]

    def nest(depth):
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(leaves)
        if rng.random() < 0.5:
            return [nest(depth - 1) for _ in range(rng.randint(0, 4))]
        return {str(i): nest(depth - 1) for i in range(rng.randint(0, 4))}

    seen = set()
    for _ in range(3000):
        v = [nest(5)]
        seen.add(_holds_float(v))
        assert _holds_float(v) == _holds_float_plain(v), v
    assert seen == {True, False}
    m = [[rng.randint(-9, 9) for _ in range(50)] for _ in range(50)]
    assert not _holds_float([{"matrix": m}])
    m[rng.randrange(50)][rng.randrange(50)] = 3.0
    assert _holds_float([{"matrix": m}]) and _holds_float_plain([{"matrix": m}])
