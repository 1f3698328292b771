"""The built-in families other than ``paper-5.1``, rebuilt here from their
definitions (the paper's Sec. 4 and Sec. 5.2, and the project's documented
generator), in plain Python: no numpy, no project code.

``multilevel-M{M}-s{s}-h{h}-q{q}`` -- the code: the ``h``-subsets of ``[M]`` in
lexicographic order (``itertools.combinations``), each kept when every word
kept before it misses at least ``s + 1`` of its coordinates (``|S \\ U| >= s +
1``), the first ``q`` kept; the tokens: per word ``S`` the query ``(0, 1,
x_(S^c), 1^s)``, then per word its database tokens ``(1, 0, x_S, 1^k 0^(s-k))``
for ``k = 0..s``; one input per assignment ``kappa`` in ``{0..s}^q``
(lexicographic, ``kappa_0`` most significant): the ``q`` queries then the
database tokens ``d_(S_i, kappa_i)``; the queries are scored.

``ood-{M}-{q}-{2q}-{train|test}`` -- the Sec. 5.2 pools at the default sizes
(2,048 train, 1,024 test inputs) and seed 0, drawn from SplitMix64 (Steele, Lea
and Flood 2014; generator ``splitmix64-colex/1``): the stream's draws, in order,
are a shuffle of the ``2^q`` assignments (split in half: train, test), 64
shuffles of the ``M`` coordinates (the first 32 train, the rest test), then per
input ``q`` distinct codewords of the pool (weight-``M/2`` words numbered in
colex order, drawn uniformly and kept when new and in the pool: a keyed
SplitMix64 bit of the word's number), a coordinate shuffle and an assignment of
the pool, and a shuffle of the ``2q`` positions. A query of word ``S`` is ``(1,
0, x_S)``; its slot holds ``(0, 1, x_(S^c))`` when the assignment's bit is 1,
else ``(0, 1, x_(S^c) + e_c)`` with ``c`` the first coordinate of ``S``; tokens
are numbered in first-use order.

Each is the canonical JSON body whose sha256 is the family's; a test pins every
one against the project's builder (:mod:`certify.core.families`). A name that
denotes no family (``s = 0``, ``q = 0``, ``h > M``; ``n != 2q``, an odd ``M``;
a code or a pool with fewer than ``q`` words) fails; one beyond the limits
below -- the same limits at which ``certify verify`` names the assumption -- is
the named assumption ``family:<name>`` (exit 4).
"""

from __future__ import annotations

import re
from itertools import combinations, product
from math import comb
from typing import Any

from certify.reference.exact import Fails

FORMAT = "certify-attention/family/1"
MULTILEVEL = re.compile(r"multilevel-M(\d+)-s(\d+)-h(\d+)-q(\d+)")
OOD = re.compile(r"ood-(\d+)-(\d+)-(\d+)-(train|test)")
#: rebuilt up to this many inputs (assignments); beyond: the assumption family:<name>
MAX_INPUTS = 1 << 16
#: subsets scanned for a greedy code; beyond: the assumption
MAX_SCANNED = 1 << 18
#: the largest code length M rebuilt (multilevel; ood: 24)
MAX_M, MAX_OOD_M = 62, 24
OOD_SIZES, OOD_SEED = {"train": 2048, "test": 1024}, 0
_MASK = (1 << 64) - 1


class TooLarge(Exception):
    """The built-in family is beyond the limits above (the caller names the assumption)."""


def is_builtin(name: Any) -> bool:
    return isinstance(name, str) and (name == "paper-5.1" or MULTILEVEL.fullmatch(name) is not None
                                      or OOD.fullmatch(name) is not None)


# ---------------------------------------------------------------- multilevel (Sec. 4)

def greedy_code(M: int, h: int, s: int, q: int) -> list[list[int]]:
    """The first ``q`` words (0/1 lists) of the greedy code; :class:`TooLarge` after
    :data:`MAX_SCANNED` subsets; fewer than ``q`` when the code is smaller."""
    kept: list[list[int]] = []
    for n, subset in enumerate(combinations(range(M), h)):
        if n >= MAX_SCANNED:
            raise TooLarge
        word = [1 if i in subset else 0 for i in range(M)]
        if all(sum(1 for a, b in zip(word, u) if a and not b) >= s + 1 for u in kept):
            kept.append(word)
            if len(kept) == q:
                break
    return kept


