"""How a command's process ends (:func:`certify.cli.exit_now`, :mod:`certify.__main__`): the
output flushed, the thread-shutdown hooks and exit handlers run and the code kept, without the
interpreter's teardown; the usual exit while a daemon thread is alive; the collector tuned only
for the command line."""

import os
import subprocess
import sys

import pytest


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)


def test_exit_now_flushes_runs_the_exit_handlers_and_keeps_the_code():
    p = _run("import atexit, sys\n"
             "atexit.register(lambda: print('handler', end=''))\n"
             "from certify.cli import exit_now\n"
             "print('out', end=''); print('err', end='', file=sys.stderr)\n"
             "exit_now(3)\n"
             "print('never')")
    assert (p.returncode, p.stdout, p.stderr) == (3, "outhandler", "err")


def test_exit_now_joins_a_live_thread_then_exits_fast():
    """The interpreter's first exit step runs here: a non-daemon thread is joined (its output
    comes before the exit), then the fast exit (no SystemExit reaches the caller)."""
    p = _run("import threading, time\n"
             "t = threading.Thread(target=lambda: (time.sleep(0.2), print(' joined', end='', flush=True))); t.start()\n"
             "from certify.cli import exit_now\n"
             "print('out', end='', flush=True)\n"
             "try:\n"
             "    exit_now(4)\n"
             "except SystemExit as e:\n"
             "    print(' usual', e.code, end='')\n"
             "    raise")
    assert (p.returncode, p.stdout) == (4, "out joined")


def test_exit_now_with_a_daemon_thread_alive_is_the_usual_exit():
    p = _run("import threading, time\n"
             "t = threading.Thread(target=time.sleep, args=(5,), daemon=True); t.start()\n"
             "from certify.cli import exit_now\n"
             "print('out', end='')\n"
             "try:\n"
             "    exit_now(4)\n"
             "except SystemExit as e:\n"
             "    print(' usual', e.code, end='')\n"
             "    raise")
    assert (p.returncode, p.stdout) == (4, "out usual 4")


def test_thread_shutdown_hooks_run_before_the_fast_exit_and_the_service_gets_the_usual_exit():
    # concurrent.futures registers a hook for thread shutdown (it joins its workers there): it runs,
    # the workers are joined, and the process still ends without the interpreter's teardown
    p = _run("import concurrent.futures, threading\n"
             "threading._register_atexit(lambda: print('hook ', end=''))\n"
             "ex = concurrent.futures.ThreadPoolExecutor(2); ex.submit(lambda: None).result()\n"
             "from certify.cli import exit_now\n"
             "try:\n"
             "    exit_now(5)\n"
             "except SystemExit as e:\n"
             "    print('usual', e.code, end='')\n"
             "    raise")
    assert (p.returncode, p.stdout) == (5, "hook ")
    p = _run("import sys; sys.argv = ['certify', 'serve']\n"
             "from certify.cli import exit_now\n"
             "try:\n"
             "    exit_now(5)\n"
             "except SystemExit as e:\n"
             "    print('usual', e.code, end='')\n"
             "    raise")
    assert (p.returncode, p.stdout) == (5, "usual 5")


