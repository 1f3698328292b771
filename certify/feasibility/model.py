"""The exact feasibility model: one normalized nonnegative kernel head, rank r, on a family.

For a scored position whose query token is ``x`` in an input with tokens
``z_1..z_N`` (the query itself included: the self term),

    t_hat = sum_j alpha(x, z_j) g_x(z_j) / sum_j alpha(x, z_j),   alpha = PhiQ PhiK^T,

and the head solves the family when every scored position has a positive
denominator and ``|t_hat - t| < 1/2`` (strict). ``g_x(z)`` is a free
query-token lookup table (Eq. 5). Feature classes: ``real`` (signed features)
and ``nonnegative`` (``PhiQ, PhiK >= 0``).

Model classes (where ``alpha >= 0`` is asked):

* ``paper`` (the default; Sec. 2.3): the head of the paper has ``alpha >= 0`` on
  the whole Boolean domain and a positive denominator on every valid input.
  On the family this is asked on ``Q x T``, ``Q`` = the tokens at scored
  positions, ``T`` = all of the family's tokens (15 x 41 = 615 pairs on
  paper-5.1), together with ``alpha(q, q) > 0`` for ``q`` in ``Q``; the
  extension to the rest of ``{0,1}^m`` is a finite rule stored with the
  witness (:func:`extension_rule`, lemma there).
* ``used-pairs`` (the relaxed model): ``alpha >= 0`` only on the (query, key)
  pairs some scored position uses. Every ``paper`` head is a ``used-pairs``
  head, so lower bounds proved for ``used-pairs`` hold for ``paper`` too.

With ``H = alpha * g`` entrywise, each scored position gives two constraints
linear in the pair ``(alpha, H)``:

    sum_j c_j ((t + 1/2) alpha_j - H_j) > 0,    sum_j c_j (H_j - (t - 1/2) alpha_j) > 0,

(``c_j`` = multiplicity of the key). :class:`FeasibilityProblem` holds them as
sparse matrices over the (query, key) pairs ("entries": the used pairs first,
then, in the ``paper`` class, the other pairs of ``Q x T`` with no constraint
but ``alpha >= 0``); the searches in
:mod:`solvers.factor` propose factors, and :func:`verify_factors` decides:
floats are rationalized (dyadic), the values are re-fitted by an LP for the
exact rational kernel, and every scored position is re-evaluated in exact
integer/rational arithmetic.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Mapping

import numpy as np
import scipy.sparse as sp

from certify.core.families import Family
from solvers.lp import LPStatus, solve_lp

HALF = Fraction(1, 2)


class Features(str, enum.Enum):
    REAL = "real"
    NONNEGATIVE = "nonnegative"


class ModelClass(str, enum.Enum):
    PAPER = "paper"              # alpha >= 0 on Q x T, alpha(q, q) > 0, extension rule
    USED_PAIRS = "used-pairs"    # alpha >= 0 on the used pairs only (relaxed)


@dataclass(frozen=True, eq=False)
class FeasibilityProblem:
    """The constraint structure of a family (independent of the rank)."""

    family: Family
    queries: np.ndarray        # (R,) token indices at scored positions
    keys: np.ndarray           # (C,) key tokens: used by some scored position (used-pairs),
                               #      every family token (paper)
    entries: np.ndarray        # (E, 2) (query row, key column): used pairs, then the rest of
                               #      Q x T in the paper class (zero columns of counts)
    counts: sp.csr_matrix      # (P, E) multiplicity of each entry in scored position p
    targets: np.ndarray        # (P,) Min-IP target of scored position p
    positions: np.ndarray      # (P, 2) (input index, position) of each scored position
    model_class: ModelClass = ModelClass.PAPER
    num_used: int | None = None    # entries[:num_used] are the used pairs (None: all)

    @property
    def used(self) -> int:
        return self.num_entries if self.num_used is None else int(self.num_used)

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


def build_problem(family: Family,
                  model_class: ModelClass | str = ModelClass.PAPER) -> FeasibilityProblem:
    model_class = ModelClass(model_class)
    inputs, scored = family.inputs, family.scored
    pos = np.argwhere(scored)                                  # (P, 2)
    q_tok = inputs[pos[:, 0], pos[:, 1]]                       # (P,)
    queries = np.unique(q_tok)
    row_of = {int(t): i for i, t in enumerate(queries)}
    if model_class is ModelClass.PAPER:
        keys = np.arange(family.tokens.shape[0], dtype=np.int64)
    else:
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
    num_used = len(entry_of)
    if model_class is ModelClass.PAPER:       # the rest of Q x T: alpha >= 0 only
        for a in range(len(queries)):
            for b in range(len(keys)):
                entry_of.setdefault((a, b), len(entry_of))
    entries = np.array(sorted(entry_of, key=lambda k: entry_of[k]), dtype=np.int64).reshape(-1, 2)
    counts = sp.csr_matrix((np.array(vals, dtype=np.float64), (rows, cols)),
                           shape=(len(pos), len(entries)))
    targets = family.targets[pos[:, 0], pos[:, 1]]
    return FeasibilityProblem(family=family, queries=queries, keys=keys, entries=entries,
                              counts=counts, targets=targets.astype(np.int64), positions=pos,
                              model_class=model_class, num_used=num_used)


# ---------------------------------------------------------------- witnesses

@dataclass(frozen=True)
class Witness:
    """An exact rank-r head restricted to the family's tokens. In the ``paper``
    class ``phi_q`` covers the queries ``Q``, ``phi_k`` all tokens ``T``, and
    ``extension`` is the rule that extends the head to the whole cube
    (:func:`extension_rule`); it is None in the ``used-pairs`` class."""

    features: Features
    rank: int
    phi_q: Mapping[int, tuple[Fraction, ...]]     # query token -> r rationals
    phi_k: Mapping[int, tuple[Fraction, ...]]     # key token -> r rationals
    g: Mapping[tuple[int, int], Fraction]          # (query token, key token) -> value
    model_class: ModelClass = ModelClass.PAPER
    extension: Mapping[str, Any] | None = None

    @property
    def cube_rank(self) -> int | None:
        """Feature dimension of the whole-cube head the extension rule gives."""
        if self.extension is None:
            return None
        return self.rank + (1 if self.extension["rule"] == PLUS_ONE else 0)

    def to_json(self) -> dict:
        from certify.core.numbers import q_to_str

        return {
            "features": self.features.value,
            "rank": self.rank,
            "class": self.model_class.value,
            "phi_q": [[int(t), [q_to_str(v) for v in row]] for t, row in sorted(self.phi_q.items())],
            "phi_k": [[int(t), [q_to_str(v) for v in row]] for t, row in sorted(self.phi_k.items())],
            "g": [[int(x), int(z), q_to_str(v)] for (x, z), v in sorted(self.g.items())],
            "extension": None if self.extension is None else dict(self.extension),
        }


@dataclass(frozen=True)
class ExactCheck:
    ok: bool
    margin: Fraction | None        # min over scored positions of 1/2 - |t_hat - t|
    problems: tuple[str, ...]
    worst: tuple[int, int] | None  # (input, position) attaining the margin


# ---------------------------------------------------------------- the paper's class

COPY_QUERY = "copy-query"
PLUS_ONE = "plus-one"


def _dot(u, v) -> Fraction:
    return sum((a * b for a, b in zip(u, v)), Fraction(0))


def paper_alpha(problem: FeasibilityProblem, w: Witness):
    """``alpha`` on ``Q x T`` as ``{(q, z): Fraction}``, or a problem string when a
    query or token has no features."""
    T = range(problem.family.tokens.shape[0])
    for q in problem.queries:
        if int(q) not in w.phi_q:
            return f"no query features for the query token {int(q)}"
    for z in T:
        if z not in w.phi_k:
            return f"no key features for the family token {z}"
    return {(int(q), z): _dot(w.phi_q[int(q)], w.phi_k[z]) for q in problem.queries for z in T}


def extension_rule(problem: FeasibilityProblem, alpha: Mapping[tuple[int, int], Fraction]) -> dict:
    """The cheapest rule that extends a family head of the paper's class to ``{0,1}^m``.

    **Lemma (extension).** Let ``phi_q`` be given on ``Q`` (the tokens at scored
    positions), ``phi_k`` on ``T`` (all family tokens, ``Q`` in ``T``), rank ``r``,
    with (i) ``alpha(q, z) >= 0`` for ``q`` in ``Q``, ``z`` in ``T`` and (ii)
    ``alpha(q, q) > 0`` for ``q`` in ``Q``. Write ``N`` = ``{0,1}^m \\ Q``
    (non-queries: the family's other tokens and every token outside the family)
    and ``O`` = ``{0,1}^m \\ T``.

    (a) ``plus-one`` (always applicable, rank ``r + 1``): append one coordinate;
        ``phi_k(z) = (phi_k(z), 1)`` for ``z`` in ``T``, ``phi_k(z) = e_{r+1}`` for
        ``z`` in ``O``; ``phi_q(q) = (phi_q(q), 0)`` for ``q`` in ``Q``,
        ``phi_q(x) = e_{r+1}`` for ``x`` in ``N``. Then ``alpha(q, z)`` is unchanged
        on ``Q x T``, ``alpha(q, z) = 0`` on ``Q x O`` and ``alpha(x, .) = 1`` for
        ``x`` in ``N``.
    (b) ``copy-query`` (rank ``r``; applicable when some ``q*`` in ``Q`` has
        ``alpha(q*, z) > 0`` for every ``z`` in ``T``): ``phi_q(x) = phi_q(q*)`` for
        ``x`` in ``N``, ``phi_k(z) = phi_k(q*)`` for ``z`` in ``O``. The four blocks:
        ``Q x T`` unchanged (>= 0 by (i)); ``Q x O``: ``alpha(q, q*) >= 0`` by (i);
        ``N x T``: ``alpha(q*, z) > 0``; ``N x O``: ``alpha(q*, q*) > 0``.

    In both, ``alpha >= 0`` on all of ``{0,1}^m x {0,1}^m`` and ``alpha(x, x) > 0``
    for every ``x`` (``x`` in ``Q``: (ii); (a) ``x`` in ``N``: 1; (b) ``x`` in
    ``N`` and in ``T``: ``alpha(q*, x) > 0``, ``x`` in ``O``: ``alpha(q*, q*) > 0``).
    Every denominator ``sum_j alpha(x_i, x_j)`` of every valid input (any length,
    any position) contains its self term, so it is > 0. A scored position of the
    family has its query in ``Q`` and its tokens in ``T``, where the kernel is
    unchanged, so with the witness's values ``g`` on the used pairs it is still
    solved with the same margin; the values ``g_x(z)`` of every other pair (any
    token outside the family, any non-query ``x``) never enter a scored position
    of the family and are arbitrary (say 0). Both rules keep ``phi >= 0`` when it
    holds, so they serve the nonnegative class too. Checking (i), (ii) and the
    condition of (b) takes ``|Q| |T| r`` exact products. ∎

    Returns ``{"rule": "copy-query", "query": q*}`` (smallest such ``q*``) or
    ``{"rule": "plus-one"}``."""
    T = range(problem.family.tokens.shape[0])
    for q in problem.queries:
        if all(alpha[int(q), z] > 0 for z in T):
            return {"rule": COPY_QUERY, "query": int(q)}
    return {"rule": PLUS_ONE}


def paper_problems(problem: FeasibilityProblem, w: Witness) -> list[str]:
    """The paper-class conditions of the lemma in :func:`extension_rule`, exactly:
    ``alpha >= 0`` on ``Q x T``, ``alpha(q, q) > 0`` and a valid stored rule."""
    alpha = paper_alpha(problem, w)
    if isinstance(alpha, str):
        return [alpha]
    neg = [(k, a) for k, a in alpha.items() if a < 0]
    if neg:
        (q, z), a = neg[0]
        return [f"alpha({q}, {z}) = {a} < 0: {len(neg)} of the {len(alpha)} (query, token) "
                f"pairs are negative (paper class)"]
    for q in problem.queries:
        if alpha[int(q), int(q)] <= 0:
            return [f"alpha({int(q)}, {int(q)}) = 0: the self term of query {int(q)} is not "
                    f"positive (paper class)"]
    ext = w.extension
    if ext is None:
        return ["no extension rule to the whole cube (paper class)"]
    if ext.get("rule") == PLUS_ONE and set(ext) == {"rule"}:
        return []
    if ext.get("rule") == COPY_QUERY and set(ext) == {"rule", "query"}:
        q = ext["query"]
        if not isinstance(q, (int, np.integer)) or int(q) not in {int(v) for v in problem.queries}:
            return [f"extension query {q!r} is not a query token of the family"]
        bad = [z for z in range(problem.family.tokens.shape[0]) if alpha[int(q), z] <= 0]
        if bad:
            return [f"copy-query rule with query {int(q)}: alpha({int(q)}, {bad[0]}) = "
                    f"{alpha[int(q), bad[0]]} is not positive ({len(bad)} tokens)"]
        return []
    return [f"unknown extension rule {ext!r}"]


def with_extension(problem: FeasibilityProblem, w: Witness) -> Witness:
    """``w`` with the class of ``problem`` and, in the paper class, the cheapest
    valid extension rule (``w`` unchanged when alpha fails the class's conditions:
    :func:`exact_check` reports that)."""
    if problem.model_class is ModelClass.USED_PAIRS:
        return replace(w, model_class=ModelClass.USED_PAIRS, extension=None)
    alpha = paper_alpha(problem, w)
    if isinstance(alpha, str):
        return replace(w, model_class=ModelClass.PAPER)
    return replace(w, model_class=ModelClass.PAPER, extension=extension_rule(problem, alpha))


def exact_check(problem: FeasibilityProblem, w: Witness) -> ExactCheck:
    """Re-evaluate every scored position of the family in exact rationals, and in
    the paper class the conditions of the extension lemma."""
    fam = problem.family
    probs: list[str] = []
    if w.model_class is not problem.model_class:
        return ExactCheck(False, None, (f"witness class {w.model_class.value} differs from the "
                                        f"problem's {problem.model_class.value}",), None)
    for tab, what in ((w.phi_q, "phi_q"), (w.phi_k, "phi_k")):
        for t, row in tab.items():
            if len(row) != w.rank:
                probs.append(f"{what}[{t}] has {len(row)} entries, rank is {w.rank}")
            if w.features is Features.NONNEGATIVE and any(v < 0 for v in row):
                probs.append(f"{what}[{t}] has a negative entry")
    if probs:
        return ExactCheck(False, None, tuple(probs[:5]), None)
    if problem.model_class is ModelClass.PAPER:
        probs = paper_problems(problem, w)
        if probs:
            return ExactCheck(False, None, tuple(probs), None)
    alpha: dict[tuple[int, int], Fraction] = {}
    margin: Fraction | None = None
    worst: tuple[int, int] | None = None
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
    if margin is None or worst is None:
        return ExactCheck(False, None, ("the family scores no position",), None)
    ok = margin > 0
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
    if res.status is not LPStatus.OPTIMAL or res.x is None:
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
        what = ("a (query, token) pair" if problem.model_class is ModelClass.PAPER
                else "a used pair")
        return None, ExactCheck(False, None, (f"{what} has alpha < 0 after rounding",), None)
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
           for e, (a, b) in enumerate(ex[:problem.used])},
    )
    w = with_extension(problem, w)
    return w, exact_check(problem, w)


def lookup_witness(problem: FeasibilityProblem, rank: int,
                   features: Features) -> tuple[Witness | None, ExactCheck | None]:
    """The rank = #queries construction: ``PhiQ = I`` (padded with zero columns),
    ``PhiK[z] = ((2n)^-<x,z>)_x`` and ``g_x(z) = <x,z>`` (the Thm 1 softmin
    kernel at ``tau = log(2n)``, one feature per query token). Nonnegative, so
    it serves both feature classes; ``alpha > 0`` on ``Q x T``, so in the paper
    class the copy-query rule extends it to the cube at the same rank. Exactly
    checked."""
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
         for a, b in problem.entries[:problem.used]}
    w = with_extension(problem, Witness(features=features, rank=rank, phi_q=phi_q, phi_k=phi_k,
                                        g=g))
    return w, exact_check(problem, w)
