"""The command line: ``certify <command>`` (the script), ``python -m certify
<command>`` or ``python -m certify.<command>``.

One module per command, each parsing its arguments and calling the library
(:mod:`certify.api` and the capability packages); no library module parses
arguments or exits. :func:`main` dispatches; ``certify --help`` lists the
commands.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Sequence

from certify.core.errors import EXIT_BAD_INPUT, run_command

#: command -> (module, one-line description)
COMMANDS = {
    "families": ("certify.cli.families", "build, show and save the paper's finite input families"),
    "bounds": ("certify.cli.bounds", "the paper's closed-form bounds in exact arithmetic"),
    "extract": ("certify.cli.extract", "extract a kernel alpha(x, z) from a model, checkpoint or matrix"),
    "rank": ("certify.cli.rank", "exact (two-sided) and certified approximate rank of a kernel"),
    "feasibility": ("certify.cli.feasibility", "is there a rank-r head that solves a finite family?"),
    "transcript": ("certify.cli.transcript", "Theorem 9 transcript bound against quantized sketches"),
    "checkpoint": ("certify.cli.checkpoint", "end-to-end certification of a trained checkpoint"),
    "verify": ("certify.cli.verify", "re-check a certificate with exact arithmetic only"),
    "report": ("certify.cli.report", "certificates -> Markdown, LaTeX table, figures"),
    "demo": ("certify.cli.demo", "the main job on the built-in defaults (make demo)"),
    "serve": ("certify.cli.serve", "the certification service: job queue, certificate store, web pages"),
}


def _usage() -> str:
    lines = ["usage: certify <command> [options]   (or python -m certify <command>)", "",
             "commands:"]
    lines += [f"  {name:<12} {desc}" for name, (_, desc) in COMMANDS.items()]
    lines += ["", "Run 'certify <command> --help' for a command's options.",
              "Exit codes: 0 every claim proved; 1 some claim refuted or unknown;",
              "2 usage error or bad input; 3 input outside what can be certified.",
              "certify verify: 0 every verdict re-derived (proved, refuted or unknown), no",
              "assumption left; 1 some claim fails its check; 2 not a certificate;",
              "4 every claim holds, but only under the named assumptions it prints."]
    return "\n".join(lines)


#: the exit codes that report a verdict rather than a failure to run (``CERTIFY_VERDICT_EXIT``)
VERDICT_CODES = {1: "some claim refuted or unknown (verify: some claim fails its check)",
                 4: "every claim holds under the named assumptions printed"}
VERDICT_EXIT_ENV = "CERTIFY_VERDICT_EXIT"


def verdict_exit(name: str, code: int) -> int:
    """``code``, or 0 for a verdict's exit code when ``CERTIFY_VERDICT_EXIT=0``
    (batch systems mark a job failed by its exit code). A scheduler's job whose
    certificate holds a refuted claim (exit 1), or whose verify holds only under
    named assumptions (exit 4), did its work and printed the verdict: with
    ``CERTIFY_VERDICT_EXIT=0`` it exits 0 after one line on stderr naming the exit
    code it stands for; bad input (2), input outside what can be certified (3)
    and internal errors still fail it. ``--json`` output is unchanged."""
    if code not in VERDICT_CODES or os.environ.get(VERDICT_EXIT_ENV) != "0":
        return code
    print(f"certify {name}: verdict: exit {code} ({VERDICT_CODES[code]}); exit status 0 "
          f"({VERDICT_EXIT_ENV}=0)", file=sys.stderr)
    return 0


def run(name: str, argv: Sequence[str] | None = None) -> int:
    """Run command ``name`` with ``argv`` (default: ``sys.argv[1:]``) under the
    exit-code convention (:func:`certify.core.errors.run_command`)."""
    def main(args):                  # the import inside: a missing extra is one line, not a traceback
        return importlib.import_module(COMMANDS[name][0]).main(args)
    return verdict_exit(name, run_command(f"certify {name}", main, argv))


def entry() -> None:
    """The console script ``certify`` and ``python -m certify``: :func:`main`, then
    :func:`exit_now` with its code."""
    exit_now(main())


def exit_now(code: int) -> None:
    """End the process with ``code`` once the output is flushed and the exit handlers
    (:mod:`atexit`: logging, temporary folders, finalizers, multiprocessing's
    children) have run, without the interpreter's teardown, which frees every module
    and object one by one: about 13 ms of CPU after ``certify rank`` on a 512 x 512
    matrix, a sixth of the numpy script's whole run. The usual exit instead for
    ``certify serve`` (long-lived, with its own shutdown), with another thread alive
    (a progress monitor, Ray), with a hook registered for the interpreter's thread
    shutdown (``concurrent.futures`` joins its workers there; where the list cannot
    be read, assumed), or when the output cannot be flushed."""
    import atexit
    threads = sys.modules.get("threading")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    if sys.argv[1:2] == ["serve"] or threads is not None and (
            threads.active_count() > 1 or getattr(threads, "_threading_atexits", [None])):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else EXIT_BAD_INPUT
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"certify: error: unknown command {name!r}; see 'certify --help'", file=sys.stderr)
        return EXIT_BAD_INPUT
    return run(name, rest)
