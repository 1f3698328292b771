"""zoology's Based mixer and pytorch-fast-transformers' ``AttentionLayer``, read from tables.

* zoology (not on the package index): ``Based`` keeps ``proj_q``, ``proj_k``,
  ``proj_v``, ``proj_o`` (no biases) and maps q, k with ``TaylorExp``
  (``[1, u/d^1/4, u u^T / (sqrt2 sqrt d)]``, the full outer product; the same
  kernel ``1 + s + s^2/2`` as fla's port, with ``d^2`` instead of
  ``d(d+1)/2`` second-order features). Read here through fla's port's kernel,
  which is what the tests check against; zoology itself is not installed.
  Mixers sit at any prefix (``backbone.layers.<i>.sequence_mixer.``).
* pytorch-fast-transformers (does not build against the pinned torch): an
  ``AttentionLayer`` keeps ``query_projection``, ``key_projection``,
  ``value_projection``, ``out_projection`` (with biases); ``linear`` and
  ``causal-linear`` attention use ``elu(x) + 1`` and a denominator
  ``+ 1e-6``. Its Favor / GeneratorFeatureMap variants draw new random
  features on every forward (``new_feature_map``): refused. The builder's
  default ``attention_type`` is ``full`` (softmax): refused unless a
  ``config.json`` says ``linear`` or ``causal-linear``.
"""

from __future__ import annotations

from typing import Any, Mapping

from certify.core.errors import InputError
from models import feature_table as fm
from models.layouts.base import SPEC_HINT, Detected, FeatureHead, LayerPlan, Refusal, natural, rows_of_head
from models.layouts.defaults import KERNEL_ARGS, defaults
from models.layouts.fla import based_heads

ZOOLOGY_CONFIG = {"library", "d_model", "l_max", "feature_dim", "num_key_value_heads", "num_heads",
                  "feature_name", "eps", "causal"}
PFT_CONFIG = {"library", "attention_type", "n_heads", "d_model", "d_keys", "d_values", "feature_map",
              "query_dimensions", "value_dimensions"}


def _prefixes(sd, key: str) -> list[str]:
    return sorted((k[:-len(key)] for k in sd if k.endswith(key) and (k == key or k[-len(key) - 1] == ".")),
                  key=natural)


def detect_zoology(sd: Mapping[str, Any], config: Mapping[str, Any]) -> Detected | None:
    prefixes = [p for p in _prefixes(sd, "proj_q.weight") if p + "proj_k.weight" in sd]
    if not prefixes:
        return None
    extra = set(config) - ZOOLOGY_CONFIG
    if extra:
        raise InputError(f"config for zoology Based has unknown keys {sorted(extra)}")
    cfg = {**defaults("zoology", "Based"), **config}
    rows = int(sd[prefixes[0] + "proj_q.weight"].shape[0])
    if "num_heads" not in config and rows % int(cfg["feature_dim"]) == 0:
        cfg["num_heads"] = rows // int(cfg["feature_dim"])
    layers = [based_heads(sd, p, cfg, i, "zoology.mixers.based.Based", names=("proj_q", "proj_k", "proj_v"))
              for i, p in enumerate(prefixes)]
    for L in layers:
        L.library = {**L.library, "build": "zoology-Based", "names": ("proj_q", "proj_k", "proj_v", "proj_o")}
    m = int(sd[prefixes[0] + "proj_q.weight"].shape[1])
    det = Detected("zoology", "zoology:based", layers, m, reason="proj_q/proj_k/proj_v (zoology Based)",
                   config=dict(config), container="zoology Based mixer",
                   prefix=prefixes[0] if len(prefixes) == 1 else "", kernel_args=("zoology", "Based"))
    base = defaults("zoology", "Based")
    det.unstated = {k: base[k] for k in ("feature_name",) if k not in config}
    if "feature_dim" not in config and "num_heads" not in config:      # rows = feature_dim x num_heads
        det.unstated.update({k: base[k] for k in ("feature_dim", "num_heads")})
    det.notes.append("zoology mixers at " + ", ".join(repr(p) for p in prefixes) + ": each is read on its own "
                     "inputs (zoology is not installed; the blocks around a mixer are not read)")
    return det


