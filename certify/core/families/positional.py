"""The family with positions of Thm 8's proof, built from a chain family.

Thm 8 (position-dependent key maps ``phiK_j``, one query position, the causal
final query) re-runs Lemma 3 with the database at the source positions
``0..n-2`` and the query ``x`` at the final position ``n-1``: for a jump ``t ->
u`` (keys ``y``, ``z``) its inputs are ``Y = (y^L, x)``, ``Z = (z^L, x)`` and,
for every source position ``l``, ``M_l`` (``y`` at ``l``, ``z`` at the other
sources, ``x`` last), ``L = n - 1``. A position-free head needs only one mixed
input; a head whose keys depend on the position needs all ``L`` of them
(``sum_l N_(M_l) = N_Y + (L - 1) N_Z`` is the identity the proof sums).

:func:`causal_family` keeps the chain family's tokens, code words and jumps
(their ``input_y``, ``input_z`` and ``input_m`` now index ``Y``, ``Z`` and
``M_0``) and scores the final position only.
"""

from __future__ import annotations

import numpy as np

from certify.core.cube import targets_from_indices
from certify.core.errors import InputError
from certify.core.families.family import JUMP_COLUMNS, Family


def causal_family(chain: Family, name: str | None = None) -> Family:
    """The family with positions of ``chain``'s jumps (module docstring); named
    ``<chain name>-causal`` unless ``name`` is given."""
    if chain.jumps is None or chain.words is None or not len(chain.jumps):
        raise InputError(f"family {chain.name!r} has no chains (jumps and code words): Thm 8's family "
                         "with positions is built from a chain family")
    n = chain.n
    if n < 3:
        raise InputError(f"Thm 8's family needs length n >= 3, got {n}")
    L = n - 1
    col = {c: k for k, c in enumerate(JUMP_COLUMNS)}
    index: dict[tuple[int, ...], int] = {}
    inputs: list[list[int]] = []

    def add(seq: list[int]) -> int:
        key = tuple(seq)
        if key not in index:
            index[key] = len(inputs)
            inputs.append(seq)
        return index[key]

    jumps = []
    for row in chain.jumps.tolist():
        x, y, z = row[col["x"]], row[col["y"]], row[col["z"]]
        iy, iz = add([y] * L + [x]), add([z] * L + [x])
        mixed = [add([z] * l + [y] + [z] * (L - 1 - l) + [x]) for l in range(L)]
        jumps.append(row[:col["input_y"]] + [iy, iz, mixed[0]])
    arr = np.array(inputs, dtype=np.int64)
    scored = np.zeros(arr.shape, dtype=bool)
    scored[:, -1] = True
    params = {**chain.params, "builder": "causal", "from": chain.name, "from_sha256": chain.sha256,
              "scored": "final position (the causal query)",
              "mixed_inputs": "y at each source position, z at the others"}
    return Family(name=name or f"{chain.name}-causal", tokens=chain.tokens.copy(), inputs=arr,
                  scored=scored, targets=targets_from_indices(chain.tokens, arr), params=params,
                  words=chain.words.copy(), jumps=np.array(jumps, dtype=np.int64))
