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
"""

import gc
import sys

if sys.argv[1:2] != ["serve"]:              # the service is the one long-lived process
    gc.set_threshold(100_000, 10, 10)


def entry() -> None:
    from certify.cli import entry as run
    run()


if __name__ == "__main__":
    entry()
