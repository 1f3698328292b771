"""performer-pytorch and linear-attention-transformer: ``to_q/to_k/to_v/to_out``.

Both libraries save ``module.state_dict()`` (``torch.save``); constructor
arguments are not in it, so they come from a ``config.json`` next to the
weights (the constructor's keyword arguments) or from the library's own
defaults (:mod:`models.layouts.defaults`). A state dict holding
``fast_attention.projection_matrix`` is performer-pytorch; the same keys
without it are linear-attention-transformer.

The model's own path to the first layer is followed:

* a ``Performer`` / ``LinearAttentionTransformer`` (keys ``net.layers.<i>.0.fn.``
  / ``layers.layers.<i>.0.fn.``, or ``.blocks.<i>.f.net.fn.`` when reversible)
  wraps each attention in a pre-norm: ``LayerNorm`` (``...0.norm``), or
  ``ScaleNorm`` / ``ReZero`` (``...0.g``: ``use_scalenorm`` / ``use_rezero`` in
  the config decide, else the shape of ``g``: ``(1,)`` ScaleNorm, ``()``
  ReZero, which scales the output and leaves the input alone); layer 0 reads
  the model's input through it, deeper layers read earlier outputs (out of
  reach); a reversible stack feeds layer 0 the input itself;
* a language model (``token_emb.weight``) reads embedding rows (through
  ``project_in`` when ``emb_dim != dim``); its position embeddings (rotary,
  axial or absolute) make every layer refused;
* a bare ``SelfAttention`` (at any key prefix) reads its own inputs;
* the state dict's second view of the layers (``proj_updater.instance.``) is
  a wrapper, never a layer.

Per head:

* performer-pytorch: default ``generalized_attention=False`` is FAVOR+ (keys
  stabilized by their maximum over the sequence): refused.
  ``generalized_attention=True`` with the stored projection:
  ``phi(u) = kernel_fn(d^-1/4 u P^T) + 0.001`` (``kernel_fn`` one of the
  table's ``performer-pytorch`` maps, :mod:`models.feature_table`: its ``elu``
  is ``elu`` itself, signed); ``no_projection`` is
  ``softmax(q)``, ``exp(k)`` when causal, a softmax over the sequence
  otherwise (refused); local heads (the last ``local_heads``) are windowed
  softmax: refused.
* linear-attention-transformer: non-causal heads take a softmax of the keys
  over the sequence: refused; causal heads ``phiQ = softmax(q) d^-1/2``,
  ``phiK = exp(k)``; local heads (the first ``n_local_attn_heads``): refused.
* token shifting (``shift_tokens``: ``fn.fn.``) mixes neighbouring positions
  into each token: refused; Linformer layers (``proj_k``) are softmax
  attention: refused.
"""

from __future__ import annotations

import re
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
    layer_norm,
    natural,
    rows_of_head,
)
from models.layouts.defaults import KERNEL_ARGS, defaults
from models.optional_torch import F, torch, tt

PERFORMER, LAT = "performer-pytorch", "linear-attention-transformer"
LM_CONFIG = {"num_tokens", "max_seq_len", "depth", "rotary_position_emb", "axial_position_emb",
             "axial_position_shape", "axial_shape", "reversible", "ff_chunks", "use_scalenorm", "use_rezero",
             "ff_glu", "emb_dropout", "ff_dropout", "attn_dropout", "shift_tokens", "tie_embed", "cross_attend",
             "amp", "ff_mult", "emb_dim", "local_attn_window_size", "n_local_attn_heads", "attend_axially",
             "return_embeddings", "local_attn_heads", "auto_check_redraw", "use_axial_pos_emb",
             "use_rotary_emb", "bucket_size", "attn_layer_dropout", "receives_context", "pkm_layers",
             "pkm_num_keys"}
PERFORMER_CONFIG = LM_CONFIG | {"library", "class", "dim", "heads", "dim_head", "causal", "generalized_attention",
                                "kernel_fn", "no_projection", "qkv_bias", "local_heads", "nb_features",
                                "feature_redraw_interval", "local_window_size", "dropout", "attn_out_bias"}
