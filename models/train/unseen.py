"""The Sec. 5.2 unseen-token pool: a test pool none of whose tokens occurs in training.

The joint-OOD pools of :func:`certify.core.families.ood_families` are disjoint in
codeword labels, assignments and coordinate permutations, but after the
permutations every test token also occurs in the train pool. This module builds,
at each scale ``(M, q, n = 2q)``, a pair beside them:

1. **Held-out words** ``H``: ``h`` (default ``q + 2``) weight-``M/2`` words of
   ``[M]``, drawn by ``numpy.random.default_rng(seed + 7919)`` without replacement.
   Their tokens ``T(H)`` are every token an input on ``H`` can hold: the query
   ``(1, 0, x_S)``, the matching token ``(0, 1, x_{S^c})`` and the safe padding
   ``(0, 1, x_{S^c} + e_c)`` (``c`` the first coordinate of ``S``), for ``S`` in ``H``.
2. **Train pool**: the joint-OOD train stream of the same seed (the versioned
   generator), keeping, in order, the first ``train_size`` inputs that hold no
   token of ``T(H)`` (the stream draws train inputs first, so it is the generator's
   train pool with the inputs that touch ``H`` skipped and the next ones taken).
3. **Unseen-token test pool**: ``test_size`` inputs on ``H`` alone, built as the
   generator builds an input (``q`` distinct words of ``H``, an assignment in
   ``{0,1}^q``: 1 = matching token, 0 = padding, and a shuffle of the ``2q``
   positions), drawn by ``numpy.random.default_rng(seed + 7920)``.

So no token of the test pool occurs in the train pool (:func:`tokens_shared`
counts them; the tests require 0 at every scale). Targets are the family's
Min-IP targets, as for the other pools.
"""

from __future__ import annotations

import numpy as np

from certify.core.cube import targets_from_indices
from certify.core.families import Family, ood_families


def held_out_words(M: int, h: int, seed: int) -> np.ndarray:
    """``h`` distinct weight-``M/2`` words of length ``M`` as an (h, M) uint8 array."""
    rng = np.random.default_rng(seed + 7919)
    words: set[tuple[int, ...]] = set()
    while len(words) < h:
        w = np.zeros(M, dtype=np.uint8)
        w[rng.choice(M, M // 2, replace=False)] = 1
        words.add(tuple(int(v) for v in w))
    return np.array(sorted(words), dtype=np.uint8)


def _tokens_of(word: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(query, matching, padding) tokens of a word, as tuples of length M + 2."""
    comp = 1 - word
    pad = comp.copy()
    pad[int(np.flatnonzero(word)[0])] = 1
    return (tuple([1, 0, *word.tolist()]), tuple([0, 1, *comp.tolist()]), tuple([0, 1, *pad.tolist()]))


def _family(name: str, tokens: list[tuple[int, ...]], inputs, scored, params: dict) -> Family:
    tok = np.array(tokens, dtype=np.uint8)
    inp = np.array(inputs, dtype=np.int64)
    return Family(name=name, tokens=tok, inputs=inp, scored=np.array(scored, dtype=bool),
                  targets=targets_from_indices(tok, inp), params=params)


def unseen_token_pools(M: int, q: int, *, train_size: int = 2048, test_size: int = 1024,
                       seed: int = 0, h: int | None = None) -> tuple[Family, Family]:
    """(train pool without the held-out tokens, unseen-token test pool) at ``(M, q, 2q)``;
    see the module docstring. ``h`` held-out words (default ``q + 2``)."""
    h = q + 2 if h is None else h
    if h < q:
        raise ValueError(f"need at least q = {q} held-out words, got {h}")
    H = held_out_words(M, h, seed)
    per_word = [_tokens_of(w) for w in H]
    banned = {t for ts in per_word for t in ts}
    # the train stream: ask the generator for more train inputs until enough avoid T(H)
    ask, kept = train_size, None
    while True:
        train, _ = ood_families(M, q, train_size=ask, test_size=1, seed=seed)
        toks = [tuple(int(v) for v in t) for t in train.tokens]
        bad = np.array([t in banned for t in toks])
        ok = ~bad[train.inputs].any(axis=1)
        if ok.sum() >= train_size or ask >= 64 * train_size:
            kept = np.flatnonzero(ok)[:train_size]
            break
        ask *= 2
    if len(kept) < train_size:
        raise ValueError(f"({M}, {q}): only {len(kept)} train inputs avoid the held-out words")
    used = sorted(set(train.inputs[kept].ravel().tolist()))
    remap = {old: new for new, old in enumerate(used)}
    tr_inputs = [[remap[int(i)] for i in row] for row in train.inputs[kept]]
    params = {"builder": "ood-unseen", "M": M, "q": q, "n": 2 * q, "seed": seed, "held_out": h}
    train_f = _family(f"ood-{M}-{q}-{2 * q}-train-without-held-out-h{h}-size{train_size}-seed{seed}",
                      [toks[i] for i in used], tr_inputs, train.scored[kept],
                      {**params, "split": "train", "size": train_size})
    rng = np.random.default_rng(seed + 7920)
    index: dict[tuple[int, ...], int] = {}
    tokens: list[tuple[int, ...]] = []

    def add(t: tuple[int, ...]) -> int:
        if t not in index:
            index[t] = len(tokens)
            tokens.append(t)
        return index[t]

    inputs, scored = [], []
    for _ in range(test_size):
        chosen = rng.choice(h, q, replace=False)
        assign = rng.integers(0, 2, q)
        seq, is_q = [], []
        for j, a in zip(chosen, assign):
            query, match, pad = per_word[int(j)]
            seq += [add(query), add(match if a else pad)]
            is_q += [1, 0]
        order = rng.permutation(2 * q)
        inputs.append([seq[o] for o in order])
        scored.append([is_q[o] for o in order])
    test_f = _family(f"ood-{M}-{q}-{2 * q}-unseen-h{h}-size{test_size}-seed{seed}", tokens, inputs,
                     scored, {**params, "split": "unseen", "size": test_size})
    return train_f, test_f


def tokens_shared(a: Family, b: Family) -> int:
    """How many distinct tokens the inputs of ``b`` hold that some input of ``a`` holds."""
    ta = {tuple(a.tokens[i].tolist()) for i in np.unique(a.inputs)}
    return sum(tuple(b.tokens[i].tolist()) in ta for i in np.unique(b.inputs))
