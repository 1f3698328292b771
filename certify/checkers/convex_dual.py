"""Independent checker for ``infeasible`` claims proved by a convex dual certificate.

Imports only the standard library, :mod:`certify.checkers.common` and the kinds'
declarations (:mod:`certify.checkers.kinds`, whose key lists close every object
below): no cvxpy, no solver. The claim's ``parameters`` are those of every feasibility claim
(``rank``, ``features``, ``family``, ``family_sha256``, ``error`` = ``"1/2"``, and
``class`` in ``paper`` | ``used-pairs`` (the bound holds for both) and ``scope``
``family``).

``evidence`` = ``{"family": <family file object>, "derivation": D}`` with exactly

``D = {"method": "convex-dual", "chains": CH, "dual": DU}``

``CH = {"lemma3": {"eps": "1/2", "n": n, "mu": "(n-2)(d-1)"},
       "edges": [[x, y, z, t, u, mu, input_y, input_z, input_m]...],
       "edge_columns": [those nine names], "queries": [x_i], "diagonal": [c_i],
       "pairs": [[i, j, [edge indices of the path c_i -> c_j], Lambda_ij]...]}``
  -- the Lemma 3 chains, re-derived from the family exactly as in
  :mod:`certify.checkers.feasibility` (every ordered pair of the ``t`` queries).
  They put the row-normalized chain matrix ``C`` of any head into the polytope
  ``P = {C_ii = 1, 0 <= C_ij <= rho_ij = 1/Lambda_ij}``.

``DU = {"rank": R, "W": [[t "p/q"]] x t, "x": [t "p/q"], "y": [t "p/q"],
       "lambda": "p/q", "mu": "p/q", "margin": "p/q"}``
  -- re-checked: ``R >= 2`` and the claimed rank ``<= R``; ``||W||_2 <= 1`` by an
  exact symmetric elimination (``LDL^T``) of ``I - W^T W`` in Fractions (a
  negative pivot, or a zero pivot with a nonzero entry below it, rejects);
  ``|x|^2 |y|^2 <= 1``; ``lambda > 0``; ``mu >= 0``; and the margin

      min_{C in P} [<W,C> + mu x^T C y - (R-1)/(2 lambda) sum_{i!=j} rho_ij C_ij]
        - lambda/2 - (R-1) t/(2 lambda) - (1+mu)^2 lambda/(2(R-1))

  (each off-diagonal entry at 0 or rho_ij by the sign of its coefficient) is
  recomputed, must equal the stated one, and must be > 0. The lemma that a
  positive margin excludes every rank ``<= R`` is proved in
  :mod:`certify.feasibility.convex_bounds`: von Neumann (``<W,C> <= ||C||_*``), Cauchy-Schwarz
  on ``s_2..s_R``, ``C_ij^2 <= rho_ij C_ij``, ``s_1 >= x^T C y`` and AM-GM.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Mapping, Sequence

from certify.checkers.common import Bad, Family, family, integer, rational
from certify.checkers.kernel import box_minimum, gram_matrix, is_psd, scaled_matrix
from certify.checkers.kernel.attention import kernel_value
from certify.checkers.kinds import BY_NAME

METHOD = "convex-dual"
EDGE_COLUMNS = ["x", "y", "z", "t", "u", "mu", "input_y", "input_z", "input_m"]
#: the claim's parameters, evidence and nested objects (declared in certify.checkers.kinds)
_INFEASIBLE = BY_NAME["infeasible"]


def is_convex_dual(claim: Any) -> bool:
    """Does this claim carry a convex dual certificate (dispatch test)?"""
    ev = claim.get("evidence") if isinstance(claim, dict) else None
    d = ev.get("derivation") if isinstance(ev, dict) else None
    return isinstance(d, dict) and d.get("method") == METHOD


def _chains(ch: Any, fam: Family) -> tuple[int, dict]:
    """Re-derive the Lemma 3 chains; returns ``(t, {(i, j): Lambda_ij})``."""
    n = fam.n
    ch = _INFEASIBLE.part("derivation.chains").check_keys(ch, "derivation.chains")
    if n < 3:
        raise Bad(f"Lemma 3 needs length n >= 3, family has n = {n}")
    if ch["lemma3"] != {"eps": "1/2", "n": n, "mu": "(n-2)(d-1)"}:
        raise Bad(f"chains.lemma3 must be {{'eps': '1/2', 'n': {n}, 'mu': '(n-2)(d-1)'}}")
    if ch["edge_columns"] != EDGE_COLUMNS:
        raise Bad(f"chains.edge_columns must be {EDGE_COLUMNS}")
    edges = [[integer(v, "edge entry") for v in e] for e in ch["edges"]]
    queries = [integer(v, "query") for v in ch["queries"]]
    diag = [integer(v, "diagonal key") for v in ch["diagonal"]]
    I, K = len(fam.inputs), len(fam.tokens)
    for k, e in enumerate(edges):
        if len(e) != len(EDGE_COLUMNS):
            raise Bad(f"edge {k} is not a row of {len(EDGE_COLUMNS)} integers")
        x, y, z, t, u, mu, iy, iz, im = e
        if not all(0 <= v < I for v in (iy, iz, im)) or not all(0 <= v < K for v in (x, y, z)):
            raise Bad(f"edge {k}: index out of range")
        if fam.inputs[iy] != [x] + [y] * (n - 1) or fam.inputs[iz] != [x] + [z] * (n - 1) \
                or fam.inputs[im] != [x, y] + [z] * (n - 2):
            raise Bad(f"edge {k}: the inputs are not (x,y^(n-1)), (x,z^(n-1)), (x,y,z^(n-2))")
        if not (fam.scored[iy][0] and fam.scored[iz][0] and fam.scored[im][0]):
            raise Bad(f"edge {k}: position 0 of a Lemma 3 input is not scored")
        if fam.ip[x][y] != t or fam.ip[x][z] != u or not t < u <= fam.ip[x][x]:
            raise Bad(f"edge {k}: overlaps are not t = <x,y> < u = <x,z> <= <x,x>")
        if (fam.targets[iy][0], fam.targets[iz][0], fam.targets[im][0]) != (t, u, t):
            raise Bad(f"edge {k}: targets are not (t, u, t)")
        if (n - 2) * (u - t) < n - 1 or mu != (n - 2) * (u - t - 1):
            raise Bad(f"edge {k}: gap or factor mu fails Lemma 3")
    T = len(queries)
    if T < 2 or len(diag) != T or len(set(queries)) != T:
        raise Bad("the chains need at least two distinct queries with one diagonal key each")
    lam: dict = {}
    for entry in ch["pairs"]:
        if not isinstance(entry, list) or len(entry) != 4:
            raise Bad("a pair is not [i, j, path, Lambda]")
        i, j = integer(entry[0], "pair i"), integer(entry[1], "pair j")
        path = [integer(k, "path edge") for k in entry[2]]
        L = integer(entry[3], "Lambda")
        if not (0 <= i < T and 0 <= j < T and i != j) or (i, j) in lam:
            raise Bad(f"pair ({i}, {j}) is invalid or repeated")
        if not path or any(not 0 <= k < len(edges) for k in path):
            raise Bad(f"pair ({i}, {j}): empty path or edge index out of range")
        cur, prod = diag[i], 1
        for k in path:
            x, y, z, _, _, mu, *_ = edges[k]
            if x != queries[i] or y != cur:
                raise Bad(f"pair ({i}, {j}): path is not a chain of query {queries[i]}")
            cur, prod = z, prod * mu
        if cur != diag[j]:
            raise Bad(f"pair ({i}, {j}): path does not end at the diagonal key {diag[j]}")
        if prod != L or L < 1:
            raise Bad(f"pair ({i}, {j}): Lambda is {prod}, the evidence says {L}")
        lam[i, j] = L
    if len(lam) != T * (T - 1):
        raise Bad(f"{T * (T - 1) - len(lam)} ordered pairs lack a chain")
    return T, lam


def margin(rho: Sequence[Sequence[Fraction]], R: int, W: Sequence[Sequence[Fraction]], x: Sequence[Fraction],
           y: Sequence[Fraction], lam: Fraction, mu: Fraction) -> Fraction:
    """The certificate's margin (see the module docstring), exactly."""
    t = len(rho)
    c_off = Fraction(R - 1) / (2 * lam)
    coef, lo, hi = [], [], []                  # C_ii = 1, 0 <= C_ij <= rho_ij
    for i in range(t):
        for j in range(t):
            c = W[i][j] + mu * x[i] * y[j]
            coef.append(c if i == j else c - c_off * rho[i][j])
            lo.append(Fraction(1) if i == j else Fraction(0))
            hi.append(Fraction(1) if i == j else rho[i][j])
    total = box_minimum(coef, lo, hi)
    k = lam / 2 + Fraction(R - 1) * t / (2 * lam) + (1 + mu) ** 2 * lam / (2 * (R - 1))
    return total - k


