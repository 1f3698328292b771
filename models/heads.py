"""Attention heads for the Min-IP task: normalized kernel heads, the dense
softmax head and position-dependent key maps (Thm 8).

Normalized nonnegative kernel head (Eq. 3-4), for every position ``i``::

    a_i   = sum_j alpha(x_i, x_j) v(x_j) / sum_j alpha(x_i, x_j)
    t_i   = beta(x_i) + w(x_i)^T a_i,      alpha(x, z) = <phiQ(x), phiK(z)>

computed through the sketch ``S = sum_j phiK(x_j) v(x_j)^T`` (r, dv) and
``z = sum_j phiK(x_j)`` (r). Every denominator must be ``> 0``; a forward pass
that meets one ``<= 0`` (or not finite) raises :class:`NonpositiveDenominator`.

Every kernel head exposes what a certificate needs:

* ``feature_matrices(tokens (K, m)) -> (PhiQ (K, r), PhiK (K, r))``; the
  certified kernel is the exact product ``PhiQ PhiK^T`` of these float matrices;
* ``values(tokens) -> (K, dv)``, ``readout(tokens) -> (beta (K,), w (K, dv))``
  and ``value_table(query_tokens, key_tokens) -> (Kq, Kk)`` the scalarized
  table ``g_x(z) = beta(x) + w(x)^T v(z)`` of Eq. 5;
* attributes ``rank``, ``feature_map`` (registry name), ``guarantee``.

Values and readout are affine in the token (``v(z) = V z + c``,
``beta(x) = b^T x + b0``, ``w(x) = W x + w0``): with ``dv >= m + 1`` this
spans every bilinear-plus-affine ``g_x(z)``.

Canonical evaluation. Batched float kernels (matrix products, vectorised
``exp`` with a scalar tail) may round a row differently depending on the other
rows of the batch. So the per-token pieces (features, values, readout) are
evaluated one token at a time -- a function of the token alone -- by
``feature_matrices``/``values``/``readout`` and by the forward pass in eval
mode, which evaluates the distinct tokens of its batch and gathers. The
forward pass then uses bit for bit the tables a certificate is built from.
In training mode the forward pass evaluates the tokens batched (faster; equal
up to rounding). Heads are constructed in eval mode; a trainer calls
``model.train()`` explicitly.

Certified features. What a certificate binds is not this torch computation
but ``canonical_features`` (and ``canonical_values``/``canonical_readout``):
the same maps in ``float64`` through :mod:`models.canonical` (weights read
exactly, sums in a fixed order, transforms correctly rounded), the same bits
on every machine. The torch forward (the head's dtype, what training ran)
agrees with them up to its own rounding.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from certify.core.errors import InputError, UncertifiableError
from models.canonical.arith import f64, linear
from models.feature_maps import Affine, Guarantee, LookupMap, MapKind, ProjectionMap, spec


class NonpositiveDenominator(ValueError):
    """A kernel head met ``sum_j alpha(x_i, x_j) <= 0`` (or a non-finite one)."""


def as_token_tensor(tokens, m: int, dtype: torch.dtype) -> torch.Tensor:
    """Validate 0/1 tokens ``(..., m)`` (numpy or torch) and return them in ``dtype``."""
    t = tokens if isinstance(tokens, torch.Tensor) else torch.from_numpy(np.array(tokens))
    if t.ndim < 1 or t.shape[-1] != m:
        raise InputError(f"tokens must have last dimension m = {m}, got shape {tuple(t.shape)}")
    if not bool(((t == 0) | (t == 1)).all()):
        raise InputError("tokens must have entries 0 or 1")
    return t.to(dtype)


def _unique_rows(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct tokens of a batch ``(..., m)``: ``(U (K, m), inverse (...,))``."""
    flat = X.reshape(-1, X.shape[-1])
    uniq, inv = torch.unique(flat, dim=0, return_inverse=True)
    return uniq, inv.reshape(X.shape[:-1])


