"""A family of inputs, re-validated from the object a claim embeds: its content
hash, its tokens and inputs, and every Min-IP target re-derived
(``t_i = min_j <x_i, x_j>``, self term included). A built-in name binds the
content too: ``paper-5.1`` by its pinned hash (the constant below, which
``tests/test_reference_checker.py`` ties to the project's own builder); other
built-in names (``multilevel-...``, ``ood-...``) are not rebuilt here, so a claim
naming one fails."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from certify.reference.exact import Fails, Refused, canonical_sha256, whole
from certify.reference.limits import MAX_FAMILY_POSITIONS

FORMAT = "certify-attention/family/1"
KEYS = {"format", "name", "m", "n", "tokens", "inputs", "scored", "targets", "params", "words",
        "jumps", "sha256"}
#: the canonical sha256 of the built-in family paper-5.1, and of its 41 tokens
PAPER51_SHA256 = "1b2c4b72ecccb293ceab58e0a6acbc5c4d4db81de962a9e677636741342ed8b0"
PAPER51_TOKENS = (41, "3ea3997ccda439eb1397d7549a4aa7b30a5e2af6443e5fe96fed00520815c31d")
_OTHER_BUILTIN = re.compile(r"multilevel-M\d+-s\d+-h\d+-q\d+|ood-\d+-\d+-\d+-(train|test)")
JUMP_COLUMNS = ["word_s", "word_u", "step", "x", "y", "z", "t", "u", "input_y", "input_z", "input_m"]


def bits(s: Any, what: str) -> list[int]:
    if not isinstance(s, str) or not s or set(s) - {"0", "1"}:
        raise Fails(f"{what} must be a non-empty 0/1 string")
    return [int(c) for c in s]


def dot(a: list[int], b: list[int]) -> int:
    return sum(x & y for x, y in zip(a, b))


@dataclass(frozen=True)
class Family:
    name: str
    tokens: list[list[int]]
    inputs: list[list[int]]
    scored: list[list[int]]
    targets: list[list[int]]             # re-derived
    n: int
    ip: list[list[int]]                  # token inner products
    jumps: list[list[int]] | None

    def positions(self) -> list[tuple[int, int]]:
        return [(i, p) for i, row in enumerate(self.scored) for p, f in enumerate(row) if f]


def family(obj: Any, params: Mapping[str, Any]) -> Family:
    """The family the claim embeds, bound to the claim's ``family`` and
    ``family_sha256``, with its targets re-derived."""
    if not isinstance(obj, dict) or set(obj) != KEYS:
        raise Fails(f"the embedded family must have exactly the keys {sorted(KEYS)}")
    if obj["format"] != FORMAT:
        raise Fails(f"the family's format is not {FORMAT}")
    digest = canonical_sha256({k: v for k, v in obj.items() if k != "sha256"})
    if obj["sha256"] != digest or params.get("family_sha256") != digest:
        raise Fails("the family's content hash is not its sha256 and the claim's family_sha256")
    name = obj["name"]
    if params.get("family") != name or not isinstance(name, str):
        raise Fails(f"parameters.family {params.get('family')!r:.60} is not the embedded family's name")
    if name == "paper-5.1" and digest != PAPER51_SHA256:
        raise Fails("the family named paper-5.1 is not the built-in paper-5.1 (pinned sha256)")
    if _OTHER_BUILTIN.fullmatch(name):
        raise Fails(f"{name} is a built-in family the reference checker does not rebuild")
    tokens = [bits(t, "family token") for t in obj["tokens"]] if isinstance(obj["tokens"], list) else []
    m = whole(obj["m"], "family m", 1)
    if not tokens or any(len(t) != m for t in tokens) or len({tuple(t) for t in tokens}) != len(tokens):
        raise Fails("family tokens must be distinct 0/1 strings of length m")
    n = whole(obj["n"], "family n", 1)
    inputs = obj["inputs"]
    if not isinstance(inputs, list) or not inputs or len(inputs) * n > MAX_FAMILY_POSITIONS:
        if isinstance(inputs, list) and len(inputs) * n > MAX_FAMILY_POSITIONS:
            raise Refused(f"a family of {len(inputs)} inputs of length {n}, above the reference "
                          f"checker's limit of {MAX_FAMILY_POSITIONS} positions")
        raise Fails("family inputs must be a non-empty list")
    K = len(tokens)
    for row in inputs:
        if not isinstance(row, list) or len(row) != n or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < K for v in row):
            raise Fails("every family input is n token indices")
    scored = obj["scored"]
    if not isinstance(scored, list) or len(scored) != len(inputs) or any(
            not isinstance(r, list) or len(r) != n or any(v not in (0, 1) or isinstance(v, bool) for v in r)
            for r in scored):
        raise Fails("family scored flags must be 0/1 rows of length n")
    ip = [[dot(a, b) for b in tokens] for a in tokens]
    targets = [[min(ip[x][z] for z in row) for x in row] for row in inputs]
    if obj["targets"] != targets:
        raise Fails("the family's stored targets are not the Min-IP targets of its inputs")
    jumps = obj["jumps"]
    if jumps is not None and (not isinstance(jumps, list) or any(
            not isinstance(r, list) or len(r) != len(JUMP_COLUMNS)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in r) for r in jumps)):
        raise Fails(f"family jumps must be rows of {len(JUMP_COLUMNS)} integers")
    return Family(name, tokens, [list(r) for r in inputs], [list(r) for r in scored], targets, n,
                  ip, jumps)
