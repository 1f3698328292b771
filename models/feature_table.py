"""The feature-map table: every feature map the project reads, declared once.

Each :class:`FeatureMap` holds the facts of one mathematical map:

* ``torch`` -- its torch function (the float reference: training, the library
  check, float proposals), with ``library_torch`` where a library computes
  the same map in torch its own way (fla's ``elu_p1`` avoids the cancellation
  of ``elu(u) + 1``);
* ``canonical`` -- its canonical function (:mod:`models.canonical.maps`:
  float64, correctly rounded, the same bits on every machine), the function
  whose output a certificate binds;
* ``rational`` -- the exact map sends rationals to rationals (a piecewise
  rational function with rational constants), so an exact replay needs no
  balls;
* ``structure`` -- what a nonnegative claim about its kernel rests on
  (:class:`Nonnegativity`), with ``rests_on`` saying why;
* ``learned`` / ``optional`` -- the parameters it reads from a checkpoint (key
  suffixes under the map's module), in the order its two functions take them;
* ``names`` -- how each library (:data:`LIBRARIES`) calls it.

A parameter-free map's ``torch`` and ``canonical`` are the maps themselves
(``(N, d) -> (N, r)``); a learned map's take its parameters (``learned`` then
``optional``, a missing optional one as ``None``, then keyword options) and
return the map. ``rank(d, *params)`` is its number of features.

The word ``elu`` is two maps: fla's ``feature_map="elu"`` is ``elu(u) + 1``
(the table's ``elu1``, always positive), performer-pytorch's
``kernel_fn=nn.ELU()`` is ``elu(u)`` itself (the table's ``elu``, signed).
Each library's spelling is looked up in its own column (:func:`named`), never
across libraries.

Everything else is derived from :data:`TABLE`: fla's parameter-free and learned
maps (:mod:`models.layouts.fla`), performer's kernel functions
(:mod:`models.layouts.lucidrains`), the adapter spec's maps
(:mod:`models.adapters`), the project's own heads' registry
(:mod:`models.feature_maps`), the sketch models' maps (:mod:`models.sketch`),
the defaults' prose (:mod:`models.layouts.defaults`) and the table of
``docs/layouts.md`` (:func:`markdown`, written by ``benchmarks/report.py
--pages``). The checker keeps its own short list of the sketch maps on purpose
(it imports nothing of ``models/``); ``tests/test_feature_table.py`` checks
that the two agree.

Adding a map: one :class:`FeatureMap` entry here with its torch and canonical
functions (the canonical one in :mod:`models.canonical.maps`, built from
:mod:`models.canonical.arith` only), and the library spelling that selects it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from certify.core.errors import InputError
from models.canonical import maps as cm
from models.canonical.arith import cr_exp, f64, relu
from models.optional_torch import F, torch, tt


class Nonnegativity(str, enum.Enum):
    """What a map guarantees about signs, by construction (what a nonnegative claim rests on)."""

    FEATURES_NONNEGATIVE = "features_nonnegative"   # every feature >= 0, so the kernel is too
    KERNEL_NONNEGATIVE = "kernel_nonnegative"       # signed features, a kernel >= 0 (a square, 1 + s + s^2/2)
    SIGNED = "signed"                               # nothing: nonnegativity is decided on the features


#: the libraries whose spelling the table records (``FeatureMap.names``), and what the name selects
LIBRARIES: Mapping[str, str] = {
    "fla": "fla `LinearAttention(feature_map=...)`",
    "fla-based": "fla `BasedLinearAttention` / zoology `Based` (`feature_name=...`)",
    "fla-rebased": "fla `ReBasedLinearAttention`",
    "performer-pytorch": "performer-pytorch `kernel_fn=nn.<Name>()` (a config may write it lower-cased)",
    "performer-pytorch no_projection": "performer-pytorch `no_projection=True`, causal heads",
    "linear-attention-transformer": "linear-attention-transformer, causal heads",
    "pytorch-fast-transformers": "pytorch-fast-transformers `LinearAttention(feature_map=...)`",
    "adapter": "adapter spec `feature_map` (layout `generic`) / `kernel_fn` (layout `performer`)",
    "project": "the project's heads, on u = W x + b (`models.feature_maps`)",
    "project-lookup": "the project's heads, on a free table (`models.feature_maps`)",
    "sketch": "sketch models (`models.sketch`, Thm 9)",
}


@dataclass(frozen=True)
class FeatureMap:
    """One feature map's facts (module docstring)."""

    name: str
    prose: str                                   # the map, as the docs and defaults print it
    torch: Callable[..., Any]
    canonical: Callable[..., Any]
    rational: bool
    structure: Nonnegativity
    rests_on: str                                # why ``structure`` holds
    rank: Callable[..., int]                     # (d, *params) -> number of features
    names: Mapping[str, tuple[str, ...]]
    learned: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    elementwise: bool = False                    # applied to each coordinate alone (r = d)
    library_torch: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    @property
    def nonnegative(self) -> bool:
        """Every feature is ``>= 0`` by construction."""
        return self.structure is Nonnegativity.FEATURES_NONNEGATIVE

    def torch_for(self, library: str) -> Callable[..., Any]:
        """The torch function as ``library`` computes the map."""
        return self.library_torch.get(library, self.torch)


