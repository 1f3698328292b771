"""What every command front shares: one program name (``certify <command>``
whether started as ``certify <command>``, ``python -m certify <command>`` or
``python -m certify.<module>``), the exit-code epilog, the help texts of
``--out``, ``--no-progress`` and the parallel engine's options."""

from __future__ import annotations

import argparse

from certify.core.errors import InputError

OUT_DIR_HELP = ("output folder: created (with missing parents) when new; an existing one is "
                "replaced only when it is empty or holds an earlier output of this command "
                "(recognised by its manifest), otherwise refused with exit 2")
OUT_FILE_HELP = ("output file, written atomically; missing folders are created; an existing "
                 "file is replaced only when certify wrote it, otherwise refused with exit 2")
EXIT_EPILOG = ("exit codes: 0 every claim proved; 1 a claim refuted or unknown; 2 bad input; "
               "3 input outside what can be certified. Limits, paths and output folders: README, Commands.")


def prog(command: str) -> str:
    """The one program name of ``command`` in usage lines and messages."""
    return f"certify {command}"


def parser(command: str, description: str, **kw) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` named ``certify <command>`` with the exit-code epilog."""
    kw.setdefault("epilog", EXIT_EPILOG)
    return argparse.ArgumentParser(prog=prog(command), description=description, **kw)


def add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (bars are shown on stderr only when it is a terminal)")


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """``--workers N`` and ``--ray-address ADDR`` (the parallel engine)."""
    p.add_argument("--workers", type=int, default=1,
                   help="parallel tasks: 1 runs in process (default); N > 1 starts a local Ray "
                        "with N workers for the run")
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
    from certify.core.engine import Engine

    if args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    return Engine(args.workers, args.ray_address, progress=progress)
