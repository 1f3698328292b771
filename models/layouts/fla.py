"""flash-linear-attention (fla): the ``linear_attn`` model, its ``LinearAttention``
layer, ``BasedLinearAttention`` (fla's port of zoology's Based) and
``ReBasedLinearAttention``; every other fla layer is refused with its mechanism.

fla users save models with ``save_pretrained`` (a folder with ``config.json``,
``model_type`` naming the architecture, and ``model.safetensors``); a bare
layer's ``state_dict`` (at any key prefix) is read from its keys and a
``config.json`` of the layer's constructor arguments.

Which layer a bare state dict is, is decided by the config and the keys,
never guessed: ``"class"`` in the config decides; otherwise every class
whose constructor takes the config's keys and can produce exactly these keys
is a candidate, and two candidates are refused (exit 2) with the key that
decides. ``q_proj/k_proj/v_proj/o_proj`` alone fit ``LinearAttention``
(``output_norm="identity"`` with a parameter-free map), ``Based``, ``ReBased``
without affine parameters, and softmax ``Attention``: a ``"feature_map"``
(a ``LinearAttention`` argument) or ``"class"`` decides. What neither says is
the library's default (:mod:`models.layouts.defaults`), stated in the output.

Per head (queries ``q = W_q x``, keys ``k = W_k x`` of one head; a grouped key
head serves ``num_heads / num_kv_heads`` query heads):

* ``LinearAttention``: ``phi`` is the map its ``feature_map`` names in the
  table's ``fla`` column (:mod:`models.feature_table`: fla's ``elu`` is
  ``elu + 1``, the learned maps' parameters are read under ``feature_map_q.``
  / ``feature_map_k.``); ``norm_q``/``norm_k`` divide by
  ``sum(phi) + 1e-4``; the query carries fla's scale ``r^-1/2`` (``r`` the
  feature size). The denominator exists only with ``do_feature_map_norm=True``
  (``norm_feature_map`` in the model config); with fla's default ``False``
  the layer outputs ``sum_j alpha(x, z_j) v_j`` itself: the head is certified
  as unnormalized kernel attention (``FeatureHead.normalized`` False; the
  kernel's rank, eps-rank and sign are the same objects, the paper's
  normalized-head theorems do not apply). Every map fla 0.6.0's
  ``LinearAttention`` takes (``hedgehog``, ``t2r``, ``elementwise_product``,
  ``dpfp``, ``elu``, ``relu``, ``identity``) has its canonical definition.
* Based: the table's ``taylor`` (``feature_name="taylor_exp"``),
  ``phi(q).phi(k) = 1 + s + s^2/2`` with ``s = q.k / sqrt(d)``: a positive
  kernel with signed features.
* ReBased: the table's ``rebased``, ``u -> LayerNorm(u; gamma, beta)`` (eps
  1e-5), then the quadratic map: ``phi(q).phi(k) = (q.k)^2 / d``.

fla layers are causal: the final query of a sequence sees every key, which is
the setting of the families' query (Thm 8's final-query form).
In the model, layer 0 reads the embedding rows through ``attn_norm``
(RMSNorm, ``norm_eps``).
"""

from __future__ import annotations

from typing import Any, Mapping

from certify.core.errors import InputError
from models import feature_table as fm
from models.canonical import maps as cm
from models.canonical.arith import f64
from models.layouts.base import (
    SPEC_HINT,
    Detected,
    FeatureHead,
    LayerPlan,
    Refusal,
    Step,
    deferred,
    natural,
    rms_norm,
    rows_of_head,
)
from models.layouts.defaults import KERNEL_ARGS, defaults

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
    "transformer": ("softmax attention", "dense softmax attention (with rotary positions) normalizes "
                    "exp(q.k) over the sequence: softmax attention is not a finite-rank kernel"),
    "minimax": ("decay", "lightning attention with exponential decay per head"),
    "lightnet": ("decay", "LightNet's recurrence decays the state per token"),
    "comba": ("gating and delta rule", "gated delta rule variant"),
    "forgetting_transformer": ("softmax attention", "softmax attention with a data-dependent forget gate "
                               "normalizes exp(q.k) over the sequence: not a finite-rank kernel"),
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
QKVO = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}
LA_ARGS = {"mode", "hidden_size", "expand_k", "expand_v", "num_heads", "num_kv_heads", "feature_map",
           "tie_feature_map_qk", "output_norm", "norm_q", "norm_k", "do_feature_map_norm", "elementwise_affine",
           "norm_eps", "layer_idx"}
