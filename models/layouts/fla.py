"""flash-linear-attention (fla): the ``linear_attn`` model, its ``LinearAttention``
layer, ``BasedLinearAttention`` (fla's port of zoology's Based) and
``ReBasedLinearAttention``; every other fla layer is refused with its mechanism.

fla users save models with ``save_pretrained`` (a folder with ``config.json``,
``model_type`` naming the architecture, and ``model.safetensors``); a bare
layer's ``state_dict`` is read from its keys (and a ``config.json`` of the
layer's constructor arguments when its keys do not tell).

Per head (queries ``q = W_q x``, keys ``k = W_k x`` of one head; a grouped key
head serves ``num_heads / num_kv_heads`` query heads):

* ``LinearAttention``: ``phi`` in elu (``elu + 1``), relu, identity (signed),
  hedgehog (``softmax([2(Wq+b), -2(Wq+b)])``), t2r (``relu(Wq (+b))``), dpfp
  (``nu = 4``), elementwise_product (``(W1 q + b1) * (W2 q + b2)``, signed);
  ``norm_q``/``norm_k`` divide by ``sum(phi) + 1e-4`` (a fixed per-token
  map); the query carries fla's scale ``r^-1/2`` (``r`` the feature size).
  The denominator exists only with ``do_feature_map_norm=True``
  (``norm_feature_map`` in the model config); fla's default ``False`` is
  attention without a normalizing denominator: refused.
* Based: ``phi(u) = [1, u / d^1/4, u_i^2 / (sqrt(2) d^1/2), u_i u_j / d^1/2 (i<j)]``,
  ``phi(q).phi(k) = 1 + s + s^2/2`` with ``s = q.k / sqrt(d)``: a positive
  kernel with signed features.
* ReBased: ``u -> LayerNorm(u; gamma, beta)`` (eps 1e-5), then
  ``[u_i^2 / sqrt(d), u_i u_j sqrt(2/d) (i<j)]``: ``phi(q).phi(k) = (q.k)^2 / d``.

fla layers are causal: the final query of a sequence sees every key, which is
the setting of the families' query (Thm 8's final-query form).
In the model, layer 0 reads the embedding rows through ``attn_norm``
(RMSNorm, ``norm_eps``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch
from torch.nn import functional as F

from certify.core.errors import InputError
from models.layouts.base import (SPEC_HINT, Detected, FeatureHead, LayerPlan, Refusal, rms_norm,
                                 rows_of_head)
from models.layouts.defaults import defaults

#: fla model types (config.json "model_type") whose kernel is not a fixed function of (x, z)
REFUSED_MODELS: Mapping[str, tuple[str, str]] = {
    "gla": ("data-dependent gating", "gated linear attention decays the state by a gate computed from each "
            "token, so the weight of a key depends on every token after it"),
    "gsa": ("data-dependent gating", "gated slot attention forgets through per-token gates"),
    "hgrn": ("data-dependent gating", "a gated linear recurrence, not a kernel over (x, z)"),
    "hgrn2": ("data-dependent gating", "a gated linear recurrence, not a kernel over (x, z)"),
    "retnet": ("decay and rotary position", "retention multiplies alpha by gamma^(i-j) and rotates q, k "
               "by position (xPos): alpha depends on positions"),
    "mamba": ("selective state space", "Mamba's input-dependent discretization decays the state per token"),
    "mamba2": ("selective state space", "Mamba-2's input-dependent decay A_t weighs each key by later tokens"),
    "mamba3": ("selective state space", "input-dependent state decay"),
    "samba": ("selective state space", "Mamba layers with input-dependent decay"),
    "delta_net": ("delta rule", "the state is updated by a delta rule S <- S (I - beta k k^T) + ...: keys "
                  "overwrite each other, so a key's weight depends on later keys"),
    "gated_deltanet": ("gating and delta rule", "gated delta rule: decay and overwrite per token"),
    "gated_deltaproduct": ("gating and delta rule", "products of gated delta-rule updates"),
    "kda": ("gating and delta rule", "Kimi delta attention: gated delta rule"),
    "rwkv6": ("data-dependent decay", "RWKV-6 decays the state by per-token learned rates"),
    "rwkv7": ("data-dependent decay", "RWKV-7 decays and rewrites the state per token"),
    "transformer": ("softmax attention, rotary", "dense softmax attention with rotary position embeddings"),
    "minimax": ("decay", "lightning attention with exponential decay per head"),
    "lightnet": ("decay", "LightNet's recurrence decays the state per token"),
    "comba": ("gating and delta rule", "gated delta rule variant"),
    "forgetting_transformer": ("forget gate", "softmax attention with a data-dependent forget gate"),
    "abc": ("data-dependent gating", "slot memory with per-token forgetting"),
    "rodimus": ("data-dependent gating", "gated recurrence"),
    "mesa_net": ("delta rule", "online least-squares state update"),
    "path_attn": ("softmax attention", "softmax attention with position-dependent transforms"),
    "stickbreaking_attn": ("softmax attention", "stick-breaking attention depends on positions"),
}

#: state-dict key fragments of refused bare fla layers
REFUSED_KEYS: tuple[tuple[str, str, str], ...] = (
    ("gk_proj", "data-dependent gating", "a key gate gk_proj (GLA-style) decays the state per token"),
    ("A_log", "selective state space", "A_log / dt_bias: Mamba-style input-dependent decay"),
    ("b_proj", "delta rule", "a beta projection b_proj: delta-rule (DeltaNet-style) state overwrite"),
    ("g_proj", "gating", "an output / forget gate g_proj computed from the token (RetNet / GSA style)"),
    ("f_proj", "forget gate", "a forget-gate projection f_proj"),
)
FLA_LAYER_CONFIG = {"library", "class", "hidden_size", "num_heads", "num_kv_heads", "feature_map",
                    "tie_feature_map_qk", "norm_q", "norm_k", "do_feature_map_norm", "expand_k", "expand_v",
                    "feature_dim", "num_key_value_heads", "causal", "eps", "mode", "output_norm",
                    "norm_eps", "use_gamma", "use_beta", "normalize", "feature_name", "elementwise_affine"}


# ---------------------------------------------------------------- feature maps

def elu1(u):
    return F.elu(u) + 1.0


def dpfp(u, nu: int = 4):
    x = torch.cat([u.relu(), (-u).relu()], dim=-1)
    rolled = torch.cat([x.roll(shifts=j, dims=-1) for j in range(1, nu + 1)], dim=-1)
    return torch.cat([x] * nu, dim=-1) * rolled


def taylor(u):
    """fla's TaylorFeatureMap: ``[1, u/d^1/4, u_i^2/(sqrt2 sqrt d), u_i u_j/sqrt d (i<j)]``."""
    d = u.shape[-1]
    rd, rrd = math.sqrt(d), math.sqrt(math.sqrt(d))
    iu = torch.triu_indices(d, d, 1)
    outer = u[..., :, None] * u[..., None, :]
    diag = outer.diagonal(dim1=-2, dim2=-1)
    off = outer[..., iu[0], iu[1]]
    return torch.cat([torch.ones_like(u[..., :1]), u / rrd, diag / (rd * math.sqrt(2)), off / rd], dim=-1)


