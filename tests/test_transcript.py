"""Thm 9 transcript check: certify/transcript.py and its checker."""

import copy
import json
from fractions import Fraction

import pytest
import torch

from certify.checkers import transcript as checker
from certify.cli.transcript import main
from certify.core.certificate import Certificate
from certify.core.errors import run_command
from certify.core.families import multilevel_spec
from certify.core.verdict import Verdict
from certify.transcript.capacity import capacity
from certify.transcript.model import QuantizedSketchModel, calibrated_uniform
from certify.transcript.run import check_transcript
from models.quantize import FloatFormatQuantizer, UniformQuantizer
from models.sketch import (
    FEATURE_MAPS,
    RATIONAL_MAPS,
    SketchConfig,
    builtin_uniform_quantizer,
    exact_weights,
    forward_exact,
    injective_model,
    random_model,
    save_sketch_checkpoint,
)

torch.set_num_threads(1)

# (M, h) with a code of >= 4 words at distance s + 1
CODES = {1: (8, 4), 2: (10, 5), 3: (12, 6)}


def _spec(s, q):
    M, h = CODES[s]
    return multilevel_spec(M, s, h, q)


def _claim(res):
    return [c for c in res.claims if c.kind.value == "transcript"][0].to_json()


def _replays_exactly(spec, model, res):
    """Independent of the checker: both inputs replay to one exact transcript."""
    col = res.collision
    EW = exact_weights(model.weights)
    ts = []
    for k in (col["kappa_a"], col["kappa_b"]):
        toks = spec.tokens[spec.inputs([k])[0]]
        ts.append(forward_exact(model.cfg, EW, model.quantizer, toks).transcript)
    assert ts[0] == ts[1]
    assert col["kappa_a"] != col["kappa_b"]


def test_capacity_is_eq8_exactly():
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    cap = capacity(QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1)), 3, 4)
    assert (cap.coordinates, cap.bits_available, cap.assignments, cap.holds) == (8, 8, 256, True)
    cfg2 = SketchConfig(m=spec.m, d=spec.m, layers=1, heads=1, rank=1, dv=1)
    cap2 = capacity(QuantizedSketchModel(cfg2, random_model(cfg2, 0), UniformQuantizer(3, 0, 1)), 3, 4)
    assert (cap2.bits_available, cap2.holds) == (6, False)          # 2^6 < 4^4
    cap3 = capacity(QuantizedSketchModel(cfg2, random_model(cfg2, 0),
                                         FloatFormatQuantizer("fp8-e4m3")), 3, 8)
    assert cap3.holds is False and cap3.alphabet == 253               # 253^2 < 4^8 = 65536
    assert capacity(QuantizedSketchModel(cfg2, random_model(cfg2, 0),
                                         FloatFormatQuantizer("fp8-e5m2")), 1, 16).holds is False


@pytest.mark.parametrize("s,q,p,seed", [(1, 3, 1, 0), (1, 4, 1, 1), (2, 3, 1, 2), (2, 4, 2, 3),
                                        (3, 2, 1, 4), (3, 3, 2, 5), (3, 4, 3, 6), (1, 4, 1, 7)])
def test_below_the_bound_a_collision_is_always_found_and_certified(s, q, p, seed):
    spec = _spec(s, q)
    cfg = SketchConfig(m=spec.m, d=spec.m, layers=1, heads=1, rank=1, dv=1,
                       feature_map="relu" if seed % 2 else "identity")
    W = random_model(cfg, seed)
    model = QuantizedSketchModel(cfg, W, calibrated_uniform(spec, cfg, W, p))
    res = check_transcript(spec, model, progress=False)
    assert not res.capacity.holds and 2 ** (2 * p) < (s + 1) ** q     # below Eq. 8
    assert res.verdict is Verdict.REFUTED and res.collision is not None
    _replays_exactly(spec, model, res)
    assert checker.check(_claim(res), {}) == []
    bound = [c for c in res.claims if c.kind.value == "bound"][0]
    assert bound.verdict is Verdict.PROVED and bound.evidence["holds"] is False


def test_planted_collision_is_found_above_the_bound():
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s, blind=True)
    model = QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(3))
    res = check_transcript(spec, model, progress=False)
    assert res.capacity.holds                                           # 24 bits >= 8
    assert res.verdict is Verdict.REFUTED
    a, b = res.collision["kappa_a"], res.collision["kappa_b"]
    assert a[:3] == b[:3] and a[3] != b[3]          # only the unwatched last word differs
    assert res.search.distinct_transcripts == 64    # 4^3: the last coordinate is invisible
    _replays_exactly(spec, model, res)
    claim = _claim(res)
    assert claim["evidence"]["failing"]["position"] == 3
    assert checker.check(claim, {}) == []