def detect_fast_transformers(sd: Mapping[str, Any], config: Mapping[str, Any]) -> Detected | None:
    prefixes = [p for p in _prefixes(sd, "query_projection.weight") if p + "key_projection.weight" in sd]
    if not prefixes:
        return None
    extra = set(config) - PFT_CONFIG
    if extra:
        raise InputError(f"config for pytorch-fast-transformers has unknown keys {sorted(extra)}")
    cfg = {**defaults("pytorch-fast-transformers", "AttentionLayer"), "n_heads": 4, **config}
    layers = []
    m = int(sd[prefixes[0] + "query_projection.weight"].shape[1])
    for i, p in enumerate(prefixes):
        module = "fast_transformers.AttentionLayer"
        plan = LayerPlan(i, p, module, m=m, library={"build": "fast-transformers"})
        layers.append(plan)
        favor = [k for k in sd if k.startswith(p + "inner_attention.feature_map.")]
        at = cfg["attention_type"]
        if favor or cfg["feature_map"] not in (*fm.names_in("pytorch-fast-transformers"), None):
            plan.heads.append(Refusal(i, None, module, "redrawn random features",
                                      f"a random feature map ({favor[0] if favor else cfg['feature_map']}) "
                                      "is redrawn by new_feature_map() on every forward: the kernel is "
                                      "not a fixed function"))
            continue
        if at not in ("linear", "causal-linear"):
            plan.heads.append(Refusal(i, None, module, f"{at} attention",
                                      f"attention_type {at!r} (the builder's default is 'full', dense "
                                      "softmax) is not a kernel head; a linear layer needs "
                                      "{\"attention_type\": \"linear\", \"n_heads\": H} in config.json"))
            continue
        H = int(cfg["n_heads"])
        Wq, Wk = sd[p + "query_projection.weight"], sd[p + "key_projection.weight"]
        if Wq.shape[0] % H:
            raise InputError(f"{p}query_projection.weight: {Wq.shape[0]} rows do not split into {H} heads; "
                             f"give n_heads in config.json, or {SPEC_HINT}")
        d = Wq.shape[0] // H
        e = fm.named("pytorch-fast-transformers", cfg["feature_map"] or "elu+1")
        phi = e.torch_for("pytorch-fast-transformers")
        bq, bk = sd.get(p + "query_projection.bias"), sd.get(p + "key_projection.bias")
        Wv, bv = sd.get(p + "value_projection.weight"), sd.get(p + "value_projection.bias")
        for h in range(H):
            sl = slice(h * d, (h + 1) * d)
            plan.heads.append(FeatureHead(
                m=m, Wq=Wq[sl], Wk=Wk[sl], bq=bq[sl] if bq is not None else None,
                bk=bk[sl] if bk is not None else None,
                Wv=rows_of_head(Wv, H, h, "value_projection") if Wv is not None else None,
                bv=bv[Wv.shape[0] // H * h:Wv.shape[0] // H * (h + 1)] if bv is not None and Wv is not None
                else None,
                phi_q=phi, phi_k=phi, canon_q=e.canonical, canon_k=e.canonical, rank=e.rank(d),
                nonnegative=e.nonnegative, feature_map=e.name,
                causal=at == "causal-linear", notes="denominator + 1e-6 (eps of LinearAttention)",
                details={"head": h}))
    det = Detected("pytorch-fast-transformers", "fast-transformers", layers, m,
                   reason="query_projection/key_projection (AttentionLayer)", config=dict(config),
                   container="fast_transformers AttentionLayer", prefix=prefixes[0] if len(prefixes) == 1 else "",
                   kernel_args=("pytorch-fast-transformers", "AttentionLayer"))
    det.unstated = {k: cfg[k] for k in KERNEL_ARGS[det.kernel_args] if k not in config}
    det.notes.append("AttentionLayers at " + ", ".join(repr(p) for p in prefixes) + ": each is read on its own "
                     "inputs (the module around them is not read)")
    return det
