"""Checkpoints: weights in safetensors plus a JSON config; nothing is ever unpickled.

A checkpoint ``X`` is the pair ``X.safetensors`` + ``X.json``. The config
names the architecture and everything needed to rebuild the module::

    {"format": "certify-attention/checkpoint/1", "architecture": "lookup_head",
     "feature_map": "lookup_softplus", "m": 24, "num_tokens": 41, "rank": 8,
     "dv": 41, "dtype": "float32", "seed": 0,
     "family": {"name": "paper-5.1", "sha256": "..."}, "training": {...}}

Unknown keys are rejected. :func:`build_model` is strict: a missing tensor, an
unexpected tensor or a wrong shape or dtype is an ``InputError`` with one line.
Weights may also come as ``X.pt`` / ``X.pth`` (a plain dict of tensors). Files
are read by the one weight reader, :func:`certify.sources.checkpoint.load_checkpoint`
(safetensors, or ``torch.load(weights_only=True)``; a pickle holding code is
refused); this module builds, validates and saves.

Command: ``python -m models.checkpoint show CKPT [--json]`` (:mod:`certify.cli.model_checkpoint`) prints the config
and the tensor shapes (exit 2 with one line on a bad checkpoint).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import torch

from certify.core.errors import InputError
from certify.core.files import atomic_write_bytes, atomic_write_text
from models.feature_maps import MapKind, spec
from models.heads import DenseSoftmaxHead, KernelHead, LookupHead, PositionalKernelHead

#: the heads a checkpoint holds
Head = KernelHead | LookupHead | DenseSoftmaxHead | PositionalKernelHead

FORMAT = "certify-attention/checkpoint/1"
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth")

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_COMMON = {"format", "architecture", "dtype", "seed", "family", "training", "metrics", "notes"}
#: architecture -> (required keys, optional keys) besides the common ones
_SCHEMA: dict[str, tuple[set[str], set[str]]] = {
    "kernel_head": ({"feature_map", "m", "rank", "dv"}, {"proj_dim"}),
    "lookup_head": ({"feature_map", "m", "num_tokens", "rank", "dv"}, set()),
    "softmax_head": ({"m", "dk", "dv"}, {"feature_map", "rank"}),
    "positional_kernel_head": ({"feature_map", "m", "rank", "dv", "positions"}, {"proj_dim"}),
}


# ---------------------------------------------------------------- config

def _int(cfg: Mapping[str, Any], key: str, lo: int = 1) -> int:
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InputError(f"checkpoint config: {key!r} must be an integer >= {lo}, got {v!r}")
    return v


def validate_config(cfg: Any) -> dict[str, Any]:
    """Check a config's keys and types; return a plain dict copy."""
    if not isinstance(cfg, Mapping):
        raise InputError("checkpoint config must be a JSON object")
    if cfg.get("format") != FORMAT:
        raise InputError(f"checkpoint config: format must be {FORMAT!r}, got {cfg.get('format')!r}")
    arch = cfg.get("architecture")
    if arch not in _SCHEMA:
        raise InputError(f"checkpoint config: unknown architecture {arch!r}; "
                         f"known: {', '.join(sorted(_SCHEMA))}")
    required, optional = _SCHEMA[arch]
    missing = sorted((required | {"dtype"}) - set(cfg))
    if missing:
        raise InputError(f"checkpoint config: missing key(s) {missing}")
    unknown = sorted(set(cfg) - required - optional - _COMMON)
    if unknown:
        raise InputError(f"checkpoint config: unknown key(s) {unknown}")
    if cfg["dtype"] not in _DTYPES:
        raise InputError(f"checkpoint config: dtype must be one of {sorted(_DTYPES)}")
    for key in ("m", "rank", "dv", "num_tokens", "dk", "positions"):
        if key in required:
            _int(cfg, key)
    if cfg.get("proj_dim") is not None:
        _int(cfg, "proj_dim")
    if cfg.get("seed") is not None:
        _int(cfg, "seed", lo=0)
    fam = cfg.get("family")
    if fam is not None and (not isinstance(fam, Mapping) or set(fam) != {"name", "sha256"}):
        raise InputError("checkpoint config: family must be {\"name\": ..., \"sha256\": ...} or null")
    for key in ("training", "metrics"):
        if cfg.get(key) is not None and not isinstance(cfg[key], Mapping):
            raise InputError(f"checkpoint config: {key!r} must be an object")
    if arch != "softmax_head":
        kind = spec(cfg["feature_map"]).kind
        want = MapKind.LOOKUP if arch == "lookup_head" else MapKind.PROJECTION
        if kind is not want:
            raise InputError(f"checkpoint config: feature map {cfg['feature_map']!r} does not fit "
                             f"architecture {arch!r}")
    if arch == "lookup_head" and cfg["dv"] != cfg["num_tokens"]:
        raise InputError("checkpoint config: a lookup head has dv = num_tokens")
    return dict(cfg)


