"""performer-pytorch and linear-attention-transformer: ``to_q/to_k/to_v/to_out``.

Both libraries save ``module.state_dict()`` (``torch.save``); constructor
arguments are not in it, so they come from a ``config.json`` next to the
weights (the constructor's keyword arguments) or from the library's own
defaults (:mod:`models.layouts.defaults`). A state dict holding
``fast_attention.projection_matrix`` is performer-pytorch; the same keys
without it are linear-attention-transformer.

* performer-pytorch ``SelfAttention``: default ``generalized_attention=False``
  is FAVOR+ (softmax kernel estimated with keys stabilized by their maximum
  over the sequence): refused. ``generalized_attention=True`` with the stored
  projection: ``phi(u) = kernel_fn(d^-1/4 u P^T) + 0.001`` (the projection is
  redrawn only in training mode, every ``feature_redraw_interval`` calls; the
  checkpoint's matrix is the one a saved model uses).
* linear-attention-transformer ``SelfAttention``: non-causal heads take a
  softmax of the keys over the sequence: refused; causal heads
  ``phiQ = softmax(q) d^-1/2``, ``phiK = exp(k)``; local heads are windowed
  softmax attention: refused.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from certify.core.errors import InputError, UncertifiableError
from models.layouts.base import SPEC_HINT, Detected, LayerPlan, Refusal
from models.layouts.defaults import defaults

LM_CONFIG = {"num_tokens", "max_seq_len", "depth", "rotary_position_emb", "axial_position_emb", "axial_shape",
             "reversible", "ff_chunks", "use_scalenorm", "use_rezero", "ff_glu", "emb_dropout", "ff_dropout",
             "attn_dropout", "shift_tokens", "tie_embed", "cross_attend", "amp", "ff_mult", "emb_dim",
             "local_attn_window_size", "n_local_attn_heads", "attend_axially", "return_embeddings"}
PERFORMER_CONFIG = LM_CONFIG | {"library", "dim", "heads", "dim_head", "causal", "generalized_attention", "kernel_fn",
                    "no_projection", "qkv_bias", "local_heads", "nb_features", "feature_redraw_interval",
                    "local_window_size", "dropout", "attn_out_bias"}
LAT_CONFIG = LM_CONFIG | {"library", "dim", "heads", "dim_head", "causal", "n_local_attn_heads", "receives_context",
              "blindspot_size", "local_attn_window_size", "dropout", "attn_dropout"}


def _prefixes(sd: Mapping[str, torch.Tensor]) -> list[str]:
    ps = [k[:-len("to_q.weight")] for k in sd if k.endswith("to_q.weight")
          and ".proj_updater.instance." not in k]      # PerformerLM's second view of the same layers
    return sorted((p for p in ps if p + "to_k.weight" in sd and p + "to_v.weight" in sd), key=_natural)


def _lm_input(sd, prefixes, spec: dict) -> tuple[torch.Tensor | None, dict]:
    """An LM (``token_emb.weight``): the first layer reads embedding rows through its
    PreNorm LayerNorm (``...0.0.norm`` beside ``...0.0.fn``)."""
    emb = sd.get("token_emb.weight")
    if emb is None:
        return None, spec
    p = prefixes[0]
    norm = p[:-len("fn.")] + "norm." if p.endswith("fn.") else None
    if norm and norm + "weight" in sd:
        spec = {**spec, "layer_norm": {"weight": norm + "weight", "bias": norm + "bias", "eps": 1e-5}}
    return emb, spec


def _natural(s: str):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _check_keys(config: Mapping[str, Any], allowed: set[str], lib: str) -> None:
    extra = set(config) - allowed
    if extra:
        raise InputError(f"config for {lib} has unknown keys {sorted(extra)} (known: {sorted(allowed)})")


def detect(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any]) -> Detected | None:
    prefixes = _prefixes(sd)
    if not prefixes or any(k.endswith(("query_projection.weight", "q_proj.weight")) for k in sd):
        return None
    lib = config.get("library")
    has_proj = all(p + "fast_attention.projection_matrix" in sd for p in prefixes)
    if lib == "performer-pytorch" or (lib is None and has_proj):
        return _performer(sd, config, prefixes)
    if lib in (None, "linear-attention-transformer"):
        return _lat(sd, config, prefixes)
    return None


def _positional(sd, layer: int, module: str) -> Refusal | None:
    """LMs of these libraries add positions: rotary (``layer_pos_emb``) or absolute / axial
    embeddings (``pos_emb``) to the first layer's inputs."""
    rot = next((k for k in sd if k.startswith("layer_pos_emb")), None)
    if rot is not None:
        return Refusal(layer, None, module, "rotary position embedding",
                       f"{rot}: queries and keys are rotated by their positions, so alpha depends on "
                       "positions, not on (x, z) alone")
    pos = next((k for k in sd if k.startswith("pos_emb")), None)
    if pos is not None:
        return Refusal(layer, None, module, "positional embedding",
                       f"{pos}: a position embedding is added to every token before the first layer, so "
                       "the kernel on the tokens depends on their positions")
    return None


