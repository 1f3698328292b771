"""Each supported library's own constructor defaults, pinned.

A checkpoint holds tensors, not constructor arguments; where neither the
state dict nor a config says otherwise, a layer is read with its library's
defaults, so those defaults decide what is certified (a default Performer is
FAVOR+ and is refused). ``tests/test_layouts.py`` compares this table with the
installed constructors' signatures, so a library release that changes a
default fails a test instead of silently changing a certificate.

pytorch-fast-transformers does not build against the pinned torch (C++
extensions, 2021 source release): its entries are read from its source and
are not compared by the test (``checked = False``).
"""

from __future__ import annotations

from typing import Any, Mapping

from models.feature_table import names_in, param_free

#: (library, class) -> (import path, defaults, checked against the installed library)
DEFAULTS: Mapping[tuple[str, str], tuple[str, Mapping[str, Any], bool]] = {
    ("performer-pytorch", "SelfAttention"): (
        "performer_pytorch.performer_pytorch:SelfAttention",
        {"causal": False, "heads": 8, "dim_head": 64, "local_heads": 0, "nb_features": None,
         "feature_redraw_interval": 1000, "generalized_attention": False, "kernel_fn": "ReLU",
         "no_projection": False, "qkv_bias": False}, True),
    ("performer-pytorch", "Performer"): (
        "performer_pytorch.performer_pytorch:Performer",
        {"local_attn_heads": 0, "causal": False, "generalized_attention": False, "kernel_fn": "ReLU",
         "use_scalenorm": False, "use_rezero": False, "no_projection": False, "qkv_bias": True,
         "attn_out_bias": True, "shift_tokens": False, "reversible": False, "ff_mult": 4, "ff_glu": False,
         "cross_attend": False, "nb_features": None}, True),
    ("linear-attention-transformer", "SelfAttention"): (
        "linear_attention_transformer.linear_attention_transformer:SelfAttention",
        {"causal": False, "dim_head": None, "n_local_attn_heads": 0, "receives_context": False,
         "blindspot_size": 1}, True),
    ("linear-attention-transformer", "LinearAttentionTransformer"): (
        "linear_attention_transformer.linear_attention_transformer:LinearAttentionTransformer",
        {"heads": 8, "dim_head": None, "causal": False, "blindspot_size": 1, "n_local_attn_heads": 0,
         "reversible": False, "shift_tokens": False, "attend_axially": False, "receives_context": False,
         "ff_glu": False}, True),
    ("fla", "LinearAttention"): (
        "fla.layers:LinearAttention",
        {"hidden_size": 1024, "expand_k": 1.0, "expand_v": 1.0, "num_heads": 8, "num_kv_heads": None,
         "feature_map": "elementwise_product", "tie_feature_map_qk": False, "output_norm": "rmsnorm",
         "norm_q": False, "norm_k": False, "do_feature_map_norm": False, "norm_eps": 1e-05,
         "elementwise_affine": True}, True),
    ("fla", "LinearAttentionConfig"): (
        "fla.models:LinearAttentionConfig",
        {"hidden_size": 2048, "expand_k": 1.0, "expand_v": 1.0, "num_heads": 4, "num_kv_heads": None,
         "feature_map": "elementwise_product", "tie_feature_map_qk": False, "norm_q": False,
         "norm_k": False, "norm_feature_map": False, "norm_eps": 1e-06, "fuse_norm": True,
         "attn": None}, True),
    ("fla", "BasedLinearAttention"): (
        "fla.layers:BasedLinearAttention",
        {"feature_dim": 16, "num_key_value_heads": 12, "num_heads": 12, "feature_name": "taylor_exp",
         "eps": 1e-12, "causal": True, "mode": "parallel"}, True),
    ("fla", "ReBasedLinearAttention"): (
        "fla.layers:ReBasedLinearAttention",
        {"feature_dim": 16, "num_key_value_heads": 16, "num_heads": 16, "use_gamma": True,
         "use_beta": True, "normalize": True, "causal": True, "eps": 1e-05}, True),
    ("fla", "Attention"): (
        "fla.layers.attn:Attention",
        {"hidden_size": 2048, "num_heads": 32, "num_kv_heads": None, "qkv_bias": False, "qk_norm": False,
         "window_size": None}, True),
    # zoology is not on the package index: its Based mixer's defaults, read from
    # zoology/mixers/based.py; the kernel is checked through fla's port above.
    ("zoology", "Based"): (
        "zoology.mixers.based:Based",
        {"feature_dim": 16, "num_key_value_heads": 12, "num_heads": 12, "feature_name": "taylor_exp",
         "eps": 1e-12, "causal": True}, False),
    # fast_transformers.attention.attention_layer.AttentionLayer and the builder's
    # attention types; LinearAttention(query_dimensions, feature_map=None, eps=1e-6)
    # uses elu(x) + 1 when feature_map is None.
    ("pytorch-fast-transformers", "AttentionLayer"): (
        "fast_transformers.attention.attention_layer:AttentionLayer",
        {"d_keys": None, "d_values": None, "attention_type": "full", "feature_map": "elu+1",
         "eps": 1e-06}, False),
}


