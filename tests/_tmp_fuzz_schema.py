"""The schema validator that decides without jsonschema (``certify.checkers.schema.conforms``)
against jsonschema's own Draft 2020-12 validator of the published schema, on random mutations at
any depth of committed certificates: a field deleted, replaced by a value of another type (nulls,
booleans, integral and fractional floats, huge integers, strings, empty and nonempty containers),
an unknown key added, a list grown or shortened. Any disagreement is a bug of ``conforms``; the
one that matters most (it accepts what jsonschema refuses) would let a malformed certificate past
the first gate."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

from certify.checkers import schema

ROOT = Path(__file__).resolve().parent.parent
_PALETTE: list[Any] = [None, 0, -1, 1, 7, 1.0, 2.5, -0.0, True, False, "", "x", "1/2", "0" * 64, 2 ** 70,
                       -(2 ** 70), [], {}, [1], ["a"], {"a": 1}, [[1, 2], [3, 4]]]


def _certificates() -> list[dict]:
    out = []
    for path in sorted((ROOT / "reports").rglob("*.json")):
        if path.stat().st_size > 200_000:
            continue
        try:
            obj = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(obj, dict) and str(obj.get("schema", "")).startswith("certify-attention/certificate"):
            out.append(obj)
    return out


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:4]):
            out += _paths(v, prefix + (i,))
    return out


def _mutate(cert: dict, rng: random.Random) -> dict:
    c = copy.deepcopy(cert)
    path = rng.choice([p for p in _paths(c) if p])
    parent = c
    for k in path[:-1]:
        parent = parent[k]
    key, how = path[-1], rng.random()
    target = parent[key]
    if how < 0.2 and isinstance(parent, dict):
        del parent[key]
    elif how < 0.3 and isinstance(target, dict):
        target[rng.choice(["extra", "zz", "_"])] = rng.choice(_PALETTE)
    elif how < 0.4 and isinstance(target, list):
        if target and rng.random() < 0.5:
            target.pop(rng.randrange(len(target)))
        else:
            target.append(copy.deepcopy(rng.choice(target)) if target and rng.random() < 0.5 else rng.choice(_PALETTE))
    else:
        parent[key] = copy.deepcopy(rng.choice(_PALETTE))
    return c


def test_conforms_decides_as_jsonschema_on_random_mutations_at_any_depth():
    rng = random.Random(47)
    certs = _certificates()
    assert len(certs) >= 10
    validator = schema._validator()
    seen = {True: 0, False: 0}
    for n in range(3000):
        obj = _mutate(rng.choice(certs), rng)
        theirs = not any(True for _ in validator.iter_errors(obj))
        assert schema.conforms(obj) == theirs, (n, theirs)
        seen[theirs] += 1
    assert seen[True] > 100 and seen[False] > 1000, seen
