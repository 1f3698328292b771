"""Certified enumeration of transcripts (certify/transcript_enum.py) and the
checker's exact integer replay of proofs above its Fraction-replay limit."""

import copy
from fractions import Fraction

import numpy as np
import pytest
import torch

from certify.checkers import transcript as checker
from certify.checkers.common import canonical_sha256
from certify.core.families import multilevel_spec
from certify.core.verdict import Verdict
from certify.transcript.enumerate import Enumerator, merge
from certify.transcript.model import QuantizedSketchModel, calibrated_uniform
from certify.transcript.run import check_transcript
from models.quantize import UniformQuantizer
from models.sketch import (
    SketchConfig,
    builtin_uniform_quantizer,
    exact_weights,
    forward_exact,
    injective_model,
    random_model,
)

torch.set_num_threads(1)


def _claim(res):
    return [c for c in res.claims if c.kind.value == "transcript"][0].to_json()


def _exact(spec, model, i):
    kap = spec.assignments(i, i + 1)
    run = forward_exact(model.cfg, exact_weights(model.weights), model.quantizer,
                        spec.tokens[spec.inputs(kap)[0]])
    ok = all(abs(y - t) < Fraction(1, 2) for y, t in zip(run.outputs[:spec.q], kap[0]))
    return run.transcript, ok


@pytest.mark.parametrize("layers,heads,fmap,positions,seed", [
    (2, 2, "relu", 0, 0), (1, 2, "identity", 0, 1), (2, 1, "relu", 6, 2), (1, 1, "relu", 0, 3)])
def test_certified_symbols_and_verdicts_equal_the_exact_replay(layers, heads, fmap, positions, seed):
    spec = multilevel_spec(12, 3, 6, 3)
    cfg = SketchConfig(m=spec.m, d=spec.m, layers=layers, heads=heads, rank=3, dv=2,
                       feature_map=fmap, positions=positions)
    W = random_model(cfg, seed)
    model = QuantizedSketchModel(cfg, W, calibrated_uniform(spec, cfg, W, 3))
    en = Enumerator(spec, model)
    keys, unc, good, wrong, _ = en.batch(0, spec.num_assignments)
    assert not unc.all()
    for i in range(spec.num_assignments):
        tr, ok = _exact(spec, model, i)
        if not unc[i]:
            assert tuple(int(v) for v in keys[i]) == tr
            assert bool(good[i]) == ok and bool(wrong[i]) == (not ok)
    sh = en.run(0, spec.num_assignments)
    assert sh.correct == sum(_exact(spec, model, i)[1] for i in range(spec.num_assignments))


def test_values_on_cell_boundaries_are_replayed_exactly():
    """Range [-1/2, 2^p - 3/2], step 1: the cell boundaries are the integers, and
    the injective model's sketch values are integers, so every symbol straddles."""
    spec = multilevel_spec(10, 2, 5, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    quant = UniformQuantizer(bits=2, lo=Fraction(-1, 2), hi=Fraction(5, 2))
    model = QuantizedSketchModel(cfg, W, quant)
    en = Enumerator(spec, model)
    _, unc, _, _, _ = en.batch(0, spec.num_assignments)
    assert unc.all()
    sh = en.run(0, spec.num_assignments)
    assert sh.replayed == spec.num_assignments
    exact_ok = sum(_exact(spec, model, i)[1] for i in range(spec.num_assignments))
    assert sh.correct == exact_ok and sh.error_count == spec.num_assignments - exact_ok


def test_proof_above_the_fraction_limit_is_rechecked_by_integer_replay():
    spec = multilevel_spec(14, 1, 7, 17)                 # 131072 > MAX_ALL assignments
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    res = check_transcript(spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1)),
                           progress=False)
    assert res.verdict is Verdict.PROVED and res.injective is True
    assert spec.num_assignments > checker.MAX_ALL
    c = _claim(res)
    assert c["evidence"]["type"] == "all" and "assumptions" not in c["evidence"]
    assert checker.check(c, {}) == []
    # a readout bias of +1/2 makes every output err by exactly 1/2: caught by the replay
    bad = copy.deepcopy(c)
    Wj = bad["evidence"]["model"]["weights"]
    Wj["readout.bias"] = {"shape": [1], "exp": -1, "ints": [1]}
    bad["evidence"]["model"]["weights_sha256"] = canonical_sha256(Wj)
    assert any("errs by >= 1/2" in p for p in checker.check(bad, {}))
    # naming an assumption the checker can replay itself is rejected
    extra = copy.deepcopy(c)
    extra["evidence"]["assumptions"] = ["replay:transcript-enumeration"]
    assert checker.check(extra, {}) != []


