"""Kernels of models: ``models/`` checkpoints (``X.json`` + ``X.safetensors``),
any module with ``feature_matrices``, and one head of a third-party state dict
described by an adapter spec.

The kernel of a model is the exact product of the float feature matrices it
computes on ``cube:M`` or a family's tokens. A module with
``canonical_features`` (``models/`` heads, third-party heads) is read through
them: ``float64`` features computed by :mod:`models.canonical`, the same bits on
every machine (torch only holds the decoded weights); any other module's
features are computed by its own torch modules, in batches. Weights are read by the one reader
(:func:`certify.sources.weights.read_weights`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from certify.core.errors import InputError
from certify.core.files import sha256_file
from certify.core.kernel import Form, Kernel, Provenance, parse_tokens
from certify.sources.weights import read_weights, weights_file

#: what an adapter spec's kernel records instead of a library comparison
SPEC_CHECK = {"status": "not run", "reason": "an adapter spec names no library whose own computation could be run"}


def load_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ``models/`` checkpoint (stem, ``.json``, ``.safetensors``, ``.pt`` or
    ``.pth``): ``(validated config, tensors)``; build it with
    :func:`models.checkpoint.build_model`."""
    from models.checkpoint import _paths, validate_config
    cfg_path, weights = _paths(path)
    if weights is None or not weights.is_file():
        raise InputError(f"no checkpoint weights at {path} (expected .safetensors, .pt or .pth)")
    if not cfg_path.is_file():
        raise InputError(f"checkpoint config {cfg_path} is missing")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (ValueError, RecursionError) as exc:     # bad JSON or UTF-8, over-long integers
        raise InputError(f"checkpoint config {cfg_path.name} is not JSON: "
                         f"{' '.join(str(exc).split())[:100]}") from None
    cfg = validate_config(cfg)
    ws = read_weights(weights)
    if ws.nesting:
        raise InputError(f"{weights.name} must hold a flat dict of named tensors (found them under "
                         f"{' -> '.join(ws.nesting)})")
    return cfg, ws.torch()


def load_model(path: str | Path):
    """``(config, model)`` from a ``models/`` checkpoint, strictly."""
    from models.checkpoint import build_model
    cfg, tensors = load_checkpoint(path)
    return cfg, build_model(cfg, tensors)


def load_models_checkpoint(path: Path, tokens: str | None) -> Kernel:
    from models.checkpoint import build_model
    config, tensors = load_checkpoint(path)
    model = build_model(config, tensors)
    weights = next((path.with_suffix(s) for s in (".safetensors", ".pt", ".pth")
                    if path.with_suffix(s).is_file()), path)
    # the source is the weights file, named with its own hash; the config is a detail. The
    # features are the canonical ones (float64 whatever the stored dtype: models.canonical)
    prov = Provenance(str(weights), sha256_file(weights), "models.checkpoint", "float64",
                      details={"config": str(path.with_suffix(".json")),
                               "architecture": config.get("architecture"),
                               "feature_map": getattr(model, "feature_map", None),
                               "config_sha256": sha256_file(path.with_suffix(".json"))})
    return from_model(model, tokens, prov)


def from_model(model, tokens: str | None, provenance: Provenance) -> Kernel:
    """Factor-form kernel of a module with ``feature_matrices`` (models/ heads,
    adapters). Tokens default to the model's lookup table or ``cube:m``."""
    if not hasattr(model, "feature_matrices"):
        raise InputError(f"{type(model).__name__} has no feature maps (not a kernel head)")
    if tokens is None:
        table = getattr(model, "tokens", None)
        if table is not None and hasattr(table, "detach"):          # a torch tensor (a models/ head's table)
            toks = table.detach().cpu().numpy().astype(np.uint8)
            token_set, m = "tokens", toks.shape[1]
        elif getattr(model, "m", None) is not None and int(model.m) <= 16:
            token_set, m, toks = f"cube:{int(model.m)}", int(model.m), None
        else:
            raise InputError("give a token set: --tokens cube:M or --family NAME|FILE")
    else:
        token_set, m, toks = parse_tokens(tokens)
    if getattr(model, "m", m) != m:
        raise InputError(f"the model reads {model.m}-bit tokens; the token set has m = {m}")
    guarantee = getattr(getattr(model, "guarantee", None), "value", getattr(model, "guarantee", None))

    if hasattr(model, "canonical_features"):            # third-party heads: the canonical features
        def canonical_fn(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return model.canonical_features(batch)
        return Kernel(form=Form.FACTOR, provenance=provenance, token_set=token_set,
                      num_tokens=(1 << m) if toks is None else len(toks), m=m, tokens=toks, rank=int(model.rank),
                      feature_fn=canonical_fn, guarantee=str(guarantee) if guarantee is not None else None)

    import torch

    def fn(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            # tokens may be a read-only view (a frozen family's array): torch needs its own copy
            q, k = model.feature_matrices(torch.from_numpy(np.array(batch, order="C", copy=True)))
        return q.detach().cpu().numpy(), k.detach().cpu().numpy()

    K = (1 << m) if toks is None else len(toks)
    return Kernel(form=Form.FACTOR, provenance=provenance, token_set=token_set, num_tokens=K, m=m,
                  tokens=toks, rank=int(model.rank), feature_fn=fn,
                  guarantee=str(guarantee) if guarantee is not None else None)


def read_state_dict(path: str | Path) -> dict[str, Any]:
    """A state dict's tensors (torch, stored dtype) through the one reader."""
    return read_weights(path).torch()


def lazy_state_dict(path: str | Path) -> tuple[dict[str, Any], str]:
    """``(name -> stored weight, half-precision dtypes stored or "")``: names and shapes
    now, bytes when a value is read (:meth:`certify.sources.weights.WeightSet.lazy`; no torch
    for safetensors)."""
    sd = read_weights(path).lazy()
    half = sorted({w.dtype for w in sd.values() if w.dtype in ("bfloat16", "float16")})
    return sd, "+".join(half)


def load_adapter_kernel(path: str | Path, spec_path: str | Path, *, tokens: str | None = None) -> Kernel:
    """Kernel of one head of a third-party checkpoint (factor form)."""
    from models.adapters import adapt, read_spec

    spec = read_spec(spec_path)
    sd, stored = lazy_state_dict(path)
    head = adapt(sd, spec)
    wf = weights_file(path)
    prov = Provenance(str(wf), sha256_file(wf), f"adapter:{spec.layout}", "float64",
                      details={**head.describe(), "spec": str(spec_path), "spec_sha256": sha256_file(spec_path),
                               **({"stored_dtype": stored} if stored else {}), "library_check": SPEC_CHECK})
    return from_model(head, tokens, prov)
