"""The shared vocabulary of layout detection: one head as a kernel head, a refused
head with its reason, a layer, a detected model.

A :class:`FeatureHead` is one head of one layer as the paper's head sees it:
``x -> pre(x) -> W x + b -> phi``, with ``alpha(x, z) = <phiQ(x), phiK(z)>``
(the query scale folded into ``phiQ``, so the product is the number the
library multiplies). A head is *normalized* (the paper's head: the layer
outputs ``sum_j alpha(x, z_j) v_j / sum_j alpha(x, z_j)``) or not (fla's
``LinearAttention`` with ``do_feature_map_norm=False`` outputs the sum
``sum_j alpha(x, z_j) v_j`` itself): the kernel, its rank, eps-rank and sign
are the same objects either way; only the paper's normalized-head theorems
need the denominator. ``pre`` is the model's own path from its input to the
layer (embedding rows, pre-norms, input projections). Each step and map
exists twice: in torch (float32, the library's arithmetic, used where the
model is run as the library runs it) and canonically
(:mod:`models.canonical`: float64, fixed order, correctly rounded functions);
:meth:`FeatureHead.canonical_features` are the features a certificate binds,
the same bits on every machine. A float zero is returned as ``+0.0`` (a
``-0.0`` from ``relu(-0.0)`` is the same number, but not the same bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from certify.core.errors import InputError
from models.optional_torch import F, dtype_name, no_grad, torch, tt

#: appended to every "cannot tell the layout" error
#: rows of a stored embedding taken through a head's input steps at a time (:meth:`FeatureHead._inputs`)
INPUT_BLOCK = 4096
#: a stored embedding's inputs after a layer's steps are kept for the layer's heads up to this
#: size (32,000 x 1,024 float64: 262 MB); larger ones are made again by each head, a block at a
#: time (:meth:`FeatureHead._blocked_features`)
INPUTS_KEPT_BYTES = 512 << 20

SPEC_HINT = ("write an adapter spec (README, 'Supported layouts'): "
             "{\"layout\": \"generic\", \"query_weight\": ..., \"key_weight\": ..., \"heads\": H, "
             "\"feature_map\": \"elu1\"} and pass --spec SPEC")

Phi = Callable[[Any], Any]                            # torch (B, d) -> (B, r)
CanonMap = Callable[[np.ndarray], np.ndarray]         # (B, d) -> (B, r), float64 (models.canonical)


@dataclass(frozen=True)
class Refusal:
    """A head that is not a fixed kernel head alpha(x, z) = <phiQ(x), phiK(z)>."""

    layer: int
    head: int | None            # None: every head of the layer
    module: str                 # the layer's class / state-dict prefix
    mechanism: str              # "gating", "decay", "rotary", "favor+", "softmax attention", ...
    reason: str                 # why the mechanism breaks the claim

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "head": self.head, "module": self.module,
                "mechanism": self.mechanism, "reason": self.reason}


@dataclass(frozen=True)
class Step:
    """One step of the path from the model's input to a layer's projections."""

    name: str                   # what it is, e.g. "LayerNorm net.layers.0.0.norm (eps 1e-05)"
    fn: Phi
    canon: Callable[[np.ndarray], np.ndarray] | None = None     # the same step, canonically

    def __call__(self, x):
        return self.fn(x)


def compose(steps: list[Step]) -> Phi | None:
    if not steps:
        return None

    def f(x):
        for s in steps:
            x = s(x)
        return x
    return f


class FeatureHead:
    """One head as a kernel head: ``feature_matrices``, ``values``, ``m``, ``rank``,
    ``guarantee``, ``describe``. No scalar readout: correctness on a family is out
    of reach for these heads (see :mod:`certify.checkpoints.heads`)."""

    def __init__(self, *, m: int, Wq: Any, Wk: Any, phi_q: Phi, phi_k: Phi, rank: int,
                 nonnegative: bool, feature_map: str, bq: Any = None, bk: Any = None, Wv: Any = None,
                 bv: Any = None, steps: list[Step] | None = None, causal: bool = False,
                 notes: str = "", details: Mapping[str, Any] | None = None, canon_q: CanonMap | None = None,
                 canon_k: CanonMap | None = None, normalized: bool = True) -> None:
        self.m, self.rank = int(m), int(rank)
        self.Wq, self.Wk, self.bq, self.bk, self.Wv, self.bv = Wq, Wk, bq, bk, Wv, bv
        self.phi_q, self.phi_k = phi_q, phi_k
        self.canon_q, self.canon_k = canon_q, canon_k
        self.steps = list(steps or [])
        self.pre = compose(self.steps)
        self.guarantee = "features_nonnegative" if nonnegative else "signed"
        self.feature_map, self.causal, self.notes = feature_map, causal, notes
        self.normalized = bool(normalized)          # False: no denominator (the output is sum_j alpha v_j)
        self.details = dict(details or {})

    @property
    def dtype(self):
        """The torch dtype the library computes this head in (float32 for half-precision weights)."""
        return tt(self.Wq).dtype

    def _x(self, tokens):
        tokens = tt(tokens)                                                   # a stored embedding: its torch view
        t = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(np.asarray(tokens))
        if t.ndim != 2 or t.shape[1] != self.m:
            raise InputError(f"tokens must be (K, {self.m}), got {tuple(t.shape)}")
        t = t.to(self.dtype)
        return self.pre(t) if self.pre is not None else t

    @staticmethod
    def _lin(x, W, b):
        u = x @ tt(W).T.to(x.dtype)
        return u + tt(b).to(x.dtype) if b is not None else u

    @no_grad
    def feature_matrices(self, tokens):
        x = self._x(tokens)                                                   # (K, m)
        q = self.phi_q(self._lin(x, self.Wq, self.bq))                        # (K, r)
        k = self.phi_k(self._lin(x, self.Wk, self.bk))
        return q + 0.0, k + 0.0                                               # -0.0 -> +0.0

    def canonical_features(self, tokens) -> tuple[np.ndarray, np.ndarray]:
        """The features a certificate binds (:mod:`models.canonical`): float64,
        the same bits on every machine. ``tokens`` (K, m): 0/1 vectors or
        embedding rows (any float or integer array; read exactly)."""
        from models.canonical.arith import f64
        if self.canon_q is None or self.canon_k is None or any(s.canon is None for s in self.steps):
            raise InputError(f"feature map {self.feature_map}: no canonical definition")
        derived = getattr(tokens, "derived", None)
        if derived is not None and self.steps and tuple(self.steps) not in derived \
                and len(tokens.shape) == 2 and tokens.shape[0] > INPUT_BLOCK \
                and 8 * tokens.shape[0] * tokens.shape[1] > INPUTS_KEPT_BYTES:
            return self._blocked_features(tokens, f64)
        return self.canonical_projected(self._inputs(tokens, f64))

    def _blocked_features(self, tokens, f64) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`canonical_features` of a stored embedding too large to keep through its
        steps (:data:`INPUTS_KEPT_BYTES`), :data:`INPUT_BLOCK` rows at a time: each block
        decoded, taken through the steps, projected and mapped. Every step, projection and
        feature map acts on each row alone (or on each value: the correctly rounded maps),
        so the bits are the whole array's; the steps run again for each head of the layer
        instead of once (a 50,304 x 2,048 vocabulary's pre-norm: 0.8 GB not kept)."""
        K, m = tokens.shape
        if m != self.m:
            raise InputError(f"tokens must be (K, {self.m}), got {tuple(tokens.shape)}")
        outs: tuple[np.ndarray, np.ndarray] | None = None
        for a in range(0, K, INPUT_BLOCK):
            q, k = self.canonical_projected(self._through_steps(f64(tokens[a:a + INPUT_BLOCK])))
            if outs is None:
                outs = (np.empty((K, q.shape[1]), dtype=np.float64), np.empty((K, k.shape[1]), dtype=np.float64))
            outs[0][a:a + len(q)] = q
            outs[1][a:a + len(k)] = k
        assert outs is not None
        return outs

    def canonical_projected(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The canonical features of inputs ``x`` (K, m) that have been through the
        steps already (float64): the projections, then the feature maps."""
        from models.canonical.arith import f64, linear, positive_zero
        canon_q, canon_k = self.canon_q, self.canon_k
        if canon_q is None or canon_k is None:
            raise InputError(f"feature map {self.feature_map}: no canonical definition")
        if not hasattr(self, "_w64"):        # the weights in float64, and both sides stacked (one memo)
            w64 = (f64(self.Wq), None if self.bq is None else f64(self.bq),
                   f64(self.Wk), None if self.bk is None else f64(self.bk))
            wq, bq, wk, bk = w64
            both = ((np.concatenate([wq, wk]), None if bq is None else np.concatenate([bq, bk]))
                    if wq.shape[1] == wk.shape[1] and (bq is None) == (bk is None) else None)
            self._w64 = (w64, both)
        (wq, bq, wk, bk), both = self._w64
        if both is not None:                 # one pass over x for both: each entry the same operations
            u = linear(x, *both)
            uq, uk = u[:, :wq.shape[0]], u[:, wq.shape[0]:]
        else:
            uq, uk = linear(x, wq, bq), linear(x, wk, bk)
        q = canon_q(uq)                                                       # (K, r)
        k = canon_k(uk)
        return positive_zero(q), positive_zero(k)

    def release(self) -> None:
        """Drop the float64 weights kept by :meth:`canonical_projected` (one memo: a later call
        decodes them again), when the features of this head will not be asked again soon (a
        model's every layer on sequences: 384 heads' copies would be most of the memory)."""
        self.__dict__.pop("_w64", None)

    def _inputs(self, tokens, f64) -> np.ndarray:
        """The tokens after the steps (K, d), float64. For the embedding (a stored
        weight) they are computed once per path and kept with it: the heads of a
        layer share their path, so its pre-norm runs once, not once per head."""
        derived = getattr(tokens, "derived", None)
        key = tuple(self.steps)
        if derived is not None and key in derived:
            return derived[key]
        if derived is not None and self.steps and len(tokens.shape) == 2 and tokens.shape[0] > INPUT_BLOCK:
            x = self._blocked_inputs(tokens, f64)
        else:
            x = f64(tokens)
            if x.ndim != 2 or x.shape[1] != self.m:
                raise InputError(f"tokens must be (K, {self.m}), got {tuple(x.shape)}")
            x = self._through_steps(x)
        if derived is not None:
            x.setflags(write=False)
            derived[key] = x
            if self.steps:
                tokens.release()         # the raw rows are not read again on this path: not kept beside it
        return x

    def _through_steps(self, x: np.ndarray) -> np.ndarray:
        """Float64 rows ``x`` through the head's input steps, canonically."""
        for s in self.steps:
            if s.canon is None:                 # refused by canonical_features before it gets here
                raise InputError(f"step {s.name}: no canonical definition")
            x = s.canon(x)
        return x

    def _blocked_inputs(self, tokens, f64) -> np.ndarray:
        """:meth:`_inputs` of a stored embedding, :data:`INPUT_BLOCK` rows at a time: each
        block's rows decoded and taken through the steps, into one array. The steps act
        on each row alone (pre-norms, projections), so the bits are those of the whole
        array at once, without its float64 decoding and the steps' temporaries (a
        50,304 x 2,048 vocabulary: 0.8 GB each) beside the result."""
        K, m = tokens.shape
        if m != self.m:
            raise InputError(f"tokens must be (K, {self.m}), got {tuple(tokens.shape)}")
        out: np.ndarray | None = None
        for a in range(0, K, INPUT_BLOCK):
            x = self._through_steps(f64(tokens[a:a + INPUT_BLOCK]))
            if out is None:
                out = np.empty((K, x.shape[1]), dtype=np.float64)
            out[a:a + len(x)] = x
        assert out is not None
        return out

    @no_grad
    def values(self, tokens):
        if self.Wv is None:
            raise InputError("this head's value weights are not known")
        return self._lin(self._x(tokens), self.Wv, self.bv)                   # (K, dv)

    def describe(self) -> dict[str, Any]:
        return {"feature_map": self.feature_map, "rank": self.rank, "m": self.m, "causal": self.causal,
                "normalized": self.normalized, "guarantee": self.guarantee, "notes": self.notes,
                "input_path": [s.name for s in self.steps], **self.details}


@dataclass
class LayerPlan:
    """One attention layer: its heads (kernel heads or refusals).

    ``reads_tokens``: the layer's inputs are the token set (the first layer of
    a model, or a layer read on its own inputs); otherwise its inputs are an
    earlier layer's outputs (not a finite known set)."""

    index: int
    prefix: str
    module: str
    heads: list[Any] = field(default_factory=list)          # FeatureHead | AdaptedHead | Refusal
    reads_tokens: bool = True
    m: int = 0                                              # width of the layer's inputs
    library: Mapping[str, Any] = field(default_factory=dict)   # how to build the library's own module
    #: the heads when the layer's inputs are the hidden states of stated token sequences, where
    #: ``heads`` holds a refusal those positions resolve (an LM's absolute position embedding)
    on_sequences: list[Any] | None = None


@dataclass
class Detected:
    """A checkpoint's layout: the library, its layers, and the first layer's tokens.

    ``embedding`` (V, m): the vocabulary's embedding rows, when the model has
    one (the first layer then reads those rows through ``steps``); otherwise
    the first layer reads ``m``-dimensional vectors directly (the cube or a
    family's tokens). ``prefix``: where in the state dict the library's object
    sits (a user's module around it is not read). ``defaults``: what decided
    something no config key gave (a library default, or what the weights show).
    ``unstated``: the kernel-changing constructor arguments
    (:data:`models.layouts.defaults.KERNEL_ARGS`) that neither config.json nor
    the weights give, with the library default that would apply; ``stated``:
    after :func:`models.layouts.require_stated`, every kernel-changing argument
    the kernel rests on that the weights do not show, with its value and where
    it came from (``config.json``, or ``library default, assumed``)."""

    library: str
    layout: str
    layers: list[LayerPlan]
    m: int
    embedding: Any = None                 # (V, m): a stored Weight or a torch tensor
    reason: str = ""                      # how the layout was recognised
    config: Mapping[str, Any] = field(default_factory=dict)
    prefix: str = ""
    container: str = ""                   # the library object, e.g. "performer_pytorch.Performer"
    defaults: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    stored_dtype: str = ""                # the weights' dtype on disk, when not the compute dtype
    kernel_args: tuple[str, str] = ("", "")   # (library, class) of KERNEL_ARGS
    unstated: dict[str, Any] = field(default_factory=dict)
    stated: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the one change that would give the first layer the vocabulary as its tokens, when the
    #: checkpoint suggests one (a config.json line), for the messages of a refusal
    fix: str = ""

    def heads(self):
        for layer in self.layers:
            for h in layer.heads:
                yield layer, h

    def describe(self) -> dict[str, Any]:
        return {"library": self.library, "layout": self.layout, "detected_by": self.reason,
                "prefix": self.prefix, "container": self.container, "defaults_used": dict(self.defaults),
                "notes": list(self.notes), "layers": len(self.layers),
                **({"stated": {k: dict(v) for k, v in self.stated.items()}} if self.stated else {}),
                **({"embedding": list(self.embedding.shape)} if self.embedding is not None else {}),
                **({"stored_dtype": self.stored_dtype} if self.stored_dtype else {})}


def rows_of_head(W, heads: int, head: int, what: str):
    """Rows ``head * d:(head + 1) * d`` of ``W`` (a stored weight reads only those)."""
    if W.shape[0] % heads:
        raise InputError(f"{what} has {W.shape[0]} rows, not a multiple of {heads} heads")
    d = W.shape[0] // heads
    return W[head * d:(head + 1) * d]


def rms_norm(weight, eps: float) -> Phi:
    """``x / sqrt(mean(x^2) + eps) * weight`` (the RMSNorm of fla and torch)."""
    def f(x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y * tt(weight).to(x.dtype) if weight is not None else y
    return f


def layer_norm(weight, bias, eps: float) -> Phi:
    """``torch.nn.LayerNorm`` with the stored affine parameters."""
    def f(x):
        return F.layer_norm(x, (x.shape[-1],), tt(weight), tt(bias), eps)
    return f


def compute_dtype(sd: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Half-precision torch tensors (bf16, fp16) as float32, decoded exactly from
    their bits (:func:`models.canonical.arith.decode`, no torch kernel; every
    bf16/fp16 value is a float32); ``(tensors, stored dtype or "")``. Stored
    weights (:class:`~models.canonical.stored.Weight`) stay as they are: each
    is decoded when read (its torch view is float32 already)."""
    half = sorted({dtype_name(t) for t in sd.values() if dtype_name(t) in ("bfloat16", "float16")})
    if not half:
        return dict(sd), ""
    from models.canonical.arith import f64
    out = {k: (torch.from_numpy(f64(t).astype(np.float32))
               if dtype_name(t) in ("bfloat16", "float16") and hasattr(t, "detach") else t)
           for k, t in sd.items()}
    return out, "+".join(half)


def deferred(build: Callable[[], Callable]) -> Callable:
    """A function built on its first call by ``build()`` (a canonical map or step
    whose parameters are read then, not when the layout is detected)."""
    made: list[Callable] = []

    def f(x):
        if not made:
            made.append(build())
        return made[0](x)
    return f


def natural(s: str):
    """Sort key: ``layers.10`` after ``layers.9``."""
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]