#: performer's kernel functions, as the refusal line names them (:mod:`models.feature_table`)
_KERNEL_FNS = ", ".join(names_in("performer-pytorch"))


def defaults(library: str, cls: str) -> dict[str, Any]:
    return dict(DEFAULTS[(library, cls)][1])


#: (library, class) -> the constructor arguments that change a head's kernel (the
#: feature map, its normalization, the head split, which heads are windowed) and
#: that a checkpoint's tensors may not show. A detector lists in
#: ``Detected.unstated`` each one that config.json does not state and the weights
#: cannot tell (e.g. the head split when a learned map's shape gives it); such a
#: model is refused (exit 3) unless the user states it in config.json or accepts
#: the library's default with ``--assume-default NAME``
#: (:func:`models.layouts.require_stated`).
KERNEL_ARGS: Mapping[tuple[str, str], Mapping[str, str]] = {
    ("performer-pytorch", "SelfAttention"): {
        "generalized_attention": "FAVOR+ (refused) or generalized random features",
        "kernel_fn": f"the generalized kernel's function ({_KERNEL_FNS})",
        "no_projection": "features without the random projection",
        "local_heads": "how many heads are windowed softmax (refused)"},
    ("performer-pytorch", "Performer"): {
        "generalized_attention": "FAVOR+ (refused) or generalized random features",
        "kernel_fn": f"the generalized kernel's function ({_KERNEL_FNS})",
        "no_projection": "features without the random projection",
        "local_attn_heads": "how many heads are windowed softmax (refused)"},
    ("linear-attention-transformer", "SelfAttention"): {
        "heads": "the head split (dim_head follows from it)",
        "causal": "softmax keys over the sequence (refused) or softmax(q), exp(k)",
        "blindspot_size": "a bucketed causal mask (refused)",
        "n_local_attn_heads": "how many heads are windowed softmax (refused)"},
    ("linear-attention-transformer", "LinearAttentionTransformer"): {
        "heads": "the head split (dim_head follows from it)",
        "causal": "softmax keys over the sequence (refused) or softmax(q), exp(k)",
        "blindspot_size": "a bucketed causal mask (refused)",
        "n_local_attn_heads": "how many heads are windowed softmax (refused)"},
    ("fla", "LinearAttention"): {
        "feature_map": f"the feature map (a learned map's keys tell it; {', '.join(param_free('fla'))} do not)",
        "num_heads": "the head split (a learned map's shape tells it)",
        "norm_q": "queries' features divided by their sum", "norm_k": "keys' features divided by their sum",
        "do_feature_map_norm": "the normalizing denominator (without it: unnormalized kernel attention)"},
    ("fla", "LinearAttentionConfig"): {
        "feature_map": "the feature map", "num_heads": "the head split",
        "num_kv_heads": "the grouped key heads", "norm_q": "queries' features divided by their sum",
        "norm_k": "keys' features divided by their sum",
        "norm_feature_map": "the normalizing denominator (without it: unnormalized kernel attention)"},
    ("fla", "BasedLinearAttention"): {
        "feature_dim": "the head split (feature_dim x num_heads = the projection's rows)",
        "num_heads": "the head split (feature_dim x num_heads = the projection's rows)"},
    ("fla", "ReBasedLinearAttention"): {
        "normalize": "a LayerNorm of q and k before the quadratic map"},
    ("zoology", "Based"): {
        "feature_dim": "the head split (feature_dim x num_heads = the projection's rows)",
        "num_heads": "the head split (feature_dim x num_heads = the projection's rows)",
        "feature_name": f"the feature map ({' or '.join(names_in('fla-based'))})"},
    ("pytorch-fast-transformers", "AttentionLayer"): {
        "attention_type": "softmax (the builder's default, refused) or linear attention",
        "feature_map": "the feature map (elu(x) + 1 by default)",
        "n_heads": "the head split"},
}
