"""The exact feasibility model: one normalized nonnegative kernel head, rank r, on a family.

For a scored position whose query token is ``x`` in an input with tokens
``z_1..z_N`` (the query itself included: the self term),

    t_hat = sum_j alpha(x, z_j) g_x(z_j) / sum_j alpha(x, z_j),   alpha = PhiQ PhiK^T,

and the head solves the family when every scored position has a positive
denominator and ``|t_hat - t| < 1/2`` (strict). ``g_x(z)`` is a free
query-token lookup table (Eq. 5). Feature classes: ``real`` (signed features,
``alpha >= 0`` on every used pair) and ``nonnegative`` (``PhiQ, PhiK >= 0``).

With ``H = alpha * g`` entrywise, each scored position gives two constraints
linear in the pair ``(alpha, H)``:

    sum_j c_j ((t + 1/2) alpha_j - H_j) > 0,    sum_j c_j (H_j - (t - 1/2) alpha_j) > 0,

(``c_j`` = multiplicity of the key). :class:`FeasibilityProblem` holds them as
sparse matrices over the used (query, key) pairs ("entries"); the searches in
:mod:`solvers.factor` propose factors, and :func:`verify_factors` decides:
floats are rationalized (dyadic), the values are re-fitted by an LP for the
exact rational kernel, and every scored position is re-evaluated in exact
integer/rational arithmetic.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

import numpy as np
import scipy.sparse as sp

from certify.families import Family
from solvers.lp import LPStatus, solve_lp

HALF = Fraction(1, 2)


class Features(str, enum.Enum):
    REAL = "real"
    NONNEGATIVE = "nonnegative"


@dataclass(frozen=True, eq=False)
class FeasibilityProblem:
    """The constraint structure of a family (independent of the rank)."""

    family: Family
    queries: np.ndarray        # (R,) token indices at scored positions
    keys: np.ndarray           # (C,) token indices used as keys by some scored position
    entries: np.ndarray        # (E, 2) (query row, key column) used pairs
    counts: sp.csr_matrix      # (P, E) multiplicity of each entry in scored position p
    targets: np.ndarray        # (P,) Min-IP target of scored position p
    positions: np.ndarray      # (P, 2) (input index, position) of each scored position

    @property
    def num_rows(self) -> int:
        return int(self.queries.size)

    @property
    def num_cols(self) -> int:
        return int(self.keys.size)

    @property
    def num_entries(self) -> int:
        return int(self.entries.shape[0])

    def constraint_matrices(self) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """``(Ga, Gh)`` with rows ``[upper; lower]`` so that a head is correct iff
        ``Ga @ alpha + Gh @ H > 0`` entrywise (``H = alpha * g``)."""
        C = self.counts
        t = self.targets.astype(np.float64)
        up_a = sp.diags(t + 0.5) @ C
        lo_a = -(sp.diags(t - 0.5) @ C)
        Ga = sp.vstack([up_a, lo_a]).tocsr()
        Gh = sp.vstack([-C, C]).tocsr()
        return Ga, Gh


def build_problem(family: Family) -> FeasibilityProblem:
    inputs, scored = family.inputs, family.scored
    pos = np.argwhere(scored)                                  # (P, 2)
    q_tok = inputs[pos[:, 0], pos[:, 1]]                       # (P,)
    queries = np.unique(q_tok)
    row_of = {int(t): i for i, t in enumerate(queries)}
    keys = np.unique(inputs[pos[:, 0]])
    col_of = {int(t): i for i, t in enumerate(keys)}
    entry_of: dict[tuple[int, int], int] = {}
    rows, cols, vals = [], [], []
    for p, (i, j) in enumerate(pos):
        x = row_of[int(inputs[i, j])]
        mult: dict[int, int] = {}
        for z in inputs[i]:
            e = entry_of.setdefault((x, col_of[int(z)]), len(entry_of))
            mult[e] = mult.get(e, 0) + 1
        for e, c in mult.items():
            rows.append(p)
            cols.append(e)
            vals.append(c)
    entries = np.array(sorted(entry_of, key=entry_of.get), dtype=np.int64).reshape(-1, 2)
    counts = sp.csr_matrix((np.array(vals, dtype=np.float64), (rows, cols)),
                           shape=(len(pos), len(entries)))
    targets = family.targets[pos[:, 0], pos[:, 1]]
    return FeasibilityProblem(family=family, queries=queries, keys=keys, entries=entries,
                              counts=counts, targets=targets.astype(np.int64), positions=pos)


# ---------------------------------------------------------------- witnesses

@dataclass(frozen=True)
class Witness:
    """An exact rank-r head restricted to the family's tokens."""

    features: Features
    rank: int
    phi_q: Mapping[int, tuple[Fraction, ...]]     # query token -> r rationals
    phi_k: Mapping[int, tuple[Fraction, ...]]     # key token -> r rationals
    g: Mapping[tuple[int, int], Fraction]          # (query token, key token) -> value

    def to_json(self) -> dict:
        from certify.certificate import q_to_str

        return {
            "features": self.features.value,
            "rank": self.rank,
            "phi_q": [[int(t), [q_to_str(v) for v in row]] for t, row in sorted(self.phi_q.items())],
            "phi_k": [[int(t), [q_to_str(v) for v in row]] for t, row in sorted(self.phi_k.items())],
            "g": [[int(x), int(z), q_to_str(v)] for (x, z), v in sorted(self.g.items())],
        }


