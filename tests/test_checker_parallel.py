"""The checker's forked pieces (certify/checkers/parallel.py) against the plain loop:
the same first problem in the pieces' order, a dead worker an exception (never a
pass), and the transcript's exact integer replay giving one process's answer on two,
for a model that holds and one that fails; `verify --workers 2` and the producer's
self-check use it."""

import os
from fractions import Fraction

import pytest

from certify.checkers import parallel
from certify.checkers import transcript as checker
from certify.core.families import multilevel_spec

pytestmark = pytest.mark.skipif(not parallel.can_fork(), reason="forked pieces need Linux's fork")


def _bad_at(i):
    """Pieces 5 and 9 fail; 9 fails at once, 5 only after the others' work."""
    if i == 9:
        return [f"piece {i} (pid {os.getpid()})"]
    if i == 5:
        sum(range(200_000))
        return [f"piece {i}"]
    return []


def _die_on_three(i):
    if i == 3:
        os._exit(7)
    return []


def test_first_problem_is_the_plain_loops_in_order():
    plain = parallel.first_problem(_bad_at, range(12))
    with parallel.workers(2):
        forked = parallel.first_problem(_bad_at, range(12))
        assert parallel.first_problem(lambda i: [], range(12)) == []
    assert plain == forked == ["piece 5"]


def test_a_dead_worker_fails_closed():
    with parallel.workers(2), pytest.raises(RuntimeError, match="a checker process died"):
        parallel.first_problem(_die_on_three, range(8))
    with parallel.workers(2), pytest.raises(RuntimeError, match="failed: ZeroDivisionError"):
        parallel.first_problem(lambda i: [str(1 // (i - 5))], range(8))


def _replay_inputs(model_cfg, W, quant, spec):
    """The checker's view of the model: its config, weights, quantizer and code words."""
    from certify.transcript.model import QuantizedSketchModel
    model = QuantizedSketchModel(model_cfg, W, quant)
    ev = model.evidence()
    Wc = checker._weights(ev["model"] if "model" in ev else ev, model_cfg.to_json())
    qc = checker._Quant(quant.to_json())
    words = [[int(b) for b in w] for w in spec.words.tolist()]
    return model_cfg.to_json(), Wc, qc, words


@pytest.mark.parametrize("which,q", [("injective", 17), ("random", 16)])
def test_integer_replay_on_two_processes_equals_one(which, q):
    """s = 1, q = 17 (16): 131,072 (65,536) assignments in 4 (2) blocks of the replay."""
    from models.quantize import UniformQuantizer
    from models.sketch import SketchConfig, builtin_uniform_quantizer, injective_model, random_model
    spec = multilevel_spec(14, 1, 7, q)
    if which == "injective":
        cfg, W = injective_model(spec.words, spec.M, spec.s)
        quant = builtin_uniform_quantizer(1)
    else:
        cfg = SketchConfig(m=spec.m, d=spec.m, layers=1, heads=1, rank=4, dv=1, feature_map="relu")
        W = random_model(cfg, 3)
        quant = UniformQuantizer(bits=3, lo=Fraction(0), hi=Fraction(7))
    args = _replay_inputs(cfg, W, quant, spec)
    plain = checker._integer_all(*args[:3], spec.M, spec.s, spec.q, args[3])
    with parallel.workers(2):
        forked = checker._integer_all(*args[:3], spec.M, spec.s, spec.q, args[3])
    assert plain == forked
    assert (plain == []) == (which == "injective")
    if which == "random":
        assert plain[0].startswith("assignment [") and "errs by >= 1/2 (integer replay)" in plain[0]


def test_verify_with_workers_and_the_producers_self_check(tmp_path, capsys):
    from certify.cli.transcript import main as transcript
    from certify.cli.verify import main as verify
    out = tmp_path / "t.json"
    args = ["--M", "14", "--s", "1", "--h", "7", "--q", "17", "--bits", "1", "--no-progress"]
    assert transcript(args + ["--workers", "2", "--out", str(out)]) == 0
    assert verify([str(out), "--workers", "2"]) == 0
    assert verify([str(out)]) == 0
    from certify.core.errors import InputError
    with pytest.raises(InputError, match="--workers must be between 1 and"):
        verify([str(out), "--workers", "0"])