LAT_CONFIG = LM_CONFIG | {"library", "class", "dim", "heads", "dim_head", "causal", "n_local_attn_heads",
                          "receives_context", "blindspot_size", "local_attn_window_size", "dropout", "attn_dropout"}
#: performer kernel_fn names (the ``torch.nn`` class, lower-cased) -> their feature map (:mod:`models.feature_table`)
KERNEL_FNS = {n.lower(): e for n, e in fm.in_library(PERFORMER).items() if e.elementwise}
KERNEL_EPSILON = 0.001
#: an LM's learned absolute position embedding (``AbsolutePositionalEmbedding``: row t added at position t)
ABSOLUTE = "pos_emb.emb.weight"
#: the constructor arguments that change the kernel and that the keys do not show
DECIDING = {PERFORMER: ("causal", "generalized_attention", "kernel_fn", "no_projection", "local_heads"),
            LAT: ("heads", "causal", "blindspot_size", "n_local_attn_heads")}

_ROOT = r"(?P<root>(?:.*\.)?)"
_WRAP = r"(?P<wrap>(?:fn\.)+)"
#: (library, container class, pattern of an attention prefix inside it)
CONTAINERS = (
    (PERFORMER, "Performer", re.compile(_ROOT + r"net\.layers\.(?P<i>\d+)\.0\." + _WRAP + "$")),
    (PERFORMER, "Performer", re.compile(_ROOT + r"net\.blocks\.(?P<i>\d+)\.f\.net\." + _WRAP + "$")),
    (LAT, "LinearAttentionTransformer", re.compile(_ROOT + r"layers\.layers\.(?P<i>\d+)\.0\." + _WRAP + "$")),
    (LAT, "LinearAttentionTransformer", re.compile(_ROOT + r"layers\.blocks\.(?P<i>\d+)\.f\.net\." + _WRAP + "$")),
)


def prefixes(sd: Mapping[str, Any]) -> list[str]:
    """Prefixes ``p`` with ``p + to_q/to_k/to_v.weight``."""
    ps = [k[:-len("to_q.weight")] for k in sd if k.endswith("to_q.weight")
          and (k == "to_q.weight" or k[-len("to_q.weight") - 1] == ".")]
    return sorted((p for p in ps if p + "to_k.weight" in sd and p + "to_v.weight" in sd), key=natural)


def _per_layer(v, index: int) -> int:
    """A per-layer setting given as one number or one per layer."""
    if isinstance(v, (list, tuple)):
        return int(v[index]) if index < len(v) else 0
    return int(v or 0)


def _check_keys(config: Mapping[str, Any], allowed: set[str], lib: str) -> None:
    extra = set(config) - allowed
    if extra:
        raise InputError(f"config for {lib} has unknown keys {sorted(extra)} (known: {sorted(allowed)})")


def detect(sd: Mapping[str, Any], config: Mapping[str, Any]) -> Detected | None:
    ps = prefixes(sd)
    if not ps:
        return None
    lib = config.get("library")
    has_proj = all(p + "fast_attention.projection_matrix" in sd for p in ps)
    some_proj = any(p + "fast_attention.projection_matrix" in sd for p in ps)
    if some_proj and not has_proj:
        raise InputError("some to_q/to_k/to_v layers hold fast_attention.projection_matrix and some do not: "
                         "two libraries in one state dict; pass one model")
    if lib == LAT and has_proj:
        raise InputError("config.json says linear-attention-transformer, but the keys hold "
                         "fast_attention.projection_matrix (performer-pytorch)")
    if lib == PERFORMER and not has_proj:
        raise InputError("config.json says performer-pytorch, but no layer holds "
                         "fast_attention.projection_matrix (its random features)")
    library = PERFORMER if has_proj else LAT
    _check_keys(config, PERFORMER_CONFIG if library == PERFORMER else LAT_CONFIG, library)
    return _build(sd, config, ps, library)