@pytest.mark.parametrize("quant", [builtin_uniform_quantizer(2), FloatFormatQuantizer("fp8-e4m3")])
def test_injective_model_has_no_false_collision_and_is_proved(quant):
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    res = check_transcript(spec, QuantizedSketchModel(cfg, W, quant), progress=False)
    assert res.verdict is Verdict.PROVED and res.collision is None and res.injective
    assert res.search.distinct_transcripts == 256 and res.exact_checked == 256
    assert res.exact_correct == 256
    assert checker.check(_claim(res), {}) == []


def test_coarse_quantizer_clamps_into_a_collision():
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    res = check_transcript(spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1)),
                           progress=False)
    assert res.capacity.holds and res.verdict is Verdict.REFUTED   # 8 bits = q log2(s+1)
    a, b = res.collision["kappa_a"], res.collision["kappa_b"]
    assert {x for x, y in zip(a, b) if x != y} | {y for x, y in zip(a, b) if x != y} <= {1, 2, 3}


def test_float_format_multilayer_collision_replays_with_balls():
    spec = _spec(3, 4)
    cfg = SketchConfig(m=spec.m, d=spec.m, layers=2, heads=2, rank=2, dv=2, feature_map="elu1")
    model = QuantizedSketchModel(cfg, random_model(cfg, 0), FloatFormatQuantizer("fp8-e4m3"))
    res = check_transcript(spec, model, progress=False)
    assert res.verdict is Verdict.REFUTED
    _replays_exactly(spec, model, res)
    assert checker.check(_claim(res), {}) == []


@pytest.mark.parametrize("fmap", [f for f in FEATURE_MAPS if f not in RATIONAL_MAPS])
def test_a_ball_model_proof_is_replayed_in_balls_and_refused_at_its_failing_assignment(fmap):
    """The proof of the injective relu model, relabelled with a non-rational feature map
    (the same weights): the checker replays every assignment in arb balls and refuses
    the claim at the first assignment whose query errs by >= 1/2, a decided ball
    comparison (the kernel's), not a type error of comparing a ball with a Fraction."""
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    c = _claim(check_transcript(spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(2)),
                                progress=False))
    assert c["evidence"]["type"] == "all" and checker.check(c, {}) == []
    c["evidence"]["model"]["config"]["feature_map"] = c["parameters"]["feature_map"] = fmap
    assert checker.check(c, {}) == ["assignment [0, 0, 0, 2]: query 3 errs by >= 1/2"]


def test_checker_catches_tampered_evidence():
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s, blind=True)
    res = check_transcript(spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(2)),
                           progress=False)
    good = _claim(res)
    assert checker.check(good, {}) == []
    bad = copy.deepcopy(good)
    bad["evidence"]["transcript"][0] += 1
    assert checker.check(bad, {})
    bad = copy.deepcopy(good)
    bad["evidence"]["kappa_b"] = bad["evidence"]["kappa_a"]
    assert checker.check(bad, {})
    bad = copy.deepcopy(good)                        # change a weight: hash no longer matches
    bad["evidence"]["model"]["weights"]["layers.0.heads.0.k.bias"]["ints"][3] += 1
    assert any("sha256" in p for p in checker.check(bad, {}))
    bad = copy.deepcopy(good)                        # claim the planted model solves everything
    bad["verdict"], bad["reason"] = "proved", None
    bad["evidence"]["type"], bad["evidence"]["exact_checked"] = "all", 256
    assert checker.check(bad, {})
    bad = copy.deepcopy(good)                        # the words must form a code at distance s+1
    bad["evidence"]["family"]["words"][1] = bad["evidence"]["family"]["words"][0]
    assert checker.check(bad, {})


def test_time_limit_gives_unknown():
    spec = _spec(1, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    res = check_transcript(spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(1)),
                           time_limit=1e-9, progress=False)
    assert res.verdict is Verdict.UNKNOWN and "CPU-second budget of 1e-09 s exhausted" in res.reason
    assert res.claims[-1].info["budget"]["kind"] == "cpu_seconds"


