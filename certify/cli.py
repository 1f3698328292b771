"""Shared command-line helpers: one program name, one path resolution order,
progress bars that stay off the data.

* Every command's usage line and message says ``certify <command>``, whether
  it was started as ``certify <command>``, ``python -m certify <command>`` or
  ``python -m certify.<module>``.
* A model path argument (``rank``, ``extract``, ``checkpoint``) is resolved in
  one documented order: (1) the path as given; (2) a folder holding a config
  (``*.json``) and safetensors weights of the same name; (3) the path with a
  known suffix added (``.json``, ``.safetensors``, then kernel/matrix files
  ``.npz``, ``.npy``, ``.csv``). So ``models/checkpoints/paper51-lookup-r32-s0``
  works with or without its suffix.
* Progress (tqdm, with ETA) goes to stderr, only when stderr is a terminal and
  ``--no-progress`` was not given.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from certify.errors import InputError

#: suffixes tried, in order, when a source path does not exist as given
KNOWN_SUFFIXES = (".json", ".safetensors", ".npz", ".npy", ".csv")

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


def show_progress(no_progress: bool = False) -> bool:
    """Progress bars on: stderr is a terminal and ``--no-progress`` not given."""
    if no_progress or os.environ.get("CERTIFY_NO_PROGRESS"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class TimeBar:
    """A progress bar over a time budget (stderr): elapsed, the budget, an ETA, and
    a counter of steps (LPs) in the postfix. ``update``/``set_postfix`` as tqdm's."""

    def __init__(self, desc: str, seconds: float, unit: str = "LP"):
        import time
        from tqdm import tqdm

        self._time = time.perf_counter
        self._t0 = self._time()
        self.steps, self.unit = 0, unit
        self.bar = tqdm(total=max(float(seconds), 0.01), desc=desc, file=sys.stderr, leave=False,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} of at most "
                                   "{total:.0f} s, ETA {remaining}{postfix}")

    def update(self, n: int = 1) -> None:
        self.steps += n
        self.bar.n = min(self._time() - self._t0, self.bar.total)
        self.bar.refresh()

    def set_postfix(self, **kw) -> None:
        self.bar.set_postfix({self.unit + "s": self.steps, **kw})

    def close(self) -> None:
        self.bar.close()


def time_bar(desc: str, seconds: float, enabled: bool) -> TimeBar | None:
    return TimeBar(desc, seconds) if enabled else None


def resolve_source(source: str | os.PathLike) -> Path:
    """A model/kernel path in the documented order (module docstring); a missing
    path raises :class:`InputError` naming what was tried."""
    p = Path(source)
    if str(source) == "":
        raise InputError("empty path")
    if p.exists():
        if p.is_dir():
            cfgs = sorted(c for c in p.glob("*.json") if c.with_suffix(".safetensors").is_file())
            if len(cfgs) == 1:
                return cfgs[0]
            if len(cfgs) > 1:
                raise InputError(f"{source} is a folder with {len(cfgs)} checkpoints; name one "
                                 f"({', '.join(c.stem for c in cfgs[:3])}...)")
        return p
    for suf in KNOWN_SUFFIXES:
        cand = p.with_name(p.name + suf)
        if cand.is_file():
            return cand
    raise InputError(f"no such file: {source} (also tried {', '.join(KNOWN_SUFFIXES)})")


CHECKPOINT_FORMATS = {"checkpoint": "certify-attention/checkpoint/1",
                      "sketch": "certify-attention/sketch-checkpoint/1"}


def precheck_checkpoint(source: str | os.PathLike, kind: str = "checkpoint") -> None:
    """Cheap checks of a ``models/`` checkpoint before torch is imported: the
    config is a JSON object of the right format, and a safetensors file's
    header is whole. A path that is not a checkpoint candidate passes."""
    import json
    import struct

    p = Path(source)
    cfg = p if p.suffix == ".json" else (p.with_suffix(".json") if p.suffix in (".safetensors", ".pt", ".pth")
                                         else p.with_name(p.name + ".json"))
    if not cfg.is_file():
        return
    try:
        if cfg.stat().st_size > 16 << 20:
            raise InputError(f"checkpoint config {cfg} is over 16 MB")
        obj = json.loads(cfg.read_text())
    except (ValueError, RecursionError):
        raise InputError(f"checkpoint config {cfg} is not JSON") from None
    if not isinstance(obj, dict):
        raise InputError(f"checkpoint config {cfg} is not a JSON object")
    fmt = obj.get("format")
    if kind == "checkpoint" and isinstance(fmt, str) and fmt.startswith("certify-attention/kernel"):
        return          # a kernel file, read without torch
    if fmt != CHECKPOINT_FORMATS[kind]:
        weights = any(cfg.with_suffix(x).is_file() for x in (".safetensors", ".pt", ".pth"))
        if kind == "checkpoint" and not weights and not str(fmt).startswith("certify-attention/"):
            return      # a plain JSON matrix, not a checkpoint: the kernel readers decide
        raise InputError(f"{cfg} is not a {kind} config (format must be "
                         f"{CHECKPOINT_FORMATS[kind]!r}, got {str(fmt)[:60]!r})")
    w = cfg.with_suffix(".safetensors")
    if not w.is_file():
        return
    size = w.stat().st_size
    with open(w, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        ok = 0 <= n <= min(size - 8, 100 << 20)
        if ok:
            try:
                meta = json.loads(f.read(n))
                ends = [v["data_offsets"][1] for k, v in meta.items() if k != "__metadata__"]
                ok = isinstance(meta, dict) and max(ends, default=0) <= size - 8 - n
            except (ValueError, KeyError, TypeError, IndexError, AttributeError):
                ok = False
    if not ok:
        raise InputError(f"{w} is not a readable safetensors file (truncated or corrupt header)")