def per_token(fn, x: torch.Tensor, canonical: bool) -> torch.Tensor:
    """``fn`` on tokens ``x (K, m)``: one token at a time when ``canonical`` (the
    result of a row depends on that token alone), else batched."""
    if not canonical:
        return fn(x)
    return torch.cat([fn(x[i:i + 1]) for i in range(x.shape[0])]) if len(x) else fn(x)


def _check_denominators(den: torch.Tensor) -> None:
    den = den.detach()
    bad = ~(torch.isfinite(den) & (den > 0))
    if bool(bad.any()):
        where = tuple(int(i) for i in torch.nonzero(bad)[0])
        raise NonpositiveDenominator(f"kernel denominator {float(den[where])!r} <= 0 or not "
                                     f"finite at (batch, position) {where}")


def _attend(PQ, PK, V, beta, w, check: bool = True) -> torch.Tensor:
    """Eq. 3-4 on gathered tables, in the cheaper of two equal orders: through
    the sketch ``S = PK^T V``, ``z = PK^T 1`` (cost ~ 2 N r dv per sequence) or
    through the kernel matrix ``alpha = PQ PK^T`` (cost ~ N^2 (r + dv)), the
    latter for short sequences.

    PQ, PK: (B, N, r); V, w: (B, N, dv); beta: (B, N). Returns (B, N).
    """
    N, r, dv = PQ.shape[1], PQ.shape[2], V.shape[2]
    if N * (r + dv) < 2 * r * dv:
        alpha = PQ @ PK.transpose(1, 2)            # (B, N, N)
        num = alpha @ V                            # (B, N, dv)
        den = alpha.sum(-1)                        # (B, N)
    else:
        S = PK.transpose(1, 2) @ V                 # (B, r, dv)
        z = PK.sum(1)                              # (B, r)
        num = PQ @ S                               # (B, N, dv)
        den = (PQ * z[:, None, :]).sum(-1)         # (B, N)
    if check:
        _check_denominators(den)
    return beta + (w * num).sum(-1) / den


class KernelAttention(nn.Module):
    """Shared interface of kernel heads (subclasses set the pieces)."""

    feature_map: str
    guarantee: Guarantee
    m: int
    rank: int
    dv: int

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    if TYPE_CHECKING:                       # every kernel head defines them
        def values(self, tokens) -> torch.Tensor: ...

        def readout(self, tokens) -> tuple[torch.Tensor, torch.Tensor]: ...

    def value_table(self, query_tokens, key_tokens) -> torch.Tensor:
        """``g_x(z) = beta(x) + w(x)^T v(z)`` for every pair: ``(Kq, Kk)``."""
        beta, w = self.readout(query_tokens)       # (Kq,), (Kq, dv)
        v = self.values(key_tokens)                # (Kk, dv)
        return beta[:, None] + w @ v.T