def multilevel_params(name: str) -> tuple[int, int, int, int]:
    """(M, s, h, q) of a multilevel name; :class:`Fails` for parameters that denote no
    family, :class:`TooLarge` beyond the limits."""
    m = MULTILEVEL.fullmatch(name)
    if m is None:
        raise Fails(f"{name!r:.60} is not a multilevel family name")
    M, s, h, q = (int(v) for v in m.groups())
    if M > MAX_M or (s >= 1 and q >= 1 and (s + 1) ** q > MAX_INPUTS):
        raise TooLarge
    if M < 1 or s < 1 or q < 1 or h > M:
        raise Fails(f"{name} names no family (it needs M, s, q >= 1 and h <= M)")
    return M, s, h, q


def multilevel(name: str) -> dict[str, Any]:
    M, s, h, q = multilevel_params(name)
    words = greedy_code(M, h, s, q)
    if len(words) < q:
        raise Fails(f"{name} names no family: the greedy code has {len(words)} < q words")
    tokens: list[list[int]] = [[0, 1] + [1 - b for b in w] + [1] * s for w in words]
    for w in words:
        tokens += [[1, 0] + w + [1] * k + [0] * (s - k) for k in range(s + 1)]
    inputs = [list(range(q)) + [q + i * (s + 1) + k for i, k in enumerate(kappa)]
              for kappa in product(range(s + 1), repeat=q)]
    return _body(name, 2 + M + s, 2 * q, tokens, inputs, [[1] * q + [0] * q for _ in inputs],
                 {"builder": "multilevel", "M": M, "s": s, "h": h, "q": q, "assignments": len(inputs)},
                 ["".join(map(str, w)) for w in words])


# ---------------------------------------------------------------- ood (Sec. 5.2)

def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


