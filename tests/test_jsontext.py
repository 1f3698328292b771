"""The certificate writer's JSON text equals ``json.dumps(obj, indent=1)`` byte for byte."""

import json
import math
from pathlib import Path

import pytest

from certify.core.jsontext import dumps_indent1

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    {}, [], 0, -0.0, 1.5e-320, math.nan, math.inf, -math.inf, None, True, "",
    {"a": [], "b": {}, "c": [[]], "d": [{}]},
    [1, True, 2], [True, False], [1, 2.0], [1, None], ["x", 1], [2 ** 200, -(2 ** 64), 0],
    ["caf\u00e9", "\ud800", "tab\t\"q\"\\", "\x00"], {"\u00e9\n": "\U0001f600"},
    {"g": [[3, -4], [-4, 160]], "e": -4, "f": [0.1, 1e300, -2.5e-8]},
    {1: "int key"}, {None: 1, True: 2, 1.5: 3}, (1, 2), {"t": (1, [2])}, [[1, 2], (3,)],
]


@pytest.mark.parametrize("obj", CASES, ids=range(len(CASES)))
def test_same_text_as_the_standard_library(obj):
    assert dumps_indent1(obj) == json.dumps(obj, indent=1)


def test_committed_certificates_are_rewritten_byte_for_byte():
    paths = sorted(ROOT.glob("reports/gallery/*/certificate.json"))[:6]
    assert paths
    for p in paths:
        obj = json.loads(p.read_text())
        assert dumps_indent1(obj) == json.dumps(obj, indent=1), p
