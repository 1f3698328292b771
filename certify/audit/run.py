"""Exact correctness of a kernel head on a family, and the Lemma 3 audit along its chains.

A normalized kernel head on a family is, exactly, three rational tables over
the family's tokens (:class:`ExactHead`): query features ``phi_q`` for the
tokens that are queried, key features ``phi_k`` for every token, and the
scalarized values ``g_x(z) = beta(x) + w(x)^T v(z)`` (Eq. 5). A model's float
tables are converted losslessly (every float is a dyadic rational) and
combined in exact arithmetic: the kernel is the exact product
``phi_q phi_k^T`` of the feature matrices the model computes.

* :func:`check_correctness` evaluates every scored position of every input
  in rationals, ``t_hat = sum_j alpha g / sum_j alpha`` (self term included),
  and decides ``|t_hat - t| < eps`` strictly: ``proved``, or ``refuted`` with
  the first failing input.
* :func:`audit_gap_domination` checks Lemma 3 on every jump ``t -> u`` of the
  family's chains: ``alpha(x,y) > (n-2)(d-2eps)/(2eps) alpha(x,z)``. Where it
  fails, one of the jump's inputs ``Y, Z, M`` must be wrong (Lemma 3's
  identity ``N_M = N_Y/L + (K/L) N_Z`` cancels the values); the audit finds
  it and confirms it by exact evaluation.

:func:`correctness_claim` and :func:`gap_domination_claim` wrap the results
as certificate claims whose evidence :mod:`certify.checkers.audit` re-derives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from certify.core.certificate import Claim, ClaimKind
from certify.core.verdict import Verdict
from certify.core.numbers import q_to_str
from certify.core.files import sha256_json
from certify.core.errors import InputError
from certify.core.families import JUMP_COLUMNS, Family

HALF = Fraction(1, 2)
ROLES = ("Y", "Z", "M")


# ---------------------------------------------------------------- exact tables

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
        return self.phi_q.dot(self.phi_k.T)

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

    Uses ``model.feature_matrices(tokens) -> (PhiQ, PhiK)`` and, for the values,
    ``model.readout`` and ``model.values`` combined exactly
    (``g = beta + w v^T`` in rationals), else ``model.value_table``."""
    import torch

    tokens = family.tokens
    queries = family.query_tokens()
    with torch.no_grad():
        PhiQ, PhiK = model.feature_matrices(tokens)                      # (K, r), (K, r)
        phi_q = rationalize(PhiQ, "query features")[queries]
        phi_k = rationalize(PhiK, "key features")
        if hasattr(model, "readout") and hasattr(model, "values"):
            beta, w = model.readout(tokens[queries])                     # (Q,), (Q, dv)
            v = model.values(tokens)                                     # (K, dv)
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


# ---------------------------------------------------------------- evaluation

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


# ---------------------------------------------------------------- correctness

@dataclass(frozen=True)
class Correctness:
    verdict: Verdict
    eps: Fraction
    scored: int
    failures: int
    max_error: Fraction | None          # None when a denominator is <= 0
    counterexample: Output | None       # the first failing position


def check_correctness(head: ExactHead, family: Family, eps: Fraction = HALF) -> Correctness:
    outs = evaluate(head, family)
    bad = [o for o in outs if not o.correct(eps)]
    errors = [o.error() for o in outs]
    max_err = None if any(e is None for e in errors) else max(errors)
    return Correctness(verdict=Verdict.REFUTED if bad else Verdict.PROVED, eps=eps,
                       scored=len(outs), failures=len(bad), max_error=max_err,
                       counterexample=bad[0] if bad else None)


# ---------------------------------------------------------------- Lemma 3 audit

@dataclass(frozen=True)
class JumpViolation:
    jump: int
    factor: Fraction
    alpha_xy: Fraction
    alpha_xz: Fraction
    failing: Output | None      # an input of the jump the head gets wrong
    role: str | None            # "Y", "Z" or "M"


@dataclass(frozen=True)
class GapAudit:
    verdict: Verdict
    eps: Fraction
    n: int
    jumps: int
    applicable: int                       # jumps with d >= 2eps(n-1)/(n-2)
    violated: tuple[int, ...]             # jump indices where GD fails
    first: JumpViolation | None
    reason: str | None = None


def lemma3_factor(n: int, eps: Fraction, d: int) -> Fraction | None:
    """``(n-2)(d-2eps)/(2eps)``, or ``None`` below Lemma 3's gap threshold."""
    if Fraction(d) < 2 * eps * (n - 1) / (n - 2):
        return None
    return Fraction(n - 2) * (d - 2 * eps) / (2 * eps)