def taylor_rank(d: int) -> int:
    return 1 + d + d * (d + 1) // 2


def rebased(gamma, beta, normalize: bool, eps: float = 1e-5):
    def f(u):
        d = u.shape[-1]
        if normalize:
            x = F.layer_norm(u, (d,), gamma, beta, eps)
        else:
            x = u * gamma if gamma is not None else u
            x = x + beta if beta is not None else x
        outer = x[..., :, None] * x[..., None, :]
        iu = torch.triu_indices(d, d, 1)
        return torch.cat([outer.diagonal(dim1=-2, dim2=-1) * d ** -0.5,
                          outer[..., iu[0], iu[1]] * (2 / d) ** 0.5], dim=-1)
    return f


def _learned_map(kind: str, sd, prefix: str):
    """(phi, rank factor, nonnegative) of a learned fla feature-map module at ``prefix``."""
    if kind == "hedgehog":
        W, b = sd[prefix + "layer.weight"], sd[prefix + "layer.bias"]
        return (lambda u: torch.cat([2 * (u @ W.T + b), -2 * (u @ W.T + b)], -1).softmax(-1)), 2 * W.shape[0], True
    if kind == "t2r":
        W, b = sd[prefix + "layer.weight"], sd.get(prefix + "layer.bias")
        return (lambda u: (u @ W.T + (b if b is not None else 0)).relu()), W.shape[0], True
    if kind == "elementwise_product":
        W1, b1 = sd[prefix + "layer1.weight"], sd[prefix + "layer1.bias"]
        W2, b2 = sd[prefix + "layer2.weight"], sd[prefix + "layer2.bias"]
        return (lambda u: (u @ W1.T + b1) * (u @ W2.T + b2)), W1.shape[0], False
    raise InputError(f"unknown fla feature map {kind!r}")


