"""Independent checker for ``feasible`` and ``infeasible`` claims (certify.feasibility).

Imports only the standard library. Evidence fields:

``feasible`` (verdict proved):
  ``family``  the whole family file object (format, name, m, n, tokens as bit
              strings, inputs, scored, targets, params, words, jumps, sha256);
  ``witness`` ``{"features": "real"|"nonnegative", "rank": r,
              "phi_q": [[token, [r "p/q"]]...], "phi_k": [[token, [r "p/q"]]...],
              "g": [[query token, key token, "p/q"]...]}``;
  ``margin``  ``"p/q"``: min over scored positions of ``1/2 - |t_hat - t|``.
  Re-derived: the family hash, every Min-IP target from the tokens, then for
  every scored position ``t_hat = sum_j alpha g / sum_j alpha`` (self term
  included) with ``alpha = <phi_q[x], phi_k[z]>``: ``alpha >= 0`` on used pairs,
  positive denominators, strict ``|t_hat - t| < 1/2``, rank-r rows (and
  ``phi >= 0`` entrywise for ``nonnegative``); the margin must equal the claim's.

``infeasible`` (verdict proved):
  ``family``     as above;
  ``derivation`` ``{"edges": [[x, y, z, t, u, mu, input_y, input_z, input_m]...],
                 "queries": [x_i], "diagonal": [c_i],
                 "pairs": [[i, j, [edge indices of the path c_i -> c_j], Lambda_ij]...],
                 "bound": "p/q"}``.
  Re-derived: each edge is a Lemma 3 triple of the family at eps = 1/2 (inputs
  ``(x, y^(n-1))``, ``(x, z^(n-1))``, ``(x, y, z^(n-2))`` present, position 0
  scored, targets ``t, u, t``, ``t = <x,y> < u = <x,z> <= <x,x>``,
  ``(n-2)(u-t) >= n-1``, ``mu = (n-2)(u-t-1)``), so ``alpha(x,y) > mu alpha(x,z)``;
  each path is a non-empty chain of query ``x_i``'s edges from ``c_i`` to
  ``c_j`` with ``Lambda_ij`` the product of its ``mu``; every ordered pair is
  present; then Lemma 4 (strict): ``rank > t^2 / (t + sum Lambda^-2) = bound``,
  and the claimed rank must satisfy ``rank <= bound``.
"""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction

_HALF = Fraction(1, 2)


def _q(s) -> Fraction:
    if isinstance(s, bool) or isinstance(s, float):
        raise ValueError(f"not an exact rational: {s!r}")
    if isinstance(s, int):
        return Fraction(s)
    if not isinstance(s, str):
        raise ValueError(f"not an exact rational: {s!r}")
    num, _, den = s.strip().partition("/")
    return Fraction(int(num), int(den) if den else 1)


def _family(fam, claim, problems):
    """Validate the embedded family; returns (tokens as int lists, inputs, scored,
    targets, n) or None."""
    try:
        body = {k: v for k, v in fam.items() if k != "sha256"}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                                .encode()).hexdigest()
        if fam.get("sha256") != digest:
            problems.append("family sha256 does not match its contents")
        want = claim.get("parameters", {}).get("family_sha256")
        if want is not None and want != digest:
            problems.append("claim's family_sha256 differs from the embedded family")
        tokens = [[int(c) for c in s] for s in fam["tokens"]]
        if any(set(t) - {0, 1} for t in tokens) or len({tuple(t) for t in tokens}) != len(tokens):
            problems.append("family tokens are not distinct 0/1 strings")
        inputs = [[int(v) for v in row] for row in fam["inputs"]]
        scored = [[bool(v) for v in row] for row in fam["scored"]]
        targets = [[int(v) for v in row] for row in fam["targets"]]
        n = int(fam["n"])
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"family evidence malformed: {exc}")
        return None
    if not inputs or any(len(r) != n for r in inputs) or len(scored) != len(inputs) \
            or len(targets) != len(inputs):
        problems.append("family inputs / scored / targets have inconsistent shapes")
        return None
    K = len(tokens)
    if any(not 0 <= v < K for row in inputs for v in row):
        problems.append("family input indexes a token out of range")
        return None
    ip = {}

    def dot(a, b):
        key = (a, b) if a <= b else (b, a)
        if key not in ip:
            ip[key] = sum(p & q for p, q in zip(tokens[a], tokens[b]))
        return ip[key]

    for i, row in enumerate(inputs):
        for j, x in enumerate(row):
            t = min(dot(x, z) for z in row)
            if targets[i][j] != t:
                problems.append(f"input {i} position {j}: target {targets[i][j]} is not the "
                                f"Min-IP target {t}")
                return None
    return tokens, inputs, scored, targets, n, dot


