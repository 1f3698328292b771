"""The object a transcript claim is about: a sketch model with its quantizer
(:class:`QuantizedSketchModel`), and its construction from a
:class:`ModelRequest` (a built-in model, a random one, or a sketch checkpoint;
a uniform or floating-point quantizer).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from certify.core.errors import InputError
from certify.core.files import sha256_json


@dataclass(frozen=True)
class QuantizedSketchModel:
    """A sketch model together with its quantizer: the object that is certified."""

    cfg: Any                      # models.sketch.SketchConfig
    weights: dict                 # name -> float64 torch tensor (exact dyadic values)
    quantizer: Any                # models.quantize.UniformQuantizer | FloatFormatQuantizer
    source: str = "builtin"

    @property
    def T(self) -> int:
        return self.cfg.transcript_length

    def weights_json(self) -> dict[str, Any]:
        from models.sketch import weights_to_json

        return weights_to_json(self.weights)

    def evidence(self) -> dict[str, Any]:
        w = self.weights_json()
        return {"config": self.cfg.to_json(), "weights": w, "weights_sha256": sha256_json(w),
                "quantizer": self.quantizer.to_json(), "source": self.source}


def inputs_tensor(spec, kappas):
    import torch

    return torch.from_numpy(spec.tokens[spec.inputs(kappas)].astype(np.float64))  # (B, 2q, m)



def check_compatible(spec, model: QuantizedSketchModel, n: int) -> None:
    """Family and model must fit: token dimension, ``2q <= n``, positions."""
    if 2 * spec.q > n:
        raise InputError(f"2q = {2 * spec.q} exceeds the context length n = {n}")
    if model.cfg.m != spec.m:
        raise InputError(f"the model reads tokens of dimension {model.cfg.m}, the family "
                         f"(M, s) = ({spec.M}, {spec.s}) has m = 2 + M + s = {spec.m}")
    if model.cfg.positions and model.cfg.positions < 2 * spec.q:
        raise InputError(f"the model has {model.cfg.positions} positions, the family needs 2q = {2 * spec.q}")


def calibrated_uniform(spec, cfg, W, bits: int, *, sample: int = 8192, seed: int = 0,
                       frac_bits: int = 8):
    """Uniform quantizer whose range is the min/max of the unquantized sketches
    over ``sample`` assignments, rounded outward to multiples of ``2^-frac_bits``."""
    import torch

    from models.quantize import UniformQuantizer, dyadic_outward
    from models.sketch import forward_fast

    N = spec.num_assignments
    if N <= sample:
        idx = np.arange(N)
        how = f"all {N} assignments"
    else:
        idx = np.sort(np.random.default_rng(seed).choice(N, size=sample, replace=False))
        how = f"{sample} random assignments (seed {seed})"
    kap = spec.assignments(0, 1)
    powers = (spec.s + 1) ** np.arange(spec.q - 1, -1, -1, dtype=np.int64)
    kap = (idx[:, None] // powers) % (spec.s + 1)
    with torch.inference_mode():
        pre = forward_fast(cfg, W, None, inputs_tensor(spec, kap)).pre
    lo, hi = dyadic_outward(float(pre.min()), float(pre.max()), frac_bits)
    return UniformQuantizer(bits=bits, lo=lo, hi=hi,
                            calibrated=f"min/max of the unquantized sketches over {how}, "
                                       f"rounded outward to multiples of 2^-{frac_bits}")


@dataclass(frozen=True)
class ModelRequest:
    """Which sketch model and quantizer to certify (the options of
    ``certify transcript`` without the family): a sketch ``checkpoint``, or a
    built-in ``model`` (``builtin-injective``, ``builtin-planted``, or ``random``
    with its shape and ``seed``); a uniform quantizer of ``bits`` per coordinate
    (``range`` ``"LO:HI"``, ``"auto"`` or the model's default) or a float
    ``format``."""

    checkpoint: str | None = None
    model: str = "builtin-injective"
    seed: int = 0
    bits: int | None = None
    format: str | None = None
    range: str | None = None
    layers: int = 1
    heads: int = 1
    rank: int = 4
    dv: int = 2
    d_model: int | None = None
    feature_map: str = "relu"

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise InputError(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        for nm in ("layers", "heads", "rank", "dv"):
            if getattr(self, nm) < 1:
                raise InputError(f"--{nm} must be >= 1")
        if self.bits is not None and self.bits < 1:
            raise InputError(f"--bits must be >= 1 (bits per coordinate), got {self.bits}")
        if self.bits is not None and self.format is not None:
            raise InputError("give either --bits P or --format NAME, not both")


#: the built-in models of ``certify transcript --model``
MODELS = ("builtin-injective", "builtin-planted", "random")


def build_model(req: ModelRequest, spec, p: int | None = None) -> tuple[QuantizedSketchModel, dict[str, int],
                                                                  dict[str, str]]:
    """The model ``req`` names, with its quantizer (``p`` overrides ``req.bits``),
    the seeds it used and the input files it read (name -> sha256)."""
    from certify.core.files import sha256_file
    from models.quantize import FloatFormatQuantizer, Quantizer, UniformQuantizer
    from models.sketch import (
        SketchConfig,
        builtin_uniform_quantizer,
        injective_model,
        load_sketch_checkpoint,
        random_model,
    )

    bits = p if p is not None else req.bits
    seeds: dict[str, int] = {}
    inputs: dict[str, str] = {}
    saved_q: Quantizer | None = None
    W: dict[str, Any]                   # name -> torch tensor or numpy array (exact dyadic values)
    quant: Quantizer
    if req.checkpoint:
        cfg, W, saved_q = load_sketch_checkpoint(req.checkpoint)
        from models.sketch import _paths

        for pth in _paths(req.checkpoint):
            inputs[pth.name] = sha256_file(pth)
        source = f"checkpoint {req.checkpoint}"
    elif req.model in ("builtin-injective", "builtin-planted"):
        cfg, W = injective_model(spec.words, spec.M, spec.s, blind=req.model == "builtin-planted")
        source = req.model
    else:
        cfg = SketchConfig(m=spec.m, d=req.d_model or spec.m, layers=req.layers,
                           heads=req.heads, rank=req.rank, dv=req.dv,
                           feature_map=req.feature_map)
        W = random_model(cfg, req.seed)
        seeds["model"] = req.seed
        source = f"random init (seed {req.seed})"
    if cfg.m != spec.m:
        raise InputError(f"the model reads tokens of dimension {cfg.m}, the family "
                         f"(M, s) = ({spec.M}, {spec.s}) has m = 2 + M + s = {spec.m}")
    builtin = not req.checkpoint and req.model.startswith("builtin")
    if req.format:
        quant = FloatFormatQuantizer(req.format)
    elif bits is None:
        if saved_q is None:
            raise InputError("give --bits P or --format NAME (the checkpoint records no quantizer)")
        quant = saved_q
    elif req.range and req.range != "auto":
        lo, hi = _parse_range(req.range)
        quant = UniformQuantizer(bits=bits, lo=lo, hi=hi)
    elif req.range == "auto":
        quant = calibrated_uniform(spec, cfg, W, bits, seed=req.seed)
    elif builtin:
        quant = builtin_uniform_quantizer(bits)
    elif isinstance(saved_q, UniformQuantizer):
        quant = UniformQuantizer(bits=bits, lo=saved_q.lo, hi=saved_q.hi,
                                 calibrated=saved_q.calibrated)
    else:
        quant = calibrated_uniform(spec, cfg, W, bits, seed=req.seed)
    return QuantizedSketchModel(cfg, W, quant, source), seeds, inputs


def _parse_range(text: str) -> tuple[Fraction, Fraction]:
    from certify.core.numbers import str_to_q

    lo, sep, hi = text.partition(":")
    if not sep:
        raise InputError(f"--range must be LO:HI or auto, got {text!r}")
    return str_to_q(lo), str_to_q(hi)
