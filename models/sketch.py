"""The L-layer, H-head linear-attention sketch model with quantized channels (Sec. 4).

Semantics (the certified model is this exact-real computation; float64 torch
only proposes):

    h_i^(0) = E x_i (+ P_i when the config has positions)            # (N, d)
    layer l, head c:  phiK_j = f(WK h_j + bK),  v_j = WV h_j + bV
        S = sum_j phiK_j v_j^T  (r x dv),   z = sum_j phiK_j  (r)
        every coordinate of (S, z) goes through the quantizer  ->  (Sq, zq)
        phiQ_i = f(WQ h_i + bQ),  den_i = phiQ_i . zq,
        a_i = phiQ_i^T Sq / den_i   (a_i = 0 when den_i = 0 exactly)
    h_i^(l) = h_i^(l-1) + sum_c WO_c a_i^c + bO
    output  t_hat_i = w . h_i^(L) + b

Tokens interact only through the quantized sketches, so the transcript
(every ``(Sq, zq)``, layer by layer, head by head, ``S`` row-major then ``z``:
``T = L H r (dv + 1)`` symbols) and a token's own state and position determine
its output (Thm 9's proof). Feature maps ``f``: ``identity``, ``relu`` (rational:
replayed exactly with Fractions), ``elu1`` (elu(x)+1), ``exp`` (replayed with
arb balls).

Checkpoints: ``X.safetensors`` (float tensors, exact dyadic values) +
``X.json`` (``{"format": "certify-attention/sketch-checkpoint/1", "config": ...}``).

Weights are float64 arrays, numpy or torch: the built-in models are numpy and
importing this module does not import torch (the certified enumeration and
the exact replay need none); torch is imported by the float64 fast path,
checkpoints and the random models only.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from certify.core.errors import InputError
from models.feature_table import named, names_in
from models.quantize import Quantizer, UniformQuantizer, quantizer_from_json

if TYPE_CHECKING:                                   # annotations only: torch is imported lazily
    import torch

CHECKPOINT_FORMAT = "certify-attention/sketch-checkpoint/1"
#: the sketch models' feature maps, and those replayed exactly with Fractions (:mod:`models.feature_table`)
FEATURE_MAPS = names_in("sketch")
RATIONAL_MAPS = tuple(n for n in FEATURE_MAPS if named("sketch", n).rational)


@dataclass(frozen=True)
class SketchConfig:
    m: int                 # token dimension
    d: int                 # state dimension
    layers: int
    heads: int
    rank: int              # r
    dv: int
    feature_map: str = "relu"
    positions: int = 0     # 0: no position embedding; else the number of positions

    def __post_init__(self) -> None:
        for nm in ("m", "d", "layers", "heads", "rank", "dv"):
            v = getattr(self, nm)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"sketch config: {nm} must be an integer >= 1, got {v!r}")
        if isinstance(self.positions, bool) or not isinstance(self.positions, int) or self.positions < 0:
            raise InputError(f"sketch config: positions must be an integer >= 0, got {self.positions!r}")
        if self.feature_map not in FEATURE_MAPS:
            raise InputError(f"sketch config: feature_map must be one of {FEATURE_MAPS}, "
                             f"got {self.feature_map!r}")

    @property
    def transcript_length(self) -> int:
        return self.layers * self.heads * self.rank * (self.dv + 1)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Any) -> "SketchConfig":
        if not isinstance(obj, Mapping):
            raise InputError("sketch config must be a JSON object")
        extra = set(obj) - {f for f in cls.__dataclass_fields__}
        if extra:
            raise InputError(f"sketch config has unknown keys: {sorted(extra)}")
        try:
            return cls(**obj)
        except TypeError as exc:
            raise InputError(f"sketch config: {exc}") from None


def param_shapes(cfg: SketchConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor of the model."""
    shapes: dict[str, tuple[int, ...]] = {"embed.weight": (cfg.d, cfg.m)}
    if cfg.positions:
        shapes["embed.pos"] = (cfg.positions, cfg.d)
    for l in range(cfg.layers):
        for c in range(cfg.heads):
            p = f"layers.{l}.heads.{c}."
            shapes.update({p + "q.weight": (cfg.rank, cfg.d), p + "q.bias": (cfg.rank,),
                           p + "k.weight": (cfg.rank, cfg.d), p + "k.bias": (cfg.rank,),
                           p + "v.weight": (cfg.dv, cfg.d), p + "v.bias": (cfg.dv,),
                           p + "o.weight": (cfg.d, cfg.dv)})
        shapes[f"layers.{l}.o.bias"] = (cfg.d,)
    shapes["readout.weight"] = (cfg.d,)
    shapes["readout.bias"] = (1,)
    return shapes


