"""No test module measures or bounds wall-clock time.

The rule: no module ``tests/*.py`` or ``tests/harness/*.py`` calls ``time.time``,
``time.monotonic``, ``time.perf_counter`` (or their ``_ns`` forms),
``time.clock_gettime`` on a clock other than a CPU-time one, ``signal.alarm``,
or ``signal.setitimer`` with a timer other than ``ITIMER_PROF`` /
``ITIMER_VIRTUAL`` (CPU time), under whatever name it was imported; nor
carries a ``pytest.mark.timeout``. The one exception is a call on a line
whose comment says ``# hang guard``: a very generous bound (10 minutes or
more) whose only job is to end a broken run, never what a test asserts.
For the same reason a ``timeout=`` given to ``subprocess.run`` (``call``,
``check_call``, ``check_output``) is a hang guard, so it is ``HANG_GUARD_MIN_S``
(600 s) or more, marked or not.

Why: a wall-clock bound fails a correct program on a loaded machine (two
cores shared by a whole test run), so it proves nothing about the code. What
a bound stood for is tested instead: a cost in CPU seconds of the process
(``time.process_time``, ``resource.getrusage``, ``os.wait4``: allowed), or an
event (the job ended, the process is gone, a row is stored), awaited by
tests/waits.py, which fails at once when the awaited process has died.
``time.sleep`` is allowed: a pause measures nothing."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MARK = "# hang guard"
WALL = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"}
CPU_CLOCKS = {"CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID"}
CPU_TIMERS = {"ITIMER_PROF", "ITIMER_VIRTUAL"}
SUBPROCESS_RUNS = {"run", "call", "check_call", "check_output"}
#: the least timeout a subprocess may be given: a hang guard, never a measure of the run
HANG_GUARD_MIN_S = 600


def _marked_lines(source: str) -> set[int]:
    """The lines carrying a ``# hang guard`` comment (a comment token: text in a string does not count)."""
    out = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.string.lower().startswith(MARK):
            out.add(tok.start[0])
    return out