class Stream:
    """SplitMix64: state += golden gamma, output = mix(state)."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def draw(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        return _mix(self.state)

    def uniform(self, n: int) -> int:
        """Uniform in ``[0, n)``: draws at or above the largest multiple of n are rejected."""
        cut = (1 << 64) - (1 << 64) % n
        while True:
            v = self.draw()
            if v < cut:
                return v % n

    def shuffle(self, n: int) -> list[int]:
        """Fisher-Yates from the top: position i swaps with a uniform j <= i."""
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.uniform(i + 1)
            p[i], p[j] = p[j], p[i]
        return p


def _in_test_pool(seed: int, number: int) -> bool:
    """The pool bit of codeword ``number``: the top bit of SplitMix64's first output
    from the key ``(seed * 0x100000001B3 + 1) xor (number * 0xD1B54A32D192ED03)``."""
    key = ((seed * 0x100000001B3 + 1) ^ (number * 0xD1B54A32D192ED03)) & _MASK
    return _mix((key + 0x9E3779B97F4A7C15) & _MASK) >> 63 == 1


def _colex_word(number: int, M: int, k: int) -> list[int]:
    """The weight-k word of length M numbered ``number`` in colex order (number =
    sum of C(c_j, j) over its coordinates c_1 < ... < c_k)."""
    word = [0] * M
    for x in range(M - 1, -1, -1):
        if k == 0:
            break
        if number >= comb(x, k):
            word[x] = 1
            number -= comb(x, k)
            k -= 1
    return word


def ood_params(name: str) -> tuple[int, int, str]:
    m = OOD.fullmatch(name)
    if m is None:
        raise Fails(f"{name!r:.60} is not an ood family name")
    M, q, n = (int(v) for v in m.groups()[:3])
    if M > MAX_OOD_M:
        raise TooLarge
    if n != 2 * q or M < 2 or M % 2 or q < 1:
        raise Fails(f"{name} names no family (it needs n = 2q, q >= 1 and an even M >= 2)")
    return M, q, m.group(4)


def ood(name: str) -> dict[str, Any]:
    M, q, split = ood_params(name)
    seed, total = OOD_SEED, comb(M, M // 2)
    if total <= 1 << 16:
        in_test = sum(_in_test_pool(seed, i) for i in range(total))
        if min(in_test, total - in_test) < q:
            raise Fails(f"{name} names no family: a pool has fewer than q codewords")
    elif q > total // 4:
        raise Fails(f"{name} names no family: q is above a quarter of the codewords")
    rng = Stream(seed)
    assignments = [[a >> i & 1 for i in range(q)] for a in range(1 << q)]
    order = rng.shuffle(len(assignments))
    half = max(1, len(assignments) // 2)
    if len(assignments) - half < 1:
        raise Fails(f"{name} names no family: the test pool has no assignment")
    pool_assign = {"train": [assignments[i] for i in order[:half]],
                   "test": [assignments[i] for i in order[half:]]}
    coords = [rng.shuffle(M) for _ in range(64)]
    pool_coords = {"train": coords[:32], "test": coords[32:]}
    body = None
    for pool in ("train", "test"):                 # train is drawn first: test's draws follow it
        tokens: list[list[int]] = []
        seen: dict[tuple[int, ...], int] = {}

        def index(tok: list[int]) -> int:
            if tuple(tok) not in seen:
                seen[tuple(tok)] = len(tokens)
                tokens.append(tok)
            return seen[tuple(tok)]

        inputs, scored = [], []
        for _ in range(OOD_SIZES[pool]):
            numbers: list[int] = []
            while len(numbers) < q:
                i = rng.uniform(total)
                if i not in numbers and _in_test_pool(seed, i) == (pool == "test"):
                    numbers.append(i)
            perm = pool_coords[pool][rng.uniform(32)]
            kappa = pool_assign[pool][rng.uniform(len(pool_assign[pool]))]
            seq, flags = [], []
            for i, number in enumerate(numbers):
                w = _colex_word(number, M, M // 2)
                S = [w[perm[c]] for c in range(M)]
                seq.append(index([1, 0] + S))
                flags.append(1)
                other = [1 - v for v in S]
                if not kappa[i]:
                    other[S.index(1)] = 1
                seq.append(index([0, 1] + other))
                flags.append(0)
            shuffle = rng.shuffle(2 * q)
            inputs.append([seq[o] for o in shuffle])
            scored.append([flags[o] for o in shuffle])
        if pool == split:
            body = _body(name, M + 2, 2 * q, tokens, inputs, scored,
                         {"builder": "ood", "generator": "splitmix64-colex/1", "M": M, "q": q, "n": 2 * q,
                          "seed": seed, "split": split, "size": OOD_SIZES[pool]}, None)
    assert body is not None
    return body


# ---------------------------------------------------------------- both

def _body(name: str, m: int, n: int, tokens: list[list[int]], inputs: list[list[int]],
          scored: list[list[int]], params: dict[str, Any], words: list[str] | None) -> dict[str, Any]:
    masks = [sum(b << i for i, b in enumerate(t)) for t in tokens]     # token -> bit mask

    def target(x: int, row: list[int]) -> int:           # Min-IP: the least overlap in the input
        return min((masks[x] & masks[z]).bit_count() for z in row)
    return {"format": FORMAT, "name": name, "m": m, "n": n,
            "tokens": ["".join(map(str, t)) for t in tokens], "inputs": inputs, "scored": scored,
            "targets": [[target(x, row) for x in row] for row in inputs],
            "params": params, "words": words, "jumps": None}


def rebuild(name: str) -> dict[str, Any]:
    """The canonical body (without its ``sha256``) of a built-in multilevel or ood
    family; :class:`Fails` when the name denotes none, :class:`TooLarge` beyond the limits."""
    if MULTILEVEL.fullmatch(name):
        return multilevel(name)
    if OOD.fullmatch(name):
        return ood(name)
    raise Fails(f"{name!r:.60} is not a built-in multilevel or ood family name")