def test_planted_collision_is_certified_at_scale():
    spec = multilevel_spec(14, 1, 7, 17)
    cfg, W = injective_model(spec.words, spec.M, spec.s, blind=True)
    res = check_transcript(spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1)),
                           progress=False)
    assert res.verdict is Verdict.REFUTED and res.injective is False
    ka, kb = res.collision["kappa_a"], res.collision["kappa_b"]
    assert ka[:-1] == kb[:-1] and ka[-1] != kb[-1]     # the blind last coordinate
    assert checker.check(_claim(res), {}) == []


def _two_layer_injective(spec):
    """The injective model with a second layer whose weights are all 0: same
    outputs, but two layers, so the checker cannot replay it by integers."""
    cfg1, W1 = injective_model(spec.words, spec.M, spec.s)
    cfg = SketchConfig(m=cfg1.m, d=cfg1.d, layers=2, heads=1, rank=cfg1.rank, dv=cfg1.dv,
                       feature_map="relu")
    from models.sketch import param_shapes
    W = {k: (torch.as_tensor(W1[k]).clone() if k in W1 else torch.zeros(shape, dtype=torch.float64))
         for k, shape in param_shapes(cfg).items()}
    return cfg, W


@pytest.mark.parametrize("q, max_all", [
    (11, 1 << 10),                                     # the checker's limit lowered: seconds
    pytest.param(17, None, marks=pytest.mark.slow),    # above the real limit (2^16)
])
def test_deep_model_proof_above_the_limits_names_its_assumption(q, max_all, monkeypatch):
    """A proved 'all' claim of a 2-layer model above MAX_ALL names the enumeration
    as an assumption; the checker replays a seeded sample, rejects the claim
    without the assumption and catches a model that errs everywhere."""
    import certify.checkers.transcript as transcript_checker

    if max_all is not None:
        monkeypatch.setattr(transcript_checker, "MAX_ALL", max_all)
    assert 2 ** q > transcript_checker.MAX_ALL
    spec = multilevel_spec(14, 1, 7, q)
    cfg, W = _two_layer_injective(spec)
    res = check_transcript(spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1)),
                           progress=False)
    assert res.verdict is Verdict.PROVED
    c = _claim(res)
    assert c["evidence"]["assumptions"] == ["replay:transcript-enumeration"]
    assert checker.check(c, {}) == []
    gone = copy.deepcopy(c)
    del gone["evidence"]["assumptions"]
    assert any("no assumption" in p for p in checker.check(gone, {}))
    bad = copy.deepcopy(c)
    Wj = bad["evidence"]["model"]["weights"]
    Wj["readout.bias"] = {"shape": [1], "exp": -1, "ints": [1]}
    bad["evidence"]["model"]["weights_sha256"] = canonical_sha256(Wj)
    assert any("errs by >= 1/2" in p for p in checker.check(bad, {}))


def test_shards_merge_to_the_same_result_in_any_split():
    spec = multilevel_spec(12, 3, 6, 4)
    cfg = SketchConfig(m=spec.m, d=spec.m, layers=2, heads=2, rank=2, dv=1)
    W = random_model(cfg, 5)
    model = QuantizedSketchModel(cfg, W, calibrated_uniform(spec, cfg, W, 2))
    en = Enumerator(spec, model)
    N = spec.num_assignments
    one = merge(en, [en.run(0, N)])
    three = merge(en, [en.run(a, min(N, a + 100)) for a in (200, 0, 100)])
    assert one.distinct == three.distinct and one.collisions == three.collisions
    assert (one.correct, one.errors, one.error_count) == (three.correct, three.errors,
                                                         three.error_count)


# ------------------------------------------------ the one-layer fast path (certify/transcript/onelayer.py)