def test_the_collector_is_tuned_for_the_command_line_only(tmp_path):
    default = _run("import gc; print(gc.get_threshold())").stdout.strip()
    assert default == "(700, 10, 10)"                                        # the interpreter's
    p = _run("import gc, certify, certify.cli, certify.core.certificate; print(gc.get_threshold())")
    assert p.stdout.strip() == default                                       # a library import leaves it
    p = _run("import gc, sys; sys.argv = ['certify', 'rank']\nimport certify.__main__; print(gc.get_threshold())")
    assert p.stdout.strip() == "(100000, 10, 10)"
    # the test processes run under the command line's setting (tests/conftest.py)
    assert str(__import__("gc").get_threshold()) == p.stdout.strip()
    p = _run("import gc, sys; sys.argv = ['certify', 'serve']\nimport certify.__main__; print(gc.get_threshold())")
    assert p.stdout.strip() == default                                       # the service: the defaults
    # the replay worker of verify --replay-extraction is a command's process too
    p = _run("import gc, io, sys; sys.stdin = io.StringIO('[]')\nfrom certify.cli.replay import main\n"
             "main(); print(gc.get_threshold(), file=sys.stderr)")
    assert p.stdout.strip() == "{}" and p.stderr.strip() == "(100000, 10, 10)", p.stderr[-300:]
    p = subprocess.run([sys.executable, "-m", "certify", "bounds", "--no-such-option"], capture_output=True,
                       text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 2 and "usage: certify bounds" in p.stderr           # argparse's exit, unchanged


def _hugepage_advice(code: str, **env: str) -> str:
    """numpy's huge-page advice (True: on) after ``code``, in a process whose environment has
    no ``NUMPY_MADVISE_HUGEPAGE`` unless ``env`` sets it."""
    base = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    p = subprocess.run([sys.executable, "-c", code + "\nimport numpy\n"
                        "print(numpy._core.multiarray._get_madvise_hugepage())"],
                       capture_output=True, text=True, timeout=600, env={**base, **env})
    assert p.returncode == 0, p.stderr[-500:]
    return p.stdout.strip()


def test_numpy_huge_page_advice_is_off_for_commands_unless_the_user_set_it():
    """certify/__main__.py: every command (the service and its workers too) runs with numpy's
    transparent-huge-page advice off; a library import leaves numpy's default; a value the
    user set is kept; the test processes run as the commands do (tests/conftest.py)."""
    import numpy
    command = "import sys; sys.argv = ['certify', 'rank']\nimport certify.__main__"
    assert _hugepage_advice("import certify, certify.cli") == _hugepage_advice("")   # numpy's own default
    assert _hugepage_advice(command) == "False"
    assert _hugepage_advice(command.replace("'rank'", "'serve'")) == "False"
    assert _hugepage_advice(command, NUMPY_MADVISE_HUGEPAGE="1") == "True"  # the user's choice
    assert numpy._core.multiarray._get_madvise_hugepage() is False


def _malloc_tuning(argv1: str, **env: str) -> tuple[dict, str, str]:
    """``(MALLOC_SET, the two tunables in the environment)`` after certify/__main__.py is run
    as ``certify ARGV1``, in a process whose environment has neither unless ``env`` sets it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    code = (f"import sys, os; sys.argv = ['certify', {argv1!r}]\nimport certify.__main__ as m\n"
            "print(repr((m.MALLOC_SET, os.environ.get('MALLOC_MMAP_THRESHOLD_'), "
            "os.environ.get('MALLOC_TRIM_THRESHOLD_'))))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**base, **env})
    assert p.returncode == 0, p.stderr[-500:]
    import ast
    return ast.literal_eval(p.stdout.strip())


def _glibc() -> bool:
    try:
        return sys.platform == "linux" and bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


@pytest.mark.skipif(not _glibc(), reason="glibc only")
def test_glibc_malloc_keeps_a_commands_arrays_on_its_heap_unless_the_user_set_it():
    """certify/__main__.py: a command sets glibc's mmap and trim thresholds (1 GB, 2 GB) for
    itself (mallopt accepts both) and for the processes it starts; the service only for the
    processes it starts; a tunable the user set is kept and not set again."""
    gb = str(1 << 30)
    assert _malloc_tuning("rank") == ({"MALLOC_MMAP_THRESHOLD_": 1, "MALLOC_TRIM_THRESHOLD_": 1}, gb, str(2 << 30))
    assert _malloc_tuning("serve") == ({}, gb, str(2 << 30))
    assert _malloc_tuning("rank", MALLOC_TRIM_THRESHOLD_="5") == ({"MALLOC_MMAP_THRESHOLD_": 1}, gb, "5")