# ---------------------------------------------------------------- torch functions

def identity(u):
    return u


def _relu(u):
    return F.relu(u)


def _elu(u):
    return F.elu(u)


def _exp(u):
    return torch.exp(u)


def _softplus(u):
    return F.softplus(u)


def _sigmoid(u):
    return torch.sigmoid(u)


def _tanh(u):
    return torch.tanh(u)


def _gelu(u):
    return F.gelu(u)


def _softmax(u):
    return u.softmax(dim=-1)


def elu1(u):
    """``elu(u) + 1`` as fast-transformers (and the project's heads) compute it."""
    return F.elu(u) + 1.0


def elu_p1(u):
    """fla's ``elu_p1``: ``u + 1`` for ``u >= 0``, ``exp(u)`` below (no cancellation)."""
    return torch.where(u >= 0, u + 1, u.clamp_max(0).exp()).to(u.dtype)


def dpfp(u, nu: int = 4):
    x = torch.cat([u.relu(), (-u).relu()], dim=-1)
    rolled = torch.cat([x.roll(shifts=j, dims=-1) for j in range(1, nu + 1)], dim=-1)
    return torch.cat([x] * nu, dim=-1) * rolled


def taylor(u):
    """fla's TaylorFeatureMap: ``[1, u/d^1/4, u_i^2/(sqrt2 sqrt d), u_i u_j/sqrt d (i<j)]``."""
    d = u.shape[-1]
    rd, rrd = math.sqrt(d), math.sqrt(math.sqrt(d))
    iu = torch.triu_indices(d, d, 1)
    outer = u[..., :, None] * u[..., None, :]
    diag = outer.diagonal(dim1=-2, dim2=-1)
    off = outer[..., iu[0], iu[1]]
    return torch.cat([torch.ones_like(u[..., :1]), u / rrd, diag / (rd * math.sqrt(2)), off / rd], dim=-1)


def rebased(gamma, beta, normalize: bool = True, eps: float = 1e-5):
    """fla's ReBased map: (LayerNorm or affine) then ``[x_i^2 d^-1/2, x_i x_j sqrt(2/d) (i<j)]``."""
    def f(u):
        d = u.shape[-1]
        g, b = tt(gamma), tt(beta)
        if normalize:
            x = F.layer_norm(u, (d,), g, b, eps)
        else:
            x = u * g if g is not None else u
            x = x + b if b is not None else x
        outer = x[..., :, None] * x[..., None, :]
        iu = torch.triu_indices(d, d, 1)
        return torch.cat([outer.diagonal(dim1=-2, dim2=-1) * d ** -0.5,
                          outer[..., iu[0], iu[1]] * (2 / d) ** 0.5], dim=-1)
    return f


def _lin(u, W, b):
    return u @ tt(W).T + (tt(b) if b is not None else 0)


def hedgehog(W, b):
    return lambda u: torch.cat([2 * _lin(u, W, b), -2 * _lin(u, W, b)], -1).softmax(-1)


def t2r(W, b=None):
    return lambda u: _lin(u, W, b).relu()


def elementwise_product(W1, b1, W2, b2):
    return lambda u: _lin(u, W1, b1) * _lin(u, W2, b2)


def favor(P):
    """``exp(u P^T - |u|^2 / 2) / sqrt(r)``."""
    def f(u):
        r = P.shape[0]
        return torch.exp(u @ tt(P).T - 0.5 * (u * u).sum(-1, keepdim=True)) / math.sqrt(r)
    return f


def tensor_square(u):
    return (u[..., :, None] * u[..., None, :]).flatten(-2)


def _opt(t):
    return None if t is None else f64(t)


# ---------------------------------------------------------------- the table

