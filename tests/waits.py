"""Waits and costs for the tests, without a wall-clock bound that a test asserts.

A wait polls its condition and returns as soon as the condition holds; it fails
at once when the process it waits on has exited first (with the tail of that
process's output). A busy machine can make a wait longer, never make it fail.
Its only bound is the hang guard: a count of polls whose pauses alone add up to
``HANG_GUARD_S`` seconds (15 minutes), so that a broken run ends instead of
hanging CI. It is never what a test asserts.

A cost is measured in CPU seconds of the child (user + system time of the
process and of the descendants it waited for, from ``os.wait4``): the load of
the machine does not move it, as it moves wall-clock time.

tests/test_suite_hygiene.py keeps wall clocks out of the test modules."""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

#: the hang guard of every wait: a broken run ends after this many seconds of pauses between
#: polls (and whatever the polls themselves took); far above any time an awaited event takes
HANG_GUARD_S = 900.0


def polls(pause: float) -> range:
    """The hang guard as a count of polls ``pause`` seconds apart."""
    return range(math.ceil(HANG_GUARD_S / pause))


def _tail(output: Path | Callable[[], str] | None, n: int = 3000) -> str:
    if output is None:
        return ""
    try:
        text = output() if callable(output) else Path(output).read_text(errors="replace")
    except OSError as exc:
        text = f"(output not readable: {exc})"
    return "\n" + text[-n:]


def wait_until(cond: Callable[[], object], what: str, *, proc: subprocess.Popen | None = None,
               output: Path | Callable[[], str] | None = None, pause: float = 0.1,
               absent: tuple[type[BaseException], ...] = ()) -> object:
    """``cond()``'s first true value, polled ``pause`` seconds apart.

    An exception in ``absent`` counts as "not yet" (a server not listening yet, a
    page still loading). When ``proc`` has exited before the condition holds,
    fail at once with the tail of ``output`` (a file or a function giving text);
    else give up only at the hang guard."""

    def look():
        try:
            return cond()
        except absent:
            return None

    for _ in polls(pause):
        v = look()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            v = look()                    # the event may have come just before the exit
            if v:
                return v
            raise AssertionError(f"waiting for {what}: the process exited with {proc.returncode} "
                                 f"first{_tail(output)}")
        time.sleep(pause)
    raise AssertionError(f"waiting for {what}: not seen after {len(polls(pause))} polls "
                         f"{pause} s apart (the hang guard){_tail(output)}")


class Hung(AssertionError):
    """A process still running at the hang guard (killed)."""


def cpu_run(args: list[str], *, guard_s: float = HANG_GUARD_S,
            **popen: object) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``args`` to its end: the completed process (text output) and its CPU
    seconds (user + system of the process and of the descendants it waited for).

    A process still running after ``guard_s`` seconds (the hang guard, 600 s at
    least) is killed and :class:`Hung` raised; nothing else about its duration is
    looked at."""
    if guard_s < 600:
        raise ValueError(f"a hang guard of {guard_s} s: 600 s at least (it must never be what fails a run)")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, **popen)
        guard = threading.Timer(guard_s, p.kill)      # hang guard
        guard.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            fired = guard.finished.is_set()
            guard.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(args, p.returncode, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))
    if fired:
        raise Hung(f"{args[:4]}... still running after {guard_s} s (the hang guard):"
                   f"{done.stderr[-2000:]}")
    return done, usage.ru_utime + usage.ru_stime