@dataclass(frozen=True)
class ExactCheck:
    ok: bool
    margin: Fraction | None        # min over scored positions of 1/2 - |t_hat - t|
    problems: tuple[str, ...]
    worst: tuple[int, int] | None  # (input, position) attaining the margin


def exact_check(problem: FeasibilityProblem, w: Witness) -> ExactCheck:
    """Re-evaluate every scored position of the family in exact rationals."""
    fam = problem.family
    probs: list[str] = []
    for tab, what in ((w.phi_q, "phi_q"), (w.phi_k, "phi_k")):
        for t, row in tab.items():
            if len(row) != w.rank:
                probs.append(f"{what}[{t}] has {len(row)} entries, rank is {w.rank}")
            if w.features is Features.NONNEGATIVE and any(v < 0 for v in row):
                probs.append(f"{what}[{t}] has a negative entry")
    if probs:
        return ExactCheck(False, None, tuple(probs[:5]), None)
    alpha: dict[tuple[int, int], Fraction] = {}
    margin, worst = None, None
    for (i, j), t in zip(problem.positions, problem.targets):
        x = int(fam.inputs[i, j])
        num = den = Fraction(0)
        for z in fam.inputs[i]:
            key = (x, int(z))
            a = alpha.get(key)
            if a is None:
                if x not in w.phi_q or key[1] not in w.phi_k:
                    return ExactCheck(False, None, (f"no features for pair {key}",), None)
                a = alpha[key] = sum((p * q for p, q in zip(w.phi_q[x], w.phi_k[key[1]])),
                                     Fraction(0))
                if a < 0:
                    return ExactCheck(False, None, (f"alpha{key} = {a} < 0 on a used pair",), None)
            gv = w.g.get(key)
            if gv is None:
                if a != 0:
                    return ExactCheck(False, None, (f"no value g for pair {key}",), None)
                gv = Fraction(0)
            num += a * gv
            den += a
        if den <= 0:
            return ExactCheck(False, None, (f"input {i} position {j}: denominator {den} <= 0",),
                              (int(i), int(j)))
        mrg = HALF - abs(num / den - int(t))
        if margin is None or mrg < margin:
            margin, worst = mrg, (int(i), int(j))
    ok = margin is not None and margin > 0
    if not ok:
        probs.append(f"input {worst[0]} position {worst[1]}: |t_hat - t| = {HALF - margin} "
                     f">= 1/2")
    return ExactCheck(ok, margin, tuple(probs), worst)


# ---------------------------------------------------------------- floats -> exact

def dyadic(a: np.ndarray, bits: int) -> np.ndarray:
    """Round to integers over ``2^bits`` (exact): returns int numerators (object array)."""
    return np.vectorize(lambda v: int(round(float(v) * (1 << bits))), otypes=[object])(a)