def _constant_name(node: ast.AST, signal_modules: set[str], names: dict[str, tuple[str, str]]) -> str | None:
    """``X`` for ``signal.X`` / ``time.X`` or a name imported from them; else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in signal_modules:
        return node.attr
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id][1]
    return None


def violations(source: str, name: str = "<source>") -> list[str]:
    """Each wall-clock call or alarm in ``source`` that no ``# hang guard`` comment marks."""
    tree = ast.parse(source, name)
    modules: dict[str, str] = {}                    # local name -> "time" / "signal"
    names: dict[str, tuple[str, str]] = {}          # local name -> (module, attribute)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in ("time", "signal", "subprocess"):
                    modules[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module in ("time", "signal", "subprocess"):
            for a in node.names:
                names[a.asname or a.name] = (node.module, a.name)
    const_modules = set(modules)
    marked = _marked_lines(source)
    found = []

    def flag(node: ast.AST, what: str) -> None:
        lines = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if not lines & marked:
            found.append(f"{name}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "timeout" and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
            flag(node, "pytest.mark.timeout (a wall-clock alarm)")
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
            called = (modules[f.value.id], f.attr)
        elif isinstance(f, ast.Name) and f.id in names:
            called = names[f.id]
        else:
            continue
        first = _constant_name(node.args[0], const_modules, names) if node.args else None
        if called[0] == "time" and called[1] in WALL:
            flag(node, f"time.{called[1]}() reads the wall clock")
        elif called[0] == "time" and called[1] in ("clock_gettime", "clock_gettime_ns") \
                and first not in CPU_CLOCKS:
            flag(node, f"time.{called[1]}({first or '?'}) reads a clock that is not CPU time")
        elif called == ("signal", "alarm"):
            flag(node, "signal.alarm() is a wall-clock alarm")
        elif called == ("signal", "setitimer") and first not in CPU_TIMERS:
            flag(node, f"signal.setitimer({first or '?'}) is not a CPU-time timer")
        elif called[0] == "subprocess" and called[1] in SUBPROCESS_RUNS:
            for k in node.keywords:
                if k.arg == "timeout" and isinstance(k.value, ast.Constant) and \
                        isinstance(k.value.value, (int, float)) and k.value.value < HANG_GUARD_MIN_S:
                    found.append(f"{name}:{node.lineno}: subprocess.{called[1]}(timeout={k.value.value}) "
                                 f"is below the {HANG_GUARD_MIN_S} s of a hang guard")
    return sorted(found, key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def _modules() -> list[Path]:
    return sorted([*TESTS.glob("*.py"), *TESTS.glob("harness/*.py")])


def test_no_test_module_measures_or_bounds_wall_clock_time():
    mods = _modules()
    assert len(mods) > 50 and Path(__file__).resolve() in mods        # the scan saw the suite
    bad = [v for p in mods for v in violations(p.read_text(), str(p.relative_to(TESTS.parent)))]
    assert not bad, "wall-clock time in the tests (see tests/test_suite_hygiene.py):\n" + "\n".join(bad)


@pytest.mark.parametrize("source, n", [
    ("import time\nt0 = time.monotonic()\n", 1),
    ("import time\nassert time.time() - t0 < 5\n", 1),
    ("import time as clock\nx = clock.perf_counter()\ny = clock.perf_counter_ns()\n", 2),
    ("from time import monotonic as now\nwhile now() < deadline:\n    pass\n", 1),
    ("from time import time\nt = time()\n", 1),
    ("import time\ntime.clock_gettime(time.CLOCK_MONOTONIC)\n", 1),
    ("import signal\nsignal.alarm(30)\n", 1),
    ("import signal\nsignal.setitimer(signal.ITIMER_REAL, 1.0)\n", 1),
    ("from signal import ITIMER_REAL as R, setitimer\nsetitimer(R, 1.0)\n", 1),
    ("import signal\nsignal.setitimer(which, 1.0)\n", 1),                  # an unknown timer fails
    ("import pytest\n@pytest.mark.timeout(60)\ndef test_x():\n    pass\n", 1),
    ("import time\nt0 = time.monotonic()  # not a hang guard\n", 1),     # the comment must start so
    ("import time\nx = time.time(); y = '# hang guard'\n", 1),
    ("import time\ns = 'time.monotonic()'\n", 0),                         # text, not a call
    ("import time\nt0 = time.monotonic()  # hang guard: 900 s, never asserted\n", 0),
    ("import time\nt0 = time.monotonic(\n)  # hang guard\n", 0),            # a line the call spans
    ("import signal\nsignal.setitimer(signal.ITIMER_PROF, 6.0)\n", 0),
    ("from signal import ITIMER_VIRTUAL, setitimer\nsetitimer(ITIMER_VIRTUAL, 1)\n", 0),
    ("import time\nc = time.process_time()\ntime.sleep(0.1)\n", 0),
    ("import time\ntime.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)\n", 0),
    ("import resource\nr = resource.getrusage(resource.RUSAGE_CHILDREN)\n", 0),
    ("def time():\n    return 1\nt = time()\n", 0),                          # not the module's
    ("import subprocess\nsubprocess.run(['x'], timeout=120)\n", 1),
    ("import subprocess as sp\nsp.check_output(\n    ['x'], timeout=60)  # hang guard\n", 1),
    ("from subprocess import run\nrun(['x'], timeout=599.5)\n", 1),
    ("import subprocess\nsubprocess.run(['x'], timeout=600)\nsubprocess.run(['y'])\n", 0),
])
def test_the_scan_catches_planted_violations(source, n):
    found = violations(source)
    assert len(found) == n, found


def test_a_planted_violation_in_a_copy_of_a_real_module_is_caught():
    src = (TESTS / "waits.py").read_text()
    assert violations(src) == []
    planted = src.replace("    for _ in polls(pause):\n",
                          "    t0 = time.monotonic()\n    for _ in polls(pause):\n", 1)
    assert planted != src
    found = violations(planted, "waits.py")
    assert len(found) == 1 and "time.monotonic() reads the wall clock" in found[0], found


def test_the_same_worker_groups_name_test_files_that_exist():
    from conftest import SAME_WORKER
    names = [n for group in SAME_WORKER.values() for n in group]
    assert len(names) == len(set(names))
    assert [n for n in names if not (Path(__file__).parent / f"{n}.py").is_file()] == []


def test_the_longest_first_units_are_files_or_groups_that_exist():
    from conftest import LONGEST_FIRST, SAME_WORKER
    assert len(LONGEST_FIRST) == len(set(LONGEST_FIRST))
    assert [n for n in LONGEST_FIRST
            if n not in SAME_WORKER and not (Path(__file__).parent / f"{n}.py").is_file()] == []
