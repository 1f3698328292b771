"""The canonical forward of a performer-pytorch ``PerformerLM`` or a linear-attention-transformer
``LinearAttentionTransformerLM``: the hidden states entering every layer on stated token
sequences, the same bits on every machine.

``PerformerLM`` (performer-pytorch 1.1.4) with ``rotary_position_emb=False`` and
``axial_position_emb=False`` computes, on ids ``(S, T)``:

* ``h = token_emb[ids] + pos_emb.emb[t]`` (``AbsolutePositionalEmbedding``: row ``t`` at position ``t``);
* per block ``i`` (``SequentialSequence``: ``x = x + f(x)``, ``x = x + g(x)``), with ``f`` the
  attention and ``g`` the feed-forward, each behind its ``PreLayerNorm`` (``LayerNorm``, eps 1e-5):
  ``x = norm(h)``; per head ``q = phiQ(W_q x + b_q)``, ``k = phiK(W_k x + b_k)`` -- exactly the
  features the head's claims bind (:meth:`models.layouts.base.FeatureHead.canonical_projected`) --,
  ``v = W_v x + b_v``; causal (``causal_linear_attention_noncuda``):
  ``o_t = sum_{j <= t} (q_t . k_j) v_j / (q_t . (sum_{j <= t} k_j + 1e-6))``; not causal
  (``linear_attention``): the sums over every ``j`` and no epsilon; the heads' outputs side by side
  through ``to_out``; ``h = h + attn``; then ``h = h + w2(gelu(w1 norm(h)))`` (``ff_glu``:
  ``w2(gelu(a) * b)`` with ``(a, b)`` the halves of ``w1 norm(h)``).

``LinearAttentionTransformerLM`` (linear-attention-transformer 0.19.1) with
``use_axial_pos_emb=False``, ``use_rotary_emb=False`` and causal heads (``blindspot_size=1``)
is the same stack (``transformer.layers.layers.<i>``, ``PreNorm``), its heads
``phiQ = softmax(q) d^-1/2``, ``phiK = exp(k)`` and ``causal_linear_attn``'s denominator
``max(q_t . sum_{j <= t} k_j, 1e-3)``, its feed-forward ``w2(gelu(w1 x))``.

Canonically (:mod:`models.canonical`): every product ``x W^T (+ b)`` is
:func:`models.canonical.arith.linear` (fixed order), the norms :func:`models.canonical.maps.layer_norm`,
``gelu`` the correctly rounded ``x (1 + erf(x / sqrt 2)) / 2``; the mixing of one head on one sequence
is ``A = linear(q, k)`` with ``+0.0`` above the diagonal when causal, ``o = linear(A, v^T)``, divided
by ``rowsum(q * (cumsum(k) + 1e-6))`` (``numpy.cumsum`` along the positions: one addition after
another; linear-attention-transformer: ``max(rowsum(q * cumsum(k)), 1e-3)``). The library sums in other orders (chunked cumulative sums, einsum): the two agree to float
rounding, which the library check measures (:func:`models.layouts.reference.check_forward`).

Only this architecture is run: rotary or axial positions, ScaleNorm or ReZero wrappers, reversible
or cross-attending stacks, token shifts, local (windowed softmax) heads, FAVOR+ heads, or a tensor
of a block the forward does not read are refused with the reason (:func:`refusal`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from certify.core.errors import InputError
from certify.core.memory import trim
from models.canonical import maps as cm
from models.canonical.arith import cr_gelu, f64, linear, rowsum
from models.layouts.base import Detected, FeatureHead
from models.layouts.fla_forward import Forward, head_features, per_sequence
from models.layouts.lucidrains import ABSOLUTE, LAT, PERFORMER

#: what the canonical forward runs
SUPPORTED = ("performer-pytorch PerformerLM with rotary_position_emb=False, axial_position_emb=False "
             "(learned absolute positions), LayerNorm pre-norms, every head a generalized kernel head; "
             "linear-attention-transformer LinearAttentionTransformerLM with use_axial_pos_emb=False, "
             "causal, no local heads")
#: each library's blocks under the LM (``<i>.0``: the attention's pre-norm wrapper, ``<i>.1`` the feed-forward's)
BLOCKS = {PERFORMER: "performer.net.layers.", LAT: "transformer.layers.layers."}
#: the denominator's floor of linear-attention-transformer's causal_linear_attn
LAT_CLAMP = 1e-3
#: the causal denominator's epsilon (causal_linear_attention_noncuda)
CAUSAL_EPS = 1e-6
#: LayerNorm's epsilon in PreLayerNorm (torch's default)
LN_EPS = 1e-5
#: the tensors of one block the forward reads, beyond the heads' projections and feature maps
ATTN_KEYS = ("0.norm.weight", "0.norm.bias", "0.fn.to_v.weight", "0.fn.to_out.weight")
FF_KEYS = ("1.norm.weight", "1.norm.bias", "1.fn.fn.w1.weight", "1.fn.fn.w1.bias", "1.fn.fn.w2.weight",
           "1.fn.fn.w2.bias")
#: the block's tensors that may be there (biases of the projections; the heads read the rest)
OPTIONAL = ("0.fn.to_q.bias", "0.fn.to_k.bias", "0.fn.to_v.bias", "0.fn.to_out.bias")
#: read by the heads (FeatureHead): the query and key projections (and performer's random features)
HEAD_KEYS = {PERFORMER: ("0.fn.to_q.weight", "0.fn.to_k.weight", "0.fn.fast_attention.projection_matrix"),
             LAT: ("0.fn.to_q.weight", "0.fn.to_k.weight")}


def _root(det: Detected) -> str:
    return det.prefix + BLOCKS[det.library]


def refusal(det: Detected) -> str | None:
    """Why ``--sequences`` cannot run on this performer-pytorch or linear-attention-transformer
    model (one line), or None."""
    cfg = det.config
    cls = {PERFORMER: "PerformerLM", LAT: "LinearAttentionTransformerLM"}.get(det.library, "")
    lm = det.library in BLOCKS and det.embedding is not None and det.layout.endswith(
        (":Performer", ":LinearAttentionTransformer")) and all(L.library.get("lm_root") is not None for L in det.layers)
    if not lm:
        return (f"--sequences on {det.library}: the canonical forward runs a {cls or 'language model'} (token_emb.weight "
                f"with its stack of layers); this is {det.container or det.layout}: without --sequences, its first "
                f"layer's heads are certified on what they read")
    if any(L.prefix != f"{_root(det)}{L.index}.0.fn." for L in det.layers):     # layer i is block i
        return (f"--sequences: the canonical forward runs a {cls}'s sequential LayerNorm blocks; this one is "
                f"reversible, projects its embedding (emb_dim) or wraps its attention (token shift, axial folding)")
    for key in ("rotary_position_emb", "axial_position_emb", "use_rotary_emb", "cross_attend", "use_scalenorm",
                "use_rezero", "shift_tokens", "receives_context", "attend_axially", "pkm_layers"):
        if cfg.get(key):
            return f"--sequences: config.json sets {key}: the canonical forward runs {SUPPORTED}"
    for L in det.layers:
        heads = L.on_sequences if L.on_sequences is not None else L.heads
        bad = next((h for h in heads if not isinstance(h, FeatureHead)), None)
        if bad is not None:
            return (f"--sequences: layer {L.index} has a head that is not a kernel head ({bad.mechanism}: "
                    f"{bad.reason[:120]}): the canonical forward needs every head of every layer")
    return None


def for_sequences(det: Detected) -> None:
    """Every layer's heads on stated sequences: the refusal of the absolute positions replaced by
    the heads they resolve (:attr:`models.layouts.base.LayerPlan.on_sequences`)."""
    for L in det.layers:
        if L.on_sequences is not None:
            L.heads, L.on_sequences = L.on_sequences, None


def max_length(det: Detected) -> int | None:
    """The longest sequence the model takes: its position embedding's rows (``max_seq_len``)."""
    n = det.layers[0].library.get("max_seq_len") if det.layers else None
    return None if n is None else int(n)