class _ProjectionReadout:
    """What the projection heads share: ``m``-bit tokens, affine values
    ``v(z)`` and the query-dependent affine readout ``beta(x) + w(x)^T a``."""

    if TYPE_CHECKING:                       # the head's (KernelAttention.dtype)
        @property
        def dtype(self) -> torch.dtype: ...

    def _init_readout(self, m: int, rank: int, dv: int, feature_map: str,
                      generator=None, dtype=None) -> None:
        s = spec(feature_map)
        if s.kind is not MapKind.PROJECTION:
            raise InputError(f"{type(self).__name__} needs a projection feature map, "
                             f"got {feature_map!r}")
        self.m, self.rank, self.dv = int(m), int(rank), int(dv)
        self.feature_map, self.guarantee = feature_map, s.guarantee

    def _init_affine(self, generator, dtype) -> None:
        """Values and readout; built after the feature maps (the order the seeded
        generator draws in, so a seed gives the same head as before)."""
        self.value = Affine(self.m, self.dv, generator=generator, dtype=dtype)
        self.beta = Affine(self.m, 1, generator=generator, dtype=dtype)
        self.w = Affine(self.m, self.dv, generator=generator, dtype=dtype)

    def _tokens(self, tokens) -> torch.Tensor:
        return as_token_tensor(tokens, self.m, self.dtype)

    def values(self, tokens) -> torch.Tensor:
        return per_token(self.value, self._tokens(tokens), True)           # (K, dv)

    def readout(self, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        x = self._tokens(tokens)
        return per_token(self.beta, x, True)[:, 0], per_token(self.w, x, True)   # (K,), (K, dv)

    def _canonical_tokens(self, tokens) -> np.ndarray:
        return as_token_tensor(tokens, self.m, torch.uint8).numpy().astype(np.float64)

    def canonical_values(self, tokens) -> np.ndarray:
        """``v(z) = V z + c`` as ``float64`` ``(K, dv)``, canonically (fixed-order sums)."""
        return linear(self._canonical_tokens(tokens), f64(self.value.weight), f64(self.value.bias))

    def canonical_readout(self, tokens) -> tuple[np.ndarray, np.ndarray]:
        """``(beta (K,), w (K, dv))`` as ``float64``, canonically."""
        x = self._canonical_tokens(tokens)
        return (linear(x, f64(self.beta.weight), f64(self.beta.bias))[:, 0],
                linear(x, f64(self.w.weight), f64(self.w.bias)))


class KernelHead(_ProjectionReadout, KernelAttention):
    """Normalized kernel head with projection feature maps (``m``-bit tokens).

    >>> import torch
    >>> h = KernelHead(m=3, rank=4, dv=5, feature_map="elu1", generator=torch.Generator().manual_seed(0))
    >>> h(torch.tensor([[[1, 0, 1], [0, 1, 1]]])).shape
    torch.Size([1, 2])
    """

    architecture = "kernel_head"

    def __init__(self, m: int, rank: int, dv: int, feature_map: str = "elu1", *,
                 proj_dim: int | None = None, omega_seed: int = 0,
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                 init_scale: float = 1.0) -> None:
        super().__init__()
        self._init_readout(m, rank, dv, feature_map, generator, dtype)
        new_map = partial(ProjectionMap, feature_map, m, rank, proj_dim=proj_dim, generator=generator,
                          omega_seed=omega_seed, dtype=dtype, init_scale=init_scale)
        self.query_map = new_map()
        self.key_map = new_map()
        self._init_affine(generator, dtype)
        self.train(False)

    def config(self) -> dict:
        return {"architecture": self.architecture, "feature_map": self.feature_map, "m": self.m,
                "rank": self.rank, "dv": self.dv, "proj_dim": self.query_map.proj_dim
                if self.feature_map in ("favor", "tensor_square") else None}

    def token_tables(self, tokens, canonical: bool = True):
        """``(PhiQ (K, r), PhiK (K, r), V (K, dv), beta (K,), w (K, dv))`` for ``tokens (K, m)``."""
        x = self._tokens(tokens)
        pq = per_token(self.query_map, x, canonical)
        pk = per_token(self.key_map, x, canonical)
        v = per_token(self.value, x, canonical)
        beta = per_token(self.beta, x, canonical)[:, 0]
        w = per_token(self.w, x, canonical)
        return pq, pk, v, beta, w

    def feature_matrices(self, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        x = self._tokens(tokens)                                           # (K, m)
        return per_token(self.query_map, x, True), per_token(self.key_map, x, True)

    def canonical_features(self, tokens) -> tuple[np.ndarray, np.ndarray]:
        """``(PhiQ, PhiK)`` as ``float64`` ``(K, r)``: the features a certificate binds,
        the same bits on every machine (:meth:`models.feature_maps.ProjectionMap.canonical`);
        :meth:`feature_matrices` (torch, the head's dtype) computes the same maps."""
        x = self._canonical_tokens(tokens)
        return self.query_map.canonical(x), self.key_map.canonical(x)

    def forward_indexed(self, tokens, inputs: torch.Tensor, check: bool = True) -> torch.Tensor:
        """Predictions ``(B, N)`` for ``inputs (B, N)`` indexing ``tokens (K, m)``."""
        PhiQ, PhiK, V, beta, w = self.token_tables(tokens, canonical=not self.training)
        return _attend(PhiQ[inputs], PhiK[inputs], V[inputs], beta[inputs], w[inputs], check)

    def forward(self, X) -> torch.Tensor:          # (B, N, m) -> (B, N)
        X = self._tokens(X)
        uniq, inv = _unique_rows(X)
        return self.forward_indexed(uniq, inv)


class LookupHead(KernelAttention):
    """Free tables over a finite token set (Sec. 5.1): query and key feature
    tables ``(K, r)`` through a lookup transform, and a query-token lookup table
    ``G (K, K)`` with ``g_x(z) = G[x, z]``. In the form of Eq. 3-4 this is
    ``v(z) = e_z`` (``dv = K``), ``w(x) = G[x, :]``, ``beta = 0``.

    Inputs are token indices ``(B, N)`` or 0/1 tokens ``(B, N, m)`` that must
    lie in the table. The default ``lookup_softplus`` keeps every feature
    ``> 0``, hence ``alpha > 0`` and every denominator positive.
    """

    architecture = "lookup_head"
    tokens: torch.Tensor                    # (K, m) uint8, a buffer

    def __init__(self, tokens, rank: int, feature_map: str = "lookup_softplus", *,
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                 init_scale: float = 1.0) -> None:
        super().__init__()
        s = spec(feature_map)
        if s.kind is not MapKind.LOOKUP:
            raise InputError(f"LookupHead needs a lookup feature map, got {feature_map!r}")
        tok = torch.from_numpy(np.array(tokens, dtype=np.uint8))
        if tok.ndim != 2 or tok.shape[0] == 0:
            raise InputError(f"lookup tokens must be a non-empty (K, m) array, got {tuple(tok.shape)}")
        K, m = tok.shape
        self.register_buffer("tokens", tok)                       # (K, m) uint8
        self.m, self.rank, self.dv = int(m), int(rank), int(K)
        self.feature_map, self.guarantee = feature_map, s.guarantee
        new_map = partial(LookupMap, feature_map, K, rank, generator=generator, dtype=dtype,
                          init_scale=init_scale)
        self.query_map = new_map()
        self.key_map = new_map()
        self.g = nn.Parameter(torch.zeros(K, K, dtype=dtype))    # (K, K) g_x(z)
        self.train(False)

    @property
    def num_tokens(self) -> int:
        return int(self.tokens.shape[0])

    def config(self) -> dict:
        return {"architecture": self.architecture, "feature_map": self.feature_map, "m": self.m,
                "num_tokens": self.num_tokens, "rank": self.rank, "dv": self.dv}

    def index_of(self, tokens) -> torch.Tensor:
        """Table index of each 0/1 token ``(..., m) -> (...,)``; a token outside the
        table is an ``InputError``."""
        t = as_token_tensor(tokens, self.m, torch.uint8)
        table = {bytes(row): i for i, row in enumerate(self.tokens.numpy())}
        flat = t.reshape(-1, self.m).numpy()
        idx = np.empty(len(flat), dtype=np.int64)
        for k, row in enumerate(flat):
            i = table.get(bytes(row))
            if i is None:
                raise InputError(f"token {''.join(map(str, row))} is not in the lookup table")
            idx[k] = i
        return torch.from_numpy(idx).reshape(t.shape[:-1])

    def feature_matrices(self, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.index_of(tokens)
        return self.query_map(idx), self.key_map(idx)             # (K', r), (K', r)

    def canonical_features(self, tokens) -> tuple[np.ndarray, np.ndarray]:
        """``(PhiQ, PhiK)`` as ``float64`` ``(K', r)``: the features a certificate binds,
        the tables' transforms correctly rounded (:meth:`models.feature_maps.LookupMap.canonical_table`),
        the same bits on every machine; :meth:`feature_matrices` (torch) computes the same maps."""
        idx = self.index_of(tokens).numpy()
        return self.query_map.canonical_table()[idx], self.key_map.canonical_table()[idx]

    def values(self, tokens) -> torch.Tensor:
        idx = self.index_of(tokens)
        return nn.functional.one_hot(idx, self.num_tokens).to(self.dtype)   # (K', K)

    def readout(self, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.index_of(tokens)
        return torch.zeros(len(idx), dtype=self.dtype), self.g[idx]        # (K',), (K', K)

    def value_table(self, query_tokens, key_tokens) -> torch.Tensor:
        return self.g[self.index_of(query_tokens)][:, self.index_of(key_tokens)]

    def forward_indexed(self, tokens, inputs: torch.Tensor, check: bool = True) -> torch.Tensor:
        """Predictions ``(B, N)`` for ``inputs (B, N)`` indexing ``tokens (K', m)``, whose
        rows must lie in the table."""
        return self.forward(self.index_of(tokens)[inputs], check)

    def forward(self, X, check: bool = True) -> torch.Tensor:
        """``X``: ``(B, N)`` token indices or ``(B, N, m)`` tokens -> ``(B, N)``."""
        X = X if isinstance(X, torch.Tensor) else torch.from_numpy(np.array(X))
        idx = self.index_of(X) if X.ndim == 3 else X.long()                # (B, N)
        if idx.ndim != 2 or (idx.numel() and (idx.min() < 0 or idx.max() >= self.num_tokens)):
            raise InputError("lookup-head inputs must be (B, N) indices into its token table")
        PQ, PK = self.query_map.table(), self.key_map.table()            # (K, r)
        alpha = PQ[idx] @ PK[idx].transpose(1, 2)                         # (B, N, N)
        g = self.g[idx[:, :, None], idx[:, None, :]]                      # (B, N, N)
        den = alpha.sum(-1)                                               # (B, N)
        if check:
            _check_denominators(den)
        return (alpha * g).sum(-1) / den


class DenseSoftmaxHead(nn.Module):
    """Dense softmax head: ``s_ij = q(x_i)^T k(x_j)``, ``y_i = sum_j softmax_j(s_ij) v(x_j)``,
    ``t_i = beta(x_i) + w(x_i)^T y_i``; ``q, k, v, beta, w`` affine."""

    architecture = "softmax_head"
    feature_map = None

    def __init__(self, m: int, dk: int, dv: int, *, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32, init_scale: float = 1.0) -> None:
        super().__init__()
        self.m, self.dk, self.dv = int(m), int(dk), int(dv)
        self.query = Affine(m, dk, generator=generator, dtype=dtype, init_scale=init_scale)
        self.key = Affine(m, dk, generator=generator, dtype=dtype, init_scale=init_scale)
        self.value = Affine(m, dv, generator=generator, dtype=dtype)
        self.beta = Affine(m, 1, generator=generator, dtype=dtype)
        self.w = Affine(m, dv, generator=generator, dtype=dtype)
        self.train(False)

    @property
    def dtype(self) -> torch.dtype:
        return self.query.weight.dtype

    def config(self) -> dict:
        return {"architecture": self.architecture, "m": self.m, "dk": self.dk, "dv": self.dv}

    def forward_indexed(self, tokens, inputs: torch.Tensor) -> torch.Tensor:
        return self.forward(as_token_tensor(tokens, self.m, self.dtype)[inputs])

    def forward(self, X) -> torch.Tensor:                      # (B, N, m) -> (B, N)
        X = as_token_tensor(X, self.m, self.dtype)
        s = self.query(X) @ self.key(X).transpose(1, 2)         # (B, N, N)
        y = torch.softmax(s, dim=-1) @ self.value(X)            # (B, N, dv)
        return self.beta(X)[..., 0] + (self.w(X) * y).sum(-1)


class PositionalKernelHead(_ProjectionReadout, KernelAttention):
    """Thm 8: position-dependent key maps ``phiK_j`` in one shared ``r``-dim space,
    causal attention, the final query scored::

        t_i = beta(x_i) + w(x_i)^T sum_{j<=i} alpha_j(x_i, x_j) v(x_j) / sum_{j<=i} alpha_j(x_i, x_j)

    with ``alpha_j(x, z) = <phiQ(x), phiK_j(z)>``. Independent per-position
    spaces of dims ``r_j`` are the special case of block-sparse key maps in a
    shared space of dim ``sum_j r_j``. The kernel depends on the position, so
    :meth:`feature_matrices` raises :class:`UncertifiableError`; use
    :meth:`feature_matrices_at` or :meth:`key_feature_stack`.
    """

    architecture = "positional_kernel_head"
    position_dependent = True

    def __init__(self, m: int, rank: int, dv: int, positions: int, feature_map: str = "elu1", *,
                 proj_dim: int | None = None, omega_seed: int = 0,
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                 init_scale: float = 1.0) -> None:
        super().__init__()
        if positions < 1:
            raise InputError(f"positions must be >= 1, got {positions}")
        self._init_readout(m, rank, dv, feature_map, generator, dtype)
        self.positions = int(positions)
        new_map = partial(ProjectionMap, feature_map, m, rank, proj_dim=proj_dim, generator=generator,
                          omega_seed=omega_seed, dtype=dtype, init_scale=init_scale)
        self.query_map = new_map()
        self.key_maps = nn.ModuleList(new_map() for _ in range(positions))
        self._init_affine(generator, dtype)
        self.train(False)

    def config(self) -> dict:
        return {"architecture": self.architecture, "feature_map": self.feature_map, "m": self.m,
                "rank": self.rank, "dv": self.dv, "positions": self.positions,
                "proj_dim": self.query_map.proj_dim
                if self.feature_map in ("favor", "tensor_square") else None}

    def feature_matrices(self, tokens):
        raise UncertifiableError("position-dependent key maps have no single kernel; "
                                 "use feature_matrices_at(tokens, position)")

    def feature_matrices_at(self, tokens, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(PhiQ (K, r), PhiK_position (K, r))``; positions count from 0."""
        if not 0 <= position < self.positions:
            raise InputError(f"position {position} outside 0..{self.positions - 1}")
        x = self._tokens(tokens)
        return per_token(self.query_map, x, True), per_token(self.key_maps[position], x, True)

    def key_feature_stack(self, tokens) -> torch.Tensor:       # (positions, K, r)
        x = self._tokens(tokens)
        return torch.stack([per_token(km, x, True) for km in self.key_maps])

    def forward(self, X, check: bool = True) -> torch.Tensor:   # (B, N, m) -> (B, N)
        X = self._tokens(X)
        B, N, _ = X.shape
        if N > self.positions:
            raise InputError(f"length {N} exceeds the {self.positions} key positions")
        c = not self.training
        uniq, inv = _unique_rows(X)                             # (K, m), (B, N)
        PQ = per_token(self.query_map, uniq, c)[inv]            # (B, N, r)
        PK = torch.stack([per_token(self.key_maps[j], uniq, c)[inv[:, j]]
                          for j in range(N)], 1)                # (B, N, r)
        V = per_token(self.value, uniq, c)[inv]                 # (B, N, dv)
        beta = per_token(self.beta, uniq, c)[:, 0]
        w = per_token(self.w, uniq, c)
        S = torch.cumsum(PK[..., :, None] * V[..., None, :], dim=1)   # (B, N, r, dv) prefix sketches
        z = torch.cumsum(PK, dim=1)                                   # (B, N, r)
        num = (PQ[..., :, None] * S).sum(-2)                          # (B, N, dv)
        den = (PQ * z).sum(-1)                                        # (B, N)
        if check:
            _check_denominators(den)
        return beta[inv] + (w[inv] * num).sum(-1) / den
