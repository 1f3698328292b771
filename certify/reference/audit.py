"""``correctness`` and ``gap_domination``: a head's exact behaviour on a family.

The head is the one the evidence embeds (``query_tokens``, ``phi_q``, ``phi_k``,
``g``; its canonical hash is the claim's ``head_sha256``). At a scored position
with query ``x`` of the input ``(z_1..z_N)`` it outputs ``t_hat = sum_j alpha(x,
z_j) g(x, z_j) / sum_j alpha(x, z_j)`` with ``alpha = <phiQ(x), phiK(z)>``, all in
Fractions; it is correct when the denominator is positive and ``|t_hat - t| <
eps``, ``t`` the re-derived Min-IP target.

* ``correctness``: every scored position evaluated; proved iff none fails (and
  no counterexample is attached), refuted iff one fails (the attached
  counterexample is replayed: its numbers are the exact ones and it fails); the
  stated counts and the largest error are recomputed.
* ``gap_domination``: every jump of the family re-checked against the family
  (overlaps, its three inputs, scored at 0); applicable when ``d = u - t >= 2 eps
  (n-1)/(n-2)``, violated when ``alpha(x,y) <= (n-2)(d - 2eps)/(2eps) alpha(x,z)``;
  proved iff none is violated; refuted with a violation whose input of the
  named role is replayed and fails; unknown only when every violated jump's
  three inputs are correct.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from certify.reference.exact import Fails, canonical_sha256, num, q_text, whole
from certify.reference.families import JUMP_COLUMNS, family

ROLES = {"Y": "input_y", "Z": "input_z", "M": "input_m"}
RECORD = {"input", "position", "sequence", "numerator", "denominator", "t_hat", "target"}


class Head:
    def __init__(self, claim: Mapping[str, Any]) -> None:
        p, ev = claim["parameters"], claim["evidence"]
        self.eps = num(p.get("eps"), "eps")
        if not 0 < self.eps <= Fraction(1, 2):
            raise Fails(f"eps must lie in (0, 1/2], got {q_text(self.eps)}")
        self.fam = family(ev.get("family"), p)
        head = ev.get("head")
        if not isinstance(head, dict) or set(head) != {"query_tokens", "phi_q", "phi_k", "g"}:
            raise Fails("evidence.head must be {query_tokens, phi_q, phi_k, g}")
        if canonical_sha256(head) != p.get("head_sha256"):
            raise Fails("parameters.head_sha256 is not the hash of the evidence's head")
        K = len(self.fam.tokens)
        qt = head["query_tokens"]
        if not isinstance(qt, list) or not qt:
            raise Fails("the head has no query tokens")
        self.row: dict[int, int] = {}
        for i, t in enumerate(qt):
            t = whole(t, "query token", 0)
            if t >= K or t in self.row:
                raise Fails(f"query token {t} is out of range or repeated")
            self.row[t] = i
        phi_q = self._rows(head["phi_q"], len(qt), None, "phi_q")
        r = len(phi_q[0])
        if p.get("rank") != r:
            raise Fails(f"parameters.rank must be the head's feature dimension {r}")
        phi_k = self._rows(head["phi_k"], K, r, "phi_k")
        self.g = self._rows(head["g"], len(qt), K, "g")
        self.alpha = [[sum((a * b for a, b in zip(u, v)), Fraction(0)) for v in phi_k] for u in phi_q]

    @staticmethod
    def _rows(v: Any, n: int, m: int | None, what: str) -> list[list[Fraction]]:
        if not isinstance(v, list) or len(v) != n or any(not isinstance(r, list) for r in v):
            raise Fails(f"head.{what} must have {n} rows")
        rows = [[num(x, what) for x in r] for r in v]
        if len({len(r) for r in rows}) != 1 or not rows[0] or (m is not None and len(rows[0]) != m):
            raise Fails(f"head.{what} has rows of the wrong length")
        return rows

    def a(self, x: int, z: int) -> Fraction:
        if x not in self.row:
            raise Fails(f"token {x} is queried but has no query features")
        return self.alpha[self.row[x]][z]

    def output(self, i: int, p: int) -> tuple[Fraction, Fraction, int]:
        seq = self.fam.inputs[i]
        x = seq[p]
        D = sum((self.a(x, z) for z in seq), Fraction(0))
        N = sum((self.a(x, z) * self.g[self.row[x]][z] for z in seq), Fraction(0))
        return N, D, self.fam.targets[i][p]

    def correct(self, i: int, p: int) -> bool:
        N, D, t = self.output(i, p)
        return D > 0 and abs(N / D - t) < self.eps

    def error(self, i: int, p: int) -> Fraction | None:
        N, D, t = self.output(i, p)
        return abs(N / D - t) if D > 0 else None

    def replay(self, rec: Any, what: str) -> list[str]:
        """An output record must be the exact evaluation of a scored position, and wrong."""
        if not isinstance(rec, dict) or set(rec) != RECORD:
            return [f"{what} must be a record {sorted(RECORD)}"]
        i, p = rec["input"], rec["position"]
        if not (isinstance(i, int) and isinstance(p, int) and 0 <= i < len(self.fam.inputs)
                and 0 <= p < self.fam.n and self.fam.scored[i][p]):
            return [f"{what}: not a scored position of the family"]
        N, D, t = self.output(i, p)
        t_hat = N / D if D > 0 else None
        stated_hat = None if rec["t_hat"] is None else num(rec["t_hat"], "t_hat")
        if rec["sequence"] != self.fam.inputs[i] or num(rec["numerator"], "numerator") != N \
                or num(rec["denominator"], "denominator") != D or stated_hat != t_hat \
                or rec["target"] != t:
            return [f"{what}: the record is not the exact output at input {i} position {p}"]
        if self.correct(i, p):
            return [f"{what}: input {i} position {p} is correct; it is no counterexample"]
        return []


def check(claim: Mapping[str, Any]) -> list[str]:
    h = Head(claim)
    if claim["kind"] == "correctness":
        return _correctness(claim, h)
    return _gap(claim, h)


def _correctness(claim: Mapping[str, Any], h: Head) -> list[str]:
    ev, verdict = claim["evidence"], claim["verdict"]
    if set(ev) != {"family", "head", "scored_positions", "failures", "max_error", "counterexample"}:
        return ["correctness evidence has the documented keys only"]
    pos = h.fam.positions()
    if not pos:
        return ["the family has no scored position"]
    failing = [ip for ip in pos if not h.correct(*ip)]
    errors = [h.error(*ip) for ip in pos]
    worst = None if any(e is None for e in errors) else max(e for e in errors if e is not None)
    problems = []
    if ev["scored_positions"] != len(pos) or ev["failures"] != len(failing):
        problems.append(f"{len(failing)} of {len(pos)} scored positions fail; the claim says "
                        f"{ev['failures']!r:.12} of {ev['scored_positions']!r:.12}")
    stated = None if ev["max_error"] is None else num(ev["max_error"], "max_error")
    if stated != worst:
        problems.append(f"the largest error is {worst if worst is None else q_text(worst)}, the claim "
                        f"says {ev['max_error']!r:.40}")
    if verdict == "proved":
        if failing:
            problems.append(f"input {failing[0][0]} position {failing[0][1]} is wrong: not proved")
        if ev["counterexample"] is not None:
            problems.append("a proved claim carries a counterexample")
    elif verdict == "refuted":
        problems += h.replay(ev["counterexample"], "counterexample")
    else:
        problems.append("correctness is decided exactly: the verdict must be proved or refuted")
    return problems


def _gap(claim: Mapping[str, Any], h: Head) -> list[str]:
    ev, verdict, p = claim["evidence"], claim["verdict"], claim["parameters"]
    fam, e = h.fam, h.eps
    n = fam.n
    if p.get("n") != n or n < 3:
        return [f"Lemma 3 needs the family's exact length n >= 3 in parameters.n (n = {n})"]
    if fam.jumps is None:
        return ["the family has no jumps"]
    if set(ev) != {"family", "head", "jumps", "applicable", "violated_jumps", "violation"}:
        return ["gap_domination evidence has the documented keys only"]
    col = {c: k for k, c in enumerate(JUMP_COLUMNS)}
    K, I = len(fam.tokens), len(fam.inputs)
    applicable, violated, factors = 0, [], {}
    for j, row in enumerate(fam.jumps):
        x, y, z, t, u = (row[col[c]] for c in ("x", "y", "z", "t", "u"))
        if not all(0 <= v < K for v in (x, y, z)) or \
                not (fam.ip[x][y] == t < u == fam.ip[x][z] <= fam.ip[x][x]):
            return [f"jump {j}: not t = <x,y> < u = <x,z> <= <x,x>"]
        want = {"input_y": [x] + [y] * (n - 1), "input_z": [x] + [z] * (n - 1),
                "input_m": [x, y] + [z] * (n - 2)}
        for c, seq in want.items():
            i = row[col[c]]
            if not 0 <= i < I or fam.inputs[i] != seq or not fam.scored[i][0]:
                return [f"jump {j}: {c} is not the scored Lemma 3 input {seq}"]
        d = u - t
        if d < 2 * e * (n - 1) / (n - 2):
            continue
        applicable += 1
        factors[j] = (n - 2) * (d - 2 * e) / (2 * e)
        if not h.a(x, y) > factors[j] * h.a(x, z):
            violated.append(j)
    problems = []
    if ev["jumps"] != len(fam.jumps) or ev["applicable"] != applicable or ev["violated_jumps"] != violated:
        problems.append(f"{len(fam.jumps)} jumps, {applicable} applicable, violated {violated[:10]}; "
                        "the claim states otherwise")
    v = ev["violation"]
    if verdict == "proved":
        if violated or v is not None:
            problems.append(f"gap domination fails at jumps {violated[:10]}: not proved")
        return problems
    if not violated:
        return problems + [f"a {verdict} claim needs a violated jump; there is none"]
    if verdict == "unknown":
        for j in violated:
            for c in ROLES.values():
                if not h.correct(fam.jumps[j][col[c]], 0):
                    return problems + [f"jump {j}'s input {c} is wrong: the claim is refutable"]
        return problems
    if verdict != "refuted" or not isinstance(v, dict) or set(v) != {
            "jump", "factor", "alpha_xy", "alpha_xz", "role", "failing_input"}:
        return problems + ["a refuted claim needs a violation {jump, factor, alpha_xy, alpha_xz, role, "
                           "failing_input}"]
    j = v["jump"]
    if j not in violated or v["role"] not in ROLES:
        return problems + ["the violation's jump is not violated, or its role is not Y, Z or M"]
    row = fam.jumps[j]
    x, y, z = row[col["x"]], row[col["y"]], row[col["z"]]
    if num(v["factor"], "factor") != factors[j] or num(v["alpha_xy"], "alpha_xy") != h.a(x, y) \
            or num(v["alpha_xz"], "alpha_xz") != h.a(x, z):
        problems.append("the violation's factor or kernel values are not the exact ones")
    rec = v["failing_input"]
    if not isinstance(rec, dict) or rec.get("input") != row[col[ROLES[v["role"]]]] or rec.get("position") != 0:
        return problems + ["the failing input is not the jump's input of the named role, position 0"]
    return problems + h.replay(rec, "failing_input")