def _check_feasible(claim, cert, problems):
    ev = claim.get("evidence", {})
    fam = _family(ev.get("family", {}), claim, problems)
    if fam is None:
        return
    tokens, inputs, scored, targets, n, dot = fam
    try:
        w = ev["witness"]
        feats = w["features"]
        r = int(w["rank"])
        phi_q = {int(t): [_q(v) for v in row] for t, row in w["phi_q"]}
        phi_k = {int(t): [_q(v) for v in row] for t, row in w["phi_k"]}
        g = {(int(x), int(z)): _q(v) for x, z, v in w["g"]}
        claimed_margin = _q(ev["margin"])
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"witness evidence malformed: {exc}")
        return
    params = claim.get("parameters", {})
    if params.get("rank") != r or params.get("features") != feats:
        problems.append("witness rank/features differ from the claim's parameters")
    if feats not in ("real", "nonnegative"):
        problems.append(f"unknown feature class {feats!r}")
        return
    for tab, nm in ((phi_q, "phi_q"), (phi_k, "phi_k")):
        for t, row in tab.items():
            if len(row) != r:
                problems.append(f"{nm}[{t}] has {len(row)} entries, rank is {r}")
                return
            if feats == "nonnegative" and any(v < 0 for v in row):
                problems.append(f"{nm}[{t}] has a negative entry (nonnegative class)")
                return
    alpha = {}
    margin = None
    for i, row in enumerate(inputs):
        for j, x in enumerate(row):
            if not scored[i][j]:
                continue
            num = den = Fraction(0)
            for z in row:
                key = (x, z)
                a = alpha.get(key)
                if a is None:
                    if x not in phi_q or z not in phi_k:
                        problems.append(f"no features for the used pair {key}")
                        return
                    a = alpha[key] = sum((p * q for p, q in zip(phi_q[x], phi_k[z])), Fraction(0))
                    if a < 0:
                        problems.append(f"alpha{key} = {a} < 0 on a used pair")
                        return
                gv = g.get(key)
                if gv is None:
                    if a != 0:
                        problems.append(f"no value g for the used pair {key}")
                        return
                    gv = Fraction(0)
                num += a * gv
                den += a
            if den <= 0:
                problems.append(f"input {i} position {j}: denominator {den} is not positive")
                return
            m = _HALF - abs(num / den - targets[i][j])
            if m <= 0:
                problems.append(f"input {i} position {j}: |t_hat - t| = {_HALF - m} >= 1/2")
                return
            margin = m if margin is None or m < margin else margin
    if margin is None:
        problems.append("family has no scored position")
    elif margin != claimed_margin:
        problems.append(f"margin is {margin}, the claim says {claimed_margin}")


