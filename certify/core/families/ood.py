"""The Sec. 5.2 joint-OOD families: train and test pools of
``ood-M-q-n-train|test``, drawn by the checker's own versioned generator
(:mod:`certify.checkers.generators`) so that the checker rebuilds them.
"""

from __future__ import annotations

import numpy as np

from certify.core.cube import targets_from_indices
from certify.core.errors import InputError
from certify.core.families.family import Family


def ood_families(M: int, q: int, n: int | None = None, *, train_size: int = 2048,
                 test_size: int = 1024, seed: int = 0) -> tuple[Family, Family]:
    """The Sec. 5.2 train and joint-OOD test pools at scale ``(M, q, n = 2q)``.

    Token dimension ``M + 2``: a query for codeword ``S`` is ``(1, 0, x_S)``; its
    matching database token ``(0, 1, x_{S^c})`` has overlap 0 (target 0); its
    safe padding ``(0, 1, x_{S^c} + e_c)``, ``c`` the first coordinate of ``S``,
    has overlap 1 with it (target 1) and overlap ``>= 1`` with every other
    query, as every database token has. Codewords are the weight-``M/2``
    words of ``[M]``. An input draws ``q`` distinct codewords, an assignment in
    ``{0,1}^q`` (1 = matching, 0 = padding), a permutation of the ``M`` code
    coordinates, and a shuffle of the ``2q`` positions. Train and test pools
    are disjoint in codewords, assignments and coordinate permutations (each
    set split in two by a seeded shuffle). Queries are the scored positions.
    The draws come from :func:`certify.checkers.generators.ood_pools` (a
    versioned SplitMix64 stream), so a name means one family on every machine;
    the name ``ood-M-q-n-split`` is built-in only at the default sizes and seed.
    """
    if n is None:
        n = 2 * q
    if n != 2 * q:
        raise InputError(f"the Sec. 5.2 family has length n = 2q, got n = {n}, q = {q}")
    if M < 2 or M % 2 or q < 1:
        raise InputError(f"need even M >= 2 and q >= 1, got M = {M}, q = {q}")
    from certify.checkers.generators import OOD_DEFAULTS, OOD_GENERATOR, ood_pools
    pools = ood_pools(M, q, train_size, test_size, seed)
    if pools is None:
        raise InputError(f"M = {M} gives too few codewords for q = {q} in each pool")
    default = (train_size, test_size, seed) == (OOD_DEFAULTS["train_size"],
                                                OOD_DEFAULTS["test_size"], OOD_DEFAULTS["seed"])
    out = []
    for split, (toks, rows, flags) in zip(("train", "test"), pools):
        tokens = np.array(toks, dtype=np.uint8)
        inputs = np.array(rows, dtype=np.int64)
        name = f"ood-{M}-{q}-{n}-{split}"
        if not default:      # the built-in name means the default sizes and seed only
            name += f"-size{train_size if split == 'train' else test_size}-seed{seed}"
        fam = Family(name=name, tokens=tokens, inputs=inputs, scored=np.array(flags, dtype=bool),
                     targets=targets_from_indices(tokens, inputs),
                     params={"builder": "ood", "generator": OOD_GENERATOR, "M": M, "q": q,
                             "n": n, "seed": seed, "split": split,
                             "size": train_size if split == "train" else test_size})
        t = fam.targets[fam.scored]
        assert set(np.unique(t).tolist()) <= {0, 1}
        out.append(fam)
    return out[0], out[1]