def _fixed_map(kind: str, d: int):
    if kind == "elu":
        return elu1, d, True
    if kind == "relu":
        return F.relu, d, True
    if kind == "identity":
        return (lambda u: u), d, False
    if kind == "dpfp":
        return dpfp, 2 * d * 4, True
    raise InputError(f"unknown fla feature map {kind!r} (elu, relu, identity, dpfp, hedgehog, t2r, "
                     f"elementwise_product)")


# ---------------------------------------------------------------- layers

def linear_attention_heads(sd, p: str, cfg: Mapping[str, Any], layer: int, pre=None) -> LayerPlan:
    """Heads of one fla ``LinearAttention`` at prefix ``p`` (cfg: the layer's arguments)."""
    plan = LayerPlan(layer, p, "fla.layers.LinearAttention")
    if not cfg["do_feature_map_norm"]:
        plan.heads.append(Refusal(
            layer, None, plan.module, "no normalizing denominator",
            "do_feature_map_norm=False (fla's default; norm_feature_map in the model config): the layer "
            "outputs sum_j alpha(x, z_j) v_j without dividing by sum_j alpha(x, z_j), which is not the "
            "paper's normalized head, so no claim about it is made"))
        return plan
    Wq, Wk = sd[p + "q_proj.weight"], sd[p + "k_proj.weight"]
    Wv = sd.get(p + "v_proj.weight")
    H = int(cfg["num_heads"])
    Hkv = int(cfg.get("num_kv_heads") or H)
    if Wq.shape[0] % H or Wk.shape[0] % Hkv or H % Hkv:
        raise InputError(f"{p}q_proj.weight: {Wq.shape[0]} rows do not split into {H} heads "
                         f"({Hkv} key heads)")
    d = Wq.shape[0] // H
    kind = cfg["feature_map"]
    tied = bool(cfg.get("tie_feature_map_qk"))
    for h in range(H):
        hk = h // (H // Hkv)
        if kind in ("hedgehog", "t2r", "elementwise_product"):
            phq, r, nonneg = _learned_map(kind, sd, p + "feature_map_q.")
            phk, _, _ = _learned_map(kind, sd, p + ("feature_map_q." if tied else "feature_map_k."))
        else:
            phq, r, nonneg = _fixed_map(kind, d)
            phk = phq
        nq, nk = bool(cfg.get("norm_q")), bool(cfg.get("norm_k"))
        scale = r ** -0.5

        def fq(u, phq=phq, nq=nq, scale=scale):
            x = phq(u)
            return (x / (x.sum(-1, keepdim=True) + 1e-4) if nq else x) * scale

        def fk(u, phk=phk, nk=nk):
            x = phk(u)
            return x / (x.sum(-1, keepdim=True) + 1e-4) if nk else x

        plan.heads.append(FeatureHead(
            m=Wq.shape[1], Wq=rows_of_head(Wq, H, h, "q_proj"), Wk=rows_of_head(Wk, Hkv, hk, "k_proj"),
            Wv=rows_of_head(Wv, Hkv, hk, "v_proj") if Wv is not None else None, phi_q=fq, phi_k=fk,
            rank=r, nonnegative=nonneg, feature_map=f"fla-{kind}" + ("-tied" if tied else ""), pre=pre,
            causal=True, notes="denominator + 1e-10 in fla's reference op; query scale r^-1/2 folded "
            "into phiQ", details={"head": h, "kv_head": hk}))
    return plan


