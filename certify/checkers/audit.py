"""Independent re-check of ``correctness`` and ``gap_domination`` claims.

Imports only the standard library, :mod:`certify.checkers.common` and the
kernel (the exact product ``alpha = phi_q phi_k^T``). Every object named here must have exactly the
listed keys (a missing or an unexpected key fails). Both kinds carry the same
self-contained description of a normalized kernel head on a finite family:

``parameters``: ``family`` (the embedded family's name), ``family_sha256``,
``head_sha256`` (re-derived here from the embedded head), ``rank``, ``eps``
(``"p/q"``, ``0 < eps <= 1/2``), for ``gap_domination`` the exact length ``n``;
and, for a head read from weights, ``source``, ``source_sha256``, ``adapter``,
``weights_sha256`` (bound by ``certify verify``: :mod:`certify.checkers.binding`).
``model`` (certificates made before renderer version 2) must be the weights
file's name.

``evidence["family"]``: the family file object (``tokens`` as bit strings,
``inputs`` as token indices, ``scored`` 0/1, ``jumps`` for the chains, its
``sha256`` = sha256 of the canonical JSON of the object without ``sha256``).
Targets are *recomputed* here as Min-IP targets; the file's are not trusted.

``evidence["head"]``: ``query_tokens`` (Q token indices), ``phi_q`` (Q x r),
``phi_k`` (K x r) and ``g`` (Q x K), exact ``"p/q"`` strings. The kernel is
``alpha = phi_q phi_k^T`` (computed here exactly); a scored position with
query ``x`` in the sequence ``(z_1..z_N)`` outputs
``t_hat = sum_j alpha(x,z_j) g(x,z_j) / sum_j alpha(x,z_j)`` (self term
included) and is correct when the denominator is ``> 0`` and
``|t_hat - t| < eps``.

``correctness`` evidence: ``scored_positions``, ``failures`` (count),
``max_error`` (``"p/q"``, null when a denominator is ``<= 0``),
``counterexample`` (null when proved; else ``input``, ``position``,
``sequence``, ``numerator``, ``denominator``, ``t_hat``, ``target`` of a
failing position). ``proved`` iff no position fails; ``refuted`` needs the
counterexample, replayed here; ``unknown`` is inconsistent (the question is
decided exactly by the evidence).

``gap_domination`` evidence: ``jumps``, ``applicable`` (jumps with
``d = u - t >= 2 eps (n-1)/(n-2)``), ``violated_jumps`` (every applicable jump
with ``alpha(x,y) <= (n-2)(d-2eps)/(2eps) alpha(x,z)``), ``violation`` (null
when proved; else ``jump``, ``factor``, ``alpha_xy``, ``alpha_xz``, ``role``
(Y, Z or M) and ``failing_input``: an output record as above of the jump's
input of that role, which must fail). Every jump is checked against the
family: overlaps ``t = <x,y> < u = <x,z> <= <x,x>`` and its three inputs
``Y = (x, y^(n-1))``, ``Z = (x, z^(n-1))``, ``M = (x, y, z^(n-2))``.
``unknown`` is consistent only when violations exist and every violated
jump's three inputs are correct.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from certify.checkers.common import JUMP_COLUMNS as _JUMP_COLS
from certify.checkers.common import Bad as _Bad
from certify.checkers.common import canonical_sha256 as _canonical_sha
from certify.checkers.common import family as _family
from certify.checkers.common import guarded, integer, rational, rational_matrix
from certify.checkers.kernel import attention as head
from certify.checkers.kernel import fmpz_matrix, product
from certify.checkers.kernel.attention import lemma3
from certify.checkers.kinds import BY_NAME

KINDS = ("correctness", "gap_domination")
ROLES = ("Y", "Z", "M")
#: the claims' parameters, evidence and nested objects (declared in certify.checkers.kinds)
_CORRECTNESS, _GAP = BY_NAME["correctness"], BY_NAME["gap_domination"]
#: an output record (a counterexample, a violation's failing input)
_RECORD = _CORRECTNESS.part("counterexample")


def _scaled(M: list[list[Fraction]]) -> tuple[Any, int]:
    """An integer matrix and a positive denominator with ``M = N / den``."""
    if not M or not M[0]:
        raise _Bad("an empty matrix in the head's tables")
    den = math.lcm(1, *(v.denominator for row in M for v in row))
    return fmpz_matrix([[int(v * den) for v in row] for row in M]), den


# ---------------------------------------------------------------- the head on the family

class _Setting:
    """The parsed family and head, with the kernel and values as integers."""

    def __init__(self, claim: dict) -> None:
        params, ev = claim.get("parameters"), claim.get("evidence")
        if not isinstance(params, dict) or not isinstance(ev, dict):
            raise _Bad("parameters and evidence must be objects")
        self.eps = rational(params.get("eps"), "eps")
        if not 0 < self.eps <= Fraction(1, 2):
            raise _Bad(f"eps must lie in (0, 1/2], got {self.eps}")
        # the head's source fields are bound by verify (certify.checkers.binding)
        (_GAP if claim.get("kind") == "gap_domination" else _CORRECTNESS).params().check_keys(
            params, "parameters")
        if "model" in params and not isinstance(params["model"], str):
            raise _Bad("parameters.model must be a string (the weights file's name)")
        fam = _family(ev.get("family"), params)
        self.tokens = fam.tokens
        K = len(self.tokens)
        self.ip = fam.ip
        self.inputs = fam.inputs
        self.n = fam.n
        self.scored = fam.scored
        self.jumps = fam.jumps
        self.min_ip = fam.targets

        head = _CORRECTNESS.part("head").check_keys(ev.get("head"), "head")
        if _canonical_sha(head) != params.get("head_sha256"):
            raise _Bad("parameters.head_sha256 is not the hash of the evidence's head")
        qt = head.get("query_tokens")
        if not isinstance(qt, list) or not qt:
            raise _Bad("head has no query tokens")
        self.rows: dict[int, int] = {}
        for i, t in enumerate(qt):
            t = integer(t, "query token")
            if not 0 <= t < K or t in self.rows:
                raise _Bad(f"query token {t} out of range or repeated")
            self.rows[t] = i
        Q = len(qt)
        phi_q = rational_matrix(head.get("phi_q"), "phi_q", (Q, None))
        r = len(phi_q[0])
        if r < 1 or params.get("rank") != r:
            raise _Bad(f"parameters.rank must be the feature dimension {r}")
        phi_k = rational_matrix(head.get("phi_k"), "phi_k", (K, r))
        g = rational_matrix(head.get("g"), "g", (Q, K))
        Aq, dq = _scaled(phi_q)
        Ak, dk = _scaled(phi_k)
        # alpha = A / alpha_den with A an integer matrix (Q, K)
        self.A = [[int(v) for v in row] for row in product(Aq, Ak.transpose()).tolist()]
        self.alpha_den = dq * dk
        G, self.g_den = _scaled(g)
        self.G = [[int(v) for v in row] for row in G.tolist()]

    def alpha(self, x: int, z: int) -> Fraction:
        return Fraction(self.A[self.rows[x]][z], self.alpha_den)

    def target(self, i: int, p: int) -> int:
        return self.min_ip[i][p]

    def output(self, i: int, p: int) -> tuple[int, int, int]:
        """Integers (N, D, t) with ``t_hat = N / (g_den D)`` (D scaled by alpha_den)."""
        seq = self.inputs[i]
        x = seq[p]
        if x not in self.rows:
            raise _Bad(f"input {i} queries token {x}, which has no query features")
        N, D = head.output(self.A[self.rows[x]], self.G[self.rows[x]], seq)
        return N, D, self.target(i, p)

    def correct(self, i: int, p: int) -> bool:
        N, D, t = self.output(i, p)
        return head.within(N, D, t, self.eps, self.g_den)

    def error(self, i: int, p: int) -> Fraction | None:
        N, D, t = self.output(i, p)
        return head.error(N, D, t, self.g_den)

    def replay(self, rec: Any, what: str) -> list[str]:
        """Check an output record against the exact evaluation; it must fail."""
        if not isinstance(rec, dict):
            return [f"{what} is missing"]
        _RECORD.check_keys(rec, what)
        i, p = integer(rec.get("input"), f"{what}.input"), integer(rec.get("position"), f"{what}.position")
        if not 0 <= i < len(self.inputs) or not 0 <= p < self.n or not self.scored[i][p]:
            return [f"{what}: input {i} position {p} is not a scored position of the family"]
        probs = []
        if rec.get("sequence") != self.inputs[i]:
            probs.append(f"{what}: sequence is not input {i} of the family")
        N, D, t = self.output(i, p)
        num = Fraction(N, self.alpha_den * self.g_den)
        den = Fraction(D, self.alpha_den)
        if rational(rec.get("numerator"), f"{what}.numerator") != num:
            probs.append(f"{what}: numerator is {num}, not {rec.get('numerator')}")
        if rational(rec.get("denominator"), f"{what}.denominator") != den:
            probs.append(f"{what}: denominator is {den}, not {rec.get('denominator')}")
        t_hat = num / den if den > 0 else None
        stated = rec.get("t_hat")
        if (None if stated is None else rational(stated, f"{what}.t_hat")) != t_hat:
            probs.append(f"{what}: t_hat is {t_hat}, not {stated}")
        if rec.get("target") != t:
            probs.append(f"{what}: the Min-IP target is {t}, not {rec.get('target')}")
        if self.correct(i, p):
            probs.append(f"{what}: input {i} position {p} is correct (error "
                         f"{self.error(i, p)} < {self.eps}); it is no counterexample")
        return probs


# ---------------------------------------------------------------- correctness

def _check_correctness(claim: dict, s: _Setting) -> list[str]:
    ev, verdict = claim["evidence"], claim.get("verdict")
    _CORRECTNESS.form().check_keys(ev, "evidence")
    positions = [(i, p) for i in range(len(s.inputs)) for p in range(s.n) if s.scored[i][p]]
    if not positions:
        return ["the family has no scored position"]
    failing = [ip for ip in positions if not s.correct(*ip)]
    errors = [s.error(*ip) for ip in positions]
    known = [e for e in errors if e is not None]
    max_err = None if len(known) != len(errors) else max(known)
    probs = []
    if ev.get("scored_positions") != len(positions):
        probs.append(f"scored_positions is {len(positions)}, not {ev.get('scored_positions')}")
    if ev.get("failures") != len(failing):
        probs.append(f"{len(failing)} scored positions fail, not {ev.get('failures')}")
    stated = ev.get("max_error")
    if (None if stated is None else rational(stated, "max_error")) != max_err:
        probs.append(f"max_error is {max_err}, not {stated}")
    if verdict == "proved":
        if failing:
            i, p = failing[0]
            probs.append(f"not proved: input {i} position {p} fails (error {s.error(i, p)})")
        if ev.get("counterexample") is not None:
            probs.append("a proved claim carries a counterexample")
    elif verdict == "refuted":
        probs += s.replay(ev.get("counterexample"), "counterexample")
    else:
        probs.append(f"verdict {verdict!r}: correctness is decided exactly by the evidence")
    return probs


# ---------------------------------------------------------------- gap domination

def _check_gap(claim: dict, s: _Setting) -> list[str]:
    ev, params, verdict = claim["evidence"], claim["parameters"], claim.get("verdict")
    n, e = s.n, s.eps
    if params.get("n") != n or n < 3:
        return [f"Lemma 3 needs the family's exact length n >= 3 in parameters.n (n = {n})"]
    if not isinstance(s.jumps, list):
        return ["the family has no jumps"]
    _GAP.form().check_keys(ev, "evidence")
    c = {name: k for k, name in enumerate(_JUMP_COLS)}
    applicable, violated, factors = 0, [], {}
    for j, row in enumerate(s.jumps):
        if not isinstance(row, list) or len(row) != len(_JUMP_COLS):
            return [f"jump {j} is not a row of {len(_JUMP_COLS)} integers"]
        x, y, z, t, u = (integer(row[c[k]], f"jump {j} {k}") for k in ("x", "y", "z", "t", "u"))
        K = len(s.tokens)
        if not all(0 <= v < K for v in (x, y, z)):
            return [f"jump {j} indexes tokens out of range"]
        if (s.ip[x][y], s.ip[x][z]) != (t, u) or not t < u <= s.ip[x][x]:
            return [f"jump {j}: overlaps are ({s.ip[x][y]}, {s.ip[x][z]}), need t = <x,y> < "
                    f"u = <x,z> <= <x,x> as stated ({t}, {u})"]
        want = {"input_y": [x] + [y] * (n - 1), "input_z": [x] + [z] * (n - 1),
                "input_m": [x, y] + [z] * (n - 2)}
        for col, seq in want.items():
            i = integer(row[c[col]], f"jump {j} {col}")
            if not 0 <= i < len(s.inputs) or s.inputs[i] != seq or not s.scored[i][0]:
                return [f"jump {j}: {col} is not the scored Lemma 3 input {seq}"]
        threshold, f = lemma3(n, e, u - t)
        if u - t < threshold:
            continue
        applicable += 1
        factors[j] = f
        if x not in s.rows:
            return [f"jump {j}: query token {x} has no query features"]
        a_xy, a_xz = s.A[s.rows[x]][y], s.A[s.rows[x]][z]      # same positive scale
        if not a_xy > f * a_xz:
            violated.append(j)
    probs = []
    if ev.get("jumps") != len(s.jumps):
        probs.append(f"the family has {len(s.jumps)} jumps, not {ev.get('jumps')}")
    if ev.get("applicable") != applicable:
        probs.append(f"{applicable} jumps meet Lemma 3's gap, not {ev.get('applicable')}")
    if ev.get("violated_jumps") != violated:
        probs.append(f"gap domination fails on {len(violated)} jumps {violated[:10]}, not on "
                     f"the stated {ev.get('violated_jumps')!r:.80}")
    v = ev.get("violation")
    if verdict == "proved":
        if violated:
            probs.append(f"not proved: gap domination fails at jump {violated[0]}")
        if v is not None:
            probs.append("a proved claim carries a violation")
        return probs
    if not violated:
        return probs + [f"a {verdict} claim needs a violated jump; there is none"]
    if verdict == "unknown":
        for j in violated:
            row = s.jumps[j]
            for role, col in zip(ROLES, ("input_y", "input_z", "input_m")):
                if not s.correct(row[c[col]], 0):
                    return probs + [f"unknown, but input {role} of violated jump {j} is wrong: "
                                    "the claim is refutable"]
        return probs
    if verdict != "refuted":
        return probs + [f"unknown verdict {verdict!r}"]
    if not isinstance(v, dict):
        return probs + ["a refuted claim needs a violation"]
    _GAP.part("violation").check_keys(v, "violation")
    j = integer(v.get("jump"), "violation.jump")
    if j not in violated:
        return probs + [f"violation.jump {j} is not a violated jump"]
    row = s.jumps[j]
    x, y, z = row[c["x"]], row[c["y"]], row[c["z"]]
    if rational(v.get("factor"), "violation.factor") != factors[j]:
        probs.append(f"violation.factor is {factors[j]}, not {v.get('factor')}")
    if rational(v.get("alpha_xy"), "violation.alpha_xy") != s.alpha(x, y):
        probs.append(f"violation.alpha_xy is {s.alpha(x, y)}, not {v.get('alpha_xy')}")
    if rational(v.get("alpha_xz"), "violation.alpha_xz") != s.alpha(x, z):
        probs.append(f"violation.alpha_xz is {s.alpha(x, z)}, not {v.get('alpha_xz')}")
    jump_role = v.get("role")
    if jump_role not in ROLES:
        return probs + [f"violation.role must be one of {ROLES}, got {jump_role!r}"]
    rec = v.get("failing_input")
    col = ("input_y", "input_z", "input_m")[ROLES.index(jump_role)]
    if not isinstance(rec, dict) or rec.get("input") != row[c[col]] or rec.get("position") != 0:
        return probs + [f"violation.failing_input must be the jump's input {jump_role} "
                        f"(input {row[c[col]]}, position 0)"]
    return probs + s.replay(rec, "failing_input")


def check(claim: dict, cert: dict | None = None) -> list[str]:
    """Problems with a ``correctness`` or ``gap_domination`` claim; ``[]`` when its
    verdict is re-derived exactly from the evidence."""
    if not isinstance(claim, dict) or claim.get("kind") not in KINDS:
        return [f"not an audit claim (kind {claim.get('kind') if isinstance(claim, dict) else None!r})"]
    return guarded(_check)(claim)


def _check(claim: dict) -> list[str]:
    s = _Setting(claim)
    if claim["kind"] == "correctness":
        return _check_correctness(claim, s)
    return _check_gap(claim, s)
