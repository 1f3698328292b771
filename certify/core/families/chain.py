"""The Thm 5 / Lemma 3 chain family of any constant-weight code
(:func:`chain_family`), and the paper's Sec. 5.1 family built from it
(:func:`paper51_family`, ``paper-5.1``)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from certify.core import codes as _codes
from certify.core.cube import targets_from_indices
from certify.core.errors import InputError
from certify.core.families.family import Family

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class _TokenTable:
    """Assigns each distinct token an index in order of first appearance."""

    def __init__(self) -> None:
        self.index: dict[bytes, int] = {}
        self.rows: list[np.ndarray] = []

    def add(self, tok: np.ndarray) -> int:
        key = np.asarray(tok, dtype=np.uint8).tobytes()
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.rows)
            self.rows.append(np.asarray(tok, dtype=np.uint8))
        return i

    def array(self) -> np.ndarray:
        return np.array(self.rows, dtype=np.uint8)


def chain_levels(D: int, g: int) -> list[int]:
    """Overlap levels of a Thm 5 chain: ``D = k g + r0``, ``l_0 = 0``,
    ``l_i = i g + r0`` for ``i = 1..k`` (so ``l_k = D``; every jump is ``>= g``)."""
    k, r0 = divmod(D, g)
    return [0] + [i * g + r0 for i in range(1, k + 1)]


def chain_family(words: ArrayLike, n: int = 3, eps: Fraction | str = Fraction(1, 2), g: int | None = None,
                 name: str | None = None) -> Family:
    """The Thm 5 chain family of a constant-weight code.

    For each ordered pair ``(S, U)`` of distinct words with ``D = |S \\ U|``,
    the query is ``x = x_S`` and the key chain runs from ``y_0 = x_{S^c}``
    (overlap 0) to ``y_k = x_{U^c}`` (overlap ``D``) through the levels of
    :func:`chain_levels`. Intermediate keys (the paper leaves them open) are
    the indicators of the *first* ``l_i`` coordinates of ``supp(x_S)``. Each
    jump ``t -> u`` emits Lemma 3's three inputs ``Y = (x, y^(n-1))``,
    ``Z = (x, z^(n-1))``, ``M = (x, y, z^(n-2))`` with the query at position 0,
    the only scored position (the inputs Lemma 3's proof uses).

    ``g`` defaults to the least integer with ``g > 2 eps (n-1)/(n-2)`` and
    ``mu_g > 1``. Pairs with ``D < g`` give no jump.
    """
    eps = Fraction(eps)
    if not isinstance(n, (int, np.integer)) or n < 3:
        raise InputError(f"Lemma 3 needs exact length n >= 3, got n = {n}")
    if not 0 < eps <= Fraction(1, 2):
        raise InputError(f"error eps must satisfy 0 < eps <= 1/2, got {eps}")
    threshold = 2 * eps * (n - 1) / (n - 2)
    if g is None:
        g = int(threshold) + 1
        while Fraction(n - 2) * (g - 2 * eps) / (2 * eps) <= 1:
            g += 1
    if g <= threshold:
        raise InputError(f"step g = {g} must exceed 2 eps (n-1)/(n-2) = {threshold}")
    w = _codes.as_words(words)
    h = int(w[0].sum())
    _codes.verify_code(w, h=h, delta=1)
    D = _codes.directed_distances(w)

    table = _TokenTable()
    inputs: list[list[int]] = []
    jumps: list[list[int]] = []
    for s_idx in range(w.shape[0]):
        x = w[s_idx]
        x_i = table.add(x)
        support = np.flatnonzero(x)
        for u_idx in range(w.shape[0]):
            if u_idx == s_idx or D[s_idx, u_idx] < g:
                continue
            levels = chain_levels(int(D[s_idx, u_idx]), g)
            chain = [table.add(1 - x)]
            for lvl in levels[1:-1]:
                y = np.zeros_like(x)
                y[support[:lvl]] = 1
                chain.append(table.add(y))
            chain.append(table.add(1 - w[u_idx]))
            for step in range(len(levels) - 1):
                y_i, z_i = chain[step], chain[step + 1]
                t, u = levels[step], levels[step + 1]
                base = len(inputs)
                inputs.append([x_i] + [y_i] * (n - 1))
                inputs.append([x_i] + [z_i] * (n - 1))
                inputs.append([x_i, y_i] + [z_i] * (n - 2))
                jumps.append([s_idx, u_idx, step, x_i, y_i, z_i, t, u, base, base + 1, base + 2])
    if not inputs:
        raise InputError(f"no pair of code words is at directed distance >= g = {g}")
    tokens = table.array()
    inputs_arr = np.array(inputs, dtype=np.int64)
    scored = np.zeros(inputs_arr.shape, dtype=bool)
    scored[:, 0] = True
    targets = targets_from_indices(tokens, inputs_arr)
    jumps_arr = np.array(jumps, dtype=np.int64)
    # the chain's overlaps are what the construction says they are
    G = tokens.astype(np.int64) @ tokens.T.astype(np.int64)
    assert np.array_equal(G[jumps_arr[:, 3], jumps_arr[:, 4]], jumps_arr[:, 6])
    assert np.array_equal(G[jumps_arr[:, 3], jumps_arr[:, 5]], jumps_arr[:, 7])
    params = {"builder": "chain", "n": int(n), "eps": f"{eps.numerator}/{eps.denominator}",
              "g": int(g), "h": h, "M": int(w.shape[1]),
              "intermediate_keys": "first l_i coordinates of supp(x_S)",
              "scored": "query position 0"}
    return Family(name=name or f"chain-W{w.shape[0]}-M{w.shape[1]}-n{n}-g{g}", tokens=tokens,
                  inputs=inputs_arr, scored=scored, targets=targets, params=params,
                  words=w, jumps=jumps_arr)


def paper51_family() -> Family:
    """The Sec. 5.1 family: the code of :func:`certify.core.codes.paper51_code`, length
    3, eps = 1/2, jumps of 3. 424 jumps, 1,272 inputs."""
    fam = chain_family(_codes.paper51_code(), n=3, eps=Fraction(1, 2), g=3, name="paper-5.1")
    object.__setattr__(fam, "params", {**fam.params, "code": "paper51_code (Paley H24 rows 1-14 "
                                       "+ complement of row 1)"})
    return fam
