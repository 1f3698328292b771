"""Where a model or kernel path points, resolved in one documented order, and a
cheap check of a ``models/`` checkpoint before torch is imported.

A source argument (``rank``, ``extract``, ``checkpoint``) is resolved: (1) the
path as given (a file, or a model folder: ``config.json`` with
``model.safetensors``, its shards or ``pytorch_model.bin``); (2) a folder
holding one config (``X.json``) and safetensors weights of the same name is
that checkpoint; (3) the path with a known suffix added (``.json``,
``.safetensors``, then kernel/matrix files ``.npz``, ``.npy``, ``.csv``). So
``models/checkpoints/paper51-lookup-r32-s0`` works with or without its suffix.
What the resolved path holds is decided by :func:`certify.sources.load.kind_of`.
"""

from __future__ import annotations

import os
from pathlib import Path

from certify.checkers.common import path_problem
from certify.core.errors import InputError

#: suffixes tried, in order, when a source path does not exist as given
KNOWN_SUFFIXES = (".json", ".safetensors", ".npz", ".npy", ".csv")


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
    why = path_problem(p)                       # something is there, but not a file (a loop, a dangling link)
    if why is not None:
        raise InputError(f"{source}: {why}")
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
        if kind == "checkpoint":
            return      # a JSON matrix (a list of rows): the kernel readers decide
        raise InputError(f"checkpoint config {cfg} is not a JSON object")
    fmt = obj.get("format")
    if kind == "checkpoint" and isinstance(fmt, str) and fmt.startswith("certify-attention/kernel"):
        return          # a kernel file, read without torch
    if fmt != CHECKPOINT_FORMATS[kind]:
        if kind == "checkpoint" and not str(fmt).startswith("certify-attention/"):
            return      # not one of ours: a matrix or a third-party config, read by their readers
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
