"""Training and the Sec. 5 sweeps: the smoke sweeps run end to end from the
command, write CSV/figures/README/checkpoints, and the metrics mean what they say."""

import csv
import json
from dataclasses import replace
from fractions import Fraction

import pytest
import torch

from certify.cli.train import main
from certify.core.errors import run_command
from certify.core.families import ood_families, paper51_family
from certify.sources.checkpoint import load_model
from models.constructions import lookup_construction
from models.train import (
    Run52,
    Sec51Config,
    Sec52Config,
    evaluate_lookup,
    exact_sequence_accuracy,
    one_thread,
    train_lookup,
    train_ood,
    transition_rank,
)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def paper51():
    return paper51_family()


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_sec51_smoke_end_to_end(tmp_path, paper51):
    ck = tmp_path / "ck"
    assert main(["sec51", "--smoke", "--out", str(tmp_path), "--save-checkpoints", str(ck),
                 "--no-progress"]) == 0
    rows = _rows(tmp_path / "sec51_runs.csv")
    assert [(int(r["rank"]), int(r["seed"])) for r in rows] == [(4, 0), (32, 0)]
    for r in rows:                                  # 40 steps cannot solve paper-5.1
        assert r["solved"] == "False" and float(r["max_error"]) >= 0.5
    ratios = _rows(tmp_path / "sec51_ratios.csv")
    assert len(ratios) == 210 and {int(r["rank"]) for r in ratios} == {32}   # 15 * 14 ordered pairs
    assert (tmp_path / "figure1.png").read_bytes()[:8] == PNG
    readme = (tmp_path / "README.md").read_text()
    assert "all five r = 32 runs solve" in readme and "3/257" in readme
    timing = json.loads((tmp_path / "sweeps.json").read_text())["sec51"]
    assert timing["construction_ok"] is True and timing["construction_rank"] == 15
    # the saved run reproduces its recorded max error; the construction solves the family
    cfg, model = load_model(ck / "paper51-lookup-r4-s0")
    assert cfg["family"] == {"name": "paper-5.1", "sha256": paper51.sha256} and cfg["rank"] == 4
    assert evaluate_lookup(model, paper51)["max_error"] == pytest.approx(float(rows[0]["max_error"]))
    cfg, con = load_model(ck / "paper51-lookup-construction-r15")
    ev = evaluate_lookup(con, paper51)
    assert ev["max_error"] < 0.5 and ev["coverage"] == 1.0


def test_sec52_smoke_end_to_end(tmp_path):
    ck = tmp_path / "ck"
    assert run_command("models.train", main, ["sec52", "--smoke", "--out", str(tmp_path),
                                              "--save-checkpoints", str(ck), "--no-progress"]) == 0
    rows = _rows(tmp_path / "sec52_runs.csv")
    assert [(r["model"], int(r["rank"])) for r in rows] == [("kernel", 2), ("kernel", 8), ("dense", 0)]
    assert all(0 <= float(r["test_exact_seq_acc"]) <= 1 for r in rows)
    assert (tmp_path / "figure2.png").read_bytes()[:8] == PNG
    assert "90% transition" in (tmp_path / "README.md").read_text()
    cfg, model = load_model(ck / "ood-6-4-8-elu1-r8-s0")
    assert cfg["feature_map"] == "elu1" and cfg["m"] == 8 and cfg["dv"] == 16
    train, test = ood_families(6, 4, train_size=128, test_size=64, seed=0)
    assert cfg["family"]["sha256"] == train.sha256
    acc, _ = exact_sequence_accuracy(model, test)
    assert acc == pytest.approx(float(rows[1]["test_exact_seq_acc"]))


