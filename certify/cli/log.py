"""What a command says for people, through :mod:`logging`: the logger
``certify.cli`` writes its records' messages, one per line, to the current
``sys.stderr`` (looked up at each record, so that a caller's redirection is
followed). ``-q/--quiet`` keeps warnings only (the one-line error of a failed
command is printed whatever the level); ``-v/--verbose`` adds the debug lines
(what was resolved, the time a command took). The level is reset at the start of
each command (:func:`configure`).
"""

from __future__ import annotations

import logging
import sys
from typing import Sequence

LOG = logging.getLogger("certify.cli")


class _Stderr(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when a record is written."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:            # set by StreamHandler.__init__; always sys.stderr
        pass


if not any(isinstance(h, _Stderr) for h in LOG.handlers):
    _handler = _Stderr()
    _handler.setFormatter(logging.Formatter("%(message)s"))
    LOG.addHandler(_handler)
    LOG.propagate = False
    LOG.setLevel(logging.INFO)

QUIET = ("-q", "--quiet")
VERBOSE = ("-v", "--verbose")


def verbosity(argv: Sequence[str]) -> int:
    """-1 with ``-q/--quiet``, 1 with ``-v/--verbose`` (``-vv`` too), else 0; the last one given
    wins, and nothing after ``--`` counts."""
    level = 0
    for a in argv:
        if a == "--":
            break
        if a in QUIET:
            level = -1
        elif a in VERBOSE or (len(a) > 2 and a[0] == "-" and set(a[1:]) == {"v"}):
            level = 1
    return level


def configure(level: int) -> None:
    """Set the level of what commands say: -1 warnings only, 0 information (the default), 1 debug."""
    LOG.setLevel({-1: logging.WARNING, 0: logging.INFO}.get(level, logging.DEBUG))


def info(message: str) -> None:
    LOG.info(message)


def debug(message: str) -> None:
    LOG.debug(message)


def warning(message: str) -> None:
    LOG.warning(message)
