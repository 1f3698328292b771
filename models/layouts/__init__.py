"""Auto-detected layouts: a checkpoint's tensors and config -> every head of every layer.

:func:`detect` decides the layout from the config first (``library``,
``model_type``, ``class``) and the keys second; it never guesses: keys that
fit two layouts with nothing to decide between them are an ``InputError``
that lists the candidates and the config key that decides. Before that,
wrapper entries are set aside (``proj_updater.instance.`` -- performer's
second view of its own layers --, EMA copies, optimizer state: never
layers), and half-precision weights are converted exactly to float32.

The result is a :class:`~models.layouts.base.Detected`: layers, each head a
kernel head or a :class:`~models.layouts.base.Refusal` with its reason.
Softmax attention is recognised (:mod:`.softmax`) so that it is refused for
that reason. Unrecognised keys are an ``InputError`` that says how to write a
spec. Reading the files is :func:`certify.sources.thirdparty.read_checkpoint`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from certify.core.errors import InputError
from models.layouts import fla, lucidrains, others, softmax
from models.layouts.base import SPEC_HINT, Detected, FeatureHead, LayerPlan, Refusal, compute_dtype

#: library -> detectors tried on the keys
DETECTORS: Mapping[str, Callable[[Mapping[str, torch.Tensor], Mapping[str, Any]], Detected | None]] = {
    "performer-pytorch": lucidrains.detect,
    "linear-attention-transformer": lucidrains.detect,
    "pytorch-fast-transformers": others.detect_fast_transformers,
    "zoology": others.detect_zoology,
    "fla": fla.detect_layer,
    "softmax": softmax.detect,
}
LIBRARIES = ("performer-pytorch", "linear-attention-transformer", "pytorch-fast-transformers", "fla", "zoology")
#: key components that mark a wrapper's copy of the model, never a layer
WRAPPERS = ("proj_updater", "ema", "ema_model", "model_ema", "shadow", "shadow_params", "optimizer",
            "optimizer_states", "optim", "averaged_model", "swa_model")

__all__ = ["Detected", "FeatureHead", "LayerPlan", "Refusal", "detect", "LIBRARIES", "drop_wrappers", "prepare"]


def drop_wrappers(sd: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``(tensors, set-aside keys)``: keys with a wrapper component (:data:`WRAPPERS`)
    are set aside, unless nothing else is left."""
    keep = {k: v for k, v in sd.items() if not set(k.split(".")) & set(WRAPPERS)}
    if not keep:
        return dict(sd), []
    return keep, sorted(set(sd) - set(keep))


def prepare(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors detection reads: wrappers set aside, half precision as float32."""
    return compute_dtype(drop_wrappers(sd)[0])[0]


def detect(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any], *, name: str = "checkpoint") -> Detected:
    """The layout of a state dict (see the module docstring)."""
    if not isinstance(config, Mapping):
        raise InputError(f"{name}: the config must be a JSON object")
    sd, dropped = drop_wrappers(sd)
    sd, stored = compute_dtype(sd)
    det = _detect(sd, config, name)
    det.stored_dtype = stored
    if stored:
        det.notes.append(f"weights stored as {stored}, converted exactly to float32 (every {stored} value is "
                         f"a float32); the features are computed in float32")
    if dropped:
        roots = sorted({k.split(".")[0] if k.split(".")[0] in WRAPPERS else
                        next(c for c in k.split(".") if c in WRAPPERS) for k in dropped})
        det.notes.append(f"{len(dropped)} tensors of wrappers ({', '.join(roots)}) set aside: a wrapper's copy "
                         f"of the layers is not a layer")
    return det


def _detect(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any], name: str) -> Detected:
    lib = config.get("library")
    mt = config.get("model_type")
    if lib is not None and lib not in LIBRARIES:
        raise InputError(f"{name}: config library {lib!r} is not one of {LIBRARIES}")
    if lib in (None, "fla") and (mt is not None or fla.model_root(sd) is not None):
        found = fla.detect_model(sd, config)
        if found is not None:
            return found
    if lib is None and mt in softmax.SOFTMAX_MODEL_TYPES:
        return softmax.detect(sd, config)
    if mt is not None and lib is None and mt not in fla.REFUSED_MODELS and mt != "linear_attn":
        config = {k: v for k, v in config.items() if k != "model_type"}
    order = [(k, f) for k, f in DETECTORS.items() if lib is None or k == lib]
    found: list[tuple[str, Detected]] = []
    seen = set()
    for key, fn in order:
        if fn in seen:
            continue
        seen.add(fn)
        got = fn(sd, config if key != "softmax" else {**config, **({"model_type": mt} if mt else {})})
        if got is not None and got.layers:
            found.append((key, got))
    if len(found) > 1:
        what = "; ".join(f"{d.library} ({d.container}{', prefix ' + repr(d.prefix) if d.prefix else ''})"
                         for _, d in found)
        raise InputError(f"{name}: the keys fit more than one library: {what}; config.json \"library\" "
                         f"decides, or pass one model per checkpoint")
    if found:
        return found[0][1]
    shown = sorted(sd)[:6]
    raise InputError(f"cannot tell the layout of {name}: keys {shown}{' ...' if len(sd) > 6 else ''} match none "
                     f"of {', '.join(LIBRARIES)}; {SPEC_HINT}")