def check_tensors(cfg: SketchConfig, tensors: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Validate names, shapes and finiteness; return float64 copies."""
    import torch
    shapes = param_shapes(cfg)
    missing = sorted(set(shapes) - set(tensors))
    extra = sorted(set(tensors) - set(shapes))
    if missing or extra:
        raise InputError(f"sketch tensors do not match the config: missing {missing[:4]}, "
                         f"unexpected {extra[:4]}")
    out = {}
    for name, shape in shapes.items():
        t = torch.as_tensor(tensors[name])
        if tuple(t.shape) != shape:
            raise InputError(f"tensor {name} has shape {tuple(t.shape)}, the config needs {shape}")
        if not t.is_floating_point():
            raise InputError(f"tensor {name} must be floating point")
        t = t.detach().to(torch.float64)
        if not bool(torch.isfinite(t).all()):
            raise InputError(f"tensor {name} has non-finite entries")
        out[name] = t
    return out


# ---------------------------------------------------------------- checkpoints

def _paths(path: str | os.PathLike) -> tuple[Path, Path]:
    p = Path(path)
    stem = p.with_suffix("") if p.suffix in (".json", ".safetensors") else p
    return stem.with_name(stem.name + ".safetensors"), stem.with_name(stem.name + ".json")


def save_sketch_checkpoint(path: str | os.PathLike, cfg: SketchConfig,
                           tensors: Mapping[str, torch.Tensor],
                           quantizer: Quantizer | None = None) -> tuple[Path, Path]:
    """Write ``X.safetensors`` and ``X.json`` atomically."""
    from safetensors.torch import save as st_save

    from certify.core.files import atomic_write_bytes, atomic_write_text

    tensors = check_tensors(cfg, tensors)
    st_path, js_path = _paths(path)
    meta: dict[str, Any] = {"format": CHECKPOINT_FORMAT, "config": cfg.to_json()}
    if quantizer is not None:
        meta["quantizer"] = quantizer.to_json()
    atomic_write_bytes(st_path, st_save({k: v.contiguous() for k, v in tensors.items()}))
    atomic_write_text(js_path, json.dumps(meta, indent=1) + "\n")
    return st_path, js_path


def load_sketch_checkpoint(path: str | os.PathLike
                           ) -> tuple[SketchConfig, dict[str, torch.Tensor], Quantizer | None]:
    """Read a checkpoint written by :func:`save_sketch_checkpoint` (no pickle)."""
    from safetensors import SafetensorError
    from safetensors.torch import load as st_load

    st_path, js_path = _paths(path)
    try:
        meta = json.loads(js_path.read_text())
        blob = st_path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read checkpoint {path}: {exc.strerror}: {exc.filename}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"checkpoint config {js_path} is not JSON: {exc.msg}") from None
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        raise InputError(f"{js_path} is not a sketch checkpoint (format must be {CHECKPOINT_FORMAT!r})")
    extra = set(meta) - {"format", "config", "quantizer"}
    if extra:
        raise InputError(f"checkpoint config has unknown keys: {sorted(extra)}")
    cfg = SketchConfig.from_json(meta.get("config"))
    try:
        tensors = st_load(blob)
    except (SafetensorError, Exception) as exc:  # safetensors raises several types
        raise InputError(f"cannot parse {st_path}: {exc}") from None
    quant = quantizer_from_json(meta["quantizer"]) if meta.get("quantizer") is not None else None
    return cfg, check_tensors(cfg, tensors), quant


# ---------------------------------------------------------------- float64 fast path

def _fmap_torch(name: str, x: torch.Tensor) -> torch.Tensor:
    return named("sketch", name).torch(x)


@dataclass(frozen=True)
class FastRun:
    keys: torch.Tensor        # (B, T) int64 transcript symbols (index or float bits)
    values: torch.Tensor      # (B, T) float64 dequantized transcript
    pre: torch.Tensor         # (B, T) float64 values before quantization
    outputs: torch.Tensor     # (B, N) float64


def forward_fast(cfg: SketchConfig, W: Mapping[str, torch.Tensor], quant: Quantizer | None,
                 X: torch.Tensor | None = None, *, tokens: torch.Tensor | None = None,
                 idx: torch.Tensor | None = None, n_out: int | None = None) -> FastRun:
    """Batched float64 forward pass on ``X`` (B, N, m) 0/1, or on a token table
    ``tokens`` (K, m) with token indices ``idx`` (B, N): then every quantity that
    depends on a token alone (all of layer 1 without positions) is computed
    once per token and gathered. Outputs are returned for the first ``n_out``
    positions (default all). ``quant=None`` runs the unquantized model (keys
    are then empty)."""
    import torch
    W = {k: torch.as_tensor(v) for k, v in W.items()}              # numpy weights: shared memory
    dense: torch.Tensor | None
    if X is not None:
        B, N, _ = X.shape
        dense = X @ W["embed.weight"].T                               # (B, N, d)
        Ht = None
    elif tokens is None or idx is None:
        raise ValueError("forward_fast needs X, or tokens and idx")
    else:
        B, N = idx.shape
        Ht = tokens @ W["embed.weight"].T                             # (K, d)
        dense = None
    # while ``dense`` is None, every quantity is per token (Ht), gathered by ``idx``
    if cfg.positions:
        if dense is None:
            assert Ht is not None and idx is not None
            dense = Ht[idx]
        dense = dense + W["embed.pos"][:N]
    n_out = N if n_out is None else n_out
    r, dv = cfg.rank, cfg.dv
    keys: list[torch.Tensor] = []
    vals: list[torch.Tensor] = []
    pres: list[torch.Tensor] = []
    for l in range(cfg.layers):
        rows = n_out if l == cfg.layers - 1 else N                    # positions updated
        delta: torch.Tensor | None = None
        for c in range(cfg.heads):
            p = f"layers.{l}.heads.{c}."
            gather = idx if dense is None else None                   # per token, then gathered
            src = Ht if dense is None else dense
            assert src is not None
            phik = _fmap_torch(cfg.feature_map, src @ W[p + "k.weight"].T + W[p + "k.bias"])
            v = src @ W[p + "v.weight"].T + W[p + "v.bias"]
            if gather is not None:                                    # per token, then gather
                contrib = torch.cat([(phik[:, :, None] * v[:, None, :]).reshape(-1, r * dv),
                                     phik], 1)                        # (K, r(dv+1))
                pre = contrib[gather].sum(1)                          # (B, r(dv+1))
            else:
                S = phik.transpose(1, 2) @ v                          # (B, r, dv)
                pre = torch.cat([S.reshape(B, -1), phik.sum(1)], 1)
            if quant is None:
                k, q = pre.new_zeros((B, 0), dtype=torch.int64), pre
            else:
                k, q = quant.quantize_torch(pre)
            keys.append(k)
            vals.append(q)
            pres.append(pre)
            Sq = q[:, :r * dv].reshape(B, r, dv)
            zq = q[:, r * dv:]
            phiq = _fmap_torch(cfg.feature_map, src @ W[p + "q.weight"].T + W[p + "q.bias"])
            phiq = phiq[gather[:, :rows]] if gather is not None else phiq[:, :rows]  # (B, rows, r)
            num = phiq @ Sq                                           # (B, rows, dv)
            den = (phiq * zq[:, None, :]).sum(-1, keepdim=True)       # (B, rows, 1)
            safe = torch.where(den == 0, torch.ones_like(den), den)
            a = torch.where(den == 0, torch.zeros_like(num), num / safe)
            upd = a @ W[p + "o.weight"].T                             # (B, rows, d)
            delta = upd if delta is None else delta + upd
        assert delta is not None                                      # a layer has a head
        if dense is None:
            assert Ht is not None and idx is not None
            base = Ht[idx[:, :rows]]
        else:
            base = dense[:, :rows]
        dense = base + delta + W[f"layers.{l}.o.bias"]
    assert dense is not None                                          # a model has a layer
    out = dense[:, :n_out] @ W["readout.weight"] + W["readout.bias"]
    return FastRun(torch.cat(keys, 1), torch.cat(vals, 1), torch.cat(pres, 1), out)


# ---------------------------------------------------------------- exact replay

def exact_weights(W: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Every float64 weight as an exact Fraction (object arrays)."""
    out = {}
    for name, t in W.items():
        flat = [Fraction(*float(v).as_integer_ratio()) for v in t.reshape(-1).tolist()]
        out[name] = np.array(flat, dtype=object).reshape(tuple(t.shape))
    return out


def weights_to_json(W: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Exact dyadic encoding: value = ints[i] * 2^exp, one exponent per tensor."""
    out = {}
    for name, t in W.items():
        fr = [Fraction(*float(v).as_integer_ratio()) for v in t.reshape(-1).tolist()]
        k = max((f.denominator.bit_length() - 1 for f in fr), default=0)
        ints = [int(f * (1 << k)) for f in fr]
        out[name] = {"shape": list(t.shape), "exp": -k, "ints": ints}
    return out


class Uncertain(Exception):
    """A ball straddles a quantizer cell boundary (or a zero test is undecided)."""


class _FractionOps:
    """Exact rationals (python-flint fmpq): identity and relu feature maps."""

    name = "fraction"

    def __init__(self, fmap: str) -> None:
        import flint

        if fmap not in RATIONAL_MAPS:
            raise ValueError(f"feature map {fmap!r} is not rational")
        self.fmap = fmap
        self.fmpq = flint.fmpq
        self.zero_ = flint.fmpq(0)

    def const(self, x: Fraction):
        return self.fmpq(x.numerator, x.denominator)

    def f(self, x):
        return x if self.fmap == "identity" or x > 0 else self.zero_

    def is_zero(self, x) -> bool:
        return x == 0

    def interval(self, x) -> tuple[Fraction, Fraction]:
        v = Fraction(int(x.p), int(x.q))
        return v, v

    def output(self, x) -> Fraction:
        return Fraction(int(x.p), int(x.q))


class _ArbOps:
    name = "arb"

    def __init__(self, fmap: str) -> None:
        import flint

        self.flint = flint
        self.fmap = fmap

    def const(self, x: Fraction):
        return self.flint.arb(self.flint.fmpq(x.numerator, x.denominator))

    def _f_point(self, x):
        if self.fmap == "identity":
            return x
        if self.fmap == "relu":
            return x.max(self.flint.arb(0))
        if self.fmap == "exp":
            return x.exp()
        return x + 1 if x > 0 else (x.exp() if x < 0 else None)

    def f(self, x):
        if self.fmap == "elu1" and not (x > 0 or x < 0):
            # monotone: enclose by the images of the two ends
            lo, hi = x.lower(), x.upper()
            a = lo + 1 if lo >= 0 else lo.exp()
            b = hi + 1 if hi >= 0 else hi.exp()
            return a.union(b)
        return self._f_point(x)

    def is_zero(self, x) -> bool:
        if x.is_zero():
            return True
        if x.contains(0):
            raise Uncertain("a denominator ball contains 0")
        return False

    def output(self, x):
        return x

    def interval(self, x) -> tuple[Fraction, Fraction]:
        if not x.is_finite():
            raise Uncertain("a ball is not finite")
        lo, hi = x.lower().man_exp(), x.upper().man_exp()
        return _frac(lo), _frac(hi)


def _frac(me) -> Fraction:
    man, exp = int(me[0]), int(me[1])
    return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** -exp)


@dataclass(frozen=True)
class ExactRun:
    transcript: tuple          # T symbols: int indices (uniform) or Fraction values (float formats)
    outputs: tuple             # N outputs: Fraction (exact) or arb balls
    backend: str


def forward_exact(cfg: SketchConfig, EW: Mapping[str, np.ndarray], quant: Quantizer,
                  tokens: np.ndarray, *, prec: int = 256) -> ExactRun:
    """Exact (Fraction) or certified (arb) replay of one input ``tokens`` (N, m).

    Raises :class:`Uncertain` when some pre-quantization ball is not inside one
    quantizer cell."""
    if cfg.feature_map in RATIONAL_MAPS:
        return _forward_exact(cfg, EW, quant, tokens, _FractionOps(cfg.feature_map))
    import flint

    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        return _forward_exact(cfg, EW, quant, tokens, _ArbOps(cfg.feature_map))
    finally:
        flint.ctx.prec = old


def _forward_exact(cfg, EW, quant, tokens, ops) -> ExactRun:
    cv = np.vectorize(ops.const, otypes=[object])
    W = {k: cv(v) for k, v in EW.items()}
    fv = np.vectorize(ops.f, otypes=[object])
    X = np.array([[ops.const(Fraction(int(b))) for b in row] for row in tokens], dtype=object)
    N = X.shape[0]
    h = X @ W["embed.weight"].T                                       # (N, d)
    if cfg.positions:
        h = h + W["embed.pos"][:N]
    symbols: list = []
    for l in range(cfg.layers):
        delta = np.zeros_like(h)
        for c in range(cfg.heads):
            p = f"layers.{l}.heads.{c}."
            phik = fv(h @ W[p + "k.weight"].T + W[p + "k.bias"])           # (N, r)
            v = h @ W[p + "v.weight"].T + W[p + "v.bias"]                   # (N, dv)
            S = phik.T @ v                                                  # (r, dv)
            z = phik.sum(0)                                                 # (r,)
            q_vals = []
            for x in list(S.reshape(-1)) + list(z):
                lo, hi = ops.interval(x)
                a, b = quant.index_exact(lo), quant.index_exact(hi)
                if a != b:
                    raise Uncertain(f"layer {l} head {c}: a sketch coordinate straddles a "
                                    f"quantizer boundary ({float(lo)!r}..{float(hi)!r})")
                symbols.append(a)
                q_vals.append(ops.const(quant.value_exact(lo)))
            Sq = np.array(q_vals[:cfg.rank * cfg.dv], dtype=object).reshape(cfg.rank, cfg.dv)
            zq = np.array(q_vals[cfg.rank * cfg.dv:], dtype=object)
            phiq = fv(h @ W[p + "q.weight"].T + W[p + "q.bias"])           # (N, r)
            num = phiq @ Sq                                                 # (N, dv)
            den = phiq @ zq                                                 # (N,)
            a_rows = []
            for i in range(N):
                if ops.is_zero(den[i]):
                    a_rows.append([ops.const(Fraction(0))] * cfg.dv)
                else:
                    a_rows.append([num[i, j] / den[i] for j in range(cfg.dv)])
            a = np.array(a_rows, dtype=object)
            delta = delta + a @ W[p + "o.weight"].T
        h = h + delta + W[f"layers.{l}.o.bias"]
    out = h @ W["readout.weight"] + W["readout.bias"][0]
    return ExactRun(tuple(symbols), tuple(ops.output(y) for y in out.tolist()), ops.name)


# ---------------------------------------------------------------- built-in models

def injective_model(words: np.ndarray, M: int, s: int, *, blind: bool = False
                    ) -> tuple[SketchConfig, dict[str, np.ndarray]]:
    """A one-layer, one-head relu model with ``r = q`` features and ``dv = 1``
    that writes ``kappa_S`` into ``S[S]`` exactly (``z = 1``) and reads it back at
    query ``q_S``: with a quantizer that represents ``0..s`` exactly it solves
    the multilevel family with zero error and its transcript is injective.

    ``blind=True`` plants a collision: the last feature watches the first word's
    database token, so the last assignment coordinate never reaches the sketch.
    The weights are numpy float64 arrays (small integers: exact).
    """
    words = np.asarray(words, dtype=np.int64)
    q = words.shape[0]
    h = int(words[0].sum())
    if h < 1:
        raise InputError("the injective model needs code weight h >= 1")
    m = 2 + M + s
    d = m + 1
    cfg = SketchConfig(m=m, d=d, layers=1, heads=1, rank=q, dv=1, feature_map="relu")
    W = {k: np.zeros(shape, dtype=np.float64) for k, shape in param_shapes(cfg).items()}
    W["embed.weight"][:m, :m] = np.eye(m)
    p = "layers.0.heads.0."
    for j in range(q):
        kw = words[0] if (blind and j == q - 1) else words[j]
        # key: database token d_{U,k} with U = word -> 1, any other token -> <= 0
        W[p + "k.weight"][j, 2:2 + M] = kw
        W[p + "k.weight"][j, 0] = h
        W[p + "k.bias"][j] = -(2 * h - 1)
        # query: q_S with S = word -> 1, any other token -> <= 0
        W[p + "q.weight"][j, 1] = 1
        W[p + "q.weight"][j, 2:2 + M] = -words[j]
    W[p + "v.weight"][0, 2 + M:m] = 1                     # v = |u_k| = k
    W[p + "o.weight"][m, 0] = 1                           # a -> coordinate m
    W["readout.weight"][m] = 1
    return cfg, W


def random_model(cfg: SketchConfig, seed: int, *, scale: float = 1.0) -> dict[str, torch.Tensor]:
    """Gaussian weights (fan-in scaled), rounded to float32 so that every weight
    is a short dyadic rational (torch's generator: the seeds of earlier runs)."""
    import torch
    g = torch.Generator().manual_seed(int(seed))
    W = {}
    for name, shape in param_shapes(cfg).items():
        fan_in = shape[-1] if len(shape) == 2 and not name.endswith("pos") else 1
        t = torch.randn(shape, generator=g, dtype=torch.float64) * (scale / math.sqrt(fan_in))
        W[name] = t.to(torch.float32).to(torch.float64)
    return W


def builtin_uniform_quantizer(bits: int) -> UniformQuantizer:
    """Integer levels ``0 .. 2^p - 1`` (step 1): exact for the injective model."""
    return UniformQuantizer(bits=bits, lo=Fraction(0), hi=Fraction((1 << bits) - 1))
