"""``python -m certify <command> ...``: the command line (:mod:`certify.cli`)."""

import sys

from certify.cli import main

if __name__ == "__main__":
    sys.exit(main())
