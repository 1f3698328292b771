"""The three verdicts a claim can end in (docs/design.md, "Verdicts").

An enum, never a string matched by substring; ``solvers/`` returns it too.
"""

from __future__ import annotations

import enum
from typing import Iterable


class Verdict(str, enum.Enum):
    """The three verdicts. ``proved`` only after an exact check; ``refuted`` only
    with an exact counterexample; otherwise ``unknown`` with a reason."""

    PROVED = "proved"
    REFUTED = "refuted"
    UNKNOWN = "unknown"


def overall(verdicts: Iterable[Verdict | str]) -> Verdict:
    """The verdict of several claims together: refuted if any is, else unknown if
    any is (or there is none), else proved."""
    vs = [Verdict(v) for v in verdicts]
    if Verdict.REFUTED in vs:
        return Verdict.REFUTED
    return Verdict.UNKNOWN if Verdict.UNKNOWN in vs or not vs else Verdict.PROVED
