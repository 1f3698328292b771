"""Rank lower bound of a family from its own Lemma 3 chains and Lemma 4, exactly.

Lemma 3 (error < 1/2, exact length n >= 3). If the family holds, at scored
position 0, ``Y = (x, y^(n-1))``, ``Z = (x, z^(n-1))``, ``M = (x, y, z^(n-2))``
with targets ``t, u, t`` where ``t = <x,y> < u = <x,z> <= <x,x>``, then with
``mu = (n-2)(d-1)``, ``d = u - t >= (n-1)/(n-2)``,

    alpha(x,y) > mu alpha(x,z)        (the values cancel; the self term only helps).

Such a triple is a *GD edge* ``y -> z`` of query ``x``. Along a path of edges from
``c_i`` to ``c_j`` the factors multiply: ``alpha(x_i, c_i) > Lambda_ij alpha(x_i, c_j)``.
For ``t >= 2`` queries ``x_i`` with diagonal keys ``c_i`` and a path for every
ordered pair, ``B = [alpha(x_i, c_j)]`` is a submatrix of ``PhiQ PhiK^T`` with
``B >= 0`` (used pairs), and its row-normalized ``C`` has ``C_ii = 1``,
``0 <= C_ij < 1 / Lambda_ij``. Lemma 4's argument ``t = tr C <= ||C||_* <=
sqrt(rank C) ||C||_F`` then gives, strictly,

    r >= rank(B) > t^2 / (t + sum_{i != j} Lambda_ij^-2),

so every ``r <= t^2 / (t + sum Lambda^-2)`` is infeasible (for both classes).

Since ``C >= 0``, the nonnegative refinement of Lemma 4
(:func:`certify.core.bounds.perron_discriminant`, with ``rho = max 1/Lambda_ij``)
excludes every ``r`` with ``Delta(r) < 0`` as well; the derivation reports
both and ``max_infeasible_rank`` is the larger.

**Nonnegative features: the packing lemma.** With ``phiQ, phiK >= 0`` of rank
``r`` let ``p_i(l) = phiQ_l(x_i) phiK_l(c_i) / B_ii`` (the share of feature ``l``
in ``B_ii = alpha(x_i, c_i) > 0``; ``p_i >= 0``, its coordinates sum to 1). For
``i != j``, keeping only the terms ``l = l'`` of a product of two sums of
nonnegative terms, ``<p_i, p_j> <= B_ij B_ji / (B_ii B_jj) < 1/(Lambda_ij Lambda_ji)
<= kappa^2``. If ``r < t`` the ``t`` vectors ``p_i`` in ``R^r`` are linearly
dependent: ``sum_i y_i p_i = 0`` with ``y != 0``; as the ``p_i`` are nonzero and
nonnegative, ``P = {y_i > 0}`` and ``N = {y_i < 0}`` are both nonempty. Put
``z = sum_P y_i p_i = sum_N |y_j| p_j >= 0`` and ``A = sum_P y_i = sum_N |y_j| > 0``
(sum the coordinates). Then ``|z|^2 = sum_{i in P, j in N} y_i |y_j| <p_i, p_j>
< kappa^2 A^2`` while Cauchy-Schwarz in ``R^r`` gives ``|z|^2 >= A^2 / r``: so
``r > 1/kappa^2``. Every ``r < t`` with ``r kappa^2 <= 1`` is infeasible
(``packing_rank``). (The lemma this proves: ``n > d`` nonnegative vectors in
``R^d`` with coordinate sum 1 have a pair ``i != j`` with ``<p_i, p_j> >= 1/d``;
tight for the ``d`` basis vectors and ``(1/d, ..., 1/d)``.) On paper-5.1, ``Lambda = 4`` on every ordinary
pair and 16 on the two special ones, so ``kappa^2 = 1/16`` and every
nonnegative rank ``<= 14`` is excluded; the one-feature-per-query construction
has rank 15, so the minimum is exactly 15.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from certify.core.bounds import perron_discriminant, perron_max_excluded_rank, rank_bound_per_pair
from certify.core.families import Family


@dataclass(frozen=True)
class GDEdge:
    x: int
    y: int
    z: int
    t: int
    u: int
    mu: int
    inputs: tuple[int, int, int]     # (Y, Z, M) input indices


@dataclass(frozen=True)
class ChainBound:
    """The derivation: queries, diagonal keys, per-pair paths (edge indices) and
    ``Lambda``, and the exact bound ``t^2 / (t + sum Lambda^-2)``."""

    edges: tuple[GDEdge, ...]
    queries: tuple[int, ...]
    diagonal: tuple[int, ...]
    paths: dict                      # (i, j) -> tuple of edge indices
    lambdas: dict                    # (i, j) -> int
    bound: Fraction
    n: int                           # the family's exact length (Lemma 3)

    @property
    def lemma4_rank(self) -> int:
        """Largest r with ``r <= bound`` (Lemma 4 per pair)."""
        return self.bound.numerator // self.bound.denominator

    @property
    def rho(self) -> Fraction:
        return max(Fraction(1, L) for L in self.lambdas.values())

    @property
    def perron_rank(self) -> int:
        """Largest r excluded by the nonnegative refinement (0 when none)."""
        return perron_max_excluded_rank(len(self.queries), self.rho) if self.rho < 1 else 0

    @property
    def max_infeasible_rank(self) -> int:
        """Every rank up to this one is infeasible (real or nonnegative features)."""
        return max(self.lemma4_rank, self.perron_rank)

    @property
    def kappa_sq(self) -> Fraction:
        """``max_{i != j} 1 / (Lambda_ij Lambda_ji)``: the packing lemma's bound on the
        squared overlap of two rows' feature shares (nonnegative features)."""
        return max(Fraction(1, self.lambdas[i, j] * self.lambdas[j, i]) for (i, j) in self.lambdas)

    @property
    def packing_rank(self) -> int:
        """Largest r excluded for nonnegative features by the packing lemma: every
        ``r < t`` with ``r kappa^2 <= 1`` (0 when none)."""
        k = self.kappa_sq
        return min(len(self.queries) - 1, k.denominator // k.numerator)

    def max_infeasible_rank_for(self, features: str) -> int:
        """Every rank up to this one is infeasible for heads with these features."""
        if str(getattr(features, "value", features)) == "nonnegative":
            return max(self.max_infeasible_rank, self.packing_rank)
        return self.max_infeasible_rank

    def to_json(self) -> dict:
        from certify.core.numbers import q_to_str

        return {
            "lemma3": {"eps": "1/2", "n": self.n, "mu": "(n-2)(d-1)"},
            "edges": [[e.x, e.y, e.z, e.t, e.u, e.mu, *e.inputs] for e in self.edges],
            "edge_columns": ["x", "y", "z", "t", "u", "mu", "input_y", "input_z", "input_m"],
            "queries": list(self.queries),
            "diagonal": list(self.diagonal),
            "pairs": [[i, j, list(self.paths[i, j]), self.lambdas[i, j]]
                      for (i, j) in sorted(self.paths)],
            "sum_inverse_lambda_sq": q_to_str(sum((Fraction(1, L * L) for L in
                                                   self.lambdas.values()), Fraction(0))),
            "bound": q_to_str(self.bound),
            "perron": {"rho": q_to_str(self.rho), "rank": self.perron_rank,
                       "discriminant": (q_to_str(perron_discriminant(len(self.queries), self.rho,
                                                                     self.perron_rank))
                                        if self.perron_rank else None)},
            "max_infeasible_rank": self.max_infeasible_rank,
            "packing": {"kappa_sq": q_to_str(self.kappa_sq), "rank": self.packing_rank},
        }


def gd_edges(family: Family) -> list[GDEdge]:
    """Every Lemma 3 triple present in the family, hypotheses checked exactly."""
    n = family.n
    if n < 3:
        return []
    toks = family.tokens.astype(np.int64)
    index = {tuple(int(v) for v in row): i for i, row in enumerate(family.inputs)
             if family.scored[i, 0]}
    pure: dict[int, list[int]] = {}                  # x -> keys y with (x, y^(n-1)) present
    for row in index:
        if len(set(row[1:])) == 1:
            pure.setdefault(row[0], []).append(row[1])
    out = []
    for x, ys in pure.items():
        xx = int(toks[x] @ toks[x])
        for y, z in itertools.permutations(sorted(set(ys)), 2):
            t, u = int(toks[x] @ toks[y]), int(toks[x] @ toks[z])
            if not t < u <= xx:
                continue
            d = u - t
            if (n - 2) * d < n - 1:                   # d >= 2 eps (n-1)/(n-2), eps = 1/2
                continue
            iy = index[(x,) + (y,) * (n - 1)]
            iz = index[(x,) + (z,) * (n - 1)]
            im = index.get((x, y) + (z,) * (n - 2))
            if im is None:
                continue
            tg = family.targets
            if (tg[iy, 0], tg[iz, 0], tg[im, 0]) != (t, u, t):
                continue
            out.append(GDEdge(x, y, z, t, u, (n - 2) * (d - 1), (iy, iz, im)))
    return out


def _best_paths(edges: list[GDEdge], x: int, source: int):
    """Max-product paths from ``source`` among query ``x``'s edges (a DAG: the
    overlap ``<x, .>`` increases along every edge). Returns key -> (Lambda, path)."""
    best: dict[int, tuple[int, tuple[int, ...]]] = {source: (1, ())}
    mine = sorted((k for k, e in enumerate(edges) if e.x == x), key=lambda k: edges[k].t)
    for k in mine:                      # sources sorted by overlap: a valid topological order
        e = edges[k]
        if e.y in best:
            lam, path = best[e.y]
            cand = lam * e.mu
            if e.z not in best or cand > best[e.z][0]:
                best[e.z] = (cand, path + (k,))
    return best


def chain_bound(family: Family, *, max_exhaustive: int = 12) -> ChainBound | None:
    """The best Lemma 3 + Lemma 4 bound found from the family's own chains, or None.

    Diagonal key of query ``x``: the key of least overlap among its edge sources
    (``x_{S^c}`` in a chain family). The query set is the largest (by bound) set
    in which every ordered pair is joined by a path: exhaustive over subsets
    when there are at most ``max_exhaustive`` candidate queries, greedy otherwise.
    """
    edges = gd_edges(family)
    if not edges:
        return None
    toks = family.tokens.astype(np.int64)
    cand_q, diag = [], {}
    for x in sorted({e.x for e in edges}):
        srcs = {e.y for e in edges if e.x == x}
        c = min(srcs, key=lambda y: (int(toks[x] @ toks[y]), y))
        cand_q.append(x)
        diag[x] = c
    reach = {x: _best_paths(edges, x, diag[x]) for x in cand_q}

    def ok(a, b):
        return diag[b] in reach[a] and diag[b] != diag[a]

    def value(sel):
        """Lemma 4 per pair (strict): t^2 / (t + sum Lambda^-2), from certify.core.bounds."""
        lam = [[None if a == b else reach[a][diag[b]][0] for b in sel] for a in sel]
        return rank_bound_per_pair(lam, strict=True).bound

    best_sel: tuple[int, ...] | None = None
    if len(cand_q) <= max_exhaustive:
        best = None
        for size in range(len(cand_q), 1, -1):
            for sel in itertools.combinations(cand_q, size):
                if all(ok(a, b) for a in sel for b in sel if a != b):
                    v = value(sel)
                    if best is None or v > best:
                        best_sel, best = sel, v
    else:
        greedy: list[int] = []
        for x in sorted(cand_q, key=lambda q: -sum(ok(q, b) and ok(b, q) for b in cand_q)):
            if all(ok(x, b) and ok(b, x) for b in greedy):
                greedy.append(x)
        best_sel = tuple(greedy) if len(greedy) >= 2 else None
    if best_sel is None or len(best_sel) < 2:
        return None
    paths, lambdas = {}, {}
    for i, a in enumerate(best_sel):
        for j, b in enumerate(best_sel):
            if i != j:
                lam, path = reach[a][diag[b]]
                paths[i, j], lambdas[i, j] = path, lam
    used = sorted({k for p in paths.values() for k in p})
    renum = {k: i for i, k in enumerate(used)}
    return ChainBound(edges=tuple(edges[k] for k in used), queries=tuple(best_sel),
                      diagonal=tuple(diag[a] for a in best_sel),
                      paths={ij: tuple(renum[k] for k in p) for ij, p in paths.items()},
                      lambdas=lambdas, bound=value(best_sel), n=family.n)
