"""Sec. 5.2's unseen-token pool: none of its tokens occurs in the train pool at any
scale (the label-disjoint pool shares all of them), the command line sets the
feature map and the dense control's own learning rate, and one committed row of
the sweep re-runs bit for bit (``--runslow``)."""

import csv
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from certify.cli.train import main
from certify.core.errors import run_command
from certify.core.families import ood_families
from models.train import Run52, Sec52Config, _job52, _pools52, read_csv
from models.train.unseen import held_out_words, tokens_shared, unseen_token_pools

ROOT = Path(__file__).resolve().parent.parent
SEC5 = ROOT / "reports" / "paper-sec5"
SCALES = ((6, 4), (8, 6), (10, 8))


@pytest.mark.parametrize("M,q", SCALES)
def test_no_token_of_the_unseen_pool_occurs_in_training(M, q):
    train, unseen = unseen_token_pools(M, q, train_size=256, test_size=128, seed=0)
    assert len(train.inputs) == 256 and len(unseen.inputs) == 128
    assert tokens_shared(train, unseen) == 0
    # the label-disjoint pool of the generator shares nearly all its tokens with its
    # train pool (all of them at the default sizes: 50/50, 175/175, 630/630)
    otr, ote = ood_families(M, q, train_size=256, test_size=128, seed=0)
    assert tokens_shared(otr, ote) >= 0.99 * len(np.unique(ote.inputs))
    # the unseen pool is built on the held-out words only, with both slot kinds
    H = {tuple(w) for w in held_out_words(M, q + 2, 0)}
    queries = {tuple(t[2:].tolist()) for t in unseen.tokens if t[0] == 1}
    assert queries <= H and len(queries) == q + 2
    assert set(unseen.targets[unseen.scored].tolist()) == {0, 1}
    # the train pool is the generator's stream with the held-out inputs skipped, in order
    banned = set()
    for w in H:
        comp = [1 - v for v in w]
        pad = list(comp)
        pad[w.index(1)] = 1
        banned |= {(1, 0, *w), (0, 1, *comp), (0, 1, *pad)}
    first = ood_families(M, q, train_size=256, test_size=1, seed=0)[0]
    tok = lambda fam, row: [tuple(fam.tokens[i].tolist()) for i in row]     # noqa: E731
    kept = [tok(first, r) for r in first.inputs if not banned & set(tok(first, r))]
    assert 0 < len(kept) < 256 and kept == [tok(train, r) for r in train.inputs[:len(kept)]]


def test_fewer_held_out_words_than_q_is_refused():
    with pytest.raises(ValueError, match="at least q"):
        unseen_token_pools(6, 4, train_size=8, test_size=8, h=3)


def test_the_command_sets_the_map_the_dense_rate_and_the_pool(tmp_path):
    assert main(["sec52", "--smoke", "--out", str(tmp_path), "--no-progress", "--feature-map", "softplus",
                 "--lr-dense", "0.003", "--unseen-pool", "--ranks", "2", "--steps", "10"]) == 0
    runs = read_csv(tmp_path / "sec52_runs.csv", Run52)
    assert [(r.model, r.feature_map, r.lr) for r in runs] == [("kernel", "softplus", 0.01),
                                                              ("dense", "softmax", 0.003)]
    assert all(0 <= r.unseen_test_exact_seq_acc <= 1 for r in runs)
    cfg = json.loads((tmp_path / "sweeps.json").read_text())["sec52"]["config"]
    assert cfg["unseen"] is True and cfg["feature_map"] == "softplus" and cfg["lr_by_rank"] == [[0, 0.003]]
    readme = (tmp_path / "README.md").read_text()
    assert "Unseen-token pool" in readme and "| unseen-token pool |" in readme
    for bad in (["--feature-map", "nope"], ["--lr-dense", "0"], ["--lr", "nan"]):
        assert run_command("models.train", main, ["sec52", "--smoke", "--out", str(tmp_path / "x"),
                                                  "--no-progress", *bad]) == 2
    assert not (tmp_path / "x").exists()


def test_the_committed_rows_read_without_the_new_columns():
    runs = read_csv(SEC5 / "sec52_runs.csv", Run52)
    assert len(runs) == 150 and all(math.isnan(r.unseen_test_exact_seq_acc) for r in runs)