_FN, _KN, _SG = Nonnegativity.FEATURES_NONNEGATIVE, Nonnegativity.KERNEL_NONNEGATIVE, Nonnegativity.SIGNED


def _same(d: int, *_: Any) -> int:
    return d


TABLE: Mapping[str, FeatureMap] = {e.name: e for e in (
    FeatureMap("elu1", "elu(u) + 1: u + 1 for u >= 0, exp(u) below", elu1, cm.elu_p1, False, _FN,
               "elu(u) + 1 > 0", _same,
               {"fla": ("elu",), "pytorch-fast-transformers": ("elu+1",), "adapter": ("elu1",),
                "project": ("elu1",), "sketch": ("elu1",)},
               elementwise=True, library_torch={"fla": elu_p1}),
    FeatureMap("relu", "max(u, 0)", _relu, relu, True, _FN, "max(u, 0) >= 0",
               _same, {"fla": ("relu",), "performer-pytorch": ("ReLU",), "adapter": ("relu",),
                       "project": ("relu",), "project-lookup": ("lookup_relu",), "sketch": ("relu",)}, elementwise=True),
    FeatureMap("identity", "u (signed)", identity, cm.identity, True, _SG, "nothing",
               _same, {"fla": ("identity",), "fla-based": ("identity",), "performer-pytorch": ("Identity",),
                       "adapter": ("identity",), "project": ("identity",), "project-lookup": ("lookup_signed",),
                       "sketch": ("identity",)}, elementwise=True),
    FeatureMap("elu", "elu(u): u for u > 0, exp(u) - 1 below (signed)", _elu, cm.elu, False, _SG,
               "nothing: elu(u) >= -1", _same, {"performer-pytorch": ("ELU",)}, elementwise=True),
    FeatureMap("exp", "exp(u)", _exp, cr_exp, False, _FN, "exp(u) > 0", _same,
               {"linear-attention-transformer": ("keys",), "performer-pytorch no_projection": ("keys",),
                "adapter": ("exp",), "project": ("exp",), "project-lookup": ("lookup_exp",), "sketch": ("exp",)}, elementwise=True),
    FeatureMap("softplus", "log(1 + exp(u))", _softplus, cm.softplus, False, _FN,
               "log(1 + exp(u)) > 0", _same,
               {"performer-pytorch": ("Softplus",), "adapter": ("softplus",),
                "project": ("softplus",), "project-lookup": ("lookup_softplus",)}, elementwise=True),
    FeatureMap("sigmoid", "1 / (1 + exp(-u))", _sigmoid, cm.sigmoid, False, _FN,
               "1 / (1 + exp(-u)) > 0", _same, {"performer-pytorch": ("Sigmoid",)}, elementwise=True),
    FeatureMap("tanh", "tanh(u) (signed)", _tanh, cm.tanh, False, _SG, "nothing",
               _same, {"performer-pytorch": ("Tanh",)}, elementwise=True),
    FeatureMap("gelu", "u Phi(u) (signed)", _gelu, cm.gelu, False, _SG, "nothing: gelu(u) >= -0.17",
               _same, {"performer-pytorch": ("GELU",)}, elementwise=True),
    FeatureMap("softmax", "softmax over the features", _softmax, cm.softmax, False, _FN,
               "exp(u_i) / sum_j exp(u_j) > 0", _same,
               {"linear-attention-transformer": ("queries",), "performer-pytorch no_projection": ("queries",),
                "adapter": ("softmax",)}),
    FeatureMap("dpfp", "DPFP (nu = 4): [relu(u), relu(-u)] times its rolls by 1..4", dpfp, cm.dpfp, True, _FN,
               "products of relus >= 0", lambda d, *_: 2 * d * 4, {"fla": ("dpfp",)}),
    FeatureMap("hedgehog", "softmax([2 (W u + b), -2 (W u + b)])", hedgehog,
               lambda W, b: cm.hedgehog(f64(W), f64(b)), False, _FN, "softmax > 0",
               lambda d, W, *_: 2 * int(W.shape[0]), {"fla": ("hedgehog",)},
               learned=("layer.weight", "layer.bias")),
    FeatureMap("t2r", "relu(W u + b)", t2r, lambda W, b=None: cm.t2r(f64(W), _opt(b)), True, _FN,
               "max(., 0) >= 0", lambda d, W, *_: int(W.shape[0]), {"fla": ("t2r",)},
               learned=("layer.weight",), optional=("layer.bias",)),
    FeatureMap("elementwise_product", "(W1 u + b1) * (W2 u + b2) (signed)", elementwise_product,
               lambda W1, b1, W2, b2: cm.elementwise_product(f64(W1), f64(b1), f64(W2), f64(b2)), True, _SG,
               "nothing", lambda d, W1, *_: int(W1.shape[0]), {"fla": ("elementwise_product",)},
               learned=("layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias")),
    FeatureMap("taylor", "[1, u / d^1/4, u_i^2 / (sqrt2 sqrt d), u_i u_j / sqrt d (i < j)]", taylor, cm.taylor,
               False, _KN, "alpha = 1 + s + s^2/2 > 0 (s = q.k / sqrt d), signed features",
               lambda d, *_: 1 + d + d * (d + 1) // 2, {"fla-based": ("taylor_exp",)}),
    FeatureMap("rebased", "LayerNorm(u; gamma, beta), then [x_i^2 / sqrt d, x_i x_j sqrt(2/d) (i < j)]", rebased,
               lambda gamma, beta, normalize=True: cm.rebased(_opt(gamma), _opt(beta), normalize), False, _KN,
               "alpha = (x.y)^2 / d >= 0, signed features", lambda d, *_: d * (d + 1) // 2,
               {"fla-rebased": ("rebased",)}, optional=("gamma", "beta")),
    FeatureMap("favor", "FAVOR+ positive random features exp(u P^T - u.u / 2) / sqrt(r), P fixed", favor,
               lambda P: cm.favor(f64(P)), False, _FN, "exp > 0", lambda d, P, *_: int(P.shape[0]),
               {"adapter": ("favor",), "project": ("favor",)}, learned=("projection",)),
    FeatureMap("tensor_square", "u (x) u, r = d^2", tensor_square, cm.tensor_square, True, _KN,
               "<a (x) a, b (x) b> = <a, b>^2 >= 0, signed features", lambda d, *_: d * d,
               {"project": ("tensor_square",)}),
)}


# ---------------------------------------------------------------- lookups

def names_in(library: str) -> tuple[str, ...]:
    """Every spelling ``library`` uses, in table order."""
    return tuple(n for e in TABLE.values() for n in e.names.get(library, ()))


def in_library(library: str) -> dict[str, FeatureMap]:
    """``{spelling: entry}`` of ``library``."""
    return {n: e for e in TABLE.values() for n in e.names.get(library, ())}


def named(library: str, name: str) -> FeatureMap:
    """The entry ``library`` calls ``name`` (``InputError`` naming the known spellings)."""
    found = in_library(library)
    if name not in found:
        raise InputError(f"unknown {library} feature map {name!r} ({', '.join(found)})")
    return found[name]


def param_free(library: str) -> tuple[str, ...]:
    """``library``'s spellings of maps without learned parameters."""
    return tuple(n for n, e in in_library(library).items() if not e.learned and not e.optional)


def learned(library: str) -> dict[str, frozenset[str]]:
    """``{spelling: the keys it requires}`` of ``library``'s learned maps."""
    return {n: frozenset(e.learned) for n, e in in_library(library).items() if e.learned}


def parameters(entry: FeatureMap, sd: Mapping[str, Any], prefix: str) -> list[Any]:
    """A learned map's parameters under ``prefix`` of a state dict, in its functions' order."""
    return [sd[prefix + k] for k in entry.learned] + [sd.get(prefix + k) for k in entry.optional]


# ---------------------------------------------------------------- the docs' table

def markdown() -> str:
    """The table of ``docs/layouts.md`` (between its feature-map markers)."""
    def names(e: FeatureMap) -> str:
        return "; ".join(f"{lib}: " + ", ".join(f"`{n}`" for n in ns) for lib, ns in e.names.items())
    rows = ["| map | what it computes | rational | nonnegative by construction (what it rests on) | "
            "learned keys | how the libraries call it |", "|---|---|---|---|---|---|"]
    for e in TABLE.values():
        keys = ", ".join([f"`{k}`" for k in e.learned] + [f"`{k}` (optional)" for k in e.optional]) or "-"
        sign = {Nonnegativity.FEATURES_NONNEGATIVE: f"features: {e.rests_on}",
                Nonnegativity.KERNEL_NONNEGATIVE: f"kernel: {e.rests_on}",
                Nonnegativity.SIGNED: "no (decided on the features)"}[e.structure]
        rows.append(f"| `{e.name}` | {e.prose} | {'yes' if e.rational else 'no'} | {sign} | {keys} | {names(e)} |")
    return "\n".join(rows)
