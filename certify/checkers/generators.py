"""Self-contained, versioned generators of the seeded built-in families (stdlib only).

The Sec. 5.2 OOD pools are random draws. So that the name ``ood-M-q-n-split``
means one family forever, the draws come from this module's own stream
(:class:`SplitMix64`, generator version :data:`OOD_GENERATOR`), never from
numpy's, whose streams may change between releases. The builder
(:func:`certify.core.families.ood_families`) and the checker
(:mod:`certify.checkers.families`) both call :func:`ood_pools`, so there is one
implementation; the checker additionally re-derives every target and the hash.
"""

from __future__ import annotations

from typing import Any

OOD_GENERATOR = "splitmix64-colex/1"
OOD_DEFAULTS = {"train_size": 2048, "test_size": 1024, "seed": 0}
FAMILY_FORMAT = "certify-attention/family/1"
_MASK = (1 << 64) - 1
#: one pool of :func:`ood_pools`: (tokens, inputs, scored), each a list of integer rows
Pool = tuple[list[list[int]], list[list[int]], list[list[int]]]


class SplitMix64:
    """Steele, Lea and Flood's SplitMix64 (2014): a 64-bit counter-based stream."""

    def __init__(self, seed: int) -> None:
        self.state = int(seed) & _MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform integer in ``[0, n)`` (rejection sampling: no modulo bias)."""
        if n <= 0:
            raise ValueError("below(n) needs n >= 1")
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            v = self.next()
            if v < limit:
                return v % n

    def permutation(self, n: int) -> list[int]:
        """A uniform permutation of ``range(n)`` (Fisher-Yates)."""
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.below(i + 1)
            p[i], p[j] = p[j], p[i]
        return p

    def sample(self, n: int, k: int) -> list[int]:
        """``k`` distinct values of ``range(n)`` in draw order (partial Fisher-Yates)."""
        p = list(range(n))
        for i in range(k):
            j = i + self.below(n - i)
            p[i], p[j] = p[j], p[i]
        return p[:k]


def _unrank(index: int, M: int, k: int, table: tuple[tuple[int, ...], ...]) -> list[int]:
    """The ``index``-th ``k``-subset of ``range(M)`` in colex order (combinatorial
    number system: ``index = sum_j C(c_j, j)``), as a 0/1 list of length ``M``
    (``table``: :func:`_binomials` of at least ``M``, made once by the caller)."""
    word = [0] * M
    for x in range(M - 1, -1, -1):
        if k == 0:
            break
        c = table[x][k]
        if index >= c:
            word[x] = 1
            index -= c
            k -= 1
    return word


def _binomials(M: int) -> tuple[tuple[int, ...], ...]:
    """``C(x, k)`` for ``0 <= x, k <= M`` (``_binomials(M)[x][k]``)."""
    from math import comb
    return tuple(tuple(comb(x, k) for k in range(M + 1)) for x in range(M + 1))


def _pool_of(seed: int, salt: int, index: int) -> int:
    """0 (train) or 1 (test): a keyed SplitMix64 bit, so a codeword's pool is known
    without listing all codewords (the first output of ``SplitMix64(key)``, written
    out: this runs once per drawn codeword)."""
    z = ((((seed * 0x100000001B3 + salt) ^ (index * 0xD1B54A32D192ED03)) & _MASK)
         + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) >> 63


def ood_pools(M: int, q: int, train_size: int, test_size: int, seed: int) -> list[Pool] | None:
    """The two Sec. 5.2 pools as ``[(tokens, inputs, scored), (tokens, inputs, scored)]``
    (train, test): tokens are 0/1 lists of length ``M + 2`` in first-use order,
    inputs are rows of ``2q`` token indices, scored flags mark the queries.

    Codewords are the weight-``M/2`` words of ``[M]``, numbered in colex order;
    each goes to the train or the test pool by a keyed hash bit, so that the
    generator never lists all ``C(M, M/2)`` of them (``M = 24``: 2.7 million).
    Assignments ``{0,1}^q`` and 64 coordinate permutations are split in two by a
    seeded shuffle. Train and test are disjoint in all three. A query for codeword
    ``S`` is ``(1, 0, x_S)``; its slot holds the matching token ``(0, 1, x_{S^c})``
    (target 0) when the assignment bit is 1, else safe padding
    ``(0, 1, x_{S^c} + e_c)`` with ``c`` the first coordinate of ``S`` (target 1);
    positions are shuffled. Returns None when a pool has fewer than ``q`` codewords
    or assignments."""
    from math import comb
    rng = SplitMix64(seed)
    total = comb(M, M // 2)
    if total <= 1 << 16:                       # small: count the pools exactly
        sizes = [0, 0]
        for i in range(total):
            sizes[_pool_of(seed, 1, i)] += 1
        if min(sizes) < q:
            return None
    elif q > total // 4:
        return None
    assign = [[(a >> i) & 1 for i in range(q)] for a in range(1 << q)]
    perm_a = rng.permutation(len(assign))
    half_a = max(1, len(assign) // 2)
    pools_a = ([assign[i] for i in perm_a[:half_a]], [assign[i] for i in perm_a[half_a:]])
    if not pools_a[1]:
        return None
    perms = [rng.permutation(M) for _ in range(64)]
    table = _binomials(M)
    pools_p = (perms[:32], perms[32:])
    out = []
    for split, size in ((0, train_size), (1, test_size)):
        index: dict[tuple[int, ...], int] = {}
        tokens: list[list[int]] = []

        def add(tok: list[int]) -> int:
            key = tuple(tok)
            if key not in index:
                index[key] = len(tokens)
                tokens.append(tok)
            return index[key]

        inputs, scored = [], []
        for _ in range(size):
            chosen: list[int] = []
            while len(chosen) < q:             # q distinct codewords of this pool
                i = rng.below(total)
                if i not in chosen and _pool_of(seed, 1, i) == split:
                    chosen.append(i)
            perm = pools_p[split][rng.below(len(pools_p[split]))]
            ws = [[w[perm[c]] for c in range(M)] for w in (_unrank(i, M, M // 2, table) for i in chosen)]
            a = pools_a[split][rng.below(len(pools_a[split]))]
            seq, is_q = [], []
            for i in range(q):
                S = ws[i]
                seq.append(add([1, 0] + S))
                is_q.append(1)
                comp = [1 - v for v in S]
                if not a[i]:
                    comp[S.index(1)] = 1
                seq.append(add([0, 1] + comp))
                is_q.append(0)
            order = rng.permutation(2 * q)
            inputs.append([seq[o] for o in order])
            scored.append([is_q[o] for o in order])
        out.append((tokens, inputs, scored))
    return out


def ood_body(M: int, q: int, split: str, *, train_size: int = OOD_DEFAULTS["train_size"],
             test_size: int = OOD_DEFAULTS["test_size"],
             seed: int = OOD_DEFAULTS["seed"]) -> dict[str, Any] | None:
    """The canonical JSON body (without its hash) of one OOD pool, or None."""
    pools = ood_pools(M, q, train_size, test_size, seed)
    if pools is None:
        return None
    which = 0 if split == "train" else 1
    tokens, inputs, scored = pools[which]

    def ip(x: int, z: int) -> int:
        return sum(a & b for a, b in zip(tokens[x], tokens[z]))
    return {
        "format": FAMILY_FORMAT,
        "name": f"ood-{M}-{q}-{2 * q}-{split}",
        "m": M + 2, "n": 2 * q,
        "tokens": ["".join(map(str, t)) for t in tokens],
        "inputs": inputs,
        "scored": scored,
        "targets": [[min(ip(x, z) for z in row) for x in row] for row in inputs],
        "params": {"builder": "ood", "generator": OOD_GENERATOR, "M": M, "q": q, "n": 2 * q,
                   "seed": seed, "split": split,
                   "size": train_size if which == 0 else test_size},
        "words": None,
        "jumps": None,
    }
