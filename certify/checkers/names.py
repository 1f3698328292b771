"""The built-in names of the certificate format (standard library only): which
family names are built in (``paper-5.1``, ``multilevel-M{M}-s{s}-h{h}-q{q}``,
``ood-{M}-{q}-{n}-{train|test}``) and which code names (``paper-5.1``, pinned by
its word count and the canonical sha256 of its word list).

Part of what a claim means, like the schema: the statement renderer
(:mod:`certify.checkers.statements`) prints a built-in name as is and any other
family or code by its hash, so both checkers read these names from here. What a
built-in name stands for (its content) is bound by each checker on its own:
:mod:`certify.checkers.families` and :mod:`certify.reference.families`.
"""

from __future__ import annotations

import re
from typing import Any

MULTILEVEL_NAME = re.compile(r"multilevel-M(\d+)-s(\d+)-h(\d+)-q(\d+)")
OOD_NAME = re.compile(r"ood-(\d+)-(\d+)-(\d+)-(train|test)")

#: the built-in code paper-5.1: (number of words, canonical sha256 of the word list)
PAPER51_CODE = (15, "fadcd14183f3fcd3d73a6911e929330e716bd786ba295baeb23e125e9ad590c7")
#: built-in code names -> (words, canonical sha256 of the word list)
BUILTIN_CODES = {"paper-5.1": PAPER51_CODE}


def builtin_kind(name: Any) -> str | None:
    """``"paper-5.1"``, ``"multilevel"``, ``"ood"`` or None (not a built-in name)."""
    if not isinstance(name, str):
        return None
    if name == "paper-5.1":
        return "paper-5.1"
    if MULTILEVEL_NAME.fullmatch(name):
        return "multilevel"
    if OOD_NAME.fullmatch(name):
        return "ood"
    return None