def based_heads(sd, p: str, cfg: Mapping[str, Any], layer: int, module: str, pre=None,
                names=("q_proj", "k_proj", "v_proj")) -> LayerPlan:
    """Heads of a Based layer (fla's ``BasedLinearAttention`` or zoology's ``Based``)."""
    plan = LayerPlan(layer, p, module)
    Wq, Wk, Wv = (sd[p + n + ".weight"] for n in names)
    fd = int(cfg["feature_dim"])
    H = int(cfg["num_heads"])
    if Wq.shape[0] != fd * H:
        raise InputError(f"{p}{names[0]}.weight has {Wq.shape[0]} rows, not feature_dim x num_heads = "
                         f"{fd} x {H}; give them in config.json, or {SPEC_HINT}")
    if cfg.get("feature_name", "taylor_exp") in ("none", "identity", None):
        phi, r, fmap = (lambda u: u), fd, "identity"
    elif cfg.get("feature_name", "taylor_exp") == "taylor_exp":
        phi, r, fmap = taylor, taylor_rank(fd), "taylor_exp"
    else:
        raise InputError(f"Based feature_name {cfg.get('feature_name')!r} is not taylor_exp or identity")
    if not cfg.get("causal", True):
        note = "non-causal: every query sees the whole sequence"
    else:
        note = "causal: the final query sees the whole sequence (Thm 8's setting)"
    for h in range(H):
        plan.heads.append(FeatureHead(
            m=Wq.shape[1], Wq=rows_of_head(Wq, H, h, names[0]), Wk=rows_of_head(Wk, H, h, names[1]),
            Wv=rows_of_head(Wv, H, h, names[2]), phi_q=phi, phi_k=phi, rank=r, nonnegative=False,
            feature_map=f"based-{fmap}", pre=pre, causal=bool(cfg.get("causal", True)),
            notes=note + "; alpha = 1 + s + s^2/2 > 0 (s = q.k/sqrt(d)) with signed features; "
            "denominator + eps (1e-12 / 1e-6)", details={"head": h}))
    return plan


def rebased_heads(sd, p: str, cfg: Mapping[str, Any], layer: int, pre=None) -> LayerPlan:
    plan = LayerPlan(layer, p, "fla.layers.ReBasedLinearAttention")
    Wq, Wk, Wv = sd[p + "q_proj.weight"], sd[p + "k_proj.weight"], sd[p + "v_proj.weight"]
    gamma, beta = sd.get(p + "feature_map.gamma"), sd.get(p + "feature_map.beta")
    fd = int(gamma.shape[0]) if gamma is not None else int(cfg["feature_dim"])
    H = Wq.shape[0] // fd
    Hkv = int(cfg["num_key_value_heads"]) if "num_key_value_heads" in cfg.get("_given", ()) else H
    phi = rebased(gamma, beta, bool(cfg.get("normalize", True)))
    for h in range(H):
        plan.heads.append(FeatureHead(
            m=Wq.shape[1], Wq=rows_of_head(Wq, H, h, "q_proj"), Wk=rows_of_head(Wk, H, h, "k_proj"),
            Wv=rows_of_head(Wv, Hkv, h % Hkv, "v_proj"), phi_q=phi, phi_k=phi, rank=fd * (fd + 1) // 2,
            nonnegative=False, feature_map="rebased", pre=pre, causal=True,
            notes="alpha = (q.k)^2/d after a per-token LayerNorm (>= 0, signed features)",
            details={"head": h}))
    return plan


# ---------------------------------------------------------------- detection

def detect_model(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any]) -> Detected | None:
    """An fla model folder (``config.json`` with ``model_type``)."""
    mt = config.get("model_type")
    if mt is None or not any(k.startswith("model.layers.") for k in sd):
        return None
    n = int(config.get("num_hidden_layers", 0)) or 1 + max(int(k.split(".")[2]) for k in sd
                                                          if k.startswith("model.layers."))
    emb = sd.get("model.embeddings.weight")
    if mt in REFUSED_MODELS:
        mech, why = REFUSED_MODELS[mt]
        layers = [LayerPlan(i, f"model.layers.{i}.attn.", f"fla {mt}",
                            [Refusal(i, None, f"fla {mt}", mech, why)]) for i in range(n)]
        return Detected("fla", f"fla:{mt}", layers, int(emb.shape[1]) if emb is not None else 0, emb,
                        reason=f"config.json model_type {mt!r}", config=dict(config))
    if mt != "linear_attn":
        return None
    cfg = {**defaults("fla", "LinearAttentionConfig"), **config}
    lay = {"num_heads": cfg["num_heads"], "num_kv_heads": cfg["num_kv_heads"], "feature_map": cfg["feature_map"],
           "tie_feature_map_qk": cfg["tie_feature_map_qk"], "norm_q": cfg["norm_q"], "norm_k": cfg["norm_k"],
           "do_feature_map_norm": cfg["norm_feature_map"]}
    softmax_layers = set((cfg.get("attn") or {}).get("layers", []))
    layers = []
    for i in range(n):
        p = f"model.layers.{i}.attn."
        if i in softmax_layers:
            layers.append(LayerPlan(i, p, "fla.layers.Attention", [Refusal(
                i, None, "fla.layers.Attention", "softmax attention, rotary",
                "a hybrid layer of dense softmax attention (rotary positions): not a kernel head")]))
            continue
        pre = rms_norm(sd.get(f"model.layers.{i}.attn_norm.weight"), float(cfg["norm_eps"]))
        layers.append(linear_attention_heads(sd, p, lay, i, pre=pre))
    return Detected("fla", "fla:linear_attn", layers, int(cfg["hidden_size"]), emb,
                    reason="config.json model_type 'linear_attn'", config=dict(config))


