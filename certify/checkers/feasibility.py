"""Independent checker for ``feasible`` and ``infeasible`` claims (certify.feasibility).

Imports only the standard library, :mod:`certify.checkers.common` and the
kinds' declarations (:mod:`certify.checkers.kinds`). Every object must have
exactly the keys its declaration lists (missing or unexpected keys fail).

``parameters``: ``rank`` (r >= 1), ``features`` (``real`` | ``nonnegative``),
``class`` (``paper`` | ``used-pairs``: the model class), ``scope`` (``family`` |
``cube``: whether ``rank`` is the rank of a head on the family's tokens or of a
head on the whole cube ``{0,1}^m``), ``family`` (the embedded family's name),
``family_sha256`` (its hash), ``error`` (``"1/2"``: the only error level decided here).

Model classes. ``used-pairs``: ``alpha >= 0`` on the (query, key) pairs some
scored position uses. ``paper`` (the paper's head, Sec. 2.3: ``alpha >= 0`` on
the whole Boolean domain, every denominator positive): with ``Q`` the tokens at
scored positions and ``T`` all of the family's tokens, ``alpha(q, z) >= 0`` on
``Q x T``, ``alpha(q, q) > 0`` on ``Q``, and a stored rule extending the head to
``{0,1}^m`` (lemma in :func:`certify.feasibility.model.extension_rule`):
``{"rule": "plus-one"}`` (one appended coordinate: keys in ``T`` get 1 there,
keys outside ``T`` get ``e_{r+1}``, queries in ``Q`` get 0, every other query
``e_{r+1}``; always valid; whole-cube rank ``r + 1``) or ``{"rule": "copy-query",
"query": q*}`` (every non-query takes ``phi_q(q*)``, every key outside ``T``
takes ``phi_k(q*)``; valid when ``alpha(q*, z) > 0`` for every ``z`` in ``T``;
whole-cube rank ``r``). Under either, ``alpha >= 0`` on the whole cube and
``alpha(x, x) > 0`` for every ``x``, so every denominator (it holds its self
term) is positive, while the kernel on ``Q x T`` -- all a scored position of the
family uses -- is unchanged. ``scope: cube`` needs ``copy-query``. A paper-class
head is a used-pairs head, so lower bounds are class-free.

``feasible``, verdict ``proved``:
  ``family``  the whole family file object (hash, key set and Min-IP targets
              re-derived by :func:`certify.checkers.common.family`);
  ``witness`` ``{"features", "rank", "class", "phi_q": [[token, [r "p/q"]]...],
              "phi_k": [[token, [r "p/q"]]...], "g": [[query token, key token, "p/q"]...],
              "extension": rule object (paper) or null (used-pairs)}``
              (``features``, ``rank`` and ``class`` equal the parameters'; in the
              paper class ``phi_q`` has exactly the rows ``Q`` and ``phi_k`` exactly ``T``);
  ``margin``  ``"p/q"``: min over scored positions of ``1/2 - |t_hat - t|``.
  Re-derived: for every scored position ``t_hat = sum_j alpha g / sum_j alpha``
  (self term included) with ``alpha = <phi_q[x], phi_k[z]>``: ``alpha >= 0`` on
  used pairs, positive denominators, strict ``|t_hat - t| < 1/2``, rank-r rows
  (and ``phi >= 0`` entrywise for ``nonnegative``); the margin must be equal;
  in the paper class also the conditions above (``|Q| |T| r`` exact products).

``infeasible``, verdict ``proved`` (either class, ``scope: family``; it uses
  ``alpha >= 0`` on used pairs only):
  ``family`` as above;
  ``derivation`` ``{"lemma3": {"eps": "1/2", "n": n, "mu": "(n-2)(d-1)"},
                 "edges": [[x, y, z, t, u, mu, input_y, input_z, input_m]...],
                 "edge_columns": [those nine names], "queries": [x_i], "diagonal": [c_i],
                 "pairs": [[i, j, [edge indices of the path c_i -> c_j], Lambda_ij]...],
                 "sum_inverse_lambda_sq": "p/q", "bound": "p/q",
                 "perron": {"rho": "p/q", "rank": int, "discriminant": "p/q" or null},
                 "max_infeasible_rank": int}``.
  Re-derived: each edge is a Lemma 3 triple of the family at eps = 1/2 (inputs
  ``(x, y^(n-1))``, ``(x, z^(n-1))``, ``(x, y, z^(n-2))`` present, position 0
  scored, targets ``t, u, t``, ``t = <x,y> < u = <x,z> <= <x,x>``,
  ``(n-2)(u-t) >= n-1``, ``mu = (n-2)(u-t-1)``), so ``alpha(x,y) > mu alpha(x,z)``;
  each path is a non-empty chain of query ``x_i``'s edges from ``c_i`` to
  ``c_j`` with ``Lambda_ij`` the product of its ``mu``; every ordered pair is
  present; then Lemma 4 (strict): ``rank > t^2 / (t + sum Lambda^-2) = bound``;
  and the nonnegative refinement (``0 <= C_ij < rho = max 1/Lambda_ij``):
  ``Delta(r) = t^2 (2 + (r-1) rho)^2 - 4 r (t^2 - (r-1) t (1 - rho)) < 0``
  excludes every rank ``<= r`` (argument in :func:`certify.core.bounds.lemmas.perron_discriminant`;
  evaluated, with Lemma 4 and the packing lemma below, by the kernel's
  :func:`certify.checkers.kernel.attention.chain_ranks`). ``perron.rank`` is the
  largest such ``r <= t`` (0 if none), ``max_infeasible_rank = max(floor(bound),
  perron.rank)`` and the claimed rank is ``<= max_infeasible_rank``. With ``nonnegative`` features, also the
  packing lemma (``packing``: ``{"kappa_sq": "p/q", "rank": int}``): with
  ``kappa^2 = max_{i != j} 1/(Lambda_ij Lambda_ji)`` every rank ``r < t`` with
  ``r kappa^2 <= 1`` is excluded (proof in :mod:`certify.feasibility.chain_bounds`:
  the ``t`` feature-share vectors ``p_i(l) = phiQ_l(x_i) phiK_l(c_i) / B_ii`` have
  ``<p_i, p_j> < kappa^2``; ``r < t`` of them in ``R^r`` are dependent, and a
  dependency ``z = sum_P y_i p_i = sum_N |y_j| p_j`` with ``A = sum_P y_i`` gives
  ``A^2/r <= |z|^2 < kappa^2 A^2``); ``packing.rank = min(t - 1, floor(1/kappa^2))``.

``feasible``, verdict ``unknown`` (``scope: family``): empty evidence and a reason (search
diagnostics live in ``info``). A feasibility claim is never ``refuted``: the
opposite statement is the other claim kind, with its own evidence.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from certify.checkers.common import Bad, Family, family, guarded, integer, rational, same_rational
from certify.checkers.kernel import attention as head
from certify.checkers.kernel.attention import chain_ranks, lemma3
from certify.checkers.kinds import BY_NAME

_HALF = Fraction(1, 2)
EDGE_COLUMNS = ["x", "y", "z", "t", "u", "mu", "input_y", "input_z", "input_m"]


CLASSES = ("paper", "used-pairs")
SCOPES = ("family", "cube")
#: the claims' parameters, evidence forms and nested objects (declared in certify.checkers.kinds)
_FEASIBLE, _INFEASIBLE = BY_NAME["feasible"], BY_NAME["infeasible"]


def _params(claim: dict[str, Any]) -> tuple[int, str]:
    p = BY_NAME[claim["kind"]].params().check_keys(claim["parameters"], "parameters")
    if p["error"] != "1/2":
        raise Bad("only error 1/2 is decided (parameters.error must be '1/2')")
    if p["features"] not in ("real", "nonnegative"):
        raise Bad(f"unknown feature class {p['features']!r}")
    if p["class"] not in CLASSES:
        raise Bad(f"unknown model class {p['class']!r:.40} (expected one of {', '.join(CLASSES)})")
    if p["scope"] not in SCOPES:
        raise Bad(f"unknown scope {p['scope']!r:.40} (expected one of {', '.join(SCOPES)})")
    if p["scope"] == "cube" and not (claim.get("kind") == "feasible" and p["class"] == "paper"
                                     and claim.get("verdict") == "proved"):
        raise Bad("scope 'cube' is for proved paper-class feasible claims only")
    return integer(p["rank"], "parameters.rank", 1), p["features"]


def _paper_class(fam: Family, phi_q: dict, phi_k: dict, ext: Any, scope: str) -> list[str]:
    """The paper-class conditions: alpha >= 0 on Q x T, alpha(q, q) > 0, a valid
    extension rule (and ``copy-query`` when the scope is the cube)."""
    Q = sorted({fam.inputs[i][p] for i, p in fam.scored_positions()})
    T = list(range(len(fam.tokens)))
    if sorted(phi_q) != Q:
        return [f"phi_q must have exactly the {len(Q)} query tokens' rows (paper class)"]
    if sorted(phi_k) != T:
        return [f"phi_k must have exactly the {len(T)} family tokens' rows (paper class)"]
    alpha = {(q, z): head.kernel_value(phi_q[q], phi_k[z]) for q in Q for z in T}
    neg = [k for k in sorted(alpha) if alpha[k] < 0]
    if neg:
        return [f"alpha{neg[0]} = {alpha[neg[0]]} < 0: {len(neg)} of the {len(alpha)} "
                f"(query, token) pairs are negative (paper class)"]
    for q in Q:
        if alpha[q, q] <= 0:
            return [f"alpha({q}, {q}) = 0: the self term of query {q} is not positive"]
    if not isinstance(ext, dict):
        return ["witness.extension must be a rule object in the paper class"]
    if ext.get("rule") == "plus-one":
        _FEASIBLE.part("witness.extension:plus-one").check_keys(ext, "witness.extension")
        if scope == "cube":
            return ["the plus-one rule extends to the cube at rank + 1: scope must be 'family'"]
        return []
    if ext.get("rule") == "copy-query":
        _FEASIBLE.part("witness.extension:copy-query").check_keys(ext, "witness.extension")
        q = integer(ext["query"], "witness.extension.query")
        if q not in Q:
            return [f"copy-query rule: {q} is not a query token"]
        bad = [z for z in T if alpha[q, z] <= 0]
        if bad:
            return [f"copy-query rule with query {q}: alpha({q}, {bad[0]}) = {alpha[q, bad[0]]} "
                    f"is not positive ({len(bad)} tokens)"]
        return []
    return [f"unknown extension rule {ext.get('rule')!r:.40}"]


def _check_feasible(claim: dict[str, Any]) -> list[str]:
    r, feats = _params(claim)
    cls, scope = claim["parameters"]["class"], claim["parameters"]["scope"]
    ev = _FEASIBLE.form("witness").check_keys(claim["evidence"], "evidence")
    fam = family(ev["family"], claim["parameters"])
    w = _FEASIBLE.part("witness").check_keys(ev["witness"], "witness")
    if w["features"] != feats or integer(w["rank"], "witness.rank") != r or w["class"] != cls:
        raise Bad("witness rank/features/class differ from the claim's parameters")
    if cls == "used-pairs" and w["extension"] is not None:
        raise Bad("witness.extension must be null in the used-pairs class")
    phi_q = {integer(t, "phi_q token"): [rational(v, "phi_q") for v in row] for t, row in w["phi_q"]}
    phi_k = {integer(t, "phi_k token"): [rational(v, "phi_k") for v in row] for t, row in w["phi_k"]}
    g = {(integer(x, "g query"), integer(z, "g key")): rational(v, "g") for x, z, v in w["g"]}
    if len(phi_q) != len(w["phi_q"]) or len(phi_k) != len(w["phi_k"]) or len(g) != len(w["g"]):
        raise Bad("witness tables repeat a token")
    claimed_margin = rational(ev["margin"], "margin")
    for tab, nm in ((phi_q, "phi_q"), (phi_k, "phi_k")):
        for t, row in tab.items():
            if len(row) != r:
                return [f"{nm}[{t}] has {len(row)} entries, rank is {r}"]
            if feats == "nonnegative" and any(v < 0 for v in row):
                return [f"{nm}[{t}] has a negative entry (nonnegative class)"]
    if cls == "paper":
        probs = _paper_class(fam, phi_q, phi_k, w["extension"], scope)
        if probs:
            return probs
    alpha: dict = {}
    margin = None
    for i, p in fam.scored_positions():
        inp = fam.inputs[i]
        x = inp[p]
        a_x: dict[int, Fraction] = {}
        g_x: dict[int, Fraction] = {}
        for z in inp:
            a = alpha.get((x, z))
            if a is None:
                if x not in phi_q or z not in phi_k:
                    return [f"no features for the used pair {(x, z)}"]
                a = alpha[x, z] = head.kernel_value(phi_q[x], phi_k[z])
                if a < 0:
                    return [f"alpha{(x, z)} = {a} < 0 on a used pair"]
            gv = g.get((x, z))
            if gv is None:
                if a != 0:
                    return [f"no value g for the used pair {(x, z)}"]
                gv = Fraction(0)
            a_x[z], g_x[z] = a, gv
        num, den = head.output(a_x, g_x, inp)
        err = head.error(num, den, fam.targets[i][p])
        if err is None:
            return [f"input {i} position {p}: denominator {den} is not positive"]
        if not head.within(num, den, fam.targets[i][p], _HALF):
            return [f"input {i} position {p}: |t_hat - t| = {err} >= 1/2"]
        m = _HALF - err
        margin = m if margin is None or m < margin else margin
    if margin is None:
        return ["family has no scored position"]
    if margin != claimed_margin:
        return [f"margin is {margin}, the claim says {claimed_margin}"]
    return []


def _check_infeasible(claim: dict[str, Any]) -> list[str]:
    rank, _ = _params(claim)
    ev = _INFEASIBLE.form().check_keys(claim["evidence"], "evidence")
    fam = family(ev["family"], claim["parameters"])
    n = fam.n
    if n < 3:
        return [f"Lemma 3 needs length n >= 3, family has n = {n}"]
    d = _INFEASIBLE.part("derivation").check_keys(ev["derivation"], "derivation")
    if d["lemma3"] != {"eps": "1/2", "n": n, "mu": "(n-2)(d-1)"}:
        raise Bad(f"derivation.lemma3 must be {{'eps': '1/2', 'n': {n}, 'mu': '(n-2)(d-1)'}}")
    if d["edge_columns"] != EDGE_COLUMNS:
        raise Bad(f"derivation.edge_columns must be {EDGE_COLUMNS}")
    edges = [[integer(v, "edge entry") for v in e] for e in d["edges"]]
    queries = [integer(v, "query") for v in d["queries"]]
    diag = [integer(v, "diagonal key") for v in d["diagonal"]]
    pairs = [(integer(i, "pair i"), integer(j, "pair j"), [integer(k, "path edge") for k in path],
              integer(lam, "Lambda")) for i, j, path, lam in d["pairs"]]
    I, K = len(fam.inputs), len(fam.tokens)
    for k, e in enumerate(edges):
        if len(e) != len(EDGE_COLUMNS):
            return [f"edge {k} is not a row of {len(EDGE_COLUMNS)} integers"]
        x, y, z, t, u, mu, iy, iz, im = e
        if not all(0 <= v < I for v in (iy, iz, im)) or not all(0 <= v < K for v in (x, y, z)):
            return [f"edge {k}: index out of range"]
        if fam.inputs[iy] != [x] + [y] * (n - 1) or fam.inputs[iz] != [x] + [z] * (n - 1) \
                or fam.inputs[im] != [x, y] + [z] * (n - 2):
            return [f"edge {k}: the inputs are not (x,y^(n-1)), (x,z^(n-1)), (x,y,z^(n-2))"]
        if not (fam.scored[iy][0] and fam.scored[iz][0] and fam.scored[im][0]):
            return [f"edge {k}: position 0 of a Lemma 3 input is not scored"]
        if fam.ip[x][y] != t or fam.ip[x][z] != u or not t < u <= fam.ip[x][x]:
            return [f"edge {k}: overlaps are not t = <x,y> < u = <x,z> <= <x,x>"]
        if (fam.targets[iy][0], fam.targets[iz][0], fam.targets[im][0]) != (t, u, t):
            return [f"edge {k}: targets are not (t, u, t)"]
        threshold, factor = lemma3(n, _HALF, u - t)
        if u - t < threshold or mu != factor:
            return [f"edge {k}: gap or factor mu fails Lemma 3"]
    T = len(queries)
    if T < 2 or len(diag) != T:
        return ["Lemma 4 needs at least two queries with one diagonal key each"]
    seen: dict = {}
    for i, j, path, lam in pairs:
        if not (0 <= i < T and 0 <= j < T and i != j) or (i, j) in seen:
            return [f"pair ({i}, {j}) is invalid or repeated"]
        if not path or any(not 0 <= k < len(edges) for k in path):
            return [f"pair ({i}, {j}): empty path or edge index out of range"]
        cur, prod = diag[i], 1
        for k in path:
            x, y, z, _, _, mu, *_ = edges[k]
            if x != queries[i] or y != cur:
                return [f"pair ({i}, {j}): path is not a chain of query {queries[i]}"]
            cur, prod = z, prod * mu
        if cur != diag[j]:
            return [f"pair ({i}, {j}): path does not end at the diagonal key {diag[j]}"]
        if prod != lam or lam < 1:
            return [f"pair ({i}, {j}): Lambda is {prod}, the evidence says {lam}"]
        seen[i, j] = lam
    if len(seen) != T * (T - 1):
        return [f"{T * (T - 1) - len(seen)} ordered pairs lack a chain"]
    cr = chain_ranks(T, seen)                            # Lemma 4 and its refinements (the kernel)
    same_rational(d["sum_inverse_lambda_sq"], cr["sum_inverse_lambda_sq"], "sum_inverse_lambda_sq")
    same_rational(d["bound"], cr["bound"], "bound")
    if not cr["rho"] < 1:
        return [f"rho = {cr['rho']} is not < 1: no chain gives a factor above 1"]
    p = _INFEASIBLE.part("derivation.perron").check_keys(d["perron"], "derivation.perron")
    same_rational(p["rho"], cr["rho"], "perron.rho")
    if integer(p["rank"], "perron.rank") != cr["perron"]:
        return [f"perron.rank is {p['rank']}, re-derived {cr['perron']}"]
    if cr["perron"]:
        same_rational(p["discriminant"], cr["discriminant"], "perron.discriminant")
    elif p["discriminant"] is not None:
        return ["perron.discriminant must be null when no rank is excluded"]
    best = max(cr["lemma4"], cr["perron"])
    if integer(d["max_infeasible_rank"], "max_infeasible_rank") != best:
        return [f"max_infeasible_rank is {d['max_infeasible_rank']}, re-derived {best} "
                f"(Lemma 4: {cr['lemma4']}, refinement: {cr['perron']})"]
    excluded = best
    if "packing" in d:                  # nonnegative features: the packing lemma
        pk = _INFEASIBLE.part("derivation.packing").check_keys(d["packing"], "derivation.packing")
        same_rational(pk["kappa_sq"], cr["kappa_sq"], "packing.kappa_sq")
        if integer(pk["rank"], "packing.rank") != cr["packing"]:
            return [f"packing.rank is {pk['rank']}, re-derived {cr['packing']}"]
        if claim["parameters"]["features"] == "nonnegative":
            excluded = max(best, cr["packing"])
    if not rank <= excluded:
        return [f"rank {rank} exceeds {excluded}: not excluded"]
    return []


@guarded
def check(claim: dict, cert: dict | None = None) -> list[str]:
    """Problems found re-deriving a feasible / infeasible claim ([] = confirmed)."""
    kind, verdict = claim.get("kind"), claim.get("verdict")
    if kind not in ("feasible", "infeasible"):
        return [f"checkers.feasibility does not handle claim kind {kind!r}"]
    if verdict == "refuted":
        return [f"a {kind} claim is never refuted (its negation is the other kind, with evidence)"]
    if verdict == "unknown":
        _params(claim)
        _FEASIBLE.form("none").check_keys(claim["evidence"], "evidence")
        if kind != "feasible":
            return ["an infeasible claim is made only when proved"]
        return [] if claim.get("reason") else ["an unknown claim lacks a reason"]
    if verdict != "proved":
        return [f"unknown verdict {verdict!r}"]
    from certify.checkers import convex_dual  # convex dual certificates
    if kind == "infeasible" and convex_dual.is_convex_dual(claim):
        return convex_dual.check_infeasible(claim)
    return _check_feasible(claim) if kind == "feasible" else _check_infeasible(claim)
