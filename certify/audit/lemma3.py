"""The Lemma 3 audit along a family's chains: on every jump ``t -> u``,
``alpha(x,y) > (n-2)(d-2eps)/(2eps) alpha(x,z)``; where it fails one of the
jump's inputs ``Y, Z, M`` is wrong (Lemma 3's identity
``N_M = N_Y/L + (K/L) N_Z`` cancels the values), found and confirmed by exact
evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from certify.audit.head import HALF, ROLES, ExactHead, Output, evaluate
from certify.core.errors import InputError
from certify.core.families import JUMP_COLUMNS, Family
from certify.core.verdict import Verdict


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
    assert first is not None                # set at the first violated jump
    if first.failing is None:
        return GapAudit(Verdict.UNKNOWN, eps, n, len(family.jumps), applicable, tuple(violated),
                        first, reason="gap domination fails but none of Y, Z, M of any violated "
                        "jump is wrong (a negative self term alpha(x, x)?)")
    return GapAudit(Verdict.REFUTED, eps, n, len(family.jumps), applicable, tuple(violated), first)
