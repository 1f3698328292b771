"""Registry of feature maps for kernel attention, each with what it guarantees.

A feature map sends a token to ``r`` features; a head uses one map for queries
and one for keys, and its kernel is ``alpha(x, z) = <phiQ(x), phiK(z)>``.
Each registry entry declares a :class:`Guarantee`:

* ``FEATURES_NONNEGATIVE`` -- every feature is ``>= 0`` by construction
  (so the kernel is too);
* ``KERNEL_NONNEGATIVE`` -- features may be signed, the kernel is ``>= 0``
  by construction (tensor squares: ``<a (x) a, b (x) b> = <a, b>^2``);
* ``SIGNED`` -- nothing is guaranteed; nonnegativity must be checked.

The declaration is a property of the architecture. A certificate still checks
the computed features exactly; the guarantee says what to expect. The
guarantee, the torch transform and the canonical transform of each entry come
from the feature-map table (:mod:`models.feature_table`, column ``project``).

Two kinds of map:

* ``lookup`` maps act on a free table ``raw (K, r)`` over a finite token set
  (input: token indices); the registry entry names the elementwise transform
  (``lookup_softplus``, ``lookup_exp``, ``lookup_relu``, ``lookup_signed``).
* ``projection`` maps act on 0/1 tokens through a learned affine projection
  ``u = W x + b`` and a transform: ``exp``, ``softplus``, ``elu1`` (elu + 1),
  ``relu``, ``identity`` (signed), ``favor`` (FAVOR+ positive random features
  ``exp(omega u - |u|^2 / 2) / sqrt(r)`` with a fixed ``omega (r, d)`` drawn
  from a seed and stored with the weights), ``tensor_square``.

Parameters are initialised from a local ``torch.Generator``; the global RNG
and default dtype are never touched.

>>> import torch
>>> fm = ProjectionMap("elu1", m=4, rank=3, generator=torch.Generator().manual_seed(0))
>>> fm(torch.tensor([[1., 0., 1., 1.]])).shape
torch.Size([1, 3])
>>> REGISTRY["elu1"].guarantee.value
'features_nonnegative'
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from certify.core.errors import InputError
from models.canonical import arith
from models.feature_table import Nonnegativity, identity, in_library, named, names_in

#: what a feature map guarantees about signs, by construction (:mod:`models.feature_table`)
Guarantee = Nonnegativity


class MapKind(str, enum.Enum):
    LOOKUP = "lookup"            # free table over a finite token set, input: indices
    PROJECTION = "projection"    # affine projection of 0/1 tokens, then a transform


@dataclass(frozen=True)
class FeatureMapSpec:
    name: str
    kind: MapKind
    guarantee: Guarantee
    transform: Callable[[torch.Tensor], torch.Tensor]
    description: str

    def build(self, size: int, rank: int, **kwargs) -> "LookupMap | ProjectionMap":
        """Build the map: ``size`` is the number of tokens (lookup) or ``m`` (projection)."""
        if self.kind is MapKind.LOOKUP:
            return LookupMap(self.name, size, rank, **kwargs)
        return ProjectionMap(self.name, size, rank, **kwargs)


def _spec(name: str, kind: MapKind) -> FeatureMapSpec:
    """The registry entry of the project's map ``name``: guarantee, transform and words from the table."""
    e = named("project" if kind is MapKind.PROJECTION else "project-lookup", name)
    what = f"a free table of raw entries u, then {e.prose}" if kind is MapKind.LOOKUP else f"{e.prose} at u = W x + b"
    return FeatureMapSpec(name, kind, e.structure, e.torch if e.elementwise else identity, what)


#: the project's maps: the table's ``project-lookup`` (free tables) and ``project`` (projections) columns
REGISTRY: dict[str, FeatureMapSpec] = {
    **{n: _spec(n, MapKind.LOOKUP) for n in names_in("project-lookup")},
    **{n: _spec(n, MapKind.PROJECTION) for n in names_in("project")}}