BASED_ARGS = {"hidden_size", "feature_dim", "num_key_value_heads", "num_heads", "feature_name", "eps", "causal",
              "mode"}
REBASED_ARGS = {"hidden_size", "l_max", "feature_dim", "num_key_value_heads", "num_heads", "use_gamma",
                "use_beta", "normalize", "causal", "eps", "mode", "layer_idx"}
ATTN_ARGS = {"hidden_size", "num_heads", "num_kv_heads", "qkv_bias", "qk_norm", "window_size", "rope_theta",
             "max_position_embeddings", "layer_idx"}
META = {"library", "class", "embedding"}
CLASSES = ("LinearAttention", "BasedLinearAttention", "ReBasedLinearAttention", "Attention")
#: fla's parameter-free and learned feature maps (``feature_map=...``), from the table
PARAM_FREE = fm.param_free("fla")
LEARNED = fm.learned("fla")


# ---------------------------------------------------------------- feature maps

def _opt(t):
    return None if t is None else f64(t)


def _learned_map(kind: str, sd, prefix: str):
    """(phi, rank, nonnegative, canonical phi) of a learned fla feature-map module at ``prefix``;
    the map's parameters are read when it is first applied, not here."""
    e = fm.named("fla", kind)
    params = fm.parameters(e, sd, prefix)
    return (e.torch_for("fla")(*params), e.rank(0, *params), e.nonnegative,
            deferred(lambda: e.canonical(*params)))


def _fixed_map(kind: str, d: int):
    """(phi, rank, nonnegative, canonical phi) of a parameter-free fla feature map."""
    e = fm.named("fla", kind)
    if e.learned:
        raise InputError(f"fla feature map {kind!r} has learned parameters")
    return e.torch_for("fla"), e.rank(d), e.nonnegative, e.canonical


# ---------------------------------------------------------------- layers

def map_copies(sd, p: str, kind: str) -> tuple[str, str]:
    """``(prefix of the query map, prefix of the key map)`` of a learned feature map:
    each its own copy, or the one stored copy of a tied map for both (safetensors'
    ``save_model`` keeps one name of tensors shared by ``feature_map_q`` and
    ``feature_map_k``, as fla's ``tie_feature_map_qk=True`` makes them)."""
    has = {c: all(p + f"feature_map_{c}." + k in sd for k in LEARNED[kind]) for c in "qk"}
    if has["q"] and has["k"]:
        return "feature_map_q.", "feature_map_k."
    if has["q"] or has["k"]:
        one = "feature_map_q." if has["q"] else "feature_map_k."
        return one, one
    raise InputError(f"{p}feature_map_q.* and feature_map_k.*: the {kind} map's parameters "
                     f"{sorted(LEARNED[kind])} are missing")