def audit_gap_domination(head: ExactHead, family: Family, eps: Fraction = HALF) -> GapAudit:
    """Lemma 3 on every jump of the family's chains (see the module docstring)."""
    if family.jumps is None or family.n < 3:
        raise InputError(f"family {family.name!r} has no Lemma 3 chains")
    col = {c: k for k, c in enumerate(JUMP_COLUMNS)}
    alpha = head.alpha()
    rows = head.row_of()
    n = family.n
    violated, applicable, first = [], 0, None
    for j, jump in enumerate(family.jumps):
        x, y, z = (int(jump[col[c]]) for c in ("x", "y", "z"))
        f = lemma3_factor(n, eps, int(jump[col["u"]] - jump[col["t"]]))
        if f is None:
            continue
        applicable += 1
        a_xy, a_xz = alpha[rows[x], y], alpha[rows[x], z]
        if a_xy > f * a_xz:
            continue
        violated.append(j)
        if first is None or first.failing is None:
            trio = [int(jump[col[c]]) for c in ("input_y", "input_z", "input_m")]
            outs = {o.input: o for o in evaluate(head, family, trio, alpha)
                    if o.position == 0}
            role, failing = next(((r, outs[i]) for r, i in zip(ROLES, trio)
                                  if not outs[i].correct(eps)), (None, None))
            first = JumpViolation(j, f, a_xy, a_xz, failing, role)
    if not violated:
        return GapAudit(Verdict.PROVED, eps, n, len(family.jumps), applicable, (), None)
    if first.failing is None:
        return GapAudit(Verdict.UNKNOWN, eps, n, len(family.jumps), applicable, tuple(violated),
                        first, reason="gap domination fails but none of Y, Z, M of any violated "
                        "jump is wrong (a negative self term alpha(x, x)?)")
    return GapAudit(Verdict.REFUTED, eps, n, len(family.jumps), applicable, tuple(violated), first)


# ---------------------------------------------------------------- claims

def _common(head: ExactHead, family: Family, eps: Fraction, model: str) -> tuple[dict, dict]:
    params = {"model": model, "family": family.name, "family_sha256": family.sha256,
              "head_sha256": head.sha256, "rank": head.rank, "eps": q_to_str(eps)}
    evidence = {"family": family.to_json(), "head": head.to_json()}
    return params, evidence


def correctness_claim(head: ExactHead, family: Family, result: Correctness, model: str) -> Claim:
    params, evidence = _common(head, family, result.eps, model)
    evidence.update({
        "scored_positions": result.scored, "failures": result.failures,
        "max_error": None if result.max_error is None else q_to_str(result.max_error),
        "counterexample": None if result.counterexample is None
        else result.counterexample.to_json(family)})
    reason = None
    if result.verdict is Verdict.REFUTED:
        c = result.counterexample
        t = "undefined (denominator <= 0)" if c.t_hat is None else f"{q_to_str(c.t_hat)}"
        reason = (f"{result.failures} of {result.scored} scored positions fail; input {c.input} "
                  f"position {c.position}: t_hat = {t}, target {c.target}")
    return Claim(kind=ClaimKind.CORRECTNESS, statement=None, verdict=result.verdict,
                 parameters=params, evidence=evidence, reason=reason,
                 method="every scored position evaluated in exact rational arithmetic "
                        "(certify.audit)")


def gap_domination_claim(head: ExactHead, family: Family, audit: GapAudit, model: str) -> Claim:
    params, evidence = _common(head, family, audit.eps, model)
    params["n"] = audit.n
    v = audit.first
    evidence.update({
        "jumps": audit.jumps, "applicable": audit.applicable,
        "violated_jumps": list(audit.violated),
        "violation": None if v is None else {
            "jump": v.jump, "factor": q_to_str(v.factor), "alpha_xy": q_to_str(v.alpha_xy),
            "alpha_xz": q_to_str(v.alpha_xz), "role": v.role,
            "failing_input": None if v.failing is None else v.failing.to_json(family)}})
    reason = audit.reason
    if audit.verdict is Verdict.REFUTED:
        f = v.failing
        reason = (f"gap domination fails on {len(audit.violated)} of {audit.applicable} jumps; at jump "
                  f"{v.jump} alpha(x,y) = {q_to_str(v.alpha_xy)} <= {q_to_str(v.factor)} * "
                  f"{q_to_str(v.alpha_xz)}, and its input {v.role} (input {f.input}) is wrong: "
                  f"t_hat = {'undefined' if f.t_hat is None else q_to_str(f.t_hat)}, "
                  f"target {f.target}")
    return Claim(kind=ClaimKind.GAP_DOMINATION, statement=None, verdict=audit.verdict,
                 parameters=params, evidence=evidence, reason=reason,
                 method="Lemma 3 inequality per jump in exact rationals; failing input "
                        "confirmed by exact evaluation (certify.audit)")


def family_eps(family: Family) -> Fraction:
    """The family's error level (``params["eps"]``), 1/2 by default."""
    e = family.params.get("eps", "1/2") if family.params else "1/2"
    from certify.core.limits import parse_exact
    eps = parse_exact(str(e), "family eps")
    if not 0 < eps <= HALF:
        raise InputError(f"family eps must lie in (0, 1/2], got {eps}")
    return eps


def audit_claims(head: ExactHead, family: Family, model: str) -> list[Claim]:
    """CORRECTNESS, and GAP_DOMINATION when the family has Lemma 3 chains."""
    eps = family_eps(family)
    claims = [correctness_claim(head, family, check_correctness(head, family, eps), model)]
    if family.jumps is not None and family.n >= 3:
        claims.append(gap_domination_claim(head, family, audit_gap_domination(head, family, eps),
                                           model))
    return claims
