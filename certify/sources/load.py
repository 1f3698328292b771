"""The one loader: any source path -> a :class:`certify.core.kernel.Kernel`.

A kernel or matrix file (:mod:`certify.sources.files`), a ``models/``
checkpoint or a third-party state dict with an adapter spec
(:mod:`certify.sources.checkpoint`). Token sets: ``cube:M``, a family (name
or file, its tokens), or the tokens stored with the kernel.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from certify.core.errors import InputError
from certify.core.kernel import Kernel
from certify.sources.files import read_kernel_file


def load_kernel(source: str | os.PathLike, *, tokens: str | None = None, spec: str | None = None) -> Kernel:
    """Read any supported source (see the module docstring) as a :class:`Kernel`."""
    path = Path(source)
    if spec is not None:
        from certify.sources.checkpoint import load_adapter_kernel
        return load_adapter_kernel(path, spec, tokens=tokens)
    if not path.exists():
        raise InputError(f"no such file: {source}")
    if is_models_checkpoint(path):
        from certify.sources.checkpoint import load_models_checkpoint
        return load_models_checkpoint(path, tokens)
    if path.is_dir():
        raise InputError(f"{source} is a directory, not a kernel file or checkpoint")
    return read_kernel_file(path, tokens)


def is_models_checkpoint(path: Path) -> bool:
    """A ``models/`` checkpoint: ``X.json`` with the checkpoint format, or weights
    with such a sibling config."""
    cfg = path if path.suffix == ".json" else path.with_suffix(".json")
    if path.suffix not in (".json", ".safetensors", ".pt", ".pth", "") or not cfg.is_file():
        return False
    try:
        if cfg.stat().st_size > 16 << 20:
            return False
        fmt = json.loads(cfg.read_text()).get("format")
    except (ValueError, AttributeError, OSError, RecursionError):
        return False
    if not isinstance(fmt, str) or not fmt.startswith("certify-attention/"):
        return False
    try:
        from models.checkpoint import FORMAT  # imports torch: only for a real candidate
    except Exception:    # torch missing: not a checkpoint we can read
        return False
    return fmt == FORMAT
