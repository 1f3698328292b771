"""Auto-detected layouts: a checkpoint's keys (and config) -> every head of every layer.

:func:`read_checkpoint` reads a weights file (safetensors, or torch with
``weights_only=True``) or a Hugging Face style folder (``config.json`` +
``model.safetensors``); a ``config.json`` next to a weights file holds the
layer's constructor arguments. :func:`detect` asks each library's detector in
turn (an explicit ``"library"`` in the config first) and returns a
:class:`~models.layouts.base.Detected`: layers, each head a kernel head or a
:class:`~models.layouts.base.Refusal` with its reason. Unrecognised keys are an
``InputError`` that says how to write a spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from certify.core.errors import InputError
from models.layouts import fla, lucidrains, others
from models.layouts.base import SPEC_HINT, Detected, FeatureHead, LayerPlan, Refusal

#: library -> detector, in the order they are tried
DETECTORS: Mapping[str, Callable[[Mapping[str, torch.Tensor], Mapping[str, Any]], Detected | None]] = {
    "fla-model": fla.detect_model,
    "performer-pytorch": lucidrains.detect,
    "linear-attention-transformer": lucidrains.detect,
    "pytorch-fast-transformers": others.detect_fast_transformers,
    "zoology": others.detect_zoology,
    "fla": fla.detect_layer,
}
LIBRARIES = ("performer-pytorch", "linear-attention-transformer", "pytorch-fast-transformers", "fla", "zoology")

__all__ = ["Detected", "FeatureHead", "LayerPlan", "Refusal", "read_checkpoint", "detect", "LIBRARIES"]


def read_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, Path]]:
    """``(state dict, config, files read)`` of a weights file or a model folder."""
    from models.adapters import read_state_dict
    path = Path(path)
    files: dict[str, Path] = {}
    if path.is_dir():
        weights = next((path / n for n in ("model.safetensors", "pytorch_model.bin", "model.pt")
                        if (path / n).is_file()), None)
        if weights is None:
            if (path / "model.safetensors.index.json").is_file():
                raise InputError(f"{path}: sharded checkpoints are not read; merge the shards into "
                                 f"model.safetensors")
            raise InputError(f"{path} is a folder without model.safetensors (a Hugging Face style folder "
                             f"holds config.json and model.safetensors)")
        cfg_path = path / "config.json"
    else:
        if not path.is_file():
            raise InputError(f"no such checkpoint: {path}")
        weights = path
        cfg_path = next((c for c in (path.with_name(path.stem + ".config.json"), path.with_name("config.json"))
                         if c.is_file()), None)
    sd = read_state_dict(weights)
    files["weights"] = weights
    config: dict[str, Any] = {}
    if cfg_path is not None and cfg_path.is_file():
        try:
            config = json.loads(cfg_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{cfg_path} is not JSON ({exc})") from None
        if not isinstance(config, dict):
            raise InputError(f"{cfg_path} must hold a JSON object")
        files["config"] = cfg_path
    return sd, config, files




def detect(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any], *, name: str = "checkpoint") -> Detected:
    """The layout of a state dict; ``InputError`` (with a spec hint) when no library matches."""
    lib = config.get("library")
    if lib is not None and lib not in LIBRARIES:
        raise InputError(f"{name}: config library {lib!r} is not one of {LIBRARIES}")
    order = list(DETECTORS.items())
    if lib is not None:
        order = [(k, f) for k, f in order if k.startswith(lib)]
    for _, fn in order:
        found = fn(sd, config)
        if found is not None:
            if not found.layers:
                break
            return found
    shown = sorted(sd)[:6]
    raise InputError(f"cannot tell the layout of {name}: keys {shown}{' ...' if len(sd) > 6 else ''} match none "
                     f"of {', '.join(LIBRARIES)}; {SPEC_HINT}")