# ---------------------------------------------------------------- structure

def _container(ps: list[str], library: str) -> tuple[str | None, str, list[tuple[int, str, str]]]:
    """``(root, container class, [(index, prefix, wrap)])`` when every prefix sits
    in one library container; ``(None, "", ...)`` for bare layers."""
    found = []
    for p in ps:
        for lib, cls, pat in CONTAINERS:
            m = pat.match(p)
            if lib == library and m:
                found.append((m.group("root"), cls, int(m.group("i")), p, m.group("wrap")))
                break
        else:
            return None, "", [(i, p, "") for i, p in enumerate(ps)]
    roots = {f[0] for f in found}
    if len(roots) != 1:
        raise InputError(f"{library} layers under {len(roots)} different roots ({', '.join(sorted(roots))}): "
                         f"pass one model per checkpoint")
    return found[0][0], found[0][1], sorted(((i, p, w) for _, _, i, p, w in found), key=lambda t: t[0])


def _block(p: str, wrap: str) -> str:
    return p[:len(p) - len(wrap)]


def _lm(sd, root: str, library: str) -> tuple[str | None, str]:
    """``(LM root, inner path)`` when the container is a language model's."""
    for inner in ("performer.",) if library == PERFORMER else ("transformer.fn.", "transformer."):
        if root.endswith(inner) and root[:len(root) - len(inner)] + "token_emb.weight" in sd:
            return root[:len(root) - len(inner)], inner
    return None, ""


def _positional(sd, lm_root: str, layer: int, module: str) -> Refusal | None:
    """An LM of these libraries adds positions: rotary (``layer_pos_emb``), axial or
    absolute embeddings (``pos_emb``) to the first layer's inputs."""
    rot = next((k for k in sd if k.startswith(lm_root + "layer_pos_emb")), None)
    if rot is not None:
        return Refusal(layer, None, module, "rotary position embedding",
                       f"{rot}: queries and keys are rotated by their positions, so alpha depends on "
                       "positions, not on (x, z) alone")
    pos = next((k for k in sd if k.startswith(lm_root + "pos_emb")), None)
    if pos is not None:
        absolute = _absolute(sd, lm_root)
        return Refusal(layer, None, module, "positional embedding",
                       f"{pos}: a position embedding is added to every token before the first layer, so "
                       "the kernel on the tokens depends on their positions"
                       + ("; stated token sequences fix the positions: certify checkpoint MODEL --sequences "
                          "FILE.npy|FILE.jsonl|random:S,T,SEED certifies every layer on their hidden states"
                          if absolute else ""))
    return None


def _absolute(sd, lm_root: str) -> bool:
    """The LM's only position embedding is the learned absolute one (no rotary, no axial)."""
    return lm_root + ABSOLUTE in sd and not any(
        k.startswith((lm_root + "layer_pos_emb", lm_root + "pos_emb.")) and k != lm_root + ABSOLUTE for k in sd)


def _pre_norm(sd, block: str, cfg: Mapping[str, Any], config: Mapping[str, Any],
              defaults_used: dict) -> tuple[list[Step], str]:
    """The container's wrapper around the attention: ``(steps, kind)``."""
    if block + "norm.weight" in sd:
        w, b = sd[block + "norm.weight"], sd.get(block + "norm.bias")
        return [Step(f"LayerNorm {block}norm (eps 1e-05)", layer_norm(w, b, 1e-5),
                     deferred(lambda: cm.layer_norm(f64(w), None if b is None else f64(b), 1e-5)))], "layernorm"
    g = sd.get(block + "g")
    if g is None:
        return [], "none"
    if config.get("use_scalenorm"):
        kind = "scalenorm"
    elif config.get("use_rezero"):
        kind = "rezero"
    elif "use_scalenorm" in config or "use_rezero" in config:
        raise InputError(f"{block}g: a ScaleNorm or ReZero wrapper, but config.json sets neither "
                         f"use_scalenorm nor use_rezero")
    else:
        kind = "scalenorm" if g.dim() == 1 else "rezero"
        defaults_used["use_scalenorm" if kind == "scalenorm" else "use_rezero"] = \
            f"true, from the shape {tuple(g.shape)} of {block}g"
    if kind == "rezero":
        return [], "rezero"

    def scale_norm(x, g=g):
        return x / torch.norm(x, dim=-1, keepdim=True).clamp(min=1e-5) * tt(g).to(x.dtype)
    return [Step(f"ScaleNorm {block}g: x / max(|x|, 1e-5) * g", scale_norm,
                 deferred(lambda: cm.scale_norm(f64(g))))], "scalenorm"


