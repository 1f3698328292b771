"""The Sec. 4 multilevel family ``(M, s, h, q)`` of Thm 9: ``(s+1)^q``
assignments, enumerated lazily (:class:`MultilevelSpec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from certify.core import codes as _codes
from certify.core.cube import targets_from_indices
from certify.core.errors import InputError
from certify.core.families.family import Family
from certify.core.files import sha256_bytes

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


@dataclass(frozen=True, eq=False)
class MultilevelSpec:
    """The Sec. 4 multilevel family for ``(M, s, h, code, q)``, assignments lazily.

    Token dimension ``m = 2 + M + s``. Query ``q_S = (0, 1, x_{S^c}, 1_s)``;
    database token ``d_{U,k} = (1, 0, x_U, u_k)`` with ``u_k`` the first ``k``
    of the ``s`` unary coordinates. ``<q_S, d_{U,k}> = |U \\ S| + k``. For an
    assignment ``kappa in {0..s}^q`` the input is ``(q_S)_{S in Q}`` followed
    by ``(d_{S, kappa_S})_{S in Q}``, ``Q`` the first ``q`` words; the target
    at ``q_S`` is ``kappa_S``.

    Token order: the ``q`` queries, then ``d_{S_i, k}`` at index
    ``q + i (s + 1) + k``.
    """

    M: int
    s: int
    h: int
    q: int
    words: np.ndarray        # (q, M) the subcode Q

    @property
    def m(self) -> int:
        return 2 + self.M + self.s

    @property
    def n(self) -> int:
        return 2 * self.q

    @property
    def num_assignments(self) -> int:
        return (self.s + 1) ** self.q

    @property
    def query_positions(self) -> np.ndarray:
        return np.arange(self.q)

    @cached_property
    def tokens(self) -> np.ndarray:
        M, s, q = self.M, self.s, self.q
        toks = np.zeros((q + q * (s + 1), self.m), dtype=np.uint8)
        for i, S in enumerate(self.words):
            toks[i, 1] = 1
            toks[i, 2:2 + M] = 1 - S
            toks[i, 2 + M:] = 1
            for k in range(s + 1):
                row = toks[q + i * (s + 1) + k]
                row[0] = 1
                row[2:2 + M] = S
                row[2 + M:2 + M + k] = 1
        return toks

    def assignments(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Assignments ``start..stop-1`` in lexicographic order (kappa_0 most
        significant), shape ``(B, q)``."""
        stop = self.num_assignments if stop is None else min(stop, self.num_assignments)
        if not 0 <= start <= stop:
            raise InputError(f"assignment range {start}:{stop} is invalid")
        idx = np.arange(start, stop, dtype=np.int64)
        powers = (self.s + 1) ** np.arange(self.q - 1, -1, -1, dtype=np.int64)
        return (idx[:, None] // powers) % (self.s + 1)

    def assignment_index(self, kappas: np.ndarray) -> np.ndarray:
        kappas = np.asarray(kappas, dtype=np.int64)
        powers = (self.s + 1) ** np.arange(self.q - 1, -1, -1, dtype=np.int64)
        return kappas @ powers

    def inputs(self, kappas: np.ndarray) -> np.ndarray:
        """Token indices ``(B, 2q)`` of the inputs for assignments ``(B, q)``."""
        kappas = self._check(kappas)
        B = kappas.shape[0]
        queries = np.broadcast_to(np.arange(self.q), (B, self.q))
        db = self.q + np.arange(self.q) * (self.s + 1) + kappas
        return np.concatenate([queries, db], axis=1)

    def targets(self, kappas: np.ndarray) -> np.ndarray:
        """Min-IP targets ``(B, 2q)``; at the query positions they equal kappa."""
        return targets_from_indices(self.tokens, self.inputs(kappas))

    def family(self, kappas: np.ndarray | None = None) -> Family:
        """The family of ``kappas`` (all assignments by default). The built-in
        name ``multilevel-M..-s..-h..-q..`` is used only for all assignments over
        the default greedy code; any other choice is named apart from it."""
        name = f"multilevel-M{self.M}-s{self.s}-h{self.h}-q{self.q}"
        default_code = np.array_equal(
            self.words, _codes.greedy_packing(self.M, self.h, self.s + 1, limit=self.q))
        if not default_code:
            name += "-code" + sha256_bytes(self.words.tobytes())[:12]
        if kappas is None:
            if self.num_assignments > 1 << 20:
                raise InputError(f"{self.num_assignments} assignments are too many to "
                                 "materialise; enumerate them lazily")
            kappas = self.assignments()
        elif len(np.asarray(kappas)) != self.num_assignments:
            name += f"-subset{len(np.asarray(kappas))}"
        inputs = self.inputs(kappas)
        scored = np.zeros(inputs.shape, dtype=bool)
        scored[:, :self.q] = True
        return Family(name=name,
                      tokens=self.tokens, inputs=inputs, scored=scored,
                      targets=targets_from_indices(self.tokens, inputs),
                      params={"builder": "multilevel", "M": self.M, "s": self.s, "h": self.h,
                              "q": self.q, "assignments": int(len(inputs))},
                      words=self.words)

    def _check(self, kappas: ArrayLike) -> np.ndarray:
        kappas = np.asarray(kappas, dtype=np.int64)
        if kappas.ndim != 2 or kappas.shape[1] != self.q:
            raise InputError(f"assignments must have shape (B, {self.q})")
        if kappas.min(initial=0) < 0 or kappas.max(initial=0) > self.s:
            raise InputError(f"assignment values must lie in 0..{self.s}")
        return kappas


def multilevel_spec(M: int, s: int, h: int, q: int, words: ArrayLike | None = None) -> MultilevelSpec:
    """Build the Sec. 4 family. Without ``words`` the code is the greedy packing of
    ``binom([M], h)`` at distance ``s + 1``; its first ``q`` words are used."""
    for nm, v, lo in (("M", M, 1), ("s", s, 1), ("q", q, 1)):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{nm} must be an integer >= {lo}, got {v!r}")
    if not isinstance(h, (int, np.integer)) or not 0 <= h <= M:
        raise InputError(f"code weight h must satisfy 0 <= h <= M = {M}, got {h!r}")
    if words is None:
        words = _codes.greedy_packing(M, h, s + 1, limit=q)
    w = _codes.verify_code(words, h=h, delta=s + 1)
    if w.shape[1] != M:
        raise InputError(f"code words have length {w.shape[1]}, expected M = {M}")
    if q > w.shape[0]:
        raise InputError(f"q = {q} exceeds the code size {w.shape[0]} at (M, h, s) = ({M}, {h}, {s})")
    return MultilevelSpec(M=int(M), s=int(s), h=int(h), q=int(q), words=w[:q].copy())
