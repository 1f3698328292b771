"""The canonical forward of an fla ``linear_attn`` language model: the hidden states
entering every layer on stated token sequences, the same bits on every machine.

fla's ``LinearAttentionForCausalLM`` (fla 0.6.0, ``fla/models/linear_attn``) computes, per
block ``i`` (``LinearAttentionBlock``), from the hidden states ``h`` (``(S, T, d)``; the
embedding rows of the ids before block 0):

* ``x = attn_norm(h)`` (RMSNorm, ``norm_eps``);
* the attention (``fla.layers.LinearAttention``): per head ``q = phiQ(W_q x)``,
  ``k = phiK(W_k x)`` -- the feature map, ``norm_q``/``norm_k`` and the query scale
  ``r^-1/2``, exactly the features the head's claims bind
  (:meth:`models.layouts.base.FeatureHead.canonical_projected`) --, ``v = W_v x`` (a key /
  value head serves ``num_heads / num_kv_heads`` query heads), the causal mixing
  ``o_t = sum_{j <= t} (q_t . k_j) v_j``, divided by ``sum_{j <= t} q_t . k_j + 1e-10`` when
  the layer is normalized (``norm_feature_map``), then the output norm (RMSNorm over
  a head's values, ``norm.weight`` when ``elementwise_affine``) and ``o_proj``;
* ``h = h + attn``, ``x = mlp_norm(h)``, the gated MLP (``GatedMLP``, ``swish``):
  ``down(swish(gate x) * (up x))``, ``h = h + mlp``.

Canonically (:mod:`models.canonical`): every product ``x W^T`` is
:func:`models.canonical.arith.linear` (fixed order), the norms are
:func:`models.canonical.maps.rms_norm`, ``swish(g) = g * sigmoid(g)`` with the
correctly rounded sigmoid; the mixing of one head on one sequence is
``A = linear(q, k)`` (``A[t, j] = q_t . k_j``), ``A`` with ``+0.0`` above the diagonal,
``o = linear(A, v^T)`` (the sum over ``j`` left to right: the terms past ``t`` are zeros)
and, normalized, ``o / (rowsum(A) + 1e-10)``. fla's own op (``naive_recurrent_linear_attn``)
sums the same products in another order: the two agree to float rounding, which
the library check measures (:func:`models.layouts.reference.check_forward`).

Only this architecture is run: a hybrid (``attn`` softmax layers), ``attnres``, another
``hidden_act`` or a tensor of a block the forward does not read is refused with the reason
(:func:`refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from certify.core.errors import InputError
from certify.core.memory import trim
from models.canonical import maps as cm
from models.canonical.arith import cr_sigmoid, f64, linear, rowsum
from models.layouts.base import Detected, FeatureHead

#: the families whose every layer runs on stated sequences
SEQUENCE_LAYOUTS = ("fla:linear_attn",)
#: what --sequences is refused with for another model
SUPPORTED = "fla linear_attn language models (config.json model_type 'linear_attn')"
#: fla's epsilon of a normalized layer's denominator (naive_recurrent_linear_attn)
DEN_EPS = 1e-10
#: the tensors of one block the forward reads (beyond the attention's feature maps)
BLOCK_KEYS = ("attn_norm.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
              "attn.o_proj.weight", "mlp_norm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
              "mlp.down_proj.weight")


def refusal(det: Detected) -> str | None:
    """Why ``--sequences`` cannot run on this fla model (one line), or None (another family:
    :func:`models.layouts.forward.refusal`)."""
    if det.layout not in SEQUENCE_LAYOUTS:
        return (f"--sequences on fla: the canonical forward runs {SUPPORTED}; this is {det.container or det.layout} "
                f"(a model of fla layers under a user's module: the blocks around them are not stated)")
    cfg = det.config
    if (cfg.get("attn") or {}).get("layers"):
        return ("--sequences: this fla model has softmax attention layers (config.json attn): the canonical "
                "forward runs linear attention blocks only")
    if cfg.get("attnres_block_size") is not None:
        return ("--sequences: attnres_block_size is set: the canonical forward runs the plain residual "
                "blocks only")
    if cfg.get("hidden_act", "swish") != "swish":
        return (f"--sequences: hidden_act {cfg.get('hidden_act')!r}: the canonical forward runs fla's swish "
                f"MLP only")
    return None


@dataclass
class Forward:
    """The canonical forward on ``ids`` (S, T): ``inputs[L]`` the hidden states entering
    layer ``L`` (``(S T, d)`` float64, row ``s T + t``), ``features[(L, h)]`` head ``h``'s
    ``(phiQ, phiK)`` on them (every layer's, or, for a forward that keeps none, the layer
    :func:`layer_features` computed last)."""

    ids: np.ndarray
    inputs: list[np.ndarray] = field(default_factory=list)
    features: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: the hidden states after the last block computed (where :func:`forward` resumes)
    after: np.ndarray | None = None


def _kernel_heads(L: Any) -> list[FeatureHead]:
    return [hd for hd in L.heads if isinstance(hd, FeatureHead)]


def layer_features(det: Detected, sd: Mapping[str, Any], fwd: Forward, L: Any) -> None:
    """Every head's features of layer ``L`` into ``fwd.features`` from the hidden states
    entering it (``fwd.inputs``): ``attn_norm`` then each head's maps, the same function on
    the same inputs as in :func:`forward`, so the same bits; the other layers' features are
    dropped (one layer is held at a time)."""
    fwd.features = {}
    if fwd.inputs[L.index] is None:
        raise RuntimeError(f"internal error: layer {L.index}'s inputs were released before its heads ran")
    eps = float(det.config.get("norm_eps", 1e-6))
    key = f"{det.prefix}model.layers.{L.index}.attn_norm.weight"
    x = cm.rms_norm(f64(sd[key]), eps)(fwd.inputs[L.index])
    for hd in _kernel_heads(L):
        fwd.features[(L.index, int(hd.details["head"]))] = hd.canonical_projected(x)
        hd.release()


def _affine_out(L: Any) -> bool:
    info = L.library
    return info.get("output_norm") == "rmsnorm" and bool(info.get("elementwise_affine"))


def check_blocks(det: Detected, sd: Mapping[str, Any]) -> None:
    """Every block's tensors are the ones the forward reads (names only, no value read):
    InputError (one line) before any work otherwise."""
    for L in det.layers:
        _block_keys(sd, f"{det.prefix}model.layers.{L.index}.", _affine_out(L))


def _block_keys(sd: Mapping[str, Any], blk: str, affine_out: bool) -> None:
    """InputError when a tensor the forward needs is missing or the block holds one it does not read."""
    need = {blk + k for k in BLOCK_KEYS} | ({blk + "attn.norm.weight"} if affine_out else set())
    missing = sorted(need - set(sd))
    if missing:
        raise InputError(f"--sequences: {missing[0]} is not in the checkpoint: the block is not fla's "
                         f"LinearAttentionBlock as the canonical forward runs it")
    extra = sorted(k for k in sd if k.startswith(blk) and k not in need
                   and not k.startswith((blk + "attn.feature_map_q.", blk + "attn.feature_map_k.")))
    if extra:
        raise InputError(f"--sequences: the checkpoint has {extra[0]}, which the canonical forward of fla's "
                         f"LinearAttentionBlock does not read")


def head_features(out: Forward, L: Any, hd: FeatureHead, x: np.ndarray, keep: bool) -> tuple[np.ndarray, np.ndarray]:
    """Head ``hd``'s canonical features on ``x`` (the layer's normed inputs), kept in
    ``out.features`` when ``keep``, else its float64 weights released after use."""
    q, k = hd.canonical_projected(x)
    if keep:
        out.features[(L.index, int(hd.details["head"]))] = (q, k)
    else:
        hd.release()
    return q, k


def per_sequence(mix: Any, q: np.ndarray, k: np.ndarray, v: np.ndarray, T: int, *args: Any) -> np.ndarray:
    """``mix`` on each sequence's rows (``T`` positions each, row ``s T + t``), stacked in order."""
    return np.concatenate([mix(q[s:s + T], k[s:s + T], v[s:s + T], *args) for s in range(0, q.shape[0], T)])