def _run(argv, capsys):
    rc = run_command("certify.transcript", main, argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_command_json_and_certificate(tmp_path, capsys):
    cert = tmp_path / "c.json"
    rc, out, err = _run(["--model", "builtin-planted", "--bits", "2", "--M", "12", "--s", "3",
                         "--h", "6", "--q", "4", "--json", "--no-progress", "--out", str(cert)],
                        capsys)
    js = json.loads(out)
    assert rc == 1 and js["verdict"] == "refuted" and js["bits_available"] == 16
    assert js["assignments_checked"] == 256 and js["collision"]["kappa_a"][:3] == \
        js["collision"]["kappa_b"][:3]
    c = Certificate.read(cert)
    assert [cl.verdict for cl in c.claims] == [Verdict.PROVED, Verdict.REFUTED]
    obj = json.loads(cert.read_text())
    assert checker.check(obj["claims"][1], obj) == []
    rc, out, _ = _run(["--model", "builtin-injective", "--bits", "2", "--M", "12", "--s", "3",
                       "--h", "6", "--q", "4", "--json", "--no-progress"], capsys)
    assert rc == 0 and json.loads(out)["collision"] is None


def test_command_sweep_reports_where_collisions_start(tmp_path, capsys):
    fig = tmp_path / "sweep.png"
    rc, out, err = _run(["--model", "builtin-injective", "--sweep-bits", "1:3", "--M", "12",
                         "--s", "3", "--h", "6", "--q", "4", "--json", "--no-progress",
                         "--figure", str(fig)], capsys)
    js = json.loads(out)
    assert [r["collision"] is not None for r in js["sweep"]] == [True, False, False]
    assert js["collisions_up_to_bits"] == 1 and "certified collisions at p <= 1" in err
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_checkpoint_model(tmp_path, capsys):
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    save_sketch_checkpoint(tmp_path / "inj", cfg, W, builtin_uniform_quantizer(2))
    rc, out, _ = _run(["--checkpoint", str(tmp_path / "inj.safetensors"), "--M", "12", "--s", "3",
                       "--h", "6", "--q", "4", "--json", "--no-progress"], capsys)
    assert rc == 0 and json.loads(out)["verdict"] == "proved"


@pytest.mark.parametrize("argv,needle", [
    (["--bits", "2", "--M", "12", "--s", "3", "--h", "6", "--q", "5"], "exceeds the code size"),
    (["--bits", "2", "--M", "12", "--s", "3", "--h", "6", "--q", "4", "--n", "7"], "2q = 8"),
    (["--bits", "0", "--M", "12", "--s", "3", "--h", "6", "--q", "4"], "--bits"),
    (["--M", "12", "--s", "3", "--h", "6", "--q", "4", "--sweep-bits", "3:1"], "sweep"),
    (["--checkpoint", "CK", "--bits", "2", "--M", "12", "--s", "2", "--h", "6", "--q", "2"],
     "dimension"),
    (["--checkpoint", "/nonexistent/x", "--bits", "2", "--M", "12", "--s", "3", "--h", "6",
      "--q", "2"], "no such file"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, tmp_path, capsys):
    spec = _spec(3, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)       # m = 17; M=12, s=2 needs 16
    save_sketch_checkpoint(tmp_path / "ck", cfg, W)
    argv = [str(tmp_path / "ck") if a == "CK" else a for a in argv]
    rc, out, err = _run(argv + ["--no-progress"], capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_integer_matvec_equals_the_plain_one():
    """The checker's common-denominator dot product (its fast path) gives the plain
    term-by-term sum's numbers: dyadic weights, arbitrary rationals, signs, zeros,
    an int among the entries, an empty row, rows longer than x."""
    import random

    import flint

    from certify.checkers.transcript import _matvec, _matvec_plain
    rng = random.Random(7)
    frac = lambda: Fraction(rng.randint(-10**6, 10**6), rng.choice([1, 2**rng.randint(0, 60), rng.randint(1, 999)]))  # noqa: E731
    for _ in range(200):
        n = rng.randint(1, 6)
        x = [frac() for _ in range(n)]
        A = [[frac() for _ in range(n + rng.randint(0, 1))] for _ in range(rng.randint(1, 4))]
        A.append([])
        assert _matvec(A, x) == _matvec_plain(A, x)
        A[0][0] = 3                                   # an int: that row takes the plain path
        got, want = _matvec(A, x), _matvec_plain(A, x)
        assert got == want and all(type(g) is type(w) for g, w in zip(got, want))
    balls, row = [flint.arb(1) / 3, flint.arb(2)], [flint.arb(1) / 2, flint.arb(1) / 4]
    got, want = _matvec([row], balls)[0], _matvec_plain([row], balls)[0]
    assert got.mid() == want.mid() and got.rad() == want.rad()
