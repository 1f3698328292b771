"""``feasible`` and ``infeasible``: is there a rank-r head that solves the family
with error < 1/2?

``feasible`` (proved): the witness head is evaluated at every scored position of
the re-validated family, in Fractions: ``t_hat = sum alpha g / sum alpha`` (self
term included) with ``alpha(x, z) = <phiQ(x), phiK(z)> >= 0`` on the pairs used,
a positive denominator and ``|t_hat - t| < 1/2``; rows of length r (entries
``>= 0`` for nonnegative features); in the paper class ``alpha >= 0`` on
(queries x all tokens), ``alpha(q, q) > 0`` and the extension rule's condition;
the least ``1/2 - |t_hat - t|`` is the stated margin.

``infeasible`` (proved): every edge of the chains is a Lemma 3 triple of the
family at eps = 1/2 (its three inputs present and scored at position 0, their
targets re-derived as ``t, u, t``, ``t = <x,y> < u = <x,z> <= <x,x>``, ``(n-2)(u-t)
>= n-1``, factor ``mu = (n-2)(u-t-1)``), so every head within 1/2 has
``alpha(x,y) > mu alpha(x,z)``; each ordered pair of the t queries has a chain
from its diagonal key to the other's, ``Lambda_ij`` the product of its factors;
then one of

* Lemma 4 (strict): ``rank > t^2 / (t + sum Lambda^-2)``; the nonnegative
  refinement ``Delta(r) < 0`` (``rho = max 1/Lambda``) excludes every rank <= r;
  with nonnegative features the packing lemma excludes every ``r < t`` with
  ``r kappa^2 <= 1`` (``kappa^2 = max 1/(Lambda_ij Lambda_ji)``);
* a convex dual certificate ``(R, W, x, y, lambda, mu)``: ``||W||_2 <= 1`` (``I -
  W^T W`` has no negative eigenvalue: exact characteristic polynomial),
  ``|x|^2 |y|^2 <= 1``, ``lambda > 0``, ``mu >= 0`` and the margin (the minimum of
  a linear function over the box ``0 <= C_ij <= 1/Lambda_ij``, minus constants)
  recomputed, equal to the stated one, and > 0; it excludes every rank <= R.

The stated rank must be one the derivation excludes, and every number the
derivation states must be the one recomputed.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from certify.reference.exact import Fails, floor, fmpq, is_psd, num, q_text, whole
from certify.reference.families import Family, family

HALF = Fraction(1, 2)
EDGE_COLUMNS = ["x", "y", "z", "t", "u", "mu", "input_y", "input_z", "input_m"]


def _params(claim: Mapping[str, Any]) -> tuple[int, str, str, str]:
    p = claim["parameters"]
    if set(p) != {"rank", "features", "class", "scope", "family", "family_sha256", "error"}:
        raise Fails("feasibility parameters must be rank, features, class, scope, family, "
                    "family_sha256, error")
    if p["error"] != "1/2":
        raise Fails("only error 1/2 is decided")
    if p["features"] not in ("real", "nonnegative") or p["class"] not in ("paper", "used-pairs") \
            or p["scope"] not in ("family", "cube"):
        raise Fails("unknown features, class or scope")
    return whole(p["rank"], "rank", 1), p["features"], p["class"], p["scope"]


def check(claim: Mapping[str, Any]) -> list[str]:
    kind, verdict = claim["kind"], claim["verdict"]
    r, feats, cls, scope = _params(claim)
    if scope == "cube" and not (kind == "feasible" and cls == "paper" and verdict == "proved"):
        return ["scope 'cube' is for proved paper-class feasible claims only"]
    if verdict == "unknown":
        if kind != "feasible" or claim["evidence"] != {}:
            return ["only a feasible claim may be unknown, with empty evidence"]
        return []
    if verdict != "proved":
        return [f"a {kind} claim is never {verdict} (its negation is the other kind)"]
    ev = claim["evidence"]
    if kind == "feasible":
        if set(ev) != {"family", "witness", "margin"}:
            return ["feasible evidence is family, witness and margin"]
        return _feasible(claim, family(ev["family"], claim["parameters"]), r, feats, cls, scope)
    if set(ev) != {"family", "derivation"}:
        return ["infeasible evidence is family and derivation"]
    if scope != "family":
        return ["an infeasibility proof is about the rank on the family: scope must be 'family'"]
    fam = family(ev["family"], claim["parameters"])
    d = ev["derivation"]
    if not isinstance(d, dict):
        return ["derivation must be an object"]
    if d.get("method") == "convex-dual":
        return _convex_dual(d, fam, r)
    return _chain_bounds(d, fam, r, feats)


# ---------------------------------------------------------------- feasible

def _table(rows: Any, r: int, what: str) -> dict[int, list[Fraction]]:
    if not isinstance(rows, list):
        raise Fails(f"witness.{what} must be a list of [token, row]")
    out: dict[int, list[Fraction]] = {}
    for e in rows:
        if not isinstance(e, list) or len(e) != 2 or not isinstance(e[1], list):
            raise Fails(f"witness.{what} entries are [token, row]")
        t = whole(e[0], f"{what} token", 0)
        if t in out:
            raise Fails(f"witness.{what} repeats token {t}")
        row = [num(v, what) for v in e[1]]
        if len(row) != r:
            raise Fails(f"{what}[{t}] has {len(row)} entries, the rank is {r}")
        out[t] = row
    return out


def _alpha(u: list[Fraction], v: list[Fraction]) -> Fraction:
    return sum((a * b for a, b in zip(u, v)), Fraction(0))


def _feasible(claim: Mapping[str, Any], fam: Family, r: int, feats: str, cls: str,
              scope: str) -> list[str]:
    ev = claim["evidence"]
    w = ev["witness"]
    if not isinstance(w, dict) or set(w) != {"features", "rank", "class", "phi_q", "phi_k", "g",
                                             "extension"}:
        return ["witness must have features, rank, class, phi_q, phi_k, g, extension"]
    if (w["features"], w["rank"], w["class"]) != (feats, r, cls):
        return ["the witness's features, rank and class are not the claim's"]
    phi_q, phi_k = _table(w["phi_q"], r, "phi_q"), _table(w["phi_k"], r, "phi_k")
    if feats == "nonnegative" and any(x < 0 for t in (phi_q, phi_k) for row in t.values() for x in row):
        return ["a feature is negative (nonnegative class)"]
    g: dict[tuple[int, int], Fraction] = {}
    for e in w["g"] if isinstance(w["g"], list) else [None]:
        if not isinstance(e, list) or len(e) != 3:
            return ["witness.g entries are [query, key, value]"]
        key = (whole(e[0], "g query", 0), whole(e[1], "g key", 0))
        if key in g:
            return [f"witness.g repeats {key}"]
        g[key] = num(e[2], "g")
    if cls == "used-pairs" and w["extension"] is not None:
        return ["the used-pairs class has no extension rule"]
    if cls == "paper":
        bad = _paper(fam, phi_q, phi_k, w["extension"], scope)
        if bad:
            return bad
    margin = None
    for i, p in fam.positions():
        seq = fam.inputs[i]
        x = seq[p]
        N = D = Fraction(0)
        for z in seq:
            if x not in phi_q or z not in phi_k:
                return [f"no features for the used pair ({x}, {z})"]
            a = _alpha(phi_q[x], phi_k[z])
            if a < 0:
                return [f"alpha({x}, {z}) = {q_text(a)} < 0 on a used pair"]
            if (x, z) not in g and a != 0:
                return [f"no value g for the used pair ({x}, {z})"]
            N += a * g.get((x, z), Fraction(0))
            D += a
        if D <= 0:
            return [f"input {i} position {p}: the denominator {q_text(D)} is not positive"]
        err = abs(N / D - fam.targets[i][p])
        if not err < HALF:
            return [f"input {i} position {p}: |t_hat - t| = {q_text(err)} >= 1/2"]
        margin = HALF - err if margin is None else min(margin, HALF - err)
    if margin is None:
        return ["the family has no scored position"]
    if num(ev["margin"], "margin") != margin:
        return [f"the margin is {q_text(margin)}, the claim says {ev['margin']!r:.40}"]
    return []


def _paper(fam: Family, phi_q: dict, phi_k: dict, ext: Any, scope: str) -> list[str]:
    Q = sorted({fam.inputs[i][p] for i, p in fam.positions()})
    T = list(range(len(fam.tokens)))
    if sorted(phi_q) != Q or sorted(phi_k) != T:
        return ["in the paper class phi_q has exactly the query tokens' rows and phi_k every token's"]
    for q in Q:
        for z in T:
            a = _alpha(phi_q[q], phi_k[z])
            if a < 0:
                return [f"alpha({q}, {z}) = {q_text(a)} < 0 (paper class: queries x all tokens)"]
        if not _alpha(phi_q[q], phi_k[q]) > 0:
            return [f"alpha({q}, {q}) is not positive (paper class)"]
    if not isinstance(ext, dict):
        return ["the paper class needs an extension rule"]
    if ext == {"rule": "plus-one"}:
        return ["the plus-one rule extends to the cube at rank + 1: scope must be 'family'"] \
            if scope == "cube" else []
    if ext.get("rule") == "copy-query" and set(ext) == {"rule", "query"}:
        q = ext["query"]
        if q not in Q:
            return [f"copy-query rule: {q!r:.20} is not a query token"]
        if any(not _alpha(phi_q[q], phi_k[z]) > 0 for z in T):
            return [f"copy-query rule: alpha({q}, z) is not positive for every token z"]
        return []
    return [f"unknown extension rule {ext!r:.60}"]


# ---------------------------------------------------------------- chains

def _chains(d: Mapping[str, Any], fam: Family) -> tuple[int, dict[tuple[int, int], int]]:
    """The Lemma 3 chains, re-derived; ``(t, {(i, j): Lambda_ij})``."""
    n = fam.n
    if n < 3:
        raise Fails(f"Lemma 3 needs length n >= 3, the family has n = {n}")
    if d.get("lemma3") != {"eps": "1/2", "n": n, "mu": "(n-2)(d-1)"} or d.get("edge_columns") != EDGE_COLUMNS:
        raise Fails("the chains must state lemma3 {eps 1/2, n, mu (n-2)(d-1)} and the nine edge columns")
    edges = d.get("edges")
    if not isinstance(edges, list):
        raise Fails("edges must be a list")
    I, K = len(fam.inputs), len(fam.tokens)
    for k, e in enumerate(edges):
        if not isinstance(e, list) or len(e) != 9:
            raise Fails(f"edge {k} is not nine integers")
        x, y, z, t, u, mu, iy, iz, im = (whole(v, f"edge {k}") for v in e)
        if not all(0 <= v < K for v in (x, y, z)) or not all(0 <= v < I for v in (iy, iz, im)):
            raise Fails(f"edge {k}: an index is out of range")
        if fam.inputs[iy] != [x] + [y] * (n - 1) or fam.inputs[iz] != [x] + [z] * (n - 1) \
                or fam.inputs[im] != [x, y] + [z] * (n - 2):
            raise Fails(f"edge {k}: the inputs are not (x,y^(n-1)), (x,z^(n-1)), (x,y,z^(n-2))")
        if not (fam.scored[iy][0] and fam.scored[iz][0] and fam.scored[im][0]):
            raise Fails(f"edge {k}: position 0 of a Lemma 3 input is not scored")
        if not (fam.ip[x][y] == t < u == fam.ip[x][z] <= fam.ip[x][x]):
            raise Fails(f"edge {k}: the overlaps are not t = <x,y> < u = <x,z> <= <x,x>")
        if (fam.targets[iy][0], fam.targets[iz][0], fam.targets[im][0]) != (t, u, t):
            raise Fails(f"edge {k}: the targets are not (t, u, t)")
        if (n - 2) * (u - t) < n - 1 or mu != (n - 2) * (u - t - 1):
            raise Fails(f"edge {k}: the gap or the factor mu is not Lemma 3's at eps = 1/2")
    queries, diag = d.get("queries"), d.get("diagonal")
    if not isinstance(queries, list) or not isinstance(diag, list):
        raise Fails("queries and diagonal must be lists")
    queries = [whole(v, "query") for v in queries]
    diag = [whole(v, "diagonal key") for v in diag]
    T = len(queries)
    if T < 2 or len(diag) != T or len(set(queries)) != T:
        raise Fails("the chains need at least two distinct queries with one diagonal key each")
    lam: dict[tuple[int, int], int] = {}
    pairs: Any = d.get("pairs") if isinstance(d.get("pairs"), list) else [None]
    for entry in pairs:
        if not isinstance(entry, list) or len(entry) != 4 or not isinstance(entry[2], list):
            raise Fails("a pair is [i, j, path, Lambda]")
        i, j, L = whole(entry[0], "pair i"), whole(entry[1], "pair j"), whole(entry[3], "Lambda")
        path = [whole(v, "path edge") for v in entry[2]]
        if not (0 <= i < T and 0 <= j < T and i != j) or (i, j) in lam or not path \
                or any(not 0 <= v < len(edges) for v in path):
            raise Fails(f"pair ({i}, {j}) is invalid, repeated or has an empty path")
        cur, prod = diag[i], 1
        for v in path:
            x, y, z, mu = edges[v][0], edges[v][1], edges[v][2], edges[v][5]
            if x != queries[i] or y != cur:
                raise Fails(f"pair ({i}, {j}): the path is not a chain of query {queries[i]}")
            cur, prod = z, prod * mu
        if cur != diag[j] or prod != L or L < 1:
            raise Fails(f"pair ({i}, {j}): the chain ends at {cur} with Lambda {prod}, the claim "
                        f"says {diag[j]} and {L}")
        lam[i, j] = L
    if len(lam) != T * (T - 1):
        raise Fails(f"{T * (T - 1) - len(lam)} ordered pairs of queries lack a chain")
    return T, lam


def _chain_bounds(d: Mapping[str, Any], fam: Family, rank: int, feats: str) -> list[str]:
    allowed = {"lemma3", "edges", "edge_columns", "queries", "diagonal", "pairs",
               "sum_inverse_lambda_sq", "bound", "perron", "max_infeasible_rank"}
    if not allowed <= set(d) or set(d) - allowed - {"packing"}:
        return ["the chain derivation's keys are not the documented ones"]
    t, lam = _chains(d, fam)
    s = sum((Fraction(1, v * v) for v in lam.values()), Fraction(0))
    bound = Fraction(t * t) / (t + s)
    lemma4 = floor(bound)                    # strict: rank > bound, so every rank <= floor(bound) fails
    rho = max(Fraction(1, v) for v in lam.values())

    def delta(r: int) -> Fraction:
        return t * t * (2 + (r - 1) * rho) ** 2 - 4 * r * (t * t - (r - 1) * t * (1 - rho))

    perron = max((r for r in range(1, t + 1) if delta(r) < 0), default=0) if rho < 1 else 0
    problems = []
    if num(d["sum_inverse_lambda_sq"], "sum_inverse_lambda_sq") != s:
        problems.append(f"sum_inverse_lambda_sq is not {q_text(s)}")
    if num(d["bound"], "bound") != bound:
        problems.append(f"bound is not {q_text(bound)}")
    pr = d["perron"]
    if not isinstance(pr, dict) or set(pr) != {"rho", "rank", "discriminant"}:
        return problems + ["perron must be {rho, rank, discriminant}"]
    if not rho < 1:
        return problems + [f"rho = {q_text(rho)} is not < 1: no chain factor is above 1"]
    if num(pr["rho"], "perron.rho") != rho or pr["rank"] != perron:
        problems.append(f"perron is not rho {q_text(rho)}, rank {perron}")
    want_disc = delta(perron) if perron else None
    if (pr["discriminant"] is None) != (want_disc is None) or (
            want_disc is not None and num(pr["discriminant"], "discriminant") != want_disc):
        problems.append("perron.discriminant is not Delta at its rank")
    best = max(lemma4, perron)
    if d["max_infeasible_rank"] != best:
        problems.append(f"max_infeasible_rank is {d['max_infeasible_rank']!r:.20}, re-derived {best}")
    excluded = best
    if "packing" in d:
        kappa = max(Fraction(1, lam[i, j] * lam[j, i]) for i, j in lam)
        packing = min(t - 1, floor(1 / kappa))
        pk = d["packing"]
        if not isinstance(pk, dict) or set(pk) != {"kappa_sq", "rank"} \
                or num(pk["kappa_sq"], "kappa_sq") != kappa or pk["rank"] != packing:
            problems.append(f"packing is not kappa_sq {q_text(kappa)}, rank {packing}")
        if feats == "nonnegative":
            excluded = max(excluded, packing)
    if not rank <= excluded:
        problems.append(f"rank {rank} is not excluded: the derivation excludes ranks <= {excluded}")
    return problems


# ---------------------------------------------------------------- convex dual

def _convex_dual(d: Mapping[str, Any], fam: Family, rank: int) -> list[str]:
    if set(d) != {"method", "chains", "dual"} or not isinstance(d["chains"], dict):
        return ["a convex-dual derivation is {method, chains, dual}"]
    if set(d["chains"]) != {"lemma3", "edges", "edge_columns", "queries", "diagonal", "pairs"}:
        return ["the chains of a convex-dual derivation have the documented keys only"]
    t, lam = _chains(d["chains"], fam)
    du = d["dual"]
    if not isinstance(du, dict) or set(du) != {"rank", "W", "x", "y", "lambda", "mu", "margin"}:
        return ["dual must be {rank, W, x, y, lambda, mu, margin}"]
    R = whole(du["rank"], "dual.rank", 2)
    W = du["W"]
    if not isinstance(W, list) or len(W) != t or any(not isinstance(r, list) or len(r) != t for r in W):
        return [f"dual.W must be {t} x {t}"]
    W = [[num(v, "W") for v in r] for r in W]
    if not isinstance(du["x"], list) or not isinstance(du["y"], list) or len(du["x"]) != t \
            or len(du["y"]) != t:
        return [f"dual.x and dual.y have {t} entries"]
    x, y = [num(v, "x") for v in du["x"]], [num(v, "y") for v in du["y"]]
    lmb, mu = num(du["lambda"], "lambda"), num(du["mu"], "mu")
    if not lmb > 0 or mu < 0:
        return ["the multipliers need lambda > 0 and mu >= 0"]
    if _alpha(x, x) * _alpha(y, y) > 1:
        return ["|x|^2 |y|^2 > 1"]
    Wm = fmpq(W)
    G = Wm.transpose() * Wm
    I_minus = fmpq([[Fraction(int(i == j)) for j in range(t)] for i in range(t)]) - G
    if not is_psd(I_minus):
        return ["I - W^T W has a negative eigenvalue: ||W||_2 > 1"]
    c_off = Fraction(R - 1) / (2 * lmb)
    total = Fraction(0)
    for i in range(t):
        for j in range(t):
            c = W[i][j] + mu * x[i] * y[j]
            if i == j:
                total += c                                  # C_ii = 1
            else:
                rho = Fraction(1, lam[i, j])
                c -= c_off * rho
                total += c * rho if c < 0 else 0            # C_ij in [0, rho_ij]
    margin = total - lmb / 2 - Fraction(R - 1) * t / (2 * lmb) - (1 + mu) ** 2 * lmb / (2 * (R - 1))
    if num(du["margin"], "margin") != margin:
        return [f"the margin is {q_text(margin)}, the claim says {du['margin']!r:.40}"]
    if not margin > 0:
        return [f"the margin {q_text(margin)} is not positive: nothing is excluded"]
    if rank > R:
        return [f"rank {rank} exceeds the certified rank {R}"]
    return []