def check_infeasible(claim: Mapping[str, Any]) -> list[str]:
    """Problems found re-deriving a convex-dual ``infeasible`` claim ([] = confirmed)."""
    p = _INFEASIBLE.params().check_keys(claim["parameters"], "parameters")
    if p["scope"] != "family":
        raise Bad("a lower bound from the family's chains is about the rank on the family: "
                  "scope must be 'family'")
    if p["error"] != "1/2":
        raise Bad("only error 1/2 is decided (parameters.error must be '1/2')")
    if p["features"] not in ("real", "nonnegative"):
        raise Bad(f"unknown feature class {p['features']!r}")
    if p["class"] not in ("paper", "used-pairs"):
        raise Bad(f"unknown model class {p['class']!r}")
    rank = integer(p["rank"], "parameters.rank", 1)
    ev = _INFEASIBLE.form().check_keys(claim["evidence"], "evidence")
    fam = family(ev["family"], claim["parameters"])
    d = _INFEASIBLE.part("derivation:convex-dual").check_keys(ev["derivation"], "derivation")
    if d["method"] != METHOD:
        raise Bad(f"derivation.method must be {METHOD!r}")
    t, lam_ij = _chains(d["chains"], fam)
    du = _INFEASIBLE.part("derivation.dual").check_keys(d["dual"], "derivation.dual")
    R = integer(du["rank"], "dual.rank", 2)
    W = du["W"]
    if not isinstance(W, list) or len(W) != t or any(not isinstance(r, list) or len(r) != t
                                                      for r in W):
        raise Bad(f"dual.W must be a {t} x {t} matrix")
    W = [[rational(v, "W") for v in row] for row in W]
    if not isinstance(du["x"], list) or not isinstance(du["y"], list) \
            or len(du["x"]) != t or len(du["y"]) != t:
        raise Bad(f"dual.x and dual.y must have {t} entries")
    x = [rational(v, "x") for v in du["x"]]
    y = [rational(v, "y") for v in du["y"]]
    lam, mu = rational(du["lambda"], "lambda"), rational(du["mu"], "mu")
    stated = rational(du["margin"], "margin")
    if not lam > 0 or mu < 0:
        return [f"multipliers out of range: lambda = {lam} must be > 0, mu = {mu} >= 0"]
    if kernel_value(x, x) * kernel_value(y, y) > 1:
        return ["|x|^2 |y|^2 > 1: x^T C y is not a lower bound on ||C||_2"]
    dens = [math.lcm(*(v.denominator for v in row)) for row in W]             # W = rows / row_den, exactly
    WtW = gram_matrix(scaled_matrix([[int(v * d) for v in row] for row, d in zip(W, dens)],
                                    {"kind": "row_denominators", "row_den": dens}))    # the kernel's W^T W
    G = [[(1 if a == b else 0) - v for b, v in enumerate(row)] for a, row in enumerate(WtW.tolist())]
    if not is_psd(G):
        return ["I - W^T W is not positive semidefinite (exact LDL^T): ||W||_2 > 1"]
    rho = [[Fraction(0) if i == j else Fraction(1, lam_ij[i, j]) for j in range(t)]
           for i in range(t)]
    m = margin(rho, R, W, x, y, lam, mu)
    if m != stated:
        return [f"margin is {m}, the evidence says {stated}"]
    if not m > 0:
        return [f"margin {m} is not positive: the certificate excludes nothing"]
    if rank > R:
        return [f"rank {rank} exceeds the certified rank {R}: not excluded"]
    return []
