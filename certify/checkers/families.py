"""Built-in family names bound to their content (standard library only).

A built-in name means exactly one family:

* ``paper-5.1`` -- by the pinned canonical sha256 :data:`PAPER51_SHA256` (a test
  ties it to :func:`certify.core.families.paper51_family`);
* ``multilevel-M{M}-s{s}-h{h}-q{q}`` -- the Sec. 4 family on the first ``q`` words
  of the greedy packing of ``binom([M], h)`` at directed distance ``s + 1``, with
  all ``(s+1)^q`` assignments: rebuilt here by :func:`multilevel_body`, a small
  self-contained generator (no numpy, no RNG);
* ``ood-{M}-{q}-{n}-{split}`` -- the Sec. 5.2 pools at the default sizes and seed:
  rebuilt here by :func:`certify.checkers.generators.ood_body`, the generator the
  builder itself uses (a versioned splitmix64 stream, not numpy's).

Any other name is a family read from a file: the statement names it by its
hash, so the name carries no meaning of its own. A built-in family too large
to rebuild within :data:`REBUILD_LIMIT` inputs is bound only by assumption
(``family:<name>``), which ``certify verify`` reports (exit 4).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from certify.checkers.common import canonical_sha256
from certify.checkers.names import (  # noqa: F401 (the format's names, used here and re-exported)
    BUILTIN_CODES,
    MULTILEVEL_NAME,
    OOD_NAME,
    PAPER51_CODE,
    builtin_kind,
)

FAMILY_FORMAT = "certify-attention/family/1"

#: canonical sha256 of the built-in paper-5.1 family (certify.core.families.paper51_family)
PAPER51_SHA256 = "1b2c4b72ecccb293ceab58e0a6acbc5c4d4db81de962a9e677636741342ed8b0"
#: its tokens (count, canonical sha256 of the list of bit strings); its code's words are
#: pinned with the format's names (:mod:`certify.checkers.names`)
PAPER51_TOKENS = (41, "3ea3997ccda439eb1397d7549a4aa7b30a5e2af6443e5fe96fed00520815c31d")

#: largest number of inputs a built-in family is rebuilt with here
REBUILD_LIMIT = 1 << 16

_MULTILEVEL = MULTILEVEL_NAME
_OOD = OOD_NAME



def _match(pattern: "re.Pattern[str]", name: str) -> "re.Match[str]":
    """The match of a built-in name its kind was read from (:func:`builtin_kind`)."""
    m = pattern.fullmatch(name)
    if m is None:
        raise ValueError(f"{name!r} is not a built-in family name")
    return m

def _bits(mask: int, width: int) -> str:
    return "".join("1" if mask >> i & 1 else "0" for i in range(width))


#: subsets the checker scans at most to rebuild a greedy code (beyond: an assumption)
SCAN_LIMIT = 1 << 18


def greedy_words(M: int, h: int, delta: int, limit: int) -> list[int] | None:
    """The first ``limit`` words (bit masks, bit i = coordinate i) of the greedy
    lexicographic packing of ``h``-subsets of ``[M]`` at directed distance
    ``>= delta`` (subsets scanned in ``itertools.combinations`` order), or None
    when that takes more than :data:`SCAN_LIMIT` subsets."""
    kept: list[int] = []
    for n, combo in enumerate(itertools.combinations(range(M), h)):
        if n >= SCAN_LIMIT:
            return None
        cand = sum(1 << i for i in combo)
        if all(bin(cand & ~u).count("1") >= delta for u in kept):
            kept.append(cand)
            if len(kept) >= limit:
                break
    return kept


def multilevel_query(word: list[int], s: int) -> list[int]:
    """The query token ``q_S = (0, 1, x_{S^c}, 1^s)`` of code word ``S`` (0/1 list)."""
    return [0, 1] + [1 - x for x in word] + [1] * s


def multilevel_database(word: list[int], k: int, s: int) -> list[int]:
    """The database token ``d_{S,k} = (1, 0, x_S, u_k)`` with ``u_k = 1^k 0^(s-k)``:
    the family uses only these level vectors, so it has ``(s+1)^q`` inputs."""
    return [1, 0] + list(word) + [1] * k + [0] * (s - k)


def multilevel_input(kappa: list[int], words: list[list[int]], s: int) -> list[list[int]]:
    """The input of assignment ``kappa``: the ``q`` queries, then ``d_{S_i, kappa_i}``.
    The one definition of the family's inputs (its enumeration and every
    counterexample's membership test use it)."""
    return [multilevel_query(w, s) for w in words] + \
        [multilevel_database(w, k, s) for w, k in zip(words, kappa)]


class _TooLarge(Exception):
    """The built-in family is too large to rebuild here."""


def multilevel_body(M: int, s: int, h: int, q: int) -> dict[str, Any] | None:
    """The canonical JSON body (without its hash) of ``multilevel-M{M}-s{s}-h{h}-q{q}``,
    or None when the code has fewer than ``q`` words."""
    words = greedy_words(M, h, s + 1, q)
    if words is None:
        raise _TooLarge
    if len(words) < q:
        return None
    m = 2 + M + s
    wb = [[S >> i & 1 for i in range(M)] for S in words]
    toks: list[list[int]] = [multilevel_query(w, s) for w in wb]
    for w in wb:
        toks += [multilevel_database(w, k, s) for k in range(s + 1)]
    ip = [[sum(a & b for a, b in zip(u, v)) for v in toks] for u in toks]
    inputs, targets = [], []
    for kappa in itertools.product(range(s + 1), repeat=q):
        row = list(range(q)) + [q + i * (s + 1) + k for i, k in enumerate(kappa)]
        inputs.append(row)
        targets.append([min(ip[x][z] for z in row) for x in row])
    return {
        "format": FAMILY_FORMAT,
        "name": f"multilevel-M{M}-s{s}-h{h}-q{q}",
        "m": m, "n": 2 * q,
        "tokens": ["".join(map(str, t)) for t in toks],
        "inputs": inputs,
        "scored": [[1] * q + [0] * q for _ in inputs],
        "targets": targets,
        "params": {"builder": "multilevel", "M": M, "s": s, "h": h, "q": q,
                   "assignments": len(inputs)},
        "words": [_bits(w, M) for w in words],
        "jumps": None,
    }


