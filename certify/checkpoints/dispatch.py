"""``certify checkpoint PATH``: which certification a path gets, decided once.

The path is resolved (:func:`certify.sources.paths.resolve_source`) and
classified (:func:`certify.sources.load.kind_of`) as every command does: a
``models/`` checkpoint goes to :func:`certify.checkpoints.run.certify_checkpoint`
(one head with a scalar readout: ranks, exact correctness, the Lemma 3
audit); any other weights file or model folder, or a state dict with an
adapter spec, to :func:`certify.checkpoints.heads.certify_heads` (every head of
every layer). A kernel or matrix file is not a model: bad input, with the
command that reads it.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from certify.core.errors import InputError


def resolve_checkpoint(path: str, spec: str | None) -> tuple[str, str]:
    """``(resolved path, kind)``: kind ``models`` or ``weights`` (a hub id or cache
    folder is resolved by the caller, :func:`certify.sources.hub.resolve`)."""
    from certify.sources.load import kind_of
    from certify.sources.paths import precheck_checkpoint, resolve_source
    if spec is not None:
        return path, "weights"
    ckpt = str(resolve_source(path))
    kind = kind_of(Path(ckpt))
    if kind == "kernel":
        raise InputError(f"{path} is a kernel or matrix file, not a model's weights; `certify rank {path}` "
                         f"reads it")
    if kind == "models":
        precheck_checkpoint(ckpt)
    return ckpt, kind


def certify_path(path: str, *, spec: str | None = None, families: Sequence[str] = (),
                 eps: Fraction = Fraction(1, 1000), seed: int = 0, layer: int | None = None,
                 head: int | None = None, command: Sequence[str] = (),
                 assume: Sequence[str] = (), progress: bool = False,
                 sequences: str | None = None, text: tuple[str, int] | None = None,
                 engine: Any = None) -> tuple[str, Any]:
    """``(kind, result)``: a :class:`~certify.checkpoints.run.CheckpointResult` for a
    ``models/`` checkpoint, a :class:`~certify.checkpoints.heads.HeadsResult` otherwise.
    A hub id (``org/name[@revision]``) or a Hugging Face cache folder is read from
    the local cache and its files named ``hf://org/name@commit/...``
    (:mod:`certify.sources.hub`). ``engine``: where a third-party model's heads compute
    their claims (:func:`certify.checkpoints.heads.certify_heads`; a ``models/`` checkpoint
    is one head, computed here)."""
    from certify.sources.hub import resolve
    hub = resolve(path)
    ckpt, kind = resolve_checkpoint(str(hub.path) if hub is not None else path, spec)
    if kind == "models":
        if layer is not None or head is not None or assume or sequences is not None or text is not None:
            raise InputError("--layer/--head/--assume-default/--sequences/--text concern a third-party model; a "
                             "models/ checkpoint is one head of this project")
        from certify.checkpoints.run import certify_checkpoint
        res: Any = certify_checkpoint(ckpt, families=families, eps=eps, seed=seed, command=command)
    else:
        from certify.checkpoints.heads import certify_heads
        res = certify_heads(ckpt, spec=spec, families=families, eps=eps, seed=seed, layer=layer, head=head,
                            command=command, assume=assume, progress=progress, sequences=sequences,
                            text=text, engine=engine)
        # the model, its canonical forward and the library's copies are garbage now (in reference
        # cycles): free them before the certificate is written and checked (1.5 GB of a 24-layer
        # model at hidden 1024)
        import gc

        from certify.core.memory import trim
        gc.collect()
        trim()
    if hub is not None:
        res.certificate = hub.rename_certificate(res.certificate)
        if hasattr(res, "detected"):
            res.detected = hub.rename(res.detected)
    return kind, res
