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
"""

import gc
import os
import sys

os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")   # before numpy is imported (above)

if sys.argv[1:2] != ["serve"]:              # the service is the one long-lived process
    gc.set_threshold(100_000, 10, 10)


def entry() -> None:
    from certify.cli import entry as run
    run()


if __name__ == "__main__":
    entry()
