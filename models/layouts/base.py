"""The shared vocabulary of layout detection: one head as a kernel head, a refused
head with its reason, a detected model.

A :class:`FeatureHead` is one head of one layer as the paper's head sees it:
``x -> pre(x) -> W x + b -> phi``, with ``alpha(x, z) = <phiQ(x), phiK(z)>``
(the query scale folded into ``phiQ``, so the product is the number the
library multiplies). Everything is recomputed in torch from the weights in
their own dtype; the kernel is the exact product of those float features.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch

from certify.core.errors import InputError

#: appended to every "cannot tell the layout" error
SPEC_HINT = ("write an adapter spec (README, 'Supported layouts'): "
             "{\"layout\": \"generic\", \"query_weight\": ..., \"key_weight\": ..., \"heads\": H, "
             "\"feature_map\": \"elu1\"} and pass --spec SPEC")

Phi = Callable[[torch.Tensor], torch.Tensor]          # (B, d) -> (B, r)


@dataclass(frozen=True)
class Refusal:
    """A head that is not a fixed normalized nonnegative kernel head."""

    layer: int
    head: int | None            # None: every head of the layer
    module: str                 # the layer's class / state-dict prefix
    mechanism: str              # "gating", "decay", "rotary", "favor+", ...
    reason: str                 # why the mechanism breaks the claim

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "head": self.head, "module": self.module,
                "mechanism": self.mechanism, "reason": self.reason}


class FeatureHead:
    """One head as a kernel head: ``feature_matrices``, ``values``, ``m``, ``rank``,
    ``guarantee``, ``describe``. No scalar readout: correctness on a family is out
    of reach for these heads (see ``certify.checkpoint_heads``)."""

    def __init__(self, *, m: int, Wq: torch.Tensor, Wk: torch.Tensor, phi_q: Phi, phi_k: Phi, rank: int,
                 nonnegative: bool, feature_map: str, bq: torch.Tensor | None = None,
                 bk: torch.Tensor | None = None, Wv: torch.Tensor | None = None,
                 bv: torch.Tensor | None = None, pre: Phi | None = None, causal: bool = False,
                 notes: str = "", details: Mapping[str, Any] | None = None) -> None:
        self.m, self.rank = int(m), int(rank)
        self.Wq, self.Wk, self.bq, self.bk, self.Wv, self.bv = Wq, Wk, bq, bk, Wv, bv
        self.phi_q, self.phi_k, self.pre = phi_q, phi_k, pre
        self.dtype = Wq.dtype
        self.guarantee = "features_nonnegative" if nonnegative else "signed"
        self.feature_map, self.causal, self.notes = feature_map, causal, notes
        self.details = dict(details or {})

    def _x(self, tokens) -> torch.Tensor:
        t = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(np.asarray(tokens))
        if t.ndim != 2 or t.shape[1] != self.m:
            raise InputError(f"tokens must be (K, {self.m}), got {tuple(t.shape)}")
        t = t.to(self.dtype)
        return self.pre(t) if self.pre is not None else t

    @staticmethod
    def _lin(x, W, b):
        u = x @ W.T.to(x.dtype)
        return u + b.to(x.dtype) if b is not None else u

    @torch.no_grad()
    def feature_matrices(self, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        x = self._x(tokens)                                                   # (K, m)
        return self.phi_q(self._lin(x, self.Wq, self.bq)), self.phi_k(self._lin(x, self.Wk, self.bk))

    @torch.no_grad()
    def values(self, tokens) -> torch.Tensor:
        if self.Wv is None:
            raise InputError("this head's value weights are not known")
        return self._lin(self._x(tokens), self.Wv, self.bv)                   # (K, dv)

    def describe(self) -> dict[str, Any]:
        return {"feature_map": self.feature_map, "rank": self.rank, "m": self.m, "causal": self.causal,
                "guarantee": self.guarantee, "notes": self.notes, **self.details}


@dataclass
class LayerPlan:
    """One attention layer: its heads (kernel heads or refusals)."""

    index: int
    prefix: str
    module: str
    heads: list[Any] = field(default_factory=list)          # FeatureHead | AdaptedHead | Refusal


@dataclass
class Detected:
    """A checkpoint's layout: the library, its layers, and the first layer's tokens.

    ``embedding`` (V, m): the vocabulary's embedding rows, when the model has
    one (the first layer then reads those rows); otherwise the first layer
    reads ``m``-bit tokens directly (the cube or a family's tokens)."""

    library: str
    layout: str
    layers: list[LayerPlan]
    m: int
    embedding: torch.Tensor | None = None
    reason: str = ""                      # how the layout was recognised
    config: Mapping[str, Any] = field(default_factory=dict)

    def heads(self):
        for layer in self.layers:
            for h in layer.heads:
                yield layer, h


def rows_of_head(W: torch.Tensor, heads: int, head: int, what: str) -> torch.Tensor:
    if W.shape[0] % heads:
        raise InputError(f"{what} has {W.shape[0]} rows, not a multiple of {heads} heads")
    d = W.shape[0] // heads
    return W[head * d:(head + 1) * d]


def rms_norm(weight: torch.Tensor | None, eps: float) -> Phi:
    """``x / sqrt(mean(x^2) + eps) * weight`` (the RMSNorm of fla and torch)."""
    def f(x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y * weight.to(x.dtype) if weight is not None else y
    return f
