"""CPU-second budgets: what every ``--time-limit`` of a search counts.

A :class:`CpuBudget` counts the CPU seconds (user + system, every thread) of the
process that runs the search, from the moment the budget is made:
``time.process_time()``. The solvers a search calls (HiGHS, Clarabel, torch)
run inside that process, so their threads are counted too; in a parallel sweep
each task runs in one worker process and its budget counts that worker's own
CPU seconds. Load on the machine stretches the wall clock, not the CPU seconds a
search needs, so a verdict reached within a budget does not depend on the load.

The budget is checked *between* solver calls. A single solve is never stopped
by a clock (a wall clock that load shortens would make the search path depend
on the load); it stops at the solver's own iteration limits. A search can
therefore overrun its budget by at most one solve; :meth:`CpuBudget.record`
writes the limit and the CPU seconds used into the claim, so the overrun is
visible.

>>> b = CpuBudget(5.0)
>>> b.exhausted(), 0 <= b.used() < 5
(False, True)
>>> b.record()["kind"]
'cpu_seconds'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: the unit a budget counts, as written into claims and reasons
KIND = "cpu_seconds"


def cpu_seconds() -> float:
    """CPU seconds (user + system, all threads) of this process so far."""
    return time.process_time()


@dataclass(frozen=True)
class CpuBudget:
    """``seconds`` CPU seconds of this process, counted from ``start``."""

    seconds: float
    start: float = field(default_factory=cpu_seconds)

    def used(self) -> float:
        return cpu_seconds() - self.start

    def left(self) -> float:
        return self.seconds - self.used()

    def exhausted(self) -> bool:
        return self.left() <= 0

    def part(self, seconds: float) -> "CpuBudget":
        """A budget for one stage: ``seconds``, at most what is left of this one."""
        return CpuBudget(max(0.0, min(seconds, self.left())))

    def describe(self) -> str:
        """``CPU-second budget of 15 s`` (the words every reason uses)."""
        return f"CPU-second budget of {self.seconds:g} s"

    def spent(self) -> str:
        """``CPU-second budget of 15 s exhausted (15.31 CPU s used)``, or how much of
        it a search used when it stopped first (the words of an ``unknown`` reason)."""
        if self.exhausted():
            return f"{self.describe()} exhausted ({self.used():.2f} CPU s used)"
        return f"stopped after {self.used():.2f} CPU s of the {self.describe()}"

    def record(self) -> dict:
        """The budget as written into a claim's ``info``: its kind, the limit and
        the CPU seconds used so far."""
        return {"kind": KIND, "limit_s": float(self.seconds), "used_s": round(self.used(), 3)}