def spec(name: str) -> FeatureMapSpec:
    """The registry entry for ``name`` (``InputError`` for an unknown name)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown feature map {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def _normal(shape, std: float, generator: torch.Generator | None, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype).normal_(0.0, std, generator=generator)


class Affine(nn.Module):
    """``x -> x W^T + b`` with ``W (out, in)``, ``b (out,)``, initialised from a
    local generator (``std = init_scale / sqrt(in)``)."""

    def __init__(self, in_dim: int, out_dim: int, *, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32, init_scale: float = 1.0) -> None:
        super().__init__()
        self.weight = nn.Parameter(_normal((out_dim, in_dim), init_scale / math.sqrt(in_dim),
                                           generator, dtype))
        self.bias = nn.Parameter(torch.zeros(out_dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # (..., in) -> (..., out)
        return x @ self.weight.T + self.bias


class LookupMap(nn.Module):
    """A free feature table ``raw (K, r)``; features ``transform(raw)[indices]``."""

    def __init__(self, name: str, num_tokens: int, rank: int, *,
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                 init_scale: float = 1.0) -> None:
        super().__init__()
        s = spec(name)
        if s.kind is not MapKind.LOOKUP:
            raise InputError(f"feature map {name!r} is not a lookup table")
        self.name, self.guarantee = name, s.guarantee
        self._transform = s.transform
        self.raw = nn.Parameter(_normal((num_tokens, rank), init_scale, generator, dtype))

    @property
    def rank(self) -> int:
        return int(self.raw.shape[1])

    def table(self) -> torch.Tensor:                      # (K, r)
        return self._transform(self.raw)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (...,) int -> (..., r)
        return self.table()[idx]

    def canonical_table(self):
        """The table ``transform(raw)`` as ``float64``, canonically
        (:mod:`models.canonical`): the stored entries read exactly, the transform
        correctly rounded (``relu``, the identity: exact)."""
        return CANONICAL_TRANSFORMS[self.name](arith.f64(self.raw))


class ProjectionMap(nn.Module):
    """``transform(W x + b)`` over 0/1 tokens ``x (..., m)``; see the module docstring.

    ``favor``: ``W (d, m)`` learned, ``omega (r, d)`` a fixed buffer (Gaussian
    from ``omega_seed``). ``tensor_square``: ``W (d, m)`` with ``r = d^2``.
    Other maps: ``W (r, m)``.
    """

    omega: torch.Tensor                     # favor's buffer

    def __init__(self, name: str, m: int, rank: int, *, proj_dim: int | None = None,
                 generator: torch.Generator | None = None, omega_seed: int = 0,
                 dtype: torch.dtype = torch.float32, init_scale: float = 1.0) -> None:
        super().__init__()
        s = spec(name)
        if s.kind is not MapKind.PROJECTION:
            raise InputError(f"feature map {name!r} is not a projection map")
        self.name, self.guarantee = name, s.guarantee
        self._transform = s.transform
        self._rank = int(rank)
        if name == "tensor_square":
            d = math.isqrt(rank)
            if d * d != rank:
                raise InputError(f"tensor_square needs a square rank, got {rank}")
            if proj_dim not in (None, d):
                raise InputError(f"tensor_square: proj_dim must be sqrt(rank) = {d}")
            self.proj = Affine(m, d, generator=generator, dtype=dtype, init_scale=init_scale)
        elif name == "favor":
            d = int(proj_dim or m)
            self.proj = Affine(m, d, generator=generator, dtype=dtype, init_scale=init_scale)
            g = torch.Generator().manual_seed(int(omega_seed))
            self.register_buffer("omega", _normal((rank, d), 1.0, g, dtype))   # (r, d) fixed
        else:
            if proj_dim not in (None, rank):
                raise InputError(f"feature map {name!r} has no separate projection dimension")
            self.proj = Affine(m, rank, generator=generator, dtype=dtype, init_scale=init_scale)

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def proj_dim(self) -> int:
        return int(self.proj.weight.shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # (..., m) -> (..., r)
        u = self.proj(x)                                    # (..., d)
        if self.name == "favor":
            r = self.omega.shape[0]
            return torch.exp(u @ self.omega.T - 0.5 * (u * u).sum(-1, keepdim=True)) / math.sqrt(r)
        if self.name == "tensor_square":
            return (u[..., :, None] * u[..., None, :]).flatten(-2)
        return self._transform(u)

    def canonical(self, x):
        """The features of 0/1 tokens ``x (K, m)`` (exact in ``float64``) as ``float64``
        ``(K, r)``, canonically (:mod:`models.canonical`): ``u = W x + b`` added
        left to right over the token's bits, then the transform correctly rounded
        (``favor``: ``exp(omega u - |u|^2 / 2) / sqrt(r)``, fixed-order sums;
        ``tensor_square``: the products ``u_i u_j``, exact order)."""
        u = arith.linear(np.asarray(x, dtype=np.float64), arith.f64(self.proj.weight),
                         arith.f64(self.proj.bias))
        if self.name == "favor":
            return named("project", "favor").canonical(self.omega)(u)
        return CANONICAL_TRANSFORMS[self.name](u)


#: registry name -> the transform on float64 arrays, correctly rounded (the certified
#: features; ``favor`` is in :meth:`ProjectionMap.canonical`), from the table
CANONICAL_TRANSFORMS: dict[str, Callable] = {n: e.canonical for lib in ("project-lookup", "project")
                                             for n, e in in_library(lib).items() if not e.learned}