def _heads(L: Any) -> list[FeatureHead]:
    return [hd for hd in L.heads if isinstance(hd, FeatureHead)]


def _norm(sd: Mapping[str, Any], blk: str, which: str):
    return cm.layer_norm(f64(sd[blk + which + ".norm.weight"]), f64(sd[blk + which + ".norm.bias"]), LN_EPS)


def layer_features(det: Detected, sd: Mapping[str, Any], fwd: Forward, L: Any) -> None:
    """Every head's features of layer ``L`` into ``fwd.features`` from the hidden states entering
    it: the attention's pre-norm then each head's maps, as in :func:`forward` (the same bits)."""
    fwd.features = {}
    if fwd.inputs[L.index] is None:
        raise RuntimeError(f"internal error: layer {L.index}'s inputs were released before its heads ran")
    x = _norm(sd, f"{_root(det)}{L.index}.", "0")(fwd.inputs[L.index])
    for hd in _heads(L):
        fwd.features[(L.index, int(hd.details["head"]))] = hd.canonical_projected(x)
        hd.release()


def check_blocks(det: Detected, sd: Mapping[str, Any]) -> None:
    """Every block's tensors are the ones the forward reads (names only, no value read):
    InputError (one line) before any work otherwise."""
    for L in det.layers:
        _block_keys(sd, f"{_root(det)}{L.index}.", det.library)