def _committed_config() -> Sec52Config:
    c = json.loads((SEC5 / "sweeps.json").read_text())["sec52"]["config"]
    tup = lambda v: tuple(tuple(x) if isinstance(x, list) else x for x in v)      # noqa: E731
    return Sec52Config(**{k: tup(v) if isinstance(v, list) else v for k, v in c.items()})


@pytest.mark.slow
def test_one_committed_sweep_row_reruns_bit_for_bit():
    """(6, 4, 8), r = 32, seed 0 of ``sec52_runs.csv`` (about 10 CPU s)."""
    cfg = replace(_committed_config(), scales=((6, 4, 8),), ranks=(32,), seeds=(0,), dense=False)
    with open(SEC5 / "sec52_runs.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if (r["M"], r["model"], r["rank"], r["seed"]) == ("6", "kernel", "32", "0"))
    train, test, unseen = _pools52((6, 4, 8), cfg)
    run, _ = _job52(train, test, (6, 4, 8), 32, 0, cfg, unseen)
    assert (run.test_exact_seq_acc, run.train_exact_seq_acc, run.steps, run.stop) == (
        float(row["test_exact_seq_acc"]), float(row["train_exact_seq_acc"]), int(row["steps"]), row["stop"])


@pytest.mark.slow
@pytest.mark.parametrize("fmap", ["elu1", "exp", "softplus"])
def test_one_unseen_pool_row_reruns_bit_for_bit(fmap):
    """The first row of each committed unseen-token sweep's CSV (the command in
    reports/paper-sec5/NOTES.md), re-run: the same accuracies on both test pools and the same
    steps, bit for bit."""
    path = SEC5 / f"unseen-{fmap}" / "sec52_runs.csv"
    c = json.loads((path.parent / "sweeps.json").read_text())["sec52"]["config"]
    tup = lambda v: tuple(tuple(x) if isinstance(x, list) else x for x in v)      # noqa: E731
    cfg = Sec52Config(**{k: tup(v) if isinstance(v, list) else v for k, v in c.items()})
    (row, *_) = read_csv(path, Run52)
    sc = (row.M, row.q, row.n)
    train, test, unseen = _pools52(sc, cfg)
    run, _ = _job52(train, test, sc, row.rank or None, row.seed, cfg, unseen)
    assert (run.test_exact_seq_acc, run.unseen_test_exact_seq_acc, run.train_exact_seq_acc, run.steps) == (
        row.test_exact_seq_acc, row.unseen_test_exact_seq_acc, row.train_exact_seq_acc, row.steps)


def test_the_unseen_token_sweeps_are_committed_by_whole_groups_and_the_readme_reads_them():
    """Each strictly positive map's sweep holds, per scale, whole groups of five seeds (a rank or
    the dense control), every run scored on the unseen-token pool; (6, 4, 8) and (8, 6, 12) are
    whole (nine ranks and the dense control); what each folder holds is in its sweeps.json; the
    README's comparison of the maps is the one rendered from those files (no number typed by
    hand)."""
    from models.train import _unseen_maps_section
    for fmap in ("elu1", "exp", "softplus"):
        runs = read_csv(SEC5 / f"unseen-{fmap}" / "sec52_runs.csv", Run52)
        groups: dict = {}
        for r in runs:
            groups.setdefault((r.M, r.q, r.n, r.model, r.rank), []).append(r.seed)
        assert all(sorted(v) == [0, 1, 2, 3, 4] for v in groups.values()), fmap
        for sc in ((6, 4, 8), (8, 6, 12)):
            assert sum(k[:3] == sc for k in groups) == 10, (fmap, sc)
        assert {r.feature_map for r in runs if r.model == "kernel"} == {fmap}
        assert all(0 <= r.unseen_test_exact_seq_acc <= 1 for r in runs)
        assert {r.lr for r in runs if r.model == "dense"} == {0.003}
        held = json.loads((SEC5 / f"unseen-{fmap}" / "sweeps.json").read_text())["sec52"]
        assert held["config"]["feature_map"] == fmap and held["config"]["unseen"] is True
    section = "\n".join(_unseen_maps_section(SEC5))
    assert section and section in (SEC5 / "README.md").read_text()