def _mix(q: np.ndarray, k: np.ndarray, v: np.ndarray, normalized: bool) -> np.ndarray:
    """One head on one sequence: ``o_t = sum_{j <= t} (q_t . k_j) v_j`` (divided by
    ``sum_{j <= t} q_t . k_j + 1e-10`` when normalized), in the module docstring's order."""
    T = q.shape[0]
    A = linear(q, k)                                                  # A[t, j] = q_t . k_j
    A = np.where(np.tri(T, dtype=bool), A, 0.0)
    o = linear(A, np.ascontiguousarray(v.T))                          # (T, dv)
    if normalized:
        o = o / (rowsum(A) + DEN_EPS)
    return o


def forward(det: Detected, sd: Mapping[str, Any], ids: np.ndarray, upto: int | None = None,
            keep_features: bool = True, resume: Forward | None = None) -> Forward:
    """The hidden states entering every layer (up to ``upto``, inclusive) and every head's
    features on them (module docstring). ``sd``: the checkpoint's tensors (stored weights).
    ``keep_features`` False: the features are used for the mixing and dropped (a layer's are
    computed again by :func:`layer_features` when its heads are certified), each block's
    float64 weights are released after the block, and each head's kept weights too: memory
    for one layer at a time beyond the hidden states. ``resume``: a forward of the same ids
    up to an earlier layer, continued from the hidden states after its last block (the same
    operations in the same order as one call: the same bits)."""
    why = refusal(det)
    if why is not None:
        raise InputError(why)
    T = int(ids.shape[1])
    R = det.prefix
    if resume is not None and resume.after is not None and np.array_equal(resume.ids, ids):
        out, h = resume, resume.after
    else:
        out, h = Forward(ids), f64(det.embedding)[ids.reshape(-1)]   # (S T, d): exact rows
    eps = float(det.config.get("norm_eps", 1e-6))
    last = len(det.layers) - 1 if upto is None else upto
    for L in det.layers[len(out.inputs):last + 1]:
        out.inputs.append(h)
        blk = f"{R}model.layers.{L.index}."
        info = L.library
        affine_out = _affine_out(L)
        _block_keys(sd, blk, affine_out)
        w = {k: f64(sd[blk + k]) for k in BLOCK_KEYS if k not in ("attn.q_proj.weight", "attn.k_proj.weight")}
        x = cm.rms_norm(w["attn_norm.weight"], eps)(h)
        heads = _kernel_heads(L)
        H, Hkv = int(info["num_heads"]), int(info["num_kv_heads"])
        if len(heads) != H:
            raise InputError(f"--sequences: layer {L.index} has {len(heads)} kernel heads of {H}")
        v_all = linear(x, w["attn.v_proj.weight"])                    # (S T, Hkv dv)
        dv = v_all.shape[1] // Hkv
        onorm = None
        if info.get("output_norm") == "rmsnorm":
            onorm = cm.rms_norm(f64(sd[blk + "attn.norm.weight"]) if affine_out else None,
                                float(info["norm_eps"]))
        cols = []
        for hd in heads:
            q, k = head_features(out, L, hd, x, keep_features)
            hk = int(hd.details["kv_head"])
            o = per_sequence(_mix, q, k, v_all[:, hk * dv:(hk + 1) * dv], T, hd.normalized)
            cols.append(onorm(o) if onorm is not None else o)
        attn = linear(np.concatenate(cols, axis=1), w["attn.o_proj.weight"])
        h = h + attn
        x = cm.rms_norm(w["mlp_norm.weight"], eps)(h)
        g = linear(x, w["mlp.gate_proj.weight"])
        u = linear(x, w["mlp.up_proj.weight"])
        h = h + linear((g * cr_sigmoid(g)) * u, w["mlp.down_proj.weight"])
        if not keep_features:
            for name in [*w, "attn.norm.weight"]:
                getattr(sd.get(blk + name), "release", lambda: None)()   # a stored weight's float64 copy
        del w, x, g, u, v_all, cols, attn
        trim()                                  # the block's temporaries back to the kernel
    out.after = h
    return out
