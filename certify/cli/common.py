"""What every command front shares: one program name (``certify <command>``
whether started as ``certify <command>``, ``python -m certify <command>`` or
``python -m certify.<module>``), the exit-code epilog, the help texts of
``--out``, ``--no-progress`` and the parallel engine's options."""

from __future__ import annotations

import argparse
import sys

from certify.cli import log
from certify.core.errors import InputError, UsageExit

OUT_DIR_HELP = ("output folder: created (with missing parents) when new; an existing one is "
                "replaced only when it is empty or holds an earlier output of this command "
                "(recognised by its manifest), otherwise refused with exit 2")
OUT_FILE_HELP = ("output file, written atomically; missing folders are created; an existing "
                 "file is replaced only when certify wrote it, otherwise refused with exit 2")
SOURCE_HELP = ("a kernel or matrix file (.npy, .npz, .csv, .json, .safetensors), a models/ checkpoint, or a "
               "third-party checkpoint: a weights file (.safetensors, .pt, .bin; a training checkpoint's "
               "model/state_dict/module/ema is read) or a model folder (config.json with model.safetensors, "
               "its shards or pytorch_model.bin), layout detected; resolved as given, then a folder with a "
               "config and safetensors, then with a known suffix (.json, .safetensors, .npz, .npy, .csv)")
TOKENS_HELP = ("token set: cube:M ({0,1}^M), or vocab (a model's embedding rows, the default when it has "
               "an embedding)")
EXIT_EPILOG = ("exit codes: 0 every claim proved; 1 a claim refuted or unknown; 2 bad input; "
               "3 input outside what can be certified. Limits, paths and output folders: README, Commands.")


def prog(command: str) -> str:
    """The one program name of ``command`` in usage lines and messages."""
    return f"certify {command}"


class Parser(argparse.ArgumentParser):
    """argparse's parser with the options every command takes (``-q/--quiet``,
    ``-v/--verbose``: :mod:`certify.cli.log`), whose usage error carries its
    message (:class:`certify.core.errors.UsageExit`, for ``--json``). Its
    sub-commands' parsers are of the same class."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        g = self.add_mutually_exclusive_group()
        g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="say nothing on stderr but warnings and the one-line error")
        g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="also say what was resolved and how long it took")

    def error(self, message: str):
        self.print_usage(sys.stderr)
        line = f"{self.prog}: error: {message}"
        print(line, file=sys.stderr)
        raise UsageExit(2, message)


def parser(command: str, description: str, **kw) -> argparse.ArgumentParser:
    """A :class:`Parser` named ``certify <command>`` with the exit-code epilog."""
    kw.setdefault("epilog", EXIT_EPILOG)
    return Parser(prog=prog(command), description=description, **kw)


def add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (bars are shown on stderr only when it is a terminal)")


def add_head_arguments(p: argparse.ArgumentParser) -> None:
    """``--layer L --head H``: one head of a third-party model."""
    p.add_argument("--layer", type=int, help="third-party model: the layer (default: the first, whose inputs "
                   "are the tokens)")
    p.add_argument("--head", type=int, help="third-party model: the head (default: the layer's first kernel "
                   "head)")
    add_assume_default(p)


def add_assume_default(p: argparse.ArgumentParser) -> None:
    """``--assume-default NAME`` (repeatable): accept a library default."""
    p.add_argument("--assume-default", action="append", default=[], metavar="NAME",
                   help="third-party model: accept the library's default for constructor argument NAME, "
                   "which config.json does not state and the weights cannot tell (without it such a model "
                   "is refused, exit 3); the certificate names it as a stated argument; repeatable")
    p.add_argument("--assume-library-defaults", dest="assume_default", action="append_const", const="*",
                   help="third-party model: accept the library's default for every such argument at once "
                   "(the same as one --assume-default per argument; each is named in the certificate)")


def say_extraction(kernel) -> None:
    """One stderr line on which head a third-party kernel is and how it compares
    with its library's own computation."""
    d = kernel.provenance.details
    lay = d.get("layout")
    if not isinstance(lay, dict):
        return
    line = (f"{lay.get('library')} ({lay.get('layout')}) layer {d.get('layer')} head {d.get('head')} on "
            f"{kernel.token_set}")
    chk = d.get("library_check") or {}
    if chk.get("status") == "not run":
        line += f"; library check not run: {chk.get('reason')}"
    elif chk:
        line += (f"; {chk['status']} with {chk.get('library')} {chk.get('version')}'s own computation "
                 f"(error {chk.get('max_error', 0):.1e}, tolerance {chk.get('tolerance')})")
        if chk.get("independent") is False:
            line += " -- same assumption, not an independent check"
    if lay.get("defaults_used"):
        line += "; library defaults: " + ", ".join(f"{k} = {v}" for k, v in lay["defaults_used"].items())
    if lay.get("stated"):
        line += "; stated kernel arguments: " + ", ".join(f"{k} = {v['value']} ({v['from']})"
                                                          for k, v in lay["stated"].items())
    log.info(line)
    for note in lay.get("notes", []):
        log.info(f"  {note}")


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """``--workers N`` and ``--ray-address ADDR`` (the parallel engine)."""
    p.add_argument("--workers", type=int, default=1,
                   help="parallel tasks: 1 runs in process (default); N > 1 (at most 4 per core "
                        "of this machine) runs them on N processes forked from this one, or on a "
                        "local Ray, when their predicted CPU seconds outweigh the start-up, else "
                        "in process; one line on stderr says which, with the predictions")
    p.add_argument("--ray-address", default=None, type=_ray_address, metavar="ADDR",
                   help="join an existing Ray cluster: HOST:PORT (the head's GCS, e.g. head:6379) "
                        "or ray://HOST:PORT (the Ray client server, e.g. ray://head:10001). "
                        "Checked before any work: an address where no Ray answers within "
                        "CERTIFY_RAY_CONNECT_SECONDS (default 10) ends with exit 2")


def _ray_address(text: str) -> str:
    """argparse type of ``--ray-address``: a Ray service must answer there
    (:func:`certify.core.ray_address.check`, bounded time)."""
    from certify.core import ray_address

    try:
        ray_address.check(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--ray-address ")) from None
    return text


def engine_from_args(args, *, progress: bool = True):
    """The :class:`certify.core.engine.Engine` that ``--workers``/``--ray-address`` ask for."""
    from certify.core.engine import WORKERS_PER_CORE, Engine, cores, max_local_workers

    if args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    if args.workers > max_local_workers() and not args.ray_address:
        raise InputError(f"--workers {args.workers}: at most {max_local_workers()} here "
                         f"({WORKERS_PER_CORE} per core, {cores()} cores: each worker is a process, "
                         f"more only wait); a cluster is joined with --ray-address")
    return Engine(args.workers, args.ray_address, progress=progress)
