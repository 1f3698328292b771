"""Quantizers and the multi-layer sketch model (models/quantize.py, models/sketch.py)."""

from fractions import Fraction

import numpy as np
import pytest
import torch

from certify.core.errors import InputError
from certify.core.families import multilevel_spec
from models.quantize import FloatFormatQuantizer, UniformQuantizer, quantizer_from_json
from models.sketch import (
    FEATURE_MAPS,
    RATIONAL_MAPS,
    SketchConfig,
    Uncertain,
    builtin_uniform_quantizer,
    exact_weights,
    forward_exact,
    forward_fast,
    injective_model,
    load_sketch_checkpoint,
    random_model,
    save_sketch_checkpoint,
)

torch.set_num_threads(1)

DTYPES = {"fp8-e4m3": torch.float8_e4m3fn, "fp8-e5m2": torch.float8_e5m2,
          "bf16": torch.bfloat16, "fp16": torch.float16}


def _finite_values(dt) -> torch.Tensor:
    nbytes = torch.tensor([], dtype=dt).element_size()
    pats = torch.arange(1 << (8 * nbytes), dtype=torch.int32)
    raw = pats.to(torch.uint8) if nbytes == 1 else pats.to(torch.int16)
    vals = raw.view(dt).double()
    return torch.unique(vals[torch.isfinite(vals)] + 0.0)


@pytest.mark.parametrize("name,count", [("fp8-e4m3", 253), ("fp8-e5m2", 247),
                                        ("bf16", 65279), ("fp16", 63487)])
def test_float_alphabet_counts_match_the_dtype(name, count):
    vals = _finite_values(DTYPES[name])
    q = FloatFormatQuantizer(name)
    assert q.alphabet == count == len(vals)          # all bit patterns, NaN/inf out, -0 == +0
    assert float(q.spec.max) == float(vals.max())


@pytest.mark.parametrize("name", list(DTYPES))
def test_float_rounding_fast_equals_exact_and_lands_on_the_grid(name):
    q = FloatFormatQuantizer(name)
    grid = _finite_values(DTYPES[name])
    g = torch.Generator().manual_seed(1)
    mids = (grid[1:] + grid[:-1]) / 2                 # exact ties: round to even
    sub = torch.randperm(len(mids), generator=g)[:3000]
    x = torch.cat([grid[sub], mids[sub], torch.randn(3000, generator=g, dtype=torch.float64) * 100,
                   torch.tensor([1e300, -1e300, 0.0, -0.0], dtype=torch.float64)])
    _, r = q.quantize_torch(x)
    exact = torch.tensor([float(q.value_exact(Fraction(float(v)))) for v in x])
    assert torch.equal(r, exact)
    assert bool(torch.isin(r, grid).all())
    assert float(r[-4]) == float(grid.max()) and float(r[-3]) == -float(grid.max())   # saturates
    if name != "fp16":                                 # native conversion agrees on ties too
        k = 2 * len(sub)
        assert torch.equal(r[:k], x[:k].to(DTYPES[name]).double())


def test_uniform_quantizer_cells_ties_and_clamping():
    q = UniformQuantizer(bits=2, lo=Fraction(0), hi=Fraction(3))
    assert q.step == 1 and q.alphabet == 4
    assert [q.index_exact(Fraction(v)) for v in ("-5", "1/2", "49/100", "3/2", "5/2", "9")] == \
        [0, 1, 0, 2, 3, 3]
    q2 = UniformQuantizer(bits=3, lo=Fraction(-1), hi=Fraction(1))
    assert q2.step == Fraction(2, 7) and q2.value_of_index(7) == 1
    assert q2.index_exact(Fraction(0)) == 4          # (0 - lo)/step = 7/2: a tie, rounds up
    x = torch.tensor([-1.0, 1 / 7 - 1, 0.01, 2.0], dtype=torch.float64)
    idx, val = q2.quantize_torch(x)
    assert idx.tolist() == [q2.index_exact(Fraction(float(v))) for v in x] == [0, 0, 4, 7]
    assert quantizer_from_json(q2.to_json()) == q2
    with pytest.raises(InputError):
        UniformQuantizer(bits=0, lo=0, hi=1)
    with pytest.raises(InputError):
        UniformQuantizer(bits=2, lo=1, hi=1)


