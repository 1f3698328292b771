"""Finite input families: the hard instances the paper's proofs and experiments use.

A :class:`Family` (:mod:`.family`) is a finite set of equal-length input
sequences over a set of distinct Boolean tokens, with the positions whose
error is checked ("scored") and the Min-IP targets. Builders: the Thm 5 /
Lemma 3 chain family of any code and ``paper-5.1`` (:mod:`.chain`), the Sec. 4
multilevel family (:mod:`.multilevel`), the Sec. 5.2 train / joint-OOD pools
(:mod:`.ood`); names, files and limits in :mod:`.registry`.

This package namespace re-exports the public names of its modules.
"""

from __future__ import annotations

from certify.core.families.chain import chain_family, chain_levels, paper51_family
from certify.core.families.family import FORMAT, JUMP_COLUMNS, Family, validate
from certify.core.families.multilevel import MultilevelSpec, multilevel_spec
from certify.core.families.ood import ood_families
from certify.core.families.registry import builtin_names, check_family_size, load_code, load_family

__all__ = [
    "FORMAT", "Family", "JUMP_COLUMNS", "MultilevelSpec", "builtin_names", "chain_family",
    "chain_levels", "check_family_size", "load_code", "load_family", "multilevel_spec",
    "ood_families", "paper51_family", "validate",
]