def model_config(model: Head, **extra: Any) -> dict[str, Any]:
    """The config of ``model`` merged with ``extra`` (seed, family, training, ...)."""
    dtype = next(model.parameters()).dtype
    name = {v: k for k, v in _DTYPES.items()}.get(dtype)
    if name is None:
        raise InputError(f"checkpoints hold float32 or float64 models, got {dtype}")
    cfg = {"format": FORMAT, **model.config(), "dtype": name, **extra}
    cfg = {k: v for k, v in cfg.items() if not (k == "proj_dim" and v is None)}
    return validate_config(cfg)


# ---------------------------------------------------------------- build

def _empty_model(cfg: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> torch.nn.Module:
    dtype = _DTYPES[cfg["dtype"]]
    arch = cfg["architecture"]
    if arch == "kernel_head":
        return KernelHead(cfg["m"], cfg["rank"], cfg["dv"], cfg["feature_map"],
                          proj_dim=cfg.get("proj_dim"), dtype=dtype)
    if arch == "positional_kernel_head":
        return PositionalKernelHead(cfg["m"], cfg["rank"], cfg["dv"], cfg["positions"],
                                    cfg["feature_map"], proj_dim=cfg.get("proj_dim"), dtype=dtype)
    if arch == "softmax_head":
        return DenseSoftmaxHead(cfg["m"], cfg["dk"], cfg["dv"], dtype=dtype)
    tok = tensors.get("tokens")
    shape = (cfg["num_tokens"], cfg["m"])
    if tok is None:
        raise InputError("checkpoint: missing tensor 'tokens'")
    if tuple(tok.shape) != shape or tok.dtype != torch.uint8:
        raise InputError(f"checkpoint: tensor 'tokens' has shape {tuple(tok.shape)} {tok.dtype}, "
                         f"expected {shape} torch.uint8")
    if not bool(((tok == 0) | (tok == 1)).all()):
        raise InputError("checkpoint: tensor 'tokens' must hold 0/1 entries")
    return LookupHead(tok.numpy(), cfg["rank"], cfg["feature_map"], dtype=dtype)


def build_model(config: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> torch.nn.Module:
    """Rebuild a model from its config and tensors, strictly (keys, shapes, dtypes)."""
    cfg = validate_config(config)
    model = _empty_model(cfg, tensors)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise InputError(f"checkpoint: missing tensor(s) {missing}")
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise InputError(f"checkpoint: unexpected tensor(s) {unexpected}")
    for key, ref in expected.items():
        t = tensors[key]
        if not isinstance(t, torch.Tensor):
            raise InputError(f"checkpoint: entry {key!r} is not a tensor")
        if tuple(t.shape) != tuple(ref.shape):
            raise InputError(f"checkpoint: tensor {key!r} has shape {tuple(t.shape)}, "
                             f"expected {tuple(ref.shape)}")
        if t.dtype != ref.dtype:
            raise InputError(f"checkpoint: tensor {key!r} has dtype {t.dtype}, expected {ref.dtype}")
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise InputError(f"checkpoint: tensor {key!r} has non-finite entries")
    model.load_state_dict(dict(tensors), strict=True)
    model.eval()
    return model


# ---------------------------------------------------------------- files

def _paths(path: str | Path) -> tuple[Path, Path | None]:
    """``(config path, weights path or None)`` for a stem or any of its files."""
    p = Path(path)
    if p.suffix == ".json":
        stem = p.with_suffix("")
    elif p.suffix in WEIGHT_SUFFIXES:
        return p.with_suffix(".json"), p
    else:
        stem = p
    for suf in WEIGHT_SUFFIXES:
        w = stem.with_name(stem.name + suf)
        if w.is_file():
            return stem.with_name(stem.name + ".json"), w
    return stem.with_name(stem.name + ".json"), None


def save_checkpoint(model: Head, path: str | Path, config: Mapping[str, Any] | None = None
                    ) -> tuple[Path, Path]:
    """Write ``X.safetensors`` and ``X.json`` atomically; ``config`` adds seed,
    family, training, metrics, notes. Returns the two paths."""
    from safetensors.torch import save

    p = Path(path)
    stem = p.with_suffix("") if p.suffix in (".json",) + WEIGHT_SUFFIXES else p
    cfg = model_config(model, **dict(config or {}))
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    build_model(cfg, tensors)                   # what is written must load
    weights = stem.with_name(stem.name + ".safetensors")
    cfg_path = stem.with_name(stem.name + ".json")
    atomic_write_bytes(weights, save(tensors, metadata={"format": FORMAT}))
    atomic_write_text(cfg_path, json.dumps(cfg, indent=1, sort_keys=True) + "\n")
    return weights, cfg_path