def bind(name: Any, sha256: Any) -> tuple[list[str], list[str]]:
    """(problems, assumptions) of binding a family name to a hash."""
    kind = builtin_kind(name)
    if kind is None:
        return [], []
    if not isinstance(sha256, str):
        return [f"family {name!r} has no sha256"], []
    if kind == "paper-5.1":
        if sha256 != PAPER51_SHA256:
            return [f"'paper-5.1' is a built-in name for the family with sha256 "
                    f"{PAPER51_SHA256[:16]}...; this claim's family has {sha256[:16]}... "
                    "(a different family under the built-in name)"], []
        return [], []
    if kind == "multilevel":
        M, s, h, q = (int(v) for v in _match(_MULTILEVEL, name).groups())
        if not (1 <= s and 1 <= q and 0 <= h <= M <= 62) or (s + 1) ** q > REBUILD_LIMIT:
            return [], [f"family:{name}"]
        try:
            body = multilevel_body(M, s, h, q)
        except _TooLarge:
            return [], [f"family:{name}"]
        if body is None:
            return [f"built-in family {name!r} does not exist (the greedy code has fewer than "
                    f"{q} words)"], []
        want = canonical_sha256(body)
    else:
        from certify.checkers.generators import OOD_DEFAULTS, ood_body
        M, q, n = (int(v) for v in _match(_OOD, name).groups()[:3])
        split = _match(_OOD, name).group(4)
        if n != 2 * q or M < 2 or M % 2 or q < 1 or M > 24 or \
                max(OOD_DEFAULTS["train_size"], OOD_DEFAULTS["test_size"]) > REBUILD_LIMIT:
            return [], [f"family:{name}"]
        body = ood_body(M, q, split)
        if body is None:
            return [f"built-in family {name!r} does not exist at these parameters"], []
        want = canonical_sha256(body)
    if sha256 != want:
        return [f"{name!r} is a built-in name; rebuilt here its sha256 is {want[:16]}..., "
                f"not the claim's {sha256[:16]}... (a different family under the built-in "
                "name)"], []
    return [], []


def bind_transcript_code(params: Any, evidence: Any) -> tuple[list[str], list[str]]:
    """A transcript claim's sentence names "the multilevel family (M, s, h, q)":
    its code must be the built-in one, the first q words of the greedy packing."""
    fam = evidence.get("family") if isinstance(evidence, dict) else None
    if not isinstance(params, dict) or not isinstance(fam, dict):
        return [], []                  # the transcript checker reports the missing fields
    try:
        M, s, h, q = (int(params[k]) for k in ("M", "s", "h", "q"))
    except (KeyError, TypeError, ValueError):
        return [], []
    if not (1 <= s and 1 <= q and 0 <= h <= M <= 62):
        return [], []
    words = greedy_words(M, h, s + 1, q)
    if words is None:          # too large to rebuild here: the code is taken as the built-in one
        return [], [f"family:multilevel-M{M}-s{s}-h{h}-q{q}"]
    want = [_bits(w, M) for w in words]
    if fam.get("words") != want:
        return [f"the statement names the multilevel family (M, s, h, q) = ({M}, {s}, {h}, {q}), "
                "whose code is the greedy packing; the evidence's code words differ"], []
    return [], []


def builtin_tokens(name: Any) -> tuple[list[str], list[str], tuple[int, str] | None]:
    """(problems, assumptions, (count, sha256) of the token list) of the tokens of a
    built-in family; ``None`` when it is not a built-in name or too large to rebuild."""
    kind = builtin_kind(name)
    if kind is None:
        return [], [], None
    if kind == "paper-5.1":
        return [], [], PAPER51_TOKENS
    if kind == "multilevel":
        M, s, h, q = (int(v) for v in _match(_MULTILEVEL, name).groups())
        if not (1 <= s and 1 <= q and 0 <= h <= M <= 62) or (s + 1) ** q > REBUILD_LIMIT:
            return [], [f"family:{name}"], None
        try:
            body = multilevel_body(M, s, h, q)
        except _TooLarge:
            return [], [f"family:{name}"], None
    else:
        from certify.checkers.generators import OOD_DEFAULTS, ood_body
        M, q, n = (int(v) for v in _match(_OOD, name).groups()[:3])
        if n != 2 * q or M < 2 or M % 2 or q < 1 or M > 24 or \
                max(OOD_DEFAULTS["train_size"], OOD_DEFAULTS["test_size"]) > REBUILD_LIMIT:
            return [], [f"family:{name}"], None
        body = ood_body(M, q, _match(_OOD, name).group(4))
    if body is None:
        return [f"built-in family {name!r} does not exist at these parameters"], [], None
    return [], [], (len(body["tokens"]), canonical_sha256(body["tokens"]))