def test_bad_arguments_exit_2(tmp_path):
    assert run_command("models.train", main, ["sec51", "--smoke", "--ranks", "0",
                                              "--out", str(tmp_path)]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["sec52", "--smoke", "--scales", "6,4", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert run_command("models.train", main, ["sec52", "--smoke", "--scales", "7,4,8",
                                              "--out", str(tmp_path), "--no-progress"]) == 2


def test_evaluate_lookup_on_the_construction(paper51):
    head = lookup_construction(paper51).to_lookup_head()
    ev = evaluate_lookup(head, paper51)
    assert ev["coverage"] == 1.0 and ev["accuracy"] == 1.0
    assert ev["max_error"] == pytest.approx(3 / 257, abs=1e-12)
    # a correct model beats the factor-two-per-step envelope on every chain (Lemma 3)
    assert all(r["log2_ratio"] > r["steps"] for r in ev["ratios"])
    assert sorted({r["steps"] for r in ev["ratios"]}) == [2, 4]
    assert sum(r["steps"] for r in ev["ratios"]) == 424        # every jump counted once


def test_short_training_reduces_the_error(paper51):
    cfg = Sec51Config(steps=150)
    with one_thread():
        model, _ = train_lookup(paper51, 16, 0, cfg)
    ev = evaluate_lookup(model, paper51)
    untrained = evaluate_lookup(type(model)(paper51.tokens, 16), paper51)
    assert ev["mean_error"] < 0.5 * untrained["mean_error"]


def test_exact_sequence_accuracy_metric():
    train, test = ood_families(6, 4, train_size=64, test_size=32, seed=0)
    perfect = lookup_construction(test).to_lookup_head()
    acc, max_err = exact_sequence_accuracy(perfect, test)
    assert acc == 1.0 and max_err < 0.5
    with torch.no_grad():
        perfect.g.add_(1.0)                          # every prediction moves up by exactly 1
    acc, shifted = exact_sequence_accuracy(perfect, test)
    # softmin errors are >= 0 (Thm 1), so the worst error grows by exactly 1
    assert acc == 0.0 and shifted == pytest.approx(max_err + 1.0, abs=1e-9)


def test_training_keeps_global_state():
    train, _ = ood_families(6, 4, train_size=32, test_size=16, seed=0)
    rng = torch.random.get_rng_state()
    threads = torch.get_num_threads()
    with one_thread():
        a, _ = train_ood(train, 6, 4, 3, Sec52Config(steps=5, batch=8))
    b, _ = train_ood(train, 6, 4, 3, Sec52Config(steps=5, batch=8))
    assert torch.equal(rng, torch.random.get_rng_state())
    assert torch.get_num_threads() == threads
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_plateau_budget_counts_evaluations():
    """With a zero learning rate the accuracy never moves: the first evaluation sets the
    best value, each plateau of ``patience`` evaluations drops the rate, the last stops."""
    train, _ = ood_families(6, 4, train_size=32, test_size=16, seed=0)
    cfg = Sec52Config(steps=10_000, batch=8, lr=0.0, eval_every=3, patience=2, lr_drops=2)
    log = []
    with one_thread():
        train_ood(train, 6, 2, 0, cfg, log)
    (lg,) = log
    assert lg.stop == "plateau" and lg.steps == 3 * (1 + 2 * 3)
    assert [s for s, _ in lg.curve] == list(range(3, 22, 3))
    assert len({a for _, a in lg.curve}) == 1


def test_plateau_budget_stops_when_fitted_and_at_the_cap():
    train, _ = ood_families(6, 4, train_size=32, test_size=16, seed=0)
    cfg = Sec52Config(steps=400, batch=32, lr=0.03, eval_every=10, patience=3)
    log = []
    with one_thread():
        model, _ = train_ood(train, 6, None, 0, cfg, log)          # dense control fits 32 inputs
    (lg,) = log
    first = next(s for s, a in lg.curve if a == 1.0)
    assert lg.stop == "fit" and lg.steps >= first + 3 * 10 and lg.curve[-1] == (lg.steps, 1.0)
    assert exact_sequence_accuracy(model, train)[0] == 1.0
    log = []
    with one_thread():
        train_ood(train, 6, None, 0, replace(cfg, steps=25), log)
    assert (log[0].stop, log[0].steps, len(log[0].curve)) == ("cap", 25, 2)
    log = []
    with one_thread():
        train_ood(train, 6, 2, 0, replace(cfg, budget="fixed", steps=25), log)
    assert (log[0].stop, log[0].steps, log[0].curve) == ("fixed", 25, ())
    with pytest.raises(ValueError):
        Sec52Config(budget="until-done")


def test_lr_by_rank():
    cfg = Sec52Config(lr=0.01, lr_by_rank=((256, 0.003), (0, 0.02)))
    assert (cfg.initial_lr(256), cfg.initial_lr(8), cfg.initial_lr(None)) == (0.003, 0.01, 0.02)


def test_transition_rank():
    def run(rank, acc, seed):
        return Run52(6, 4, 8, "kernel", rank, seed, acc, acc, 0.0, 0.0, 1, 0.0)
    runs = [run(4, 0.5, 0), run(4, 0.95, 1), run(8, 0.9, 0), run(8, 0.92, 1), run(16, 1.0, 0)]
    assert transition_rank(runs, (6, 4, 8)) == 8
    assert transition_rank(runs, (6, 4, 8), level=0.99) == 16
    assert transition_rank(runs, (8, 6, 12)) is None
    # r = 8: mean 0.91, but its 95% interval (half-width 12.706 * 0.0141 / sqrt 2 = 0.127) reaches below 0.9
    assert transition_rank(runs, (6, 4, 8), interval=True) == 16


# ---------------------------------------------------------------- committed checkpoints

CKPT = __import__("pathlib").Path(__file__).resolve().parent.parent / "models" / "checkpoints"


@pytest.mark.parametrize("name,solves", [("paper51-lookup-r8-s0", False),
                                         ("paper51-lookup-r32-s0", True),
                                         ("paper51-lookup-construction-r15", True)])
def test_committed_paper51_checkpoints_exactly(name, solves, paper51):
    from models.constructions import exact_tables

    cfg, model = load_model(CKPT / name)
    assert cfg["family"]["sha256"] == paper51.sha256
    res = exact_tables(model, paper51.tokens).check_family(paper51)
    assert res.ok is solves
    if not solves:                                   # fails: some input has error >= 1/2
        assert res.max_error >= Fraction(1, 2) and cfg["rank"] == 8
    assert float(res.max_error) == pytest.approx(evaluate_lookup(model, paper51)["max_error"], abs=1e-5)


@pytest.mark.parametrize("rank,solves_test,fits_train", [(8, False, False), (32, True, True)])
def test_committed_ood_checkpoints_exactly(rank, solves_test, fits_train):
    from models.constructions import exact_tables

    cfg, model = load_model(CKPT / f"ood-6-4-8-elu1-r{rank}-s0")
    assert cfg["feature_map"] == "elu1" and cfg["dv"] == 16 and cfg["rank"] == rank
    train, test = ood_families(6, 4, train_size=2048, test_size=1024, seed=0)
    assert cfg["family"] == {"name": train.name, "sha256": train.sha256}
    exact = exact_tables(model, test.tokens).check(test.inputs, test.targets, test.scored)
    acc, max_err = exact_sequence_accuracy(model, test)
    assert exact.ok is solves_test and (acc == 1.0) is solves_test
    assert float(exact.max_error) == pytest.approx(max_err, abs=1e-4)
    assert acc == cfg["metrics"]["test_exact_seq_acc"]
    # r = 32 fits the training pool exactly; r = 8 misses 21 of its 2048 inputs
    fit = exact_tables(model, train.tokens).check(train.inputs, train.targets, train.scored)
    assert fit.ok is fits_train
    assert cfg["metrics"]["train_exact_seq_acc"] == (1.0 if fits_train else 2027 / 2048)
