"""Exceptions for misuse and the command-line exit-code convention.

Infeasible and unknown are *results*, never exceptions. Exceptions are for
bad input (:class:`InputError`, exit code 2) and for inputs that lie outside
what can be certified (:class:`UncertifiableError`, exit code 3).
"""

from __future__ import annotations

import sys
from typing import Callable, Sequence

#: 0: ran, every claim proved.  1: some claim refuted or unknown.
#: 2: usage error or bad input.  3: input outside what can be certified.
EXIT_PROVED = 0
EXIT_NOT_PROVED = 1
EXIT_BAD_INPUT = 2
EXIT_UNCERTIFIABLE = 3


class InputError(ValueError):
    """Bad input: a malformed file, an out-of-range parameter, a corrupt family."""


class UncertifiableError(Exception):
    """The input is valid but outside what can be certified (e.g. a signed kernel
    where nonnegativity is required, or a position-dependent kernel)."""


def run_command(prog: str, main: Callable[[Sequence[str] | None], int],
                argv: Sequence[str] | None = None) -> int:
    """Run a command's ``main`` with the project's exit-code convention.

    ``InputError`` -> one line on stderr, exit 2; ``UncertifiableError`` -> one
    line, exit 3. argparse's own usage errors already exit 2.
    """
    try:
        return int(main(argv))
    except InputError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UncertifiableError as exc:
        print(f"{prog}: cannot certify: {exc}", file=sys.stderr)
        return EXIT_UNCERTIFIABLE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