def _check_infeasible(claim, cert, problems):
    ev = claim.get("evidence", {})
    fam = _family(ev.get("family", {}), claim, problems)
    if fam is None:
        return
    tokens, inputs, scored, targets, n, dot = fam
    if str(claim.get("parameters", {}).get("error", "1/2")) != "1/2":
        problems.append("the derivation uses Lemma 3 at error 1/2 only")
    if n < 3:
        problems.append(f"Lemma 3 needs length n >= 3, family has n = {n}")
        return
    try:
        d = ev["derivation"]
        edges = [[int(v) for v in e] for e in d["edges"]]
        queries = [int(v) for v in d["queries"]]
        diag = [int(v) for v in d["diagonal"]]
        pairs = [(int(i), int(j), [int(k) for k in path], int(lam))
                 for i, j, path, lam in d["pairs"]]
        bound = _q(d["bound"])
        rank = int(claim["parameters"]["rank"])
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"derivation evidence malformed: {exc}")
        return
    I = len(inputs)
    for k, (x, y, z, t, u, mu, iy, iz, im) in enumerate(edges):
        if not all(0 <= v < I for v in (iy, iz, im)):
            problems.append(f"edge {k}: input index out of range")
            return
        if inputs[iy] != [x] + [y] * (n - 1) or inputs[iz] != [x] + [z] * (n - 1) \
                or inputs[im] != [x, y] + [z] * (n - 2):
            problems.append(f"edge {k}: the inputs are not (x,y^(n-1)), (x,z^(n-1)), (x,y,z^(n-2))")
            return
        if not (scored[iy][0] and scored[iz][0] and scored[im][0]):
            problems.append(f"edge {k}: position 0 of a Lemma 3 input is not scored")
            return
        if dot(x, y) != t or dot(x, z) != u or not t < u <= dot(x, x):
            problems.append(f"edge {k}: overlaps are not t = <x,y> < u = <x,z> <= <x,x>")
            return
        if (targets[iy][0], targets[iz][0], targets[im][0]) != (t, u, t):
            problems.append(f"edge {k}: targets are not (t, u, t)")
            return
        if (n - 2) * (u - t) < n - 1 or mu != (n - 2) * (u - t - 1):
            problems.append(f"edge {k}: gap or factor mu fails Lemma 3")
            return
    T = len(queries)
    if T < 2 or len(diag) != T:
        problems.append("Lemma 4 needs at least two queries with one diagonal key each")
        return
    seen = {}
    for i, j, path, lam in pairs:
        if not (0 <= i < T and 0 <= j < T and i != j) or (i, j) in seen:
            problems.append(f"pair ({i}, {j}) is invalid or repeated")
            return
        if not path or any(not 0 <= k < len(edges) for k in path):
            problems.append(f"pair ({i}, {j}): empty path or edge index out of range")
            return
        cur, prod = diag[i], 1
        for k in path:
            x, y, z, _, _, mu, *_ = edges[k]
            if x != queries[i] or y != cur:
                problems.append(f"pair ({i}, {j}): path is not a chain of query {queries[i]}")
                return
            cur, prod = z, prod * mu
        if cur != diag[j]:
            problems.append(f"pair ({i}, {j}): path does not end at the diagonal key {diag[j]}")
            return
        if prod != lam or lam < 1:
            problems.append(f"pair ({i}, {j}): Lambda is {prod}, the evidence says {lam}")
            return
        seen[i, j] = lam
    if len(seen) != T * (T - 1):
        problems.append(f"{T * (T - 1) - len(seen)} ordered pairs lack a chain")
        return
    s = sum((Fraction(1, lam * lam) for lam in seen.values()), Fraction(0))
    exact = Fraction(T * T) / (T + s)
    if exact != bound:
        problems.append(f"bound is {exact}, the evidence says {bound}")
        return
    if not rank <= exact:
        problems.append(f"rank {rank} exceeds the bound {exact}: not excluded")


def check(claim: dict, cert: dict) -> list[str]:
    """Problems found re-deriving a feasible / infeasible claim ([] = confirmed).
    Claims whose verdict is not ``proved`` assert nothing and are accepted when
    they carry a reason."""
    problems: list[str] = []
    kind, verdict = claim.get("kind"), claim.get("verdict")
    if verdict != "proved":
        if not claim.get("reason"):
            problems.append(f"a {verdict} claim lacks a reason")
        return problems
    if kind == "feasible":
        _check_feasible(claim, cert, problems)
    elif kind == "infeasible":
        _check_infeasible(claim, cert, problems)
    else:
        problems.append(f"checkers.feasibility does not handle claim kind {kind!r}")
    return problems