def detect_layer(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any]) -> Detected | None:
    """A bare fla layer's state dict (keys ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``)."""
    if "q_proj.weight" not in sd or "k_proj.weight" not in sd:
        return None
    extra = set(config) - FLA_LAYER_CONFIG - {"model_type"}
    if extra:
        raise InputError(f"config for an fla layer has unknown keys {sorted(extra)}")
    m = int(sd["q_proj.weight"].shape[1])
    for frag, mech, why in REFUSED_KEYS:
        hit = next((k for k in sd if frag in k.split(".")[0]), None)
        if hit is not None:
            return Detected("fla", "fla:gated-layer", [LayerPlan(0, "", "fla layer", [Refusal(
                0, None, f"fla layer ({hit})", mech, why + ": alpha is not a fixed function of (x, z)")])],
                m, reason=f"key {hit}", config=dict(config))
    cls = config.get("class")
    if cls == "BasedLinearAttention" or (cls is None and set(sd) == {"q_proj.weight", "k_proj.weight",
                                                                    "v_proj.weight", "o_proj.weight"}):
        cfg = {**defaults("fla", "BasedLinearAttention"), **config}
        if "num_heads" not in config and "feature_dim" in config:
            cfg["num_heads"] = sd["q_proj.weight"].shape[0] // int(cfg["feature_dim"])
        plan = based_heads(sd, "", cfg, 0, "fla.layers.BasedLinearAttention")
        return Detected("fla", "fla:based", [plan], m, reason="q/k/v/o projections only (Based)",
                        config=dict(config))
    if cls == "ReBasedLinearAttention" or "feature_map.gamma" in sd:
        cfg = {**defaults("fla", "ReBasedLinearAttention"), **config, "_given": set(config)}
        return Detected("fla", "fla:rebased", [rebased_heads(sd, "", cfg, 0)], m,
                        reason="feature_map.gamma (ReBased)", config=dict(config))
    cfg = {**defaults("fla", "LinearAttention"), **config}
    if "feature_map" not in config:
        if "feature_map_q.layer1.weight" in sd:
            cfg["feature_map"] = "elementwise_product"
        elif "feature_map_q.layer.bias" in sd:
            cfg["feature_map"] = "hedgehog"
        elif "feature_map_q.layer.weight" in sd:
            cfg["feature_map"] = "t2r"
        elif cfg["do_feature_map_norm"]:
            raise InputError("an fla LinearAttention with a parameter-free feature map (elu, relu, identity "
                             "or dpfp): its keys do not say which; give \"feature_map\" in config.json, or "
                             + SPEC_HINT)
    if "num_heads" not in config and cfg["feature_map"] in ("hedgehog", "t2r", "elementwise_product"):
        W = sd.get("feature_map_q.layer.weight", sd.get("feature_map_q.layer1.weight"))
        cfg["num_heads"] = sd["q_proj.weight"].shape[0] // W.shape[1]
    cfg["tie_feature_map_qk"] = cfg["tie_feature_map_qk"] or (
        cfg["feature_map"] in ("hedgehog", "t2r", "elementwise_product")
        and not any(k.startswith("feature_map_k.") for k in sd))
    return Detected("fla", "fla:linear_attn-layer", [linear_attention_heads(sd, "", cfg, 0)], m,
                    reason="q_proj/k_proj with an output norm (LinearAttention)", config=dict(config))
