"""Progress bars (``tqdm.auto``, with an ETA): on stderr for a command, shown
only when stderr is a terminal and neither ``--no-progress`` nor
``CERTIFY_NO_PROGRESS`` says no (bars never touch stdout, which carries
``--json`` output); in a Jupyter notebook, ``tqdm.auto`` draws them as widgets
and :func:`notebook_progress` turns them on with no terminal check."""

from __future__ import annotations

import os
import sys
from typing import Any


def show_progress(no_progress: bool = False) -> bool:
    """Progress bars on: stderr is a terminal and ``--no-progress`` not given."""
    if no_progress or os.environ.get("CERTIFY_NO_PROGRESS"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def notebook_progress(progress: bool | None = None) -> bool:
    """The library API's default (:mod:`certify.api`): ``progress`` when given,
    else on in a Jupyter kernel (no terminal there: ``tqdm.auto`` draws a widget)
    or when stderr is a terminal, unless ``CERTIFY_NO_PROGRESS`` says no."""
    if progress is not None:
        return bool(progress)
    if os.environ.get("CERTIFY_NO_PROGRESS"):
        return False
    return "ipykernel" in sys.modules or show_progress()


class TimeBar:
    """A progress bar over a CPU-second budget (stderr, :mod:`certify.core.budget`):
    the CPU seconds spent, the budget, an ETA, and a counter of steps (LPs) in the
    postfix. ``update``/``set_postfix`` as tqdm's."""

    def __init__(self, desc: str, seconds: float, unit: str = "LP"):
        from tqdm.auto import tqdm

        from certify.core.budget import cpu_seconds

        self._time = cpu_seconds
        self._t0 = self._time()
        self.steps, self.unit = 0, unit
        self.bar = tqdm(total=max(float(seconds), 0.01), desc=desc, file=sys.stderr, leave=False,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f} of at most "
                                   "{total:.0f} CPU s, ETA {remaining}{postfix}")

    def update(self, n: int = 1) -> None:
        self.steps += n
        self.bar.n = min(self._time() - self._t0, self.bar.total)
        self.bar.refresh()

    def set_postfix(self, **kw: Any) -> None:
        self.bar.set_postfix({self.unit + "s": self.steps, **kw})

    def close(self) -> None:
        self.bar.close()


def time_bar(desc: str, seconds: float, enabled: bool) -> TimeBar | None:
    return TimeBar(desc, seconds) if enabled else None
