"""Exact correctness of a kernel head on a family, and the Lemma 3 audit along
its chains (the ``correctness`` and ``gap_domination`` claims).

* :mod:`.head` -- the head as exact rational tables, evaluated exactly;
* :mod:`.correctness` -- every scored position decided in rationals;
* :mod:`.lemma3` -- Lemma 3's inequality per jump, the failing input named;
* :mod:`.run` -- both as certificate claims (checked by :mod:`certify.checkers.audit`);
* :mod:`.theorems` -- the paper's theorems on concrete objects as ``theorem`` claims (Thm 1, Thm 6
  part 1, Thm 8; checked by :mod:`certify.checkers.theorems`).

This package namespace re-exports the public names of its modules.
"""

from __future__ import annotations

from certify.audit.correctness import Correctness, check_correctness
from certify.audit.head import (
                                HALF,
                                ROLES,
                                ExactHead,
                                Output,
                                evaluate,
                                exact_matmul,
                                head_from_model,
                                head_from_tables,
                                rationalize,
)
from certify.audit.lemma3 import GapAudit, JumpViolation, audit_gap_domination, lemma3_factor
from certify.audit.run import audit_claims, correctness_claim, family_eps, gap_domination_claim

__all__ = [
    "Correctness", "ExactHead", "GapAudit", "HALF", "JumpViolation", "Output", "ROLES",
    "audit_claims", "audit_gap_domination", "check_correctness", "correctness_claim",
    "evaluate", "exact_matmul", "family_eps", "gap_domination_claim", "head_from_model",
    "head_from_tables", "lemma3_factor", "rationalize",
]