def linear_attention_heads(sd, p: str, cfg: Mapping[str, Any], layer: int, steps=None, m: int | None = None,
                           reads_tokens: bool = True) -> LayerPlan:
    """Heads of one fla ``LinearAttention`` at prefix ``p`` (cfg: the layer's arguments)."""
    Wq, Wk = sd[p + "q_proj.weight"], sd[p + "k_proj.weight"]
    plan = LayerPlan(layer, p, "fla.layers.LinearAttention", reads_tokens=reads_tokens,
                     m=int(m if m is not None else Wq.shape[1]))
    H = int(cfg["num_heads"])
    Hkv = int(cfg.get("num_kv_heads") or H)
    kind = cfg["feature_map"]
    tied = bool(cfg.get("tie_feature_map_qk"))
    plan.library = {"build": "LinearAttention", "num_heads": H, "num_kv_heads": Hkv, "feature_map": kind,
                    "tie_feature_map_qk": tied, "norm_q": bool(cfg.get("norm_q")), "norm_k": bool(cfg.get("norm_k")),
                    "output_norm": cfg.get("output_norm", "rmsnorm"),
                    "elementwise_affine": bool(cfg.get("elementwise_affine", True)),
                    "norm_eps": float(cfg.get("norm_eps", 1e-5)),
                    "key_dim": int(Wq.shape[0]), "value_dim": int(sd[p + "v_proj.weight"].shape[0]) * (H // Hkv)
                    if H % Hkv == 0 else 0}
    normalized = bool(cfg["do_feature_map_norm"])
    plan.library = {**plan.library, "do_feature_map_norm": normalized}
    note = ("denominator + 1e-10 in fla's reference op" if normalized else
            "no denominator (do_feature_map_norm=False): the layer outputs sum_j alpha(x, z_j) v_j")
    Wv = sd.get(p + "v_proj.weight")
    if Wq.shape[0] % H or Wk.shape[0] % Hkv or H % Hkv or Wq.shape[0] // H != Wk.shape[0] // Hkv:
        raise InputError(f"{p}q_proj.weight: {Wq.shape[0]} rows do not split into {H} heads "
                         f"({Hkv} key heads, k_proj has {Wk.shape[0]} rows); give num_heads and num_kv_heads "
                         f"in config.json")
    for h in range(H):
        hk = h // (H // Hkv)
        if kind in LEARNED:
            # a tied map is one module under two names; safetensors' save_model keeps one of them
            # (fla's load_model fills the other): read the stored copy for both
            q_name, k_name = map_copies(sd, p, kind)
            phq, r, nonneg, cq = _learned_map(kind, sd, p + q_name)
            phk, _, _, ck = _learned_map(kind, sd, p + k_name)
        else:
            phq, r, nonneg, cq = _fixed_map(kind, Wq.shape[0] // H)
            phk, ck = phq, cq
        nq, nk = bool(cfg.get("norm_q")), bool(cfg.get("norm_k"))
        scale = r ** -0.5

        def fq(u, phq=phq, nq=nq, scale=scale):
            x = phq(u)
            return (x / (x.sum(-1, keepdim=True) + 1e-4) if nq else x) * scale

        def fk(u, phk=phk, nk=nk):
            x = phk(u)
            return x / (x.sum(-1, keepdim=True) + 1e-4) if nk else x

        plan.heads.append(FeatureHead(
            m=plan.m, Wq=rows_of_head(Wq, H, h, "q_proj"), Wk=rows_of_head(Wk, Hkv, hk, "k_proj"),
            Wv=rows_of_head(Wv, Hkv, hk, "v_proj") if Wv is not None else None, phi_q=fq, phi_k=fk,
            rank=r, nonnegative=nonneg, feature_map=f"fla-{kind}" + ("-tied" if tied else ""), steps=steps,
            canon_q=cm.normalized(cq, nq, cm.inv_sqrt(r)), canon_k=cm.normalized(ck, nk), causal=True,
            notes=note + "; query scale r^-1/2 folded into phiQ", details={"head": h, "kv_head": hk},
            normalized=normalized))
    return plan


def based_heads(sd, p: str, cfg: Mapping[str, Any], layer: int, module: str, steps=None,
                names=("q_proj", "k_proj", "v_proj")) -> LayerPlan:
    """Heads of a Based layer (fla's ``BasedLinearAttention`` or zoology's ``Based``)."""
    Wq, Wk, Wv = (sd[p + n + ".weight"] for n in names)
    plan = LayerPlan(layer, p, module, m=int(Wq.shape[1]))
    fd, H = int(cfg["feature_dim"]), int(cfg["num_heads"])
    if Wq.shape[0] != fd * H:
        raise InputError(f"{p}{names[0]}.weight has {Wq.shape[0]} rows, not feature_dim x num_heads = "
                         f"{fd} x {H}; give them in config.json, or {SPEC_HINT}")
    fmap = cfg.get("feature_name", "taylor_exp")
    fmap = "identity" if fmap in ("none", None) else fmap
    if fmap not in fm.names_in("fla-based"):
        raise InputError(f"Based feature_name {fmap!r} is not one of {', '.join(fm.names_in('fla-based'))}")
    e = fm.named("fla-based", fmap)
    phi, r, canon = e.torch_for("fla-based"), e.rank(fd), e.canonical
    causal = bool(cfg.get("causal", True))
    note = ("causal: the final query sees the whole sequence (Thm 8's setting)" if causal
            else "non-causal: every query sees the whole sequence")
    plan.library = {"build": "BasedLinearAttention", "feature_dim": fd, "num_heads": H,
                    "num_key_value_heads": int(cfg.get("num_key_value_heads", H)), "causal": causal,
                    "feature_name": fmap, "eps": float(cfg.get("eps", 1e-12))}
    for h in range(H):
        plan.heads.append(FeatureHead(
            m=plan.m, Wq=rows_of_head(Wq, H, h, names[0]), Wk=rows_of_head(Wk, H, h, names[1]),
            Wv=rows_of_head(Wv, H, h, names[2]), phi_q=phi, phi_k=phi, canon_q=canon, canon_k=canon, rank=r,
            nonnegative=e.nonnegative,
            feature_map=f"based-{fmap}", steps=steps, causal=causal,
            notes=note + "; alpha = 1 + s + s^2/2 > 0 (s = q.k/sqrt(d)) with signed features; "
            "denominator + eps (1e-12 / 1e-6)", details={"head": h}))
    return plan


def rebased_heads(sd, p: str, cfg: Mapping[str, Any], layer: int, given: set[str]) -> LayerPlan:
    Wq, Wk, Wv = sd[p + "q_proj.weight"], sd[p + "k_proj.weight"], sd[p + "v_proj.weight"]
    plan = LayerPlan(layer, p, "fla.layers.ReBasedLinearAttention", m=int(Wq.shape[1]))
    gamma, beta = sd.get(p + "feature_map.gamma"), sd.get(p + "feature_map.beta")
    fd = int(gamma.shape[0]) if gamma is not None else (int(beta.shape[0]) if beta is not None
                                                         else int(cfg["feature_dim"]))
    if Wq.shape[0] % fd:
        raise InputError(f"{p}q_proj.weight has {Wq.shape[0]} rows, not a multiple of feature_dim {fd}")
    H = Wq.shape[0] // fd
    Hkv = int(cfg["num_key_value_heads"]) if "num_key_value_heads" in given else H
    normalize = bool(cfg.get("normalize", True))
    e = fm.named("fla-rebased", "rebased")
    phi = e.torch_for("fla-rebased")(gamma, beta, normalize)
    canon = deferred(lambda: e.canonical(gamma, beta, normalize))
    plan.library = {"build": "ReBasedLinearAttention", "feature_dim": fd, "num_heads": H,
                    "num_key_value_heads": Hkv, "use_gamma": gamma is not None, "use_beta": beta is not None,
                    "normalize": normalize, "causal": bool(cfg.get("causal", True))}
    for h in range(H):
        plan.heads.append(FeatureHead(
            m=plan.m, Wq=rows_of_head(Wq, H, h, "q_proj"), Wk=rows_of_head(Wk, H, h, "k_proj"),
            Wv=rows_of_head(Wv, Hkv, h % Hkv, "v_proj"), phi_q=phi, phi_k=phi, canon_q=canon, canon_k=canon,
            rank=e.rank(fd), nonnegative=e.nonnegative, feature_map="rebased", causal=True,
            notes="alpha = (q.k)^2/d after a per-token LayerNorm (>= 0, signed features)",
            details={"head": h}))
    return plan


# ---------------------------------------------------------------- models (save_pretrained)

def model_root(sd: Mapping[str, Any]) -> str | None:
    """The key prefix of an fla model's ``model.embeddings.weight``, if any."""
    roots = [k[:-len("model.embeddings.weight")] for k in sd if k.endswith("model.embeddings.weight")]
    return roots[0] if len(roots) == 1 and any(k.startswith(roots[0] + "model.layers.") for k in sd) else None


def _attn_norm(sd: Mapping[str, Any], R: str, i: int, eps: float, written: Any) -> Step:
    """Block ``i``'s ``attn_norm`` (RMSNorm) as a step of the path to its projections."""
    w = sd.get(f"{R}model.layers.{i}.attn_norm.weight")
    return Step(f"RMSNorm {R}model.layers.{i}.attn_norm (eps {written})", rms_norm(w, eps),
                deferred(lambda: cm.rms_norm(_opt(w), eps)))


def detect_model(sd: Mapping[str, Any], config: Mapping[str, Any]) -> Detected | None:
    """An fla model folder (``config.json`` with ``model_type``)."""
    mt = config.get("model_type")
    R = model_root(sd)
    if R is None:
        if mt in REFUSED_MODELS or mt == "linear_attn":
            if not any(".layers." in k for k in sd):
                return None
        else:
            return None
        R = ""
    if mt is None:
        raise InputError("an fla model's state dict (model.embeddings, model.layers.N.attn) without its "
                         "config.json: save it with save_pretrained, or put the model's config.json (with "
                         "model_type) beside the weights")
    idx = sorted({int(k[len(R) + len("model.layers."):].split(".")[0]) for k in sd
                  if k.startswith(R + "model.layers.")})
    n = int(config.get("num_hidden_layers", 0)) or (1 + max(idx) if idx else 1)
    emb = sd.get(R + "model.embeddings.weight")
    width = int(emb.shape[1]) if emb is not None else int(config.get("hidden_size", 0))
    if mt in REFUSED_MODELS:
        mech, why = REFUSED_MODELS[mt]
        layers = [LayerPlan(i, f"{R}model.layers.{i}.attn.", f"fla {mt}",
                            [Refusal(i, None, f"fla {mt}", mech, why)], reads_tokens=i == 0, m=width)
                  for i in range(n)]
        return Detected("fla", f"fla:{mt}", layers, width, emb, reason=f"config.json model_type {mt!r}",
                        config=dict(config), prefix=R, container=f"fla {mt} model")
    if mt != "linear_attn":
        return None
    base = defaults("fla", "LinearAttentionConfig")
    cfg = {**base, **config}
    used = {k: base[k] for k in ("num_heads", "num_kv_heads", "feature_map", "tie_feature_map_qk", "norm_q",
                                  "norm_k", "norm_feature_map", "norm_eps") if k not in config}
    if "hidden_size" in config and emb is not None and int(config["hidden_size"]) != width:
        raise InputError(f"config.json hidden_size {config['hidden_size']} but the embeddings are {width} wide")
    lay = {"num_heads": cfg["num_heads"], "num_kv_heads": cfg["num_kv_heads"], "feature_map": cfg["feature_map"],
           "tie_feature_map_qk": cfg["tie_feature_map_qk"], "norm_q": cfg["norm_q"], "norm_k": cfg["norm_k"],
           "do_feature_map_norm": cfg["norm_feature_map"], "elementwise_affine": cfg.get("elementwise_affine", True),
           "norm_eps": cfg["norm_eps"], "output_norm": "rmsnorm"}
    softmax_layers = set((cfg.get("attn") or {}).get("layers", []))
    det = Detected("fla", "fla:linear_attn", [], width, emb, reason="config.json model_type 'linear_attn'",
                   config=dict(config), prefix=R, container="fla LinearAttentionModel", defaults=used,
                   kernel_args=("fla", "LinearAttentionConfig"),
                   unstated={k: base[k] for k in KERNEL_ARGS[("fla", "LinearAttentionConfig")] if k not in config})
    if R:
        det.notes.append(f"the fla model sits under the key prefix {R!r}")
    for i in range(n):
        p = f"{R}model.layers.{i}.attn."
        if i in softmax_layers:
            det.layers.append(LayerPlan(i, p, "fla.layers.Attention", [Refusal(
                i, None, "fla.layers.Attention", "softmax attention",
                "a hybrid layer of dense softmax attention (rotary positions) normalizes exp(q.k) over the "
                "sequence: softmax attention is not a finite-rank kernel")], reads_tokens=i == 0, m=width))
            continue
        # every block normalizes its inputs first (attn_norm): layer 0 reads the embedding rows
        # through it, a deeper layer the hidden states of stated sequences (models.layouts.fla_forward)
        steps = [_attn_norm(sd, R, i, float(cfg["norm_eps"]), cfg["norm_eps"])]
        plan = linear_attention_heads(sd, p, lay, i, steps=steps, m=width, reads_tokens=i == 0)
        plan.library = {**plan.library, "model": True, "root": R, "fuse_norm": bool(cfg.get("fuse_norm", True)),
                        "attn_norm_eps": float(cfg["norm_eps"])}
        det.layers.append(plan)
    return det


# ---------------------------------------------------------------- bare layers (any prefix)

def layer_prefixes(sd: Mapping[str, Any]) -> list[str]:
    ps = [k[:-len("q_proj.weight")] for k in sd if k.endswith("q_proj.weight")
          and (k == "q_proj.weight" or k[-len("q_proj.weight") - 1] == ".")]
    return sorted((p for p in ps if p + "k_proj.weight" in sd), key=natural)


def _local(sd, p: str) -> set[str]:
    """Key names under prefix ``p`` that belong to the layer itself (not to a
    nested layer at a longer prefix)."""
    return {k[len(p):] for k in sd if k.startswith(p)}


def fits(cls: str, local: set[str], config: Mapping[str, Any]) -> str | None:
    """Why ``cls`` cannot be this layer (its keys under the config), or None when it can."""
    args = {"LinearAttention": LA_ARGS, "BasedLinearAttention": BASED_ARGS, "ReBasedLinearAttention": REBASED_ARGS,
            "Attention": ATTN_ARGS}[cls] | META
    extra_cfg = set(config) - args
    if extra_cfg:
        return f"it takes no argument {sorted(extra_cfg)[0]!r}"
    if not QKVO <= local:
        return "q_proj/k_proj/v_proj/o_proj are not all there"
    rest = local - QKVO
    if cls == "LinearAttention":
        fq = {k[len("feature_map_q."):] for k in rest if k.startswith("feature_map_q.")}
        fk = {k[len("feature_map_k."):] for k in rest if k.startswith("feature_map_k.")}
        norm = {k for k in rest if k.startswith("norm.")}
        if rest - {f"feature_map_q.{k}" for k in fq} - {f"feature_map_k.{k}" for k in fk} - norm:
            return f"it has no {sorted(rest)[0]!r}"
        if fq and fk and fk != fq:
            gone = sorted([f"feature_map_q.{k}" for k in fk - fq] + [f"feature_map_k.{k}" for k in fq - fk])
            return (f"feature_map_q holds {sorted(fq)} and feature_map_k holds {sorted(fk)}: "
                    f"{', '.join(gone)} missing")
        if bool(fq) != bool(fk) and config.get("tie_feature_map_qk") is False:
            return (f"feature_map_{'q' if fk else 'k'}.* is missing, and config.json says "
                    f"tie_feature_map_qk false (an untied layer stores both maps; a tied one saved with "
                    f"safetensors' save_model keeps one)")
        params = fq or fk
        maps = [k for k, ks in LEARNED.items() if ks == params] if params else list(PARAM_FREE)
        if not maps:
            return f"feature_map_{'q' if fq else 'k'} holds {sorted(params)}, no fla feature map's parameters"
        if "feature_map" in config and config["feature_map"] not in maps:
            return f"feature_map {config['feature_map']!r} does not fit the keys (they fit {maps})"
        affine = config.get("elementwise_affine", True)
        if norm - {"norm.weight"}:
            return "its output RMSNorm has no bias"
        if "output_norm" in config and (config["output_norm"] == "rmsnorm" and affine) != bool(norm):
            return f"output_norm {config['output_norm']!r} does not fit the keys"
        return None
    if cls == "BasedLinearAttention":
        if rest:
            return f"it has no {sorted(rest)[0]!r}"
        if config.get("feature_name", "taylor_exp") != "taylor_exp":
            return "fla's Based takes only feature_name='taylor_exp'"
        return None
    if cls == "ReBasedLinearAttention":
        if rest - {"feature_map.gamma", "feature_map.beta"}:
            return f"it has no {sorted(rest - {'feature_map.gamma', 'feature_map.beta'})[0]!r}"
        for key, flag in (("feature_map.gamma", "use_gamma"), ("feature_map.beta", "use_beta")):
            if flag in config and bool(config[flag]) != (key in rest):
                return f"{flag}={config[flag]} does not fit the keys"
        return None
    if rest - {"q_proj.bias", "k_proj.bias", "v_proj.bias", "q_norm.weight", "k_norm.weight"}:
        return f"it has no {sorted(rest)[0]!r}"
    return None


_WHAT = {"LinearAttention": "fla LinearAttention", "BasedLinearAttention": "fla BasedLinearAttention",
         "ReBasedLinearAttention": "fla ReBasedLinearAttention",
         "Attention": "softmax attention (fla Attention, or any q/k/v/o_proj softmax layer)"}


def classify(sd, p: str, config: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """``(class, candidates)``: the one class these keys and this config fit, or
    None with the candidates (empty: not an fla layer)."""
    local = _local(sd, p)
    cls = config.get("class")
    if cls is not None:
        if cls not in CLASSES:
            raise InputError(f"config.json class {cls!r} is not one of {CLASSES}")
        why = fits(cls, local, config)
        if why is not None:
            raise InputError(f"config.json says class {cls!r}, but it cannot be the layer at {p or 'the root'}: "
                             f"{why}")
        return cls, [cls]
    cands = [c for c in CLASSES if fits(c, local, config) is None]
    return (cands[0] if len(cands) == 1 else None), cands


def detect_layer(sd: Mapping[str, Any], config: Mapping[str, Any]) -> Detected | None:
    """Bare fla layers (keys ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``) at any prefix."""
    ps = [p for p in layer_prefixes(sd)]
    if not ps:
        return None
    layers: list[LayerPlan] = []
    kinds = []
    defaults_used: dict[str, Any] = {}
    unstated: dict[str, Any] = {}
    for i, p in enumerate(ps):
        m = int(sd[p + "q_proj.weight"].shape[1])
        local = _local(sd, p)
        hit = next(((frag, mech, why) for frag, mech, why in REFUSED_KEYS
                    if any(k.split(".")[0] == frag for k in local)), None)
        if hit is not None:
            frag, mech, why = hit
            layers.append(LayerPlan(i, p, f"fla layer ({p}{frag})", [Refusal(
                i, None, f"fla layer ({p}{frag})", mech, why + ": alpha is not a fixed function of (x, z)")], m=m))
            kinds.append("gated")
            continue
        cls, cands = classify(sd, p, config)
        if cls is None and not cands:
            if QKVO <= local and config:
                why = "; ".join(f"{c}: {fits(c, local, config)}" for c in CLASSES)
                raise InputError(f"the q/k/v/o projections at {p or 'the root'} fit no fla layer with this "
                                 f"config.json ({why})")
            return None
        if cls is None:
            raise InputError(
                f"cannot tell which layer the keys at {p or 'the root'} ({', '.join(sorted(QKVO & local))}) "
                f"are: they fit {'; '.join(_WHAT[c] for c in cands)}; the config decides: give \"class\" "
                f"(one of {', '.join(cands)}) in config.json beside the weights"
                + (" (or \"feature_map\" for a LinearAttention)" if "LinearAttention" in cands else ""))
        kinds.append(cls)
        layers.append(_layer(sd, p, cls, config, i, m, defaults_used, unstated))
    if all(k == "Attention" for k in kinds):
        for L in layers:
            L.heads = [Refusal(L.index, None, "softmax attention", "softmax attention",
                               "attention normalizes exp(q.k) over the sequence (softmax): it is not a "
                               "finite-rank kernel alpha(x, z) = <phi(x), phi(z)>")]
    layout = {"LinearAttention": "fla:linear_attn-layer", "BasedLinearAttention": "fla:based",
              "ReBasedLinearAttention": "fla:rebased", "Attention": "fla:attention", "gated": "fla:gated-layer"}
    det = Detected("fla", layout[kinds[0]] if len(set(kinds)) == 1 else "fla:layers", layers, layers[0].m,
                   reason=("config.json class " + repr(config["class"]) if "class" in config else
                           "keys (and config) of " + ", ".join(sorted(set(kinds)))),
                   config=dict(config), prefix=ps[0] if len(ps) == 1 else "", defaults=defaults_used,
                   container="fla " + ", ".join(dict.fromkeys(kinds)), unstated=unstated,
                   kernel_args=("fla", next((k for k in kinds if k in CLASSES[:3]), kinds[0])))
    if "embedding" in config:
        _embedding(sd, config["embedding"], det, ps)
    elif len(ps) > 1 or ps[0]:
        det.notes.append("layers found under key prefixes " + ", ".join(repr(p) for p in ps)
                         + ": each is read on its own inputs (the module around it is not read)")
        rows = _embedding_candidates(sd, ps, det.m) if len(ps) == 1 else []
        if len(rows) == 1:
            key, shape = rows[0]
            det.fix = (f"if {key!r} ({shape[0]} x {shape[1]}) is an embedding whose rows feed the layer directly, "
                       f"add \"embedding\": \"{key}\" to config.json: the layer is then read on its {shape[0]} "
                       f"vocabulary rows (docs/layouts.md, The model's own path)")
            det.notes.append(det.fix)
    return det


def _embedding_candidates(sd: Mapping[str, Any], ps: list[str], m: int) -> list[tuple[str, tuple[int, ...]]]:
    """The 2-D tensors outside the layer whose rows have the layer's width ``m`` (names
    and shapes only, no value read): what ``"embedding"`` could name."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for key, t in sd.items():
        shape = tuple(int(n) for n in t.shape)
        if not any(key.startswith(p) for p in ps if p) and len(shape) == 2 and shape[1] == m and shape[0] > 1:
            out.append((key, shape))
    return out


def _embedding(sd: Mapping[str, Any], key: Any, det: Detected, ps: list[str]) -> None:
    """config.json ``"embedding": KEY``: the user's module feeds the rows of the 2-D tensor
    ``KEY`` (an ``nn.Embedding``'s weight) straight into the one fla layer, which then reads
    the vocabulary. Stated, never guessed from names: the module's forward is not read."""
    if not isinstance(key, str) or key not in sd:
        raise InputError(f"config.json embedding {str(key)[:80]!r} is not a tensor of the checkpoint")
    if len(ps) != 1:
        raise InputError(f"config.json embedding: it feeds one fla layer, the checkpoint has {len(ps)} "
                         f"({', '.join(repr(p) for p in ps)})")
    emb = sd[key]
    shape = tuple(int(n) for n in emb.shape)
    if len(shape) != 2 or shape[1] != det.m:
        raise InputError(f"config.json embedding {key!r} has shape {shape}: an embedding feeding the layer "
                         f"is (vocabulary, {det.m})")
    det.embedding = emb
    det.layers[0].reads_tokens = True
    det.layers[0].library = {**det.layers[0].library, "embedded": True}
    det.notes.append(f"the layer at {ps[0] or 'the root'!r} reads the rows of {key} (config.json embedding): "
                     f"the module around them is not read")


def _layer(sd, p: str, cls: str, config, i: int, m: int, used: dict, unstated: dict) -> LayerPlan:
    if cls == "Attention":
        return LayerPlan(i, p, "fla.layers.Attention", [Refusal(
            i, None, "fla.layers.Attention", "softmax attention",
            "attention normalizes exp(q.k) over the sequence (softmax): it is not a finite-rank kernel")], m=m)
    if cls == "BasedLinearAttention":
        base = defaults("fla", "BasedLinearAttention")
        cfg = {**base, **{k: v for k, v in config.items() if k not in META}}
        rows = int(sd[p + "q_proj.weight"].shape[0])
        if "num_heads" not in config and "feature_dim" in config:
            cfg["num_heads"] = rows // int(cfg["feature_dim"])
        elif "feature_dim" not in config and "num_heads" in config:
            cfg["feature_dim"] = rows // int(cfg["num_heads"])
        used.update({k: base[k] for k in ("feature_dim", "num_heads", "causal") if k not in config})
        if "feature_dim" not in config and "num_heads" not in config:
            unstated.update({k: base[k] for k in ("feature_dim", "num_heads")})
        return based_heads(sd, p, cfg, i, "fla.layers.BasedLinearAttention")
    if cls == "ReBasedLinearAttention":
        base = defaults("fla", "ReBasedLinearAttention")
        cfg = {**base, **config}
        used.update({k: base[k] for k in ("normalize",) if k not in config})
        unstated.update({k: base[k] for k in ("normalize",) if k not in config})
        return rebased_heads(sd, p, cfg, i, set(config))
    base = defaults("fla", "LinearAttention")
    cfg = {**base, **{k: v for k, v in config.items() if k not in META}}
    local = _local(sd, p)
    fq = {k[len("feature_map_q."):] for k in local if k.startswith("feature_map_q.")}
    fk = {k[len("feature_map_k."):] for k in local if k.startswith("feature_map_k.")}
    stored = "feature_map_q." if fq else "feature_map_k."
    fq = fq or fk
    maps = [k for k, ks in LEARNED.items() if ks == fq] if fq else list(PARAM_FREE)
    if "feature_map" not in config:
        if len(maps) == 1:
            cfg["feature_map"] = maps[0]
            used["feature_map"] = f"{maps[0]} (the only map with {stored}{', '.join(sorted(fq))})"
        else:
            raise InputError(f"an fla LinearAttention at {p or 'the root'} with a parameter-free feature map: its "
                             f"keys fit {', '.join(maps)}; give \"feature_map\" in config.json, or " + SPEC_HINT)
    if "output_norm" not in config:
        cfg["output_norm"] = "rmsnorm" if "norm.weight" in local else "identity"
    if "do_feature_map_norm" not in config:
        used["do_feature_map_norm"] = base["do_feature_map_norm"]
        unstated["do_feature_map_norm"] = base["do_feature_map_norm"]
    for a in ("norm_q", "norm_k"):
        if a not in config:
            unstated[a] = base[a]
    rows = int(sd[p + "q_proj.weight"].shape[0])
    if "num_heads" not in config:
        if cfg["feature_map"] in LEARNED:      # its first parameter is a weight (out, head width)
            W = sd[p + stored + fm.named("fla", cfg["feature_map"]).learned[0]]
            cfg["num_heads"] = rows // int(W.shape[1])
        else:
            used["num_heads"] = base["num_heads"]
            unstated["num_heads"] = base["num_heads"]
    if "tie_feature_map_qk" not in config:
        # the weights tell: a learned map stored once is tied (both copies stored: read both)
        cfg["tie_feature_map_qk"] = cfg["feature_map"] in LEARNED and not (
            any(k.startswith("feature_map_q.") for k in local) and any(k.startswith("feature_map_k.") for k in local))
    if "num_kv_heads" not in config:
        kr = int(sd[p + "k_proj.weight"].shape[0])
        H = int(cfg["num_heads"])
        if kr != rows and rows % H == 0 and kr % (rows // H) == 0:
            cfg["num_kv_heads"] = kr // (rows // H)
    return linear_attention_heads(sd, p, cfg, i)