def _block_keys(sd: Mapping[str, Any], blk: str, library: str) -> None:
    """InputError when a tensor the forward needs is missing or the block holds one it does not read."""
    heads = HEAD_KEYS[library]
    missing = sorted(blk + k for k in (*ATTN_KEYS, *FF_KEYS, *heads) if blk + k not in sd)
    if missing:
        raise InputError(f"--sequences: {missing[0]} is not in the checkpoint: the block is not {library}'s "
                         f"sequential LayerNorm block as the canonical forward runs it")
    known = {blk + k for k in (*ATTN_KEYS, *FF_KEYS, *heads, *OPTIONAL)}
    extra = sorted(k for k in sd if k.startswith(blk) and k not in known)
    if extra:
        raise InputError(f"--sequences: the checkpoint has {extra[0]}, which the canonical forward of "
                         f"{library}'s block does not read")


def _mix(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, library: str) -> np.ndarray:
    """One head on one sequence (module docstring)."""
    T = q.shape[0]
    A = linear(q, k)                                                   # A[t, j] = q_t . k_j
    if causal:
        A = np.where(np.tri(T, dtype=bool), A, 0.0)
        ks = np.cumsum(k, axis=0)                                      # (T, r): sum_{j <= t} k_j
    else:
        ks = np.broadcast_to(np.cumsum(k, axis=0)[-1], k.shape)        # sum_j k_j, every row
    o = linear(A, np.ascontiguousarray(v.T))
    if library == LAT:                                                 # causal only
        return o / np.maximum(rowsum(q * ks), LAT_CLAMP)               # rowsum: (T, 1)
    return o / rowsum(q * (ks + CAUSAL_EPS if causal else ks))


def forward(det: Detected, sd: Mapping[str, Any], ids: np.ndarray, upto: int | None = None,
            keep_features: bool = True, resume: Forward | None = None) -> Forward:
    """The hidden states entering every layer (up to ``upto``, inclusive) and every head's
    features on them (module docstring); the arguments as :func:`models.layouts.fla_forward.forward`'s."""
    why = refusal(det)
    if why is not None:
        raise InputError(why)
    for_sequences(det)
    S, T = (int(n) for n in ids.shape)
    pos_key = det.prefix + ABSOLUTE
    if resume is not None and resume.after is not None and np.array_equal(resume.ids, ids):
        out, h = resume, resume.after
    else:
        out = Forward(ids)
        h = f64(det.embedding)[ids.reshape(-1)]                        # (S T, d), row s T + t
        if pos_key in sd:                                              # an LM without positions: none added
            pos = f64(sd[pos_key])
            if T > pos.shape[0]:
                raise InputError(f"--sequences: length {T} > the model's max_seq_len {pos.shape[0]} ({pos_key} rows)")
            h = h + np.tile(pos[:T], (S, 1))
    last = len(det.layers) - 1 if upto is None else upto
    for L in det.layers[len(out.inputs):last + 1]:
        out.inputs.append(h)
        blk = f"{_root(det)}{L.index}."
        _block_keys(sd, blk, det.library)
        heads = _heads(L)
        if len(heads) != int(L.library["heads"]):
            raise InputError(f"--sequences: layer {L.index} has {len(heads)} kernel heads of {L.library['heads']}")
        x = _norm(sd, blk, "0")(h)
        cols = []
        for hd in heads:
            q, k = head_features(out, L, hd, x, keep_features)
            v = linear(x, f64(hd.Wv), None if hd.bv is None else f64(hd.bv))
            cols.append(per_sequence(_mix, q, k, v, T, hd.causal, det.library))
        bo = sd.get(blk + "0.fn.to_out.bias")
        h = h + linear(np.concatenate(cols, axis=1), f64(sd[blk + "0.fn.to_out.weight"]),
                       None if bo is None else f64(bo))
        a = linear(_norm(sd, blk, "1")(h), f64(sd[blk + "1.fn.fn.w1.weight"]), f64(sd[blk + "1.fn.fn.w1.bias"]))
        w2 = f64(sd[blk + "1.fn.fn.w2.weight"])
        if a.shape[1] == 2 * w2.shape[1]:                               # ff_glu: gelu(a) * b
            a = cr_gelu(np.ascontiguousarray(a[:, :w2.shape[1]])) * a[:, w2.shape[1]:]
        else:
            a = cr_gelu(a)
        h = h + linear(a, w2, f64(sd[blk + "1.fn.fn.w2.bias"]))
        del x, cols, a
        trim()
    out.after = h
    return out
