"""Third-party checkpoints -> kernel heads: a state dict plus a spec.

A spec (JSON, unknown keys rejected) says where the query/key/value weights of
one attention head live and which feature map the library applies::

    {"format": "certify-attention/adapter/1", "layout": "performer",
     "prefix": "net.layers.0.0.fn.", "heads": 4, "dim_head": 16, "head": 0,
     "attention": "generalized", "kernel_fn": "relu", "kernel_epsilon": 0.001}

Layouts:

* ``performer`` (performer-pytorch ``Attention``/``SelfAttention``): keys
  ``to_q/to_k/to_v.weight`` (+ ``.bias``) and the frozen random projection
  ``fast_attention.projection_matrix``. ``attention = "generalized"``:
  ``phi(u) = kernel_fn(d^-1/4 u P^T) + kernel_epsilon`` for queries and keys
  (fixed). ``"softmax"`` (FAVOR+) stabilizes the keys with their maximum over
  the whole sequence and ``"no_projection"`` takes a softmax over the sequence:
  neither is a fixed function of (x, z), so both are refused (exit 3).
* ``linear-attention-transformer`` (``SelfAttention``): keys
  ``to_q/to_k/to_v.weight``; causal heads use ``phiQ = softmax(q) d^-1/2``,
  ``phiK = exp(k)``; non-causal heads take ``softmax`` of the keys over the
  sequence and are refused (exit 3); local heads (the first
  ``local_heads``) are windowed softmax attention and refused.
* ``generic``: explicit keys ``query_weight``, ``key_weight`` (+ biases,
  ``value_weight``) and ``feature_map``, a name of the table's ``adapter``
  column (:mod:`models.feature_table`: ``elu1`` is ``elu + 1``, ``softmax`` is
  over the features, ``favor`` reads the ``projection`` key); the
  ``performer`` layout's ``kernel_fn`` is one of its elementwise maps.

Any layout: ``positional`` other than ``"none"``, a state dict holding
positional-embedding tensors, ``redraw_features: true`` or
``keys_normalized_over_sequence: true`` -> ``UncertifiableError`` with the
reason. An optional ``layer_norm`` {``weight``, ``bias``, ``eps``} is applied
to the token first (pre-norm blocks). The state dict comes from the one weight
reader (:func:`certify.sources.weights.read_weights`): safetensors or
``torch.load(weights_only=True)``; nothing is unpickled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from certify.core.errors import InputError, UncertifiableError
from models import feature_table as fm
from models.optional_torch import F, no_grad, torch, tt

SPEC_FORMAT = "certify-attention/adapter/1"
LAYOUTS = ("performer", "linear-attention-transformer", "generic")
#: the spec's feature maps (layout ``generic``) and, of those applied elementwise, performer's
#: ``kernel_fn`` (:mod:`models.feature_table`; torch is looked up when a twin is called)
_MAPS = fm.in_library("adapter")
_KERNEL_FNS = {n: e for n, e in _MAPS.items() if e.elementwise}


@dataclass(frozen=True)
class AdapterSpec:
    layout: str
    prefix: str = ""
    heads: int = 1
    dim_head: int | None = None
    head: int = 0
    attention: str = "generalized"          # performer: generalized | softmax | no_projection
    kernel_fn: str = "relu"
    kernel_epsilon: float = 0.001
    normalize_data: bool = True
    causal: bool = False
    local_heads: int = 0
    positional: str = "none"
    redraw_features: bool = False
    keys_normalized_over_sequence: bool = False
    normalized: bool = True
    feature_map: str | None = None           # generic
    query_weight: str | None = None
    query_bias: str | None = None
    key_weight: str | None = None
    key_bias: str | None = None
    value_weight: str | None = None
    value_bias: str | None = None
    projection: str | None = None
    layer_norm: Mapping[str, Any] | None = None
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


_FIELDS = {f for f in AdapterSpec.__dataclass_fields__ if f != "extra"} | {"format"}


def parse_spec(obj: Any) -> AdapterSpec:
    if not isinstance(obj, Mapping):
        raise InputError("adapter spec must be a JSON object")
    if obj.get("format", SPEC_FORMAT) != SPEC_FORMAT:
        raise InputError(f"adapter spec format must be {SPEC_FORMAT!r}")
    extra = set(obj) - _FIELDS
    if extra:
        raise InputError(f"adapter spec has unknown keys: {sorted(extra)}")
    if obj.get("layout") not in LAYOUTS:
        raise InputError(f"adapter spec layout must be one of {LAYOUTS}, got {obj.get('layout')!r}")
    kw = {k: v for k, v in obj.items() if k != "format"}
    for k in ("heads", "head", "local_heads"):
        if k in kw and (not isinstance(kw[k], int) or isinstance(kw[k], bool) or kw[k] < 0):
            raise InputError(f"adapter spec: {k} must be a nonnegative integer")
    if kw.get("heads", 1) < 1:
        raise InputError("adapter spec: heads must be >= 1")
    return AdapterSpec(**kw)


def read_spec(path: str | Path) -> AdapterSpec:
    if Path(path).exists() and not Path(path).is_file():
        raise InputError(f"adapter spec {path} is not a regular file")
    try:
        return parse_spec(json.loads(Path(path).read_text()))
    except FileNotFoundError:
        raise InputError(f"no such adapter spec: {path}") from None
    except (ValueError, RecursionError) as exc:     # bad JSON or UTF-8, over-long integers
        raise InputError(f"adapter spec {path} is not JSON ({' '.join(str(exc).split())[:100]})") from None


class AdaptedHead:
    """One head of a third-party layer as a kernel head: ``feature_matrices``,
    ``values``, ``rank``, ``m``, ``guarantee``, ``feature_map``."""

    def __init__(self, spec: AdapterSpec, sd: Mapping[str, torch.Tensor]) -> None:
        self.spec = spec
        _refuse_position_and_sequence(spec, sd)
        lay = spec.layout
        if lay == "performer":
            self._init_performer(sd)
        elif lay == "linear-attention-transformer":
            self._init_lat(sd)
        else:
            self._init_generic(sd)
        self.m = int(self.Wq.shape[1])
        if lay == "performer":
            nonneg = _KERNEL_FNS[spec.kernel_fn].nonnegative and spec.kernel_epsilon >= 0
        else:
            nonneg = lay == "linear-attention-transformer" or _MAPS[self.feature_map].nonnegative
        self.guarantee = "features_nonnegative" if nonneg else "signed"
        #: the layer norm on the token: (weight, bias or None, eps)
        self.ln: tuple[torch.Tensor, torch.Tensor | None, float] | None
        if spec.layer_norm is not None:
            ln = dict(spec.layer_norm)
            extra = set(ln) - {"weight", "bias", "eps"}
            if extra:
                raise InputError(f"adapter spec layer_norm has unknown keys: {sorted(extra)}")
            self.ln = (_get(sd, ln.get("weight")), _get(sd, ln.get("bias")) if ln.get("bias") else None,
                       float(ln.get("eps", 1e-5)))
        else:
            self.ln = None

    @property
    def dtype(self):
        """The torch dtype the head computes in (float32 for half-precision weights)."""
        return tt(self.Wq).dtype

    # ---------------------------------------------------------- layouts
    def _head_slice(self, W, b, what: str):
        s = self.spec
        d = s.dim_head or W.shape[0] // s.heads
        if W.shape[0] != d * s.heads:
            raise InputError(f"{what} has {W.shape[0]} rows, expected heads x dim_head = {s.heads} x {d}")
        if not 0 <= s.head < s.heads:
            raise InputError(f"head {s.head} outside 0..{s.heads - 1}")
        rows = slice(s.head * d, (s.head + 1) * d)
        return W[rows], (b[rows] if b is not None else None), d

    def _qkv(self, sd, names):
        p = self.spec.prefix
        out = []
        for n in names:
            W = _get(sd, p + n + ".weight")
            b = sd.get(p + n + ".bias")
            out.append(self._head_slice(W, b, p + n + ".weight"))
        return out

    def _init_performer(self, sd) -> None:
        s = self.spec
        if s.attention == "softmax":
            raise UncertifiableError("performer FAVOR+ softmax kernel stabilizes the keys by their maximum "
                                     "over the sequence (plus a constant): alpha is not a fixed function of (x, z)")
        if s.attention == "no_projection":
            raise UncertifiableError("performer no_projection takes a softmax of the keys over the sequence: "
                                     "alpha is not a fixed function of (x, z)")
        if s.attention != "generalized":
            raise InputError(f"performer attention must be generalized, softmax or no_projection, got {s.attention!r}")
        if s.kernel_fn not in _KERNEL_FNS:
            raise InputError(f"performer kernel_fn must be one of {sorted(_KERNEL_FNS)}, got {s.kernel_fn!r}")
        if s.head >= s.heads - s.local_heads:
            raise UncertifiableError(f"head {s.head} is a local (windowed softmax) head: position-dependent")
        (self.Wq, self.bq, d), (self.Wk, self.bk, _), (self.Wv, self.bv, _) = self._qkv(sd, ("to_q", "to_k", "to_v"))
        key = s.prefix + "fast_attention.projection_matrix"
        if key not in sd:
            raise UncertifiableError(f"{key} is not in the state dict: the random features would be drawn "
                                     f"anew, so the kernel is not fixed")
        self.P = sd[key]                                   # (r, d)
        if self.P.shape[1] != d:
            raise InputError(f"{key} has shape {tuple(self.P.shape)}, expected (nb_features, {d})")
        self.rank = int(self.P.shape[0])
        self.feature_map = f"performer-generalized-{s.kernel_fn}"
        self.d = d

    def _init_lat(self, sd) -> None:
        s = self.spec
        if s.head < s.local_heads:
            raise UncertifiableError(f"head {s.head} is a local (windowed softmax) head: position-dependent")
        if not s.causal:
            raise UncertifiableError("linear-attention-transformer non-causal heads take softmax of the keys "
                                     "over the sequence: alpha is not a fixed function of (x, z)")
        (self.Wq, self.bq, d), (self.Wk, self.bk, _), (self.Wv, self.bv, _) = self._qkv(sd, ("to_q", "to_k", "to_v"))
        self.rank, self.d = d, d
        self.feature_map = "lat-softmax-q-exp-k"

    def _init_generic(self, sd) -> None:
        s = self.spec
        if s.feature_map not in _MAPS:
            raise InputError(f"generic feature_map must be {', '.join(list(_MAPS)[:-1])} or {list(_MAPS)[-1]}, "
                             f"got {s.feature_map!r}")
        if not s.query_weight or not s.key_weight:
            raise InputError("generic layout needs query_weight and key_weight keys")
        Wq, Wk = _get(sd, s.query_weight), _get(sd, s.key_weight)
        self.Wq, self.bq, d = self._head_slice(Wq, _get(sd, s.query_bias) if s.query_bias else None, s.query_weight)
        self.Wk, self.bk, _ = self._head_slice(Wk, _get(sd, s.key_bias) if s.key_bias else None, s.key_weight)
        if s.value_weight:
            self.Wv, self.bv, _ = self._head_slice(_get(sd, s.value_weight),
                                                   _get(sd, s.value_bias) if s.value_bias else None, s.value_weight)
        else:
            self.Wv = self.bv = None
        self.d = d
        if s.feature_map == "favor":
            if not s.projection:
                raise InputError("favor needs the projection key")
            self.P = _get(sd, s.projection)
            self.rank = int(self.P.shape[0])
        else:
            self.rank = d
        self.feature_map = s.feature_map

    # ---------------------------------------------------------- features
    def _pre(self, x):
        if self.ln is None:
            return x
        w, b, eps = self.ln
        return F.layer_norm(x, (x.shape[-1],), tt(w), tt(b), eps)

    def _project(self, x, W, b):
        u = self._pre(x) @ tt(W).T
        return u + tt(b) if b is not None else u

    def _phi(self, u, which: str):
        s = self.spec
        if s.layout == "performer":
            norm = self.d ** -0.25 if s.normalize_data else 1.0
            return _KERNEL_FNS[s.kernel_fn].torch((norm * u) @ tt(self.P).T.to(u.dtype)) + s.kernel_epsilon
        if s.layout == "linear-attention-transformer":
            return u.softmax(dim=-1) * self.d ** -0.5 if which == "q" else torch.exp(u)
        e = _MAPS[self.feature_map]
        return e.torch(self.P)(u) if e.learned else e.torch(u)       # favor: its projection

    def _tokens(self, tokens):
        tokens = tt(tokens)
        t = torch.from_numpy(np.array(tokens, copy=True)) if not isinstance(tokens, torch.Tensor) else tokens
        if t.ndim != 2 or t.shape[1] != self.m:
            raise InputError(f"tokens must be (K, {self.m}), got {tuple(t.shape)}")
        return t.to(self.dtype)

    @no_grad
    def feature_matrices(self, tokens):
        x = self._tokens(tokens)                                           # (K, m)
        return (self._phi(self._project(x, self.Wq, self.bq), "q"),
                self._phi(self._project(x, self.Wk, self.bk), "k"))       # (K, r) x 2

    def canonical_features(self, tokens) -> tuple[np.ndarray, np.ndarray]:
        """The features a certificate binds (:mod:`models.canonical`): float64,
        fixed-order sums, correctly rounded functions; the same bits on every machine."""
        from models.canonical import maps as cm
        from models.canonical.arith import f64, linear, positive_zero
        x = f64(tokens)
        if x.ndim != 2 or x.shape[1] != self.m:
            raise InputError(f"tokens must be (K, {self.m}), got {tuple(x.shape)}")
        if self.ln is not None:
            w, b, eps = self.ln
            x = cm.layer_norm(None if w is None else f64(w), None if b is None else f64(b), eps)(x)
        s = self.spec

        def opt(t):
            return None if t is None else f64(t)
        uq, uk = linear(x, f64(self.Wq), opt(self.bq)), linear(x, f64(self.Wk), opt(self.bk))
        if s.layout == "performer":
            phi = cm.performer(_KERNEL_FNS[s.kernel_fn].canonical, f64(self.P), self.d, s.kernel_epsilon,
                               s.normalize_data)
            q, k = phi(uq), phi(uk)
        elif s.layout == "linear-attention-transformer":
            q, k = cm.scaled_softmax(cm.inv_sqrt(self.d))(uq), cm.cr_exp(uk)
        else:
            e = _MAPS[self.feature_map]
            phi = e.canonical(self.P) if e.learned else e.canonical
            q, k = phi(uq), phi(uk)
        return positive_zero(q), positive_zero(k)

    @no_grad
    def values(self, tokens):
        if self.Wv is None:
            raise InputError("the spec names no value weights")
        return self._project(self._tokens(tokens), self.Wv, self.bv)       # (K, d)

    def describe(self) -> dict[str, Any]:
        return {"layout": self.spec.layout, "prefix": self.spec.prefix, "head": self.spec.head,
                "heads": self.spec.heads, "feature_map": self.feature_map, "rank": self.rank, "m": self.m,
                "normalized": self.spec.normalized, "causal": self.spec.causal,
                "note": "kernel = exact product of the features recomputed from the weights in the "
                        "checkpoint dtype (equal to the library's up to float reassociation)"}


def _get(sd: Mapping[str, torch.Tensor], key: str | None) -> torch.Tensor:
    if key is None or key not in sd:
        near = sorted(k for k in sd if key and key.split(".")[-2:-1] and key.split(".")[-2] in k)[:4]
        raise InputError(f"state dict has no tensor {key!r}" + (f" (similar: {near})" if near else ""))
    return sd[key]


def _refuse_position_and_sequence(spec: AdapterSpec, sd: Mapping[str, torch.Tensor]) -> None:
    if spec.positional != "none":
        raise UncertifiableError(f"positional encoding {spec.positional!r}: the kernel depends on positions, "
                                 f"not on (x, z) alone")
    pos = [k for k in sd if "pos_emb" in k]
    if pos:
        raise UncertifiableError(f"the state dict holds positional embeddings ({pos[0]}): the kernel may "
                                 f"depend on positions; pass the attention layer's weights alone")
    if spec.redraw_features:
        raise UncertifiableError("random features are redrawn during use: the kernel is not a fixed function")
    if spec.keys_normalized_over_sequence:
        raise UncertifiableError("keys are normalized over the sequence: alpha is not a fixed function of (x, z)")


def adapt(state_dict: Mapping[str, torch.Tensor], spec: AdapterSpec | Mapping[str, Any]) -> AdaptedHead:
    if not isinstance(spec, AdapterSpec):
        spec = parse_spec(spec)
    return AdaptedHead(spec, state_dict)
