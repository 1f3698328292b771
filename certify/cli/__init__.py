"""The command line: ``certify <command>`` (the script), ``python -m certify
<command>`` or ``python -m certify.<command>``.

One module per command, each parsing its arguments and calling the library
(:mod:`certify.api` and the capability packages); no library module parses
arguments or exits. :func:`main` dispatches; ``certify --help`` lists the
commands.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Sequence

from certify.core.errors import EXIT_BAD_INPUT, run_command, wants_json

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
    lines = ["usage: certify [--version] <command> [options]   (or python -m certify <command>)", "",
             "commands:"]
    lines += [f"  {name:<12} {desc}" for name, (_, desc) in COMMANDS.items()]
    lines += ["", "Run 'certify <command> --help' for a command's options. Every command takes",
              "-q/--quiet (warnings and errors only on stderr) and -v/--verbose; with --json it",
              "prints one JSON object on stdout, on failure {\"error\": ..., \"exit_code\": N}.",
              "certify --version: the versions and whether the compiled kernels are in use.",
              "Exit codes: 0 every claim proved; 1 some claim refuted or unknown;",
              "2 usage error or bad input; 3 input outside what can be certified.",
              "certify verify: 0 every verdict re-derived (proved, refuted or unknown), no",
              "assumption left; 1 some claim fails its check; 2 not a certificate;",
              "4 every claim holds, but only under the named assumptions it prints.",
              "certify report: 0 report written, every certificate holds (whatever its verdicts);",
              "1 some certificate fails its re-check; 2 bad input."]
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
    exit-code convention (:func:`certify.core.errors.run_command`), saying as much
    as ``-q``/``-v`` ask (:mod:`certify.cli.log`)."""
    import time

    from certify.cli import log

    def main(args):                  # the import inside: a missing extra is one line, not a traceback
        return importlib.import_module(COMMANDS[name][0]).main(args)
    open_standard_streams()
    log.configure(log.verbosity(sys.argv[1:] if argv is None else argv))
    t0 = time.perf_counter()
    code = verdict_exit(name, run_command(f"certify {name}", main, argv))
    log.debug(f"certify {name}: exit {code} after {time.perf_counter() - t0:.2f} s")
    return code


def entry() -> None:
    """The console script ``certify`` and ``python -m certify``: :func:`main`, then
    :func:`exit_now` with its code."""
    exit_now(main())


def open_standard_streams() -> None:
    """Give a closed standard stream (``>&-``, ``2>&-``, a parent that closed it) the
    null device: the output meant for it is dropped, and nothing else can take its
    descriptor. Without this Python sets ``sys.stdout``/``sys.stderr`` to None, a
    ``print(..., file=sys.stderr)`` then writes to stdout (``file=None`` is stdout),
    the next file opened gets descriptor 1 or 2, and a child process would write
    into it. Idempotent; a stream that is open is left alone."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            stream = open(fd, mode, closefd=False, encoding="utf-8", errors="backslashreplace")
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)


def _flush() -> bool:
    """Flush stdout and stderr; False when one cannot be written (a reader that went
    away: its descriptor then gets the null device, so that the interpreter's own
    flush at exit does not complain)."""
    ok = True
    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = getattr(sys, name)
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            ok = False
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
            except OSError:
                pass
    return ok


def exit_now(code: int) -> None:
    """End the process with ``code`` once the output is flushed, the interpreter's
    first exit step has run (:func:`threading._shutdown`: the hooks registered for
    thread shutdown, e.g. ``concurrent.futures`` joining its workers, then every
    non-daemon thread joined) and the exit handlers (:mod:`atexit`: logging,
    temporary folders, finalizers, multiprocessing's children) have run, without
    the interpreter's teardown, which frees every module and object one by one:
    about 13 ms of CPU after ``certify rank`` on a 512 x 512 matrix, a sixth of the
    numpy script's whole run, and about half a second once torch is loaded. The
    usual exit instead for ``certify serve`` (long-lived, with its own shutdown),
    with a daemon thread still alive after the shutdown step (a progress monitor,
    Ray), or when the output cannot be flushed. A closed or vanished stdout or
    stderr is no error here (:func:`open_standard_streams`)."""
    import atexit
    if not _flush() or sys.argv[1:2] == ["serve"]:
        sys.exit(code)
    threads = sys.modules.get("threading")
    if threads is not None:
        try:
            if threads.current_thread() is threads.main_thread():
                threads._shutdown()         # what the interpreter runs first at exit
        except Exception:                   # noqa: BLE001 - a hook failed: the usual exit reports it
            sys.exit(code)
        if threads.active_count() > 1:
            sys.exit(code)
    atexit._run_exitfuncs()
    try:
        _flush()
    finally:
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """``certify [--version [--json]] [-q|-v] <command> ...``: options before the
    command name apply to it (``-q``, ``-v``, ``--json``)."""
    open_standard_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    lead = []
    while argv and argv[0] in ("-q", "--quiet", "-v", "--verbose", "-vv", "--json", "--version", "-V"):
        lead.append(argv.pop(0))
    if "--version" in lead or "-V" in lead:
        from certify.cli import version
        return version.main("--json" in lead)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else EXIT_BAD_INPUT
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"certify: error: unknown command {name!r}; see 'certify --help'", file=sys.stderr)
        if "--json" in lead or wants_json(rest):
            print(json.dumps({"error": f"unknown command {name!r}", "exit_code": EXIT_BAD_INPUT}))
        return EXIT_BAD_INPUT
    return run(name, [*lead, *rest])