def fit_values(problem: FeasibilityProblem, alpha: np.ndarray, *, g_box: float | None = None,
               time_limit: float | None = None):
    """For a fixed kernel on the entries (``alpha`` (E,) floats >= 0), the values are
    an LP: maximize delta s.t. every scored position has
    ``t - 1/2 + delta <= sum_j w_j g_j <= t + 1/2 - delta`` with ``w = c alpha / D``.
    Returns ``(g (E,), delta)`` or ``(None, None)``."""
    C = problem.counts
    D = C @ alpha                                              # (P,)
    if np.any(D <= 0):
        return None, None
    W = sp.diags(1.0 / D) @ C @ sp.diags(alpha)                # (P, E)
    P, E = W.shape
    A = sp.vstack([sp.hstack([W, np.ones((P, 1))]), sp.hstack([W, -np.ones((P, 1))])]).tocsr()
    t = problem.targets.astype(np.float64)
    lo = np.concatenate([np.full(P, -np.inf), t - 0.5])
    hi = np.concatenate([t + 0.5, np.full(P, np.inf)])
    box = float(g_box if g_box is not None else 100.0)
    cost = np.zeros(E + 1)
    cost[-1] = 1.0
    res = solve_lp(cost, A, lo, hi, np.r_[np.full(E, -box), -1.0], np.r_[np.full(E, box), 0.5],
                   maximize=True, time_limit=time_limit)
    if res.status is not LPStatus.OPTIMAL:
        return None, None
    return res.x[:E], float(res.x[-1])


def verify_factors(problem: FeasibilityProblem, phi_q: np.ndarray, phi_k: np.ndarray,
                   features: Features, rank: int, *, bits: int = 48,
                   g: np.ndarray | None = None) -> tuple[Witness | None, ExactCheck | None]:
    """Rationalize float factors (rows = ``problem.queries`` / ``problem.keys``),
    re-fit the values for the exact kernel (unless ``g`` (E,) is given) and
    check exactly. Returns ``(witness, check)``; ``witness`` is None when no
    candidate could be formed."""
    phi_q = np.asarray(phi_q, dtype=np.float64)
    phi_k = np.asarray(phi_k, dtype=np.float64)
    if features is Features.NONNEGATIVE:
        phi_q, phi_k = np.maximum(phi_q, 0.0), np.maximum(phi_k, 0.0)
    r = phi_q.shape[1]
    if r > rank:
        return None, None
    Qn, Kn = dyadic(phi_q, bits), dyadic(phi_k, bits)          # integers over 2^bits
    ex = problem.entries
    alpha_int = [sum(Qn[a, l] * Kn[b, l] for l in range(r)) for a, b in ex]
    if min(alpha_int) < 0:
        return None, ExactCheck(False, None, ("a used pair has alpha < 0 after rounding",), None)
    scale = max(max(abs(v) for v in alpha_int), 1)
    alpha_f = np.array([float(Fraction(v, scale)) for v in alpha_int])
    if g is None:
        g, delta = fit_values(problem, alpha_f)
        if g is None:
            return None, ExactCheck(False, None, ("value LP failed for the rounded kernel",), None)
    G = dyadic(g, 40)
    den_q, den_g = 1 << bits, 1 << 40
    pad = (Fraction(0),) * (rank - r)
    w = Witness(
        features=features, rank=rank,
        phi_q={int(t): tuple(Fraction(int(v), den_q) for v in Qn[i]) + pad
               for i, t in enumerate(problem.queries)},
        phi_k={int(t): tuple(Fraction(int(v), den_q) for v in Kn[i]) + pad
               for i, t in enumerate(problem.keys)},
        g={(int(problem.queries[a]), int(problem.keys[b])): Fraction(int(G[e]), den_g)
           for e, (a, b) in enumerate(ex)},
    )
    return w, exact_check(problem, w)


def lookup_witness(problem: FeasibilityProblem, rank: int,
                   features: Features) -> tuple[Witness | None, ExactCheck | None]:
    """The rank = #queries construction: ``PhiQ = I`` (padded with zero columns),
    ``PhiK[z] = ((2n)^-<x,z>)_x`` and ``g_x(z) = <x,z>`` (the Thm 1 softmin
    kernel at ``tau = log(2n)``, one feature per query token). Nonnegative, so
    it serves both classes. Exactly checked."""
    R = problem.num_rows
    if rank < R:
        return None, None
    fam = problem.family
    toks = fam.tokens.astype(np.int64)
    base = Fraction(1, 2 * fam.n)
    zero = Fraction(0)
    phi_q = {int(x): tuple(Fraction(int(i == l)) for l in range(rank))
             for i, x in enumerate(problem.queries)}
    phi_k = {int(z): tuple(base ** int(toks[x] @ toks[z]) for x in problem.queries)
             + (zero,) * (rank - R) for z in problem.keys}
    g = {(int(problem.queries[a]), int(problem.keys[b])):
         Fraction(int(toks[problem.queries[a]] @ toks[problem.keys[b]]))
         for a, b in problem.entries}
    w = Witness(features=features, rank=rank, phi_q=phi_q, phi_k=phi_k, g=g)
    return w, exact_check(problem, w)