def _adapted(spec: dict, sd, layer: int, head: int, module: str):
    from models.adapters import adapt
    try:
        return adapt(sd, spec)
    except UncertifiableError as exc:
        mech = "local softmax window" if "local" in str(exc) else "position / sequence dependence"
        return Refusal(layer, head, module, mech, str(exc))


def _performer(sd, config, prefixes) -> Detected:
    _check_keys(config, PERFORMER_CONFIG, "performer-pytorch")
    cfg = {**defaults("performer-pytorch", "SelfAttention"), **config}
    layers = []
    m = int(sd[prefixes[0] + "to_q.weight"].shape[1])
    for i, p in enumerate(prefixes):
        P = sd[p + "fast_attention.projection_matrix"]
        d = int(cfg["dim_head"]) if "dim_head" in config else int(P.shape[1])
        rows = int(sd[p + "to_q.weight"].shape[0])
        heads = int(config.get("heads", rows // d if d and rows % d == 0 else cfg["heads"]))
        if heads * d != rows:
            raise InputError(f"{p}to_q.weight has {rows} rows, not heads x dim_head = {heads} x {d}; "
                             f"give heads and dim_head in config.json, or {SPEC_HINT}")
        plan = LayerPlan(i, p, "performer_pytorch.SelfAttention")
        pos = _positional(sd, i, plan.module)
        if pos is not None:
            plan.heads.append(pos)
        elif not cfg["generalized_attention"]:
            plan.heads.append(Refusal(
                i, None, plan.module, "FAVOR+ softmax kernel",
                "generalized_attention=False (the library's default) is FAVOR+: the key features are "
                "stabilized by their maximum over the whole sequence, so alpha is not a fixed function "
                "of (x, z); a model built with generalized_attention=True needs "
                "{\"generalized_attention\": true} in config.json next to the weights"))
        elif cfg.get("no_projection"):
            plan.heads.append(Refusal(i, None, plan.module, "softmax over the sequence",
                                      "no_projection takes a softmax of the keys over the sequence"))
        else:
            kfn = str(cfg["kernel_fn"]).lower().removesuffix("()")
            for h in range(heads):
                spec = {"layout": "performer", "prefix": p, "heads": heads, "dim_head": d, "head": h,
                        "attention": "generalized", "kernel_fn": kfn, "causal": bool(cfg["causal"]),
                        "local_heads": int(cfg["local_heads"])}
                if i == 0:
                    emb, spec = _lm_input(sd, prefixes, spec)
                plan.heads.append(_adapted(spec, sd, i, h, plan.module))
        layers.append(plan)
    return Detected("performer-pytorch", "performer", layers, m, sd.get("token_emb.weight"),
                    reason="to_q/to_k/to_v with fast_attention.projection_matrix", config=dict(config))


def _lat(sd, config, prefixes) -> Detected:
    _check_keys(config, LAT_CONFIG, "linear-attention-transformer")
    cfg = {**defaults("linear-attention-transformer", "SelfAttention"), **config}
    m = int(sd[prefixes[0] + "to_q.weight"].shape[1])
    layers = []
    for i, p in enumerate(prefixes):
        plan = LayerPlan(i, p, "linear_attention_transformer.SelfAttention")
        layers.append(plan)
        pos = _positional(sd, i, plan.module)
        if pos is not None:
            plan.heads.append(pos)
            continue
        if not cfg["causal"]:
            plan.heads.append(Refusal(
                i, None, plan.module, "keys normalized over the sequence",
                "causal=False (the library's default): the keys go through a softmax over the sequence "
                "dimension, so alpha(x, z) depends on every other token; a causal model needs "
                "{\"causal\": true, \"heads\": H} in config.json"))
            continue
        if int(cfg.get("blindspot_size", 1)) > 1:
            plan.heads.append(Refusal(
                i, None, plan.module, "bucketed causal mask",
                f"blindspot_size {cfg['blindspot_size']}: a query does not see the keys of its own bucket, "
                "so which keys count depends on positions"))
            continue
        if "heads" not in config:
            raise InputError(f"{p}to_q.weight: linear-attention-transformer has no default head count; "
                             f"give \"heads\" in config.json next to the weights, or {SPEC_HINT}")
        heads = int(config["heads"])
        rows = int(sd[p + "to_q.weight"].shape[0])
        d = int(cfg["dim_head"]) if cfg.get("dim_head") else rows // heads
        for h in range(heads):
            spec = {"layout": "linear-attention-transformer", "prefix": p, "heads": heads, "dim_head": d,
                    "head": h, "causal": True, "local_heads": int(cfg["n_local_attn_heads"])}
            if i == 0:
                emb, spec = _lm_input(sd, prefixes, spec)
            plan.heads.append(_adapted(spec, sd, i, h, plan.module))
    return Detected("linear-attention-transformer", "linear-attention-transformer", layers, m,
                    sd.get("token_emb.weight"),
                    reason="to_q/to_k/to_v without a random projection", config=dict(config))