def _models_one_layer():
    """One-layer models on small families: random relu / identity heads (calibrated and
    fixed quantizers, several heads, dv > 1), the injective model on a quantizer whose
    cell boundaries sit on its integer sketch values (every symbol uncertain)."""
    out = []
    for heads, dv, fmap, seed, bits in ((1, 1, "relu", 0, 3), (2, 2, "identity", 1, 2), (3, 1, "relu", 2, 4)):
        spec = multilevel_spec(12, 3, 6, 4)
        cfg = SketchConfig(m=spec.m, d=spec.m, layers=1, heads=heads, rank=3, dv=dv, feature_map=fmap)
        W = random_model(cfg, seed)
        out.append((spec, QuantizedSketchModel(cfg, W, calibrated_uniform(spec, cfg, W, bits))))
    spec = multilevel_spec(10, 2, 5, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    out.append((spec, QuantizedSketchModel(cfg, W, UniformQuantizer(bits=2, lo=Fraction(-1, 2),
                                                                    hi=Fraction(5, 2)))))
    spec = multilevel_spec(14, 1, 7, 9)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    out.append((spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1))))
    return out


#: the exact replay of (case, assignment) of :func:`_models_one_layer`, shared by the
#: compiled and the numpy runs of the test below (the same models, rebuilt identically)
_EXACT_ONE_LAYER: dict[tuple[int, int], tuple] = {}


@pytest.mark.parametrize("case", [0, 4, *(pytest.param(c, marks=pytest.mark.slow) for c in (1, 2, 3))])
@pytest.mark.parametrize("compiled", [True, False])
def test_one_layer_fast_path_is_exact_wherever_it_is_certain(case, compiled):
    """Every assignment the fast path calls certain has the exact replay's transcript
    (as packed words) and correctness; the compiled passes give the numpy passes' bits
    (by default the one-head relu model and the injective one with every symbol uncertain;
    the multi-head models with ``--runslow``)."""
    from certify.transcript.onelayer import OneLayer
    spec, model = _models_one_layer()[case]
    en = Enumerator(spec, model)
    one = OneLayer(en, compiled=compiled)
    N = spec.num_assignments
    seen = 0
    for b0 in range(0, N, en.nlo):
        words, unc, good, wrong, _ = one.batch(b0, min(N, b0 + en.nlo))
        if compiled:
            ref = OneLayer(en, compiled=False).batch(b0, min(N, b0 + en.nlo))
            assert all(np.array_equal(x, y) for x, y in zip((words, unc, good, wrong), ref[:4]))
        for j in range(len(unc)):
            if unc[j]:
                continue
            key = (case, b0 + j)
            if key not in _EXACT_ONE_LAYER:
                _EXACT_ONE_LAYER[key] = _exact(spec, model, b0 + j)
            tr, ok = _EXACT_ONE_LAYER[key]
            seen += 1
            assert np.array_equal(words[j], one.pack_transcript(tr))
            assert bool(good[j]) == ok and bool(wrong[j]) == (not ok)
    assert (seen == 0) == (case == 3)                    # case 3: every symbol on a boundary


def test_one_layer_run_merges_to_the_general_paths_result():
    """run() (the fast path for one-layer models) and the general batches agree on the
    exact summary: correct count, errors, distinct transcripts and the number of
    collisions (packed words sort in another order than hashes, so the listed pairs
    may be others, each an exact collision)."""
    import certify.transcript.onelayer as onelayer
    for spec, model in _models_one_layer():
        en = Enumerator(spec, model)
        N = spec.num_assignments
        fast = merge(en, [en.run(0, N)])
        saved = onelayer.applicable
        onelayer.applicable = lambda e: False
        try:
            slow = merge(en, [Enumerator(spec, model).run(0, N)])
        finally:
            onelayer.applicable = saved
        assert (fast.correct, fast.errors, fast.error_count, fast.distinct, len(fast.collisions),
                fast.unresolved) == (slow.correct, slow.errors, slow.error_count, slow.distinct,
                                     len(slow.collisions), slow.unresolved)
        for a, b in fast.collisions:                      # which pairs are listed is an order detail;
            assert en.replay(a)[0] == en.replay(b)[0]     # each is a collision of exact transcripts


def test_certified_transcript_path_imports_no_torch():
    """`certify transcript` with a built-in model runs without importing torch."""
    import subprocess
    import sys
    code = ("import sys; from certify.cli import run; "
            "rc = run('transcript', ['--M', '14', '--s', '1', '--h', '7', '--q', '10', '--bits', '1', '--json']); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
