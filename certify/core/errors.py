"""Exceptions for misuse and the command-line exit-code convention.

Infeasible and unknown are *results*, never exceptions. Exceptions are for
bad input (:class:`InputError`, exit code 2) and for inputs that lie outside
what can be certified (:class:`UncertifiableError`, exit code 3).
"""

from __future__ import annotations

import errno
import os
import re
import sys
from typing import Callable, Sequence

from certify.checkers.common import NotACertificate

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


class UsageExit(SystemExit):
    """argparse's usage error (exit 2; its lines already printed), with its message
    kept for ``--json`` (:func:`run_command`)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code)
        self.message = message


_STAGE = re.compile(r"(?:(?<=/)|^)\.([^/\s]+?)\.stage\.[A-Za-z0-9_]+(?:/(?:new|old))?")


_TMP = re.compile(r"(?:(?<=/)|^)\.([^/\s]+?)\.[A-Za-z0-9_]{8}\.tmp")


def public_path(text: str) -> str:
    """Replace an internal stage folder (``.NAME.stage.XXXX/new``) or an atomic
    write's temporary file (``.NAME.XXXXXXXX.tmp``) by ``NAME``: messages name the
    user's paths, never a stage folder."""
    return _TMP.sub(lambda m: m.group(1), _STAGE.sub(lambda m: m.group(1), str(text)))


def os_error_line(exc: OSError) -> str:
    """One line for an OS error, naming the path (permissions, a folder where a
    file is expected, a busy path, a full disk)."""
    why = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
           errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
           errno.EPERM: "operation not permitted", errno.EISDIR: "is a folder, expected a file",
           errno.ENOTDIR: "a part of the path is not a folder", errno.EBUSY: "busy",
           errno.ENOENT: "no such file or folder", errno.ENAMETOOLONG: "name too long",
           errno.EEXIST: "already exists", errno.ENOTEMPTY: "folder not empty",
           errno.ETXTBSY: "busy"}.get(exc.errno or -1, exc.strerror or type(exc).__name__)
    where = exc.filename if exc.filename is not None else None
    if where is None:
        return why
    return f"{public_path(os.fsdecode(where))}: {why}"


def run_command(prog: str, main: Callable[[Sequence[str] | None], int],
                argv: Sequence[str] | None = None) -> int:
    """Run a command's ``main`` with the project's exit-code convention.

    ``InputError`` -> one line on stderr, exit 2; ``UncertifiableError`` -> one
    line, exit 3; an OS error (permissions, a folder where a file is expected, a
    full disk) or running out of memory -> one line naming the path, exit 2; a
    module of an optional extra that is not installed -> one line naming the extra
    (:mod:`certify.core.extras`), exit 2.
    argparse's own usage errors already exit 2. No traceback reaches the user:
    anything else is reported in one line as an internal error (exit 1, nothing
    is proved); ``CERTIFY_DEBUG=1`` re-raises it.

    With ``--json`` among the arguments every one of these failures also prints
    one JSON object on stdout, ``{"error": LINE, "exit_code": N}`` (LINE the
    stderr line without the program's name), so that a program reading stdout
    always gets one document: the command's own on success, this one otherwise.
    """
    if prog.startswith("certify."):
        prog = "certify " + prog[len("certify."):]
    debug = bool(os.environ.get("CERTIFY_DEBUG"))
    as_json = wants_json(sys.argv[1:] if argv is None else argv)

    def fail(kind: str, message: str, code: int) -> int:
        print(f"{prog}: {kind}: {message}", file=sys.stderr)
        if as_json:
            _print_json({"error": message if kind == "error" else f"{kind}: {message}", "exit_code": code})
        return code

    try:
        return int(main(argv))
    except (InputError, NotACertificate) as exc:
        return fail("error", public_path(_one_line(exc)), EXIT_BAD_INPUT)
    except UncertifiableError as exc:
        return fail("cannot certify", public_path(_one_line(exc)), EXIT_UNCERTIFIABLE)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        if as_json:
            _print_json({"error": "interrupted", "exit_code": 130})
        return 130
    except UsageExit as exc:                   # argparse: usage and message already on stderr
        if as_json:
            _print_json({"error": public_path(_one_line_text(exc.message)), "exit_code": exc.code})
        raise
    except OSError as exc:
        if debug:
            raise
        return fail("error", public_path(os_error_line(exc)), EXIT_BAD_INPUT)
    except (MemoryError, RecursionError, OverflowError) as exc:
        if debug:
            raise
        return fail("error", f"input too large to handle ({type(exc).__name__}); see the limits in the README",
                    EXIT_BAD_INPUT)
    except Exception as exc:                       # noqa: BLE001 - last line of defence
        if debug:
            raise
        from certify.core.extras import missing_line
        line = missing_line(exc)               # a module of an optional extra is not installed
        if line is not None:
            return fail("error", line, EXIT_BAD_INPUT)
        return fail("internal error", f"{type(exc).__name__}: {public_path(_one_line(exc))} "
                    f"(nothing was certified; CERTIFY_DEBUG=1 shows the traceback)", EXIT_NOT_PROVED)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or an abbreviation argparse accepts, ``--js``...) is among the
    options, before any ``--``."""
    for a in argv:
        if a == "--":
            return False
        if len(a) >= 4 and "--json".startswith(a):
            return True
    return False


def _print_json(obj: dict) -> None:
    import json
    try:
        print(json.dumps(obj), flush=True)
    except (OSError, ValueError):              # stdout gone: the stderr line stands
        pass


def _one_line_text(text: str) -> str:
    return " ".join(str(text).split())


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return " ".join(text.split()) if text else type(exc).__name__