# ---------------------------------------------------------------- build

def _unstated(library: str, cls: str, config: Mapping[str, Any], cfg: Mapping[str, Any],
              base: Mapping[str, Any]) -> dict[str, Any]:
    """The kernel arguments of ``cls`` (:data:`KERNEL_ARGS`) that config.json does not
    state and the weights cannot tell, with the library default that would apply."""
    out = {}
    for a in KERNEL_ARGS[(library, cls)]:
        if a in config or (a in ("local_heads", "local_attn_heads")
                           and ("local_heads" in config or "local_attn_heads" in config)):
            continue
        if a == "kernel_fn" and (not cfg.get("generalized_attention") or cfg.get("no_projection")):
            continue                         # FAVOR+ or no projection: no kernel_fn is applied
        if a == "heads" and ("dim_head" in config or base.get("heads") is None):
            continue                         # rows / dim_head; or no default (asked for below)
        out[a] = base.get(a)
    return out


def _build(sd, config, ps, library) -> Detected:
    cfg_cls = "Performer" if library == PERFORMER else "LinearAttentionTransformer"
    root, container, layers_found = _container(ps, library)
    defaults_used: dict[str, Any] = {}
    deciding = DECIDING[library]
    if root is None:
        base = defaults(library, "SelfAttention")
        cfg = {**base, **config}
        defaults_used.update({k: v for k, v in base.items() if k not in config and k in deciding})
        det = Detected(library, f"{'performer' if library == PERFORMER else 'lat'}:SelfAttention", [], 0,
                       reason="to_q/to_k/to_v" + (" with fast_attention.projection_matrix"
                                                  if library == PERFORMER else " without a random projection"),
                       config=dict(config), container=f"{library} SelfAttention",
                       prefix=ps[0] if len(ps) == 1 else "")
        if len(ps) > 1 or ps[0]:
            det.notes.append("layers found under key prefixes " + ", ".join(repr(p) for p in ps)
                             + ": each is read on its own inputs (the module around it is not read)")
        for i, p in enumerate(ps):
            det.layers.append(_layer(sd, cfg, config, library, i, p, steps=[], reads_tokens=True, m_in=None,
                                     module=f"{library} SelfAttention", lib_info={
                                         "build": "SelfAttention", "strip": p, "path": ""}))
        det.m = det.layers[0].m
        det.defaults = defaults_used
        det.kernel_args = (library, "SelfAttention")
        det.unstated = _unstated(library, "SelfAttention", config, cfg, base)
        return det
    base = {**defaults(library, "SelfAttention"), **defaults(library, cfg_cls)}
    cfg = {**base, **config}
    lm_root, inner = _lm(sd, root, library)
    steps: list[Step] = []
    emb = None
    det = Detected(library, f"{'performer' if library == PERFORMER else 'lat'}:{cfg_cls}", [], 0,
                   reason=f"{cfg_cls} layers at " + ", ".join(p for _, p, _ in layers_found), config=dict(config),
                   container=f"{library} {cfg_cls}" + (" (language model)" if lm_root is not None else ""),
                   prefix=lm_root if lm_root is not None else root)
    if lm_root is not None:
        emb = sd[lm_root + "token_emb.weight"]
        if lm_root + "transformer.project_in.weight" in sd:
            W, b = sd[lm_root + "transformer.project_in.weight"], sd.get(lm_root + "transformer.project_in.bias")
            steps.append(Step(f"Linear {lm_root}transformer.project_in",
                              lambda x: F.linear(x, tt(W).to(x.dtype),
                                                 None if b is None else tt(b).to(x.dtype)),
                              deferred(lambda: cm.affine(f64(W), None if b is None else f64(b)))))
        det.reason = f"{cfg_cls} language model (token_emb.weight, {layers_found[0][1]}...)"
    if root and lm_root is None:
        det.notes.append(f"the library's {cfg_cls} sits under the key prefix {det.prefix!r}: its input is "
                         f"taken as the tokens (the module around it is not read)")
    for n, (i, p, wrap) in enumerate(layers_found):
        # every layer's heads read through its own pre-norm (a deeper layer's inputs are reached
        # on stated sequences only, models.layouts.lucidrains_forward)
        pre, kind = _pre_norm(sd, _block(p, wrap), cfg, config, defaults_used if n == 0 else {})
        plan = _layer(sd, cfg, config, library, n, p, steps=[*steps, *pre] if n == 0 else pre,
                      reads_tokens=n == 0, m_in=int(emb.shape[1]) if emb is not None and n == 0 else None,
                      module=f"{library} {cfg_cls} layer {i}",
                      lib_info={"build": cfg_cls if lm_root is None else cfg_cls + "LM", "strip": root,
                                "lm_root": lm_root, "path": p[len(root):].rstrip("."), "index": n})
        if lm_root is not None:
            pos = _positional(sd, lm_root, n, f"{library} {cfg_cls}")     # one reason for the model
            if pos is not None and _absolute(sd, lm_root):
                if n == 0:                   # the first layer reads tokens plus positions; stated
                    plan.on_sequences = plan.heads     # sequences fix them (deeper: out of reach)
                    plan.heads = [pos]
                    plan.library = {**plan.library, "max_seq_len": int(sd[lm_root + ABSOLUTE].shape[0])}
            elif pos is not None:
                plan.heads = [pos]
        if len(wrap) > len("fn."):
            mech = "token shift" if config.get("shift_tokens", True) else "axial folding"
            plan.heads = [Refusal(n, None, plan.module, mech,
                                  f"{p}: a wrapper between the pre-norm and the attention (PreShiftTokens with "
                                  "shift_tokens=True, or FoldAxially) moves features between positions, so a "
                                  "query's and a key's vectors depend on their neighbours: alpha is not a "
                                  "function of (x, z)")]
        det.layers.append(plan)
    for k in deciding:
        if k in base and k not in config and not (k == "local_heads" and "local_attn_heads" in config):
            defaults_used.setdefault(k, base[k])
    det.m = int(emb.shape[1]) if emb is not None else det.layers[0].m
    det.embedding = emb
    det.defaults = defaults_used
    det.kernel_args = (library, cfg_cls)
    det.unstated = _unstated(library, cfg_cls, config, cfg, base)
    return det


