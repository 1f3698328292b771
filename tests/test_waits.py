"""The waits and CPU measures of tests/waits.py and tests/service_support.py
measure what they say: a wait fails at once, with the process's output, when
the awaited process has exited; CPU seconds count computing, not waiting."""

from __future__ import annotations

import subprocess
import sys

import pytest
from service_support import cpu_now, cpu_until_gone
from waits import cpu_run, wait_until

#: a child that computes for about ``S`` CPU seconds, then exits
BUSY = "import time\nwhile time.process_time() < {s}:\n    pass\n"


def test_wait_until_returns_the_first_true_value():
    seen = iter([0, None, "", "ready"])
    assert wait_until(lambda: next(seen), "the fourth value", pause=0.001) == "ready"


def test_wait_until_counts_an_absent_exception_as_not_yet():
    calls = []

    def cond():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("not listening yet")
        return True
    assert wait_until(cond, "a listener", pause=0.001, absent=(ConnectionError,)) is True
    with pytest.raises(KeyError):                       # any other exception is the test's failure
        wait_until(lambda: {}["x"], "a key", pause=0.001)


def test_wait_until_fails_at_once_when_the_awaited_process_exits(tmp_path):
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; print('the reason it ended'); "
                                 "sys.exit(3)"], stdout=out, stderr=subprocess.STDOUT)
        with pytest.raises(AssertionError) as exc:
            wait_until(lambda: False, "a server that never answers", proc=proc, output=log, pause=0.01)
    assert "the process exited with 3 first" in str(exc.value)
    assert "the reason it ended" in str(exc.value)


def test_wait_until_takes_an_event_that_came_just_before_the_exit():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert wait_until(lambda: "done", "the event", proc=proc, pause=0.01) == "done"


def test_cpu_run_counts_computing_not_waiting():
    busy, cpu_busy = cpu_run([sys.executable, "-c", BUSY.format(s=0.3)])
    idle, cpu_idle = cpu_run([sys.executable, "-c", "import time; time.sleep(0.3); print('slept')"])
    assert busy.returncode == idle.returncode == 0 and idle.stdout == "slept\n"
    assert cpu_busy >= 0.3                              # its own 0.3 s, and the start-up
    assert cpu_idle < 0.25                              # the start-up only: a pause is not a cost
    with pytest.raises(ValueError, match="600 s at least"):
        cpu_run([sys.executable, "-c", "pass"], guard_s=60)


def test_cpu_until_gone_tells_a_process_that_computes_on_from_one_that_stops():
    on = subprocess.Popen([sys.executable, "-c", BUSY.format(s=0.8)])
    before = cpu_now([on.pid])
    computed_on = cpu_until_gone(before)
    on.wait()
    stopped = subprocess.Popen([sys.executable, "-c", BUSY.format(s=30)])
    before = cpu_now([stopped.pid])
    stopped.kill()
    dying = cpu_until_gone(before)
    stopped.wait()
    assert computed_on > 0.5 and dying < 0.25, (computed_on, dying)
