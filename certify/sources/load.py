"""The one loader: any source path -> a :class:`certify.core.kernel.Kernel`.

Every command that takes a model or kernel path (``rank``, ``extract``,
``checkpoint``, the service's jobs through :mod:`certify.api`, and the replay
of ``verify --replay-extraction``) resolves it with
:func:`certify.sources.paths.resolve_source` and reads it here, so one path
ends in the same kernel with the same provenance whichever command reads it.
What a path is (:func:`kind_of`):

* ``models`` -- a ``models/`` checkpoint (``X.json`` with the checkpoint
  format, and its weights): :mod:`certify.sources.checkpoint`;
* ``kernel`` -- a kernel or matrix file (``.npy``, ``.npz``, ``.csv``,
  ``.json`` matrices, a ``.safetensors`` holding ``matrix`` or
  ``phi_q``/``phi_k``): :mod:`certify.sources.files`;
* ``weights`` -- any other weights file or model folder (a third-party
  checkpoint, layout detected): :mod:`certify.sources.thirdparty`;
* with ``--spec``: one head of a state dict described by an adapter spec.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from certify.core.errors import InputError
from certify.core.files import sha256_file
from certify.core.kernel import Kernel
from certify.sources.files import read_kernel_file

#: tensor names of a kernel or matrix file in safetensors form
KERNEL_TENSORS = {"matrix", "phi_q", "phi_k", "tokens", "kernel_meta"}


def load_kernel(source: str | os.PathLike, *, tokens: str | None = None, spec: str | None = None,
                layer: int | None = None, head: int | None = None, compare: bool = True,
                seed: int = 0, assume: Sequence[str] = ()) -> Kernel:
    """Read any supported source (see the module docstring) as a :class:`Kernel`.
    ``layer``/``head`` pick a head of a third-party model (default: the first
    kernel head of the first layer); ``compare`` runs the library comparison;
    ``assume``: kernel arguments of a third-party model whose library default the
    user accepts (``--assume-default``)."""
    path = Path(source)
    if spec is not None:
        if assume:
            raise InputError("--assume-default names a constructor argument of a detected layout; an adapter "
                             "spec states its layout in full")
        if layer is not None or head is not None:
            raise InputError("--layer/--head pick a head of a detected layout; with --spec the spec's "
                             "\"head\" does")
        from certify.sources.checkpoint import load_adapter_kernel
        return load_adapter_kernel(path, spec, tokens=tokens)
    if not path.exists():
        raise InputError(f"no such file: {source}")
    kind = kind_of(path)
    if kind == "weights":
        from certify.sources.thirdparty import load_head_kernel
        return load_head_kernel(path, layer=layer, head=head, tokens=tokens, compare=compare, seed=seed,
                                assume=assume)
    if assume:
        raise InputError(f"--assume-default names a constructor argument of a third-party model; {source} "
                         "is not one")
    if layer is not None or head is not None:
        raise InputError(f"--layer/--head pick a head of a third-party model; {source} is "
                         + ("a models/ checkpoint (one head)" if kind == "models" else "a kernel or matrix file"))
    if kind == "models":
        from certify.sources.checkpoint import load_models_checkpoint
        return load_models_checkpoint(path, tokens)
    return read_kernel_file(path, tokens)


def kind_of(path: Path) -> str:
    """``models``, ``kernel`` or ``weights`` (see the module docstring)."""
    if is_models_checkpoint(path):
        return "models"
    if path.suffix == ".npy" and not path.is_dir():
        return "kernel"                  # (the weights helpers below are not loaded for a matrix)
    from certify.sources.weights import TORCH_SUFFIXES, safetensors_header
    if path.is_dir() or path.suffix in TORCH_SUFFIXES or path.name.endswith((".index.json", "config.json")):
        return "weights"                 # a model's config.json stands for the weights beside it
    if path.suffix == ".safetensors":
        try:
            meta, _ = safetensors_header(path)
        except InputError:
            return "kernel"              # the kernel reader says what is wrong with it
        names = set(meta) - {"__metadata__"}
        return "kernel" if names <= KERNEL_TENSORS or len(names) == 1 else "weights"
    return "kernel"


def is_models_checkpoint(path: Path) -> bool:
    """A ``models/`` checkpoint: ``X.json`` with the checkpoint format, or weights
    with such a sibling config (or a stem of those)."""
    if path.suffix in (".json", ".safetensors", ".pt", ".pth"):
        cfg = path.with_suffix(".json")
    elif path.suffix == "" and not path.is_dir():
        cfg = path.with_name(path.name + ".json")
    else:
        return False
    if not cfg.is_file():
        return False
    try:
        if cfg.stat().st_size > 16 << 20:
            return False
        obj = json.loads(cfg.read_text())
    except (ValueError, OSError, RecursionError):
        return False
    fmt = obj.get("format") if isinstance(obj, dict) else None
    if not isinstance(fmt, str) or not fmt.startswith("certify-attention/"):
        return False
    from models.checkpoint import FORMAT  # imports torch: only for a real candidate
    return fmt == FORMAT


def annotate(cert, kernel: Kernel):
    """A rank certificate of ``kernel`` with what its extraction recorded: the
    files read (inputs, by sha256) and, per claim, the path to the layer and the
    library comparison (``info``)."""
    from dataclasses import replace

    info = extraction_info(kernel)
    cert.inputs.update(kernel_inputs(kernel))
    if info:
        cert.claims = [replace(c, info={**dict(c.info), **info}) for c in cert.claims]
    return cert


def extraction_info(kernel: Kernel) -> dict[str, Any]:
    """What a claim's ``info`` records about how its kernel was extracted: the
    model's path to the layer and the comparison with the library's own
    computation (empty for kernels that are not third-party heads)."""
    d = kernel.provenance.details
    out: dict[str, Any] = {}
    for key in ("input_path", "library_check", "extraction", "tokens_as"):
        if d.get(key):
            out[key] = d[key]
    return out


def kernel_inputs(kernel: Kernel) -> dict[str, str]:
    """Every file a third-party kernel was read from (weights, shards, config), by sha256."""
    d = kernel.provenance.details
    files = list((d.get("weights") or {}).get("files") or [])
    for key in ("config", "spec"):
        if d.get(key):
            files.append(d[key])
    out = {}
    for f in files:
        if Path(f).is_file():
            out[str(f)] = sha256_file(f)
    return out