def test_checkpoint_round_trip_and_bad_shapes(tmp_path):
    cfg = SketchConfig(m=9, d=9, layers=2, heads=2, rank=3, dv=2, feature_map="elu1")
    W = random_model(cfg, 3)
    q = UniformQuantizer(4, Fraction(-2), Fraction(2))
    save_sketch_checkpoint(tmp_path / "ck", cfg, W, q)
    cfg2, W2, q2 = load_sketch_checkpoint(tmp_path / "ck.json")
    assert cfg2 == cfg and q2 == q and all(torch.equal(W[k], W2[k]) for k in W)
    bad = dict(W)
    bad["layers.0.heads.1.k.weight"] = torch.zeros(3, 8)
    with pytest.raises(InputError, match="shape"):
        save_sketch_checkpoint(tmp_path / "bad", cfg, bad)
    (tmp_path / "ck.json").write_text('{"format": "other"}')
    with pytest.raises(InputError):
        load_sketch_checkpoint(tmp_path / "ck")


def test_injective_model_solves_the_family_exactly():
    spec = multilevel_spec(12, 3, 6, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    kap = spec.assignments()
    run = forward_fast(cfg, W, builtin_uniform_quantizer(2),
                       torch.from_numpy(spec.tokens[spec.inputs(kap)].astype(np.float64)))
    assert torch.equal(run.outputs[:, :4], torch.from_numpy(kap).double())
    assert len({tuple(r) for r in run.keys.tolist()}) == spec.num_assignments
    ex = forward_exact(cfg, exact_weights(W), builtin_uniform_quantizer(2),
                       spec.tokens[spec.inputs(kap[[27]])[0]])
    assert list(ex.outputs[:4]) == [Fraction(int(k)) for k in kap[27]]


@pytest.mark.parametrize("fmap,quant", [(f, q) for f, q in zip(FEATURE_MAPS, [
    UniformQuantizer(3, -4, 4), FloatFormatQuantizer("fp8-e5m2"), FloatFormatQuantizer("bf16"),
    UniformQuantizer(4, -8, 8)])])
def test_fast_path_agrees_with_exact_replay(fmap, quant):
    spec = multilevel_spec(8, 1, 4, 3)
    cfg = SketchConfig(m=spec.m, d=spec.m + 2, layers=2, heads=2, rank=2, dv=2, feature_map=fmap)
    W = random_model(cfg, 7)
    kap = spec.assignments()
    run = forward_fast(cfg, W, quant, torch.from_numpy(spec.tokens[spec.inputs(kap)].astype(float)))
    EW = exact_weights(W)
    agree = 0
    for i in range(len(kap)):
        try:
            ex = forward_exact(cfg, EW, quant, spec.tokens[spec.inputs(kap[[i]])[0]])
        except Uncertain:
            continue
        fast = run.keys[i].tolist() if quant.kind == "uniform" else run.values[i].tolist()
        agree += [float(v) for v in ex.transcript] == [float(v) for v in fast]
        assert abs(float(ex.outputs[0] if fmap in RATIONAL_MAPS else ex.outputs[0].mid())
                   - float(run.outputs[i, 0])) < 1e-9 * (1 + abs(float(run.outputs[i, 0])))
    assert agree == len(kap)


def test_low_precision_ball_is_uncertain_not_wrong():
    spec = multilevel_spec(8, 1, 4, 2)
    cfg = SketchConfig(m=spec.m, d=spec.m, layers=1, heads=1, rank=2, dv=1, feature_map="exp")
    W = random_model(cfg, 0)
    q = UniformQuantizer(20, -64, 64)                  # fine cells: a 6-bit ball straddles them
    toks = spec.tokens[spec.inputs(spec.assignments(0, 1))[0]]
    with pytest.raises(Uncertain):
        forward_exact(cfg, exact_weights(W), q, toks, prec=6)
    forward_exact(cfg, exact_weights(W), q, toks, prec=256)
