"""``python -m certify <command> ...`` and the console script ``certify``: the
command line (:mod:`certify.cli`).

A command is one process that ends when its work does, so this front tunes the
interpreter for that before anything else is imported: the cyclic garbage
collector looks at its youngest objects every 100,000 new containers instead of
every 700, the older generations at their usual ratios (a small ``certify
rank`` then runs no collection at all: about 4 ms less CPU, a twentieth of the
numpy script's whole run; a long run collects as before, less often), and the
process ends without the interpreter's teardown (:func:`certify.cli.exit_now`).
``certify serve`` keeps the collector's defaults (it runs for days); imported as
a library, certify leaves both alone.

Every command, the service and the processes they start (job, replay and Ray workers
inherit the environment) also run with numpy's transparent-huge-page advice off
(``NUMPY_MADVISE_HUGEPAGE=0``, numpy's documented switch; a value the user set is kept).
numpy asks the kernel for huge pages on every array of 4 MB and more, and where the kernel
defragments memory synchronously for such requests (transparent huge pages "madvise", the
default of many distributions and of the developers' machines) that is system time on every
large temporary: ``certify rank`` of a 4096 x 4096 matrix 1.3-1.7 s of system time with it,
0.8 s without (the arrays' first touch), 10-20 % of the command's CPU. The numbers do not
depend on it (the same operations on the same values).

On glibc, a command's arrays below 1 GB come from malloc's heap and are reused there, and
the heap is returned to the kernel only past 2 GB free at its top (``MALLOC_MMAP_THRESHOLD_``
and ``MALLOC_TRIM_THRESHOLD_``, glibc's documented tunables, set with ``mallopt`` for this
process and in the environment for the processes it starts; a value the user set is kept).
By default every block above 32 MB is a fresh ``mmap`` that the kernel zeroes page by page
when first touched and takes back when freed, and a long run makes such temporaries
(feature batches, Gram blocks, pre-norm blocks) over and over: a whole fla t2r checkpoint
at hidden 2048 and vocabulary 50,304 spent 25.7 s of its 147 CPU s in the kernel (17 %),
11.3 s of 139 s (8 %) with these, at a lower peak (2.52 GB instead of 2.73). A long run
gives the free heap back at its phase boundaries (a layer's end: :mod:`certify.core.memory`),
so one phase's high-water mark is not kept through the next. ``certify
serve`` itself keeps glibc's defaults (it runs for days); its job launcher, a process of
its own, reads the environment.
"""

import gc
import os
import sys

os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")   # before numpy is imported (above)

#: glibc malloc tunables of a command (module docstring): (mallopt parameter, bytes)
MALLOC = {"MALLOC_MMAP_THRESHOLD_": (-3, 1 << 30), "MALLOC_TRIM_THRESHOLD_": (-1, 2 << 30)}


def tune_malloc(this_process: bool = True) -> dict[str, int]:
    """Set :data:`MALLOC` for the processes this one starts (environment) and, when
    ``this_process``, for this one (``mallopt``), except a tunable the user set (glibc read
    it at start). Returns ``{name: mallopt's answer}`` (1: set); ``{}`` without glibc."""
    try:
        if sys.platform != "linux" or not os.confstr("CS_GNU_LIBC_VERSION"):
            return {}
    except (ValueError, OSError):                           # pragma: no cover - a libc without the name
        return {}
    mine = {k: v for k, v in MALLOC.items() if k not in os.environ}
    for k, (_, value) in mine.items():
        os.environ[k] = str(value)
    if not this_process or not mine:
        return {}
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):                       # pragma: no cover - not glibc after all
        return {}
    return {k: int(mallopt(param, value)) for k, (param, value) in mine.items()}


SERVE = sys.argv[1:2] == ["serve"]          # the service is the one long-lived process
MALLOC_SET = tune_malloc(this_process=not SERVE)
if not SERVE:
    gc.set_threshold(100_000, 10, 10)


def entry() -> None:
    from certify.cli import entry as run
    run()


if __name__ == "__main__":
    entry()
