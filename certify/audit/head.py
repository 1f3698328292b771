"""A normalized kernel head on a family as exact rational tables
(:class:`ExactHead`: query features, key features, scalarized values
``g_x(z) = beta(x) + w(x)^T v(z)``, Eq. 5) and its exact evaluation on inputs,
``t_hat = sum_j alpha g / sum_j alpha`` with the self term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from certify.core.errors import InputError
from certify.core.families import Family
from certify.core.files import sha256_json
from certify.core.numbers import exact_product, q_to_str

HALF = Fraction(1, 2)


ROLES = ("Y", "Z", "M")


def rationalize(a: Any, what: str) -> np.ndarray:
    """Float (or int / Fraction) array -> object array of exact ``Fraction``.
    Floats convert losslessly; NaN or infinite entries are an ``InputError``."""
    arr = np.asarray(a.detach().cpu().double().numpy() if hasattr(a, "detach") else a)
    if arr.dtype != object and np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        raise InputError(f"{what} has NaN or infinite entries")
    out = np.empty(arr.shape, dtype=object)
    flat = out.reshape(-1)
    for k, v in enumerate(arr.reshape(-1).tolist()):
        flat[k] = Fraction(v)
    return out


@dataclass(frozen=True, eq=False)
class ExactHead:
    """A normalized kernel head on a token set, as exact rational tables.

    ``query_tokens`` (Q,) are token indices (into the family's tokens) of the
    rows of ``phi_q`` (Q, r) and ``g`` (Q, K); ``phi_k`` is (K, r)."""

    query_tokens: np.ndarray     # (Q,) int64
    phi_q: np.ndarray            # (Q, r) Fraction
    phi_k: np.ndarray            # (K, r) Fraction
    g: np.ndarray                # (Q, K) Fraction

    def __post_init__(self) -> None:
        Q, K = len(self.query_tokens), self.phi_k.shape[0]
        if self.phi_q.ndim != 2 or self.phi_k.ndim != 2 or self.phi_q.shape[1] != self.phi_k.shape[1]:
            raise InputError("feature tables must be (Q, r) and (K, r) with the same r")
        if self.phi_q.shape[0] != Q or self.g.shape != (Q, K):
            raise InputError(f"value table must be (Q, K) = ({Q}, {K}), got {self.g.shape}")

    @property
    def rank(self) -> int:
        return int(self.phi_k.shape[1])

    def row_of(self) -> dict[int, int]:
        return {int(t): i for i, t in enumerate(self.query_tokens)}

    def alpha(self) -> np.ndarray:
        """(Q, K) exact kernel entries ``alpha(x, z) = <phi_q(x), phi_k(z)>``."""
        return exact_product(self.phi_q, self.phi_k.T)

    def to_json(self) -> dict[str, Any]:
        return {"query_tokens": [int(t) for t in self.query_tokens],
                "phi_q": [[q_to_str(v) for v in row] for row in self.phi_q],
                "phi_k": [[q_to_str(v) for v in row] for row in self.phi_k],
                "g": [[q_to_str(v) for v in row] for row in self.g]}

    @property
    def sha256(self) -> str:
        return sha256_json(self.to_json())


def head_from_tables(phi_q, phi_k, g, query_tokens) -> ExactHead:
    """An :class:`ExactHead` from tables (floats, ints or Fractions)."""
    return ExactHead(query_tokens=np.asarray(query_tokens, dtype=np.int64),
                     phi_q=rationalize(phi_q, "phi_q"), phi_k=rationalize(phi_k, "phi_k"),
                     g=rationalize(g, "value table"))


def head_from_model(model, family: Family) -> ExactHead:
    """The exact tables of a kernel model on ``family``'s tokens.

    Uses the certified features ``model.canonical_features(tokens)`` where the
    model has them (``models/`` heads, third-party heads: ``float64``, the same
    bits on every machine), else ``model.feature_matrices(tokens) -> (PhiQ, PhiK)``;
    for the values ``model.canonical_readout``/``canonical_values`` (else
    ``readout``/``values``) combined exactly (``g = beta + w v^T`` in rationals),
    else ``model.value_table``."""
    import torch

    tokens = family.tokens
    queries = family.query_tokens()
    with torch.no_grad():
        if hasattr(model, "canonical_features"):                         # the certified features
            PhiQ, PhiK = model.canonical_features(tokens)
        else:
            PhiQ, PhiK = model.feature_matrices(tokens)                  # (K, r), (K, r)
        phi_q = rationalize(PhiQ, "query features")[queries]
        phi_k = rationalize(PhiK, "key features")
        if hasattr(model, "canonical_readout") and hasattr(model, "canonical_values"):
            beta, w = model.canonical_readout(tokens[queries])
            v = model.canonical_values(tokens)
        elif hasattr(model, "readout") and hasattr(model, "values"):
            beta, w = model.readout(tokens[queries])                     # (Q,), (Q, dv)
            v = model.values(tokens)                                     # (K, dv)
        if hasattr(model, "readout") and hasattr(model, "values"):
            g = exact_matmul(rationalize(w, "readout weights"), rationalize(v, "values").T)
            g = g + rationalize(beta, "readout bias")[:, None]
        else:
            g = rationalize(model.value_table(tokens[queries], tokens), "value table")
    return ExactHead(query_tokens=queries.astype(np.int64), phi_q=phi_q, phi_k=phi_k, g=g)


def exact_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Exact product of two Fraction object matrices, through integers."""
    def scaled(M):
        den = math.lcm(*(v.denominator for v in M.reshape(-1))) if M.size else 1
        return [[int(v * den) for v in row] for row in M], den
    import flint
    Ai, da = scaled(A)
    Bi, db = scaled(B)
    if not A.size or not B.size:
        return np.full((A.shape[0], B.shape[1]), Fraction(0), dtype=object)
    P = (flint.fmpz_mat(Ai) * flint.fmpz_mat(Bi)).tolist()
    out = np.empty((A.shape[0], B.shape[1]), dtype=object)
    for i, row in enumerate(P):
        for j, v in enumerate(row):
            out[i, j] = Fraction(int(v), da * db)
    return out


@dataclass(frozen=True)
class Output:
    """One scored position evaluated exactly."""

    input: int
    position: int
    numerator: Fraction      # sum_j alpha g
    denominator: Fraction    # sum_j alpha
    target: int

    @property
    def t_hat(self) -> Fraction | None:
        return self.numerator / self.denominator if self.denominator > 0 else None

    def correct(self, eps: Fraction) -> bool:
        t = self.t_hat
        return t is not None and abs(t - self.target) < eps

    def error(self) -> Fraction | None:
        t = self.t_hat
        return None if t is None else abs(t - self.target)

    def to_json(self, family: Family) -> dict[str, Any]:
        t = self.t_hat
        return {"input": self.input, "position": self.position,
                "sequence": [int(v) for v in family.inputs[self.input]],
                "numerator": q_to_str(self.numerator), "denominator": q_to_str(self.denominator),
                "t_hat": None if t is None else q_to_str(t), "target": self.target}


def evaluate(head: ExactHead, family: Family, inputs: Sequence[int] | None = None,
             alpha: np.ndarray | None = None) -> list[Output]:
    """Every scored position of ``inputs`` (default: all), in input order."""
    alpha = head.alpha() if alpha is None else alpha
    rows = head.row_of()
    idx = range(family.inputs.shape[0]) if inputs is None else inputs
    out = []
    for i in idx:
        seq = family.inputs[i]
        for p in np.flatnonzero(family.scored[i]):
            x = int(seq[p])
            if x not in rows:
                raise InputError(f"token {x} is queried at input {i} but has no query features")
            a = alpha[rows[x], seq]
            num = sum(a * head.g[rows[x], seq], Fraction(0))
            out.append(Output(int(i), int(p), num, sum(a, Fraction(0)), int(family.targets[i, p])))
    return out