def _layer(sd, cfg, config, library, index: int, p: str, *, steps: list[Step], reads_tokens: bool, module: str,
           lib_info: dict, m_in: int | None) -> LayerPlan:
    m = m_in if m_in is not None else int(sd[p + "to_q.weight"].shape[1])
    plan = LayerPlan(index, p, module, reads_tokens=reads_tokens, m=m, library=lib_info)
    if p + "proj_k" in sd:
        plan.heads.append(Refusal(index, None, module, "softmax attention",
                                  f"{p}proj_k: a Linformer layer projects the keys along the sequence and takes "
                                  "a softmax of q.k: softmax attention is not a finite-rank kernel"))
        return plan
    if library == PERFORMER:
        _performer_heads(sd, cfg, config, plan, p, steps)
    else:
        _lat_heads(sd, cfg, config, plan, p, steps)
    return plan


def _performer_heads(sd, cfg, config, plan: LayerPlan, p: str, steps: list[Step]) -> None:
    P = sd[p + "fast_attention.projection_matrix"]                           # (r, d)
    d = int(cfg["dim_head"]) if "dim_head" in config else int(P.shape[1])
    rows = int(sd[p + "to_q.weight"].shape[0])
    heads = int(config["heads"]) if "heads" in config else (rows // d if d and rows % d == 0 else 0)
    if heads * d != rows or P.shape[1] != d:
        raise InputError(f"{p}to_q.weight has {rows} rows and the projection {tuple(P.shape)}: not heads x "
                         f"dim_head = {heads} x {d}; give heads and dim_head in config.json, or {SPEC_HINT}")
    local = _per_layer(config.get("local_heads", config.get("local_attn_heads", cfg.get("local_heads", 0))),
                       plan.index)
    causal = bool(cfg["causal"])
    plan.library = {**plan.library, "heads": heads, "dim_head": d, "nb_features": int(P.shape[0])}
    if not cfg["generalized_attention"] and not cfg.get("no_projection"):
        plan.heads.append(Refusal(
            plan.index, None, plan.module, "FAVOR+ softmax kernel",
            "generalized_attention=False (the library's default) is FAVOR+: the key features are "
            "stabilized by their maximum over the whole sequence, so alpha is not a fixed function "
            "of (x, z); a model built with generalized_attention=True needs "
            "{\"generalized_attention\": true} in config.json next to the weights"))
        return
    if cfg.get("no_projection") and not causal:
        plan.heads.append(Refusal(plan.index, None, plan.module, "softmax over the sequence",
                                  "no_projection (non-causal) takes a softmax of the keys over the sequence: "
                                  "alpha is not a fixed function of (x, z)"))
        return
    Wq, Wk, Wv = sd[p + "to_q.weight"], sd[p + "to_k.weight"], sd[p + "to_v.weight"]
    bq, bk, bv = sd.get(p + "to_q.bias"), sd.get(p + "to_k.bias"), sd.get(p + "to_v.bias")
    if cfg.get("no_projection"):
        lib = PERFORMER + " no_projection"
        mq, mk = fm.named(lib, "queries"), fm.named(lib, "keys")
        phi_q, phi_k = mq.torch_for(lib), mk.torch_for(lib)
        r, fmap, nonneg = d, "performer-no-projection-causal", mq.nonnegative and mk.nonnegative
        canon_q, canon_k = mq.canonical, mk.canonical
        note = "no_projection, causal: phiQ = softmax(q) over features, phiK = exp(k)"
    else:
        name = str(cfg["kernel_fn"]).lower().removeprefix("nn.").removesuffix("()")
        if name not in KERNEL_FNS:
            raise InputError(f"performer kernel_fn {cfg['kernel_fn']!r} is not one of {sorted(KERNEL_FNS)}")
        entry = KERNEL_FNS[name]
        fn, nonneg = entry.torch_for(PERFORMER), entry.nonnegative
        norm = d ** -0.25

        def phi_q(u, fn=fn, P=P, norm=norm):
            return fn((norm * u) @ tt(P).T.to(u.dtype)) + KERNEL_EPSILON
        phi_k, r, fmap = phi_q, int(P.shape[0]), f"performer-generalized-{name}"
        canon_q = canon_k = deferred(lambda: cm.performer(entry.canonical, f64(P), d, KERNEL_EPSILON))
        note = f"phi(u) = {name}(d^-1/4 u P^T) + 0.001 (the stored projection P)"
        plan.library = {**plan.library, "kernel_fn": name}
    for h in range(heads):
        if h >= heads - local:
            plan.heads.append(Refusal(plan.index, h, plan.module, "local softmax window",
                                      f"head {h} is a local (windowed softmax) head: position-dependent"))
            continue
        plan.heads.append(FeatureHead(
            m=plan.m, Wq=rows_of_head(Wq, heads, h, "to_q"), Wk=rows_of_head(Wk, heads, h, "to_k"),
            bq=None if bq is None else rows_of_head(bq, heads, h, "to_q.bias"),
            bk=None if bk is None else rows_of_head(bk, heads, h, "to_k.bias"),
            Wv=rows_of_head(Wv, heads, h, "to_v"),
            bv=None if bv is None else rows_of_head(bv, heads, h, "to_v.bias"),
            phi_q=phi_q, phi_k=phi_k, rank=r, nonnegative=nonneg, feature_map=fmap, steps=steps,
            canon_q=canon_q, canon_k=canon_k, causal=causal, notes=note + ("; causal: denominator + 1e-6 sum(phiQ)" if causal else ""),
            details={"head": h}))


def _lat_heads(sd, cfg, config, plan: LayerPlan, p: str, steps: list[Step]) -> None:
    if not cfg["causal"]:
        plan.heads.append(Refusal(
            plan.index, None, plan.module, "keys normalized over the sequence",
            "causal=False (the library's default): the keys go through a softmax over the sequence "
            "dimension, so alpha(x, z) depends on every other token; a causal model needs "
            "{\"causal\": true, \"heads\": H} in config.json"))
        return
    if int(cfg.get("blindspot_size", 1)) > 1:
        plan.heads.append(Refusal(
            plan.index, None, plan.module, "bucketed causal mask",
            f"blindspot_size {cfg['blindspot_size']}: a query does not see the keys of its own bucket, "
            "so which keys count depends on positions"))
        return
    rows = int(sd[p + "to_q.weight"].shape[0])
    if "heads" not in config and "dim_head" in config and int(config["dim_head"]) > 0 \
            and rows % int(config["dim_head"]) == 0:
        cfg = {**cfg, "heads": rows // int(config["dim_head"])}       # the weights tell: rows / dim_head
        config = {**config, "heads": cfg["heads"]}
    if "heads" not in config and cfg.get("heads") is None:
        raise InputError(f"{p}to_q.weight: linear-attention-transformer's SelfAttention has no default head "
                         f"count; give \"heads\" in config.json next to the weights, or {SPEC_HINT}")
    heads = int(config.get("heads", cfg.get("heads")))
    d = int(cfg["dim_head"]) if cfg.get("dim_head") else (rows // heads if rows % heads == 0 else 0)
    if heads * d != rows:
        raise InputError(f"{p}to_q.weight has {rows} rows, not heads x dim_head = {heads} x {d}; give heads "
                         f"and dim_head in config.json, or {SPEC_HINT}")
    plan.library = {**plan.library, "heads": heads, "dim_head": d}
    local = _per_layer(config.get("n_local_attn_heads", cfg.get("n_local_attn_heads", 0)), plan.index)
    Wq, Wk, Wv = sd[p + "to_q.weight"], sd[p + "to_k.weight"], sd[p + "to_v.weight"]
    scale = d ** -0.5
    mq, mk = fm.named(LAT, "queries"), fm.named(LAT, "keys")
    softmax = mq.torch_for(LAT)

    def phi_q(u, scale=scale):
        return softmax(u) * scale
    for h in range(heads):
        if h < local:
            plan.heads.append(Refusal(plan.index, h, plan.module, "local softmax window",
                                      f"head {h} is a local (windowed softmax) head: position-dependent"))
            continue
        plan.heads.append(FeatureHead(
            m=plan.m, Wq=rows_of_head(Wq, heads, h, "to_q"), Wk=rows_of_head(Wk, heads, h, "to_k"),
            Wv=rows_of_head(Wv, heads, h, "to_v"), phi_q=phi_q, phi_k=mk.torch_for(LAT), rank=d,
            nonnegative=mq.nonnegative and mk.nonnegative,
            canon_q=cm.scaled_softmax(cm.inv_sqrt(d)), canon_k=mk.canonical,
            feature_map="lat-softmax-q-exp-k", steps=steps, causal=True,
            notes="causal: phiQ = softmax(q) d^-1/2, phiK = exp(k); denominator clamped at 1e-3",
            details={"head": h}))
