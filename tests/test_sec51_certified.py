"""Sec. 5.1's README and Figure 1 say what the committed certificates prove: the
ranks shaded and the failures called "cannot succeed (certified)" are read from
the proved claims of ``reports/feasibility/*.json``, and agree with them."""

import csv
import functools
import json
import re
import shutil
from pathlib import Path

import pytest

from models.train import figure1, write_certified
from models.train.certified import certified_ranks, run_verdicts

ROOT = Path(__file__).resolve().parent.parent
SEC5 = ROOT / "reports" / "paper-sec5"
FEAS = ROOT / "reports" / "feasibility"


@functools.cache
def _proved_ranks():
    """An independent reading of the certificates: per feature class, the proved
    infeasible and feasible ranks of paper-5.1 in the paper's class."""
    out = {"nonnegative": ({}, {}), "real": ({}, {})}
    for path in sorted(FEAS.glob("*.json")):
        for c in json.loads(path.read_text())["claims"]:
            p = c["parameters"]
            if c["verdict"] == "proved" and p.get("family") == "paper-5.1" and p.get("class") == "paper":
                side = {"infeasible": 0, "feasible": 1}.get(c["kind"])
                if side is not None:
                    out[p["features"]][side].setdefault(p["rank"], set()).add(path.name)
    return out


def _runs():
    with open(SEC5 / "sec51_runs.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_the_certificates_prove_what_the_issue_cites():
    proved = _proved_ranks()
    nn_inf, nn_fea = proved["nonnegative"]
    re_inf, re_fea = proved["real"]
    assert max(nn_inf) == 14 and min(nn_fea) == 15
    assert {12, 13, 14} <= set(nn_inf) and "paper51-nonnegative-12-15.json" in nn_inf[14]
    assert max(re_inf) == 11 and min(re_fea) == 13 and 12 not in re_inf and 12 not in re_fea
    got = certified_ranks()
    assert (got["nonnegative"].infeasible_max, got["nonnegative"].feasible_min) == (14, 15)
    assert (got["real"].infeasible_max, got["real"].feasible_min) == (11, 13)
    assert [got["real"].status(r) for r in (4, 11, 12, 13, 32)] == [
        "infeasible", "infeasible", "open", "feasible", "feasible"]


def test_the_committed_record_is_what_the_certificates_give(tmp_path):
    committed = json.loads((SEC5 / "sec51_certified.json").read_text())
    proved = _proved_ranks()
    for feats, (inf, fea) in proved.items():
        rec = committed["classes"][feats]
        assert rec["infeasible_max"] == max(inf) and rec["feasible_min"] == min(fea)
        assert {int(r): set(f) for r, f in rec["infeasible"].items()} == inf
        assert committed["shaded_up_to"][feats] == max(inf)
    shutil.copy(SEC5 / "sec51_runs.csv", tmp_path / "sec51_runs.csv")
    assert write_certified(tmp_path) == committed          # regenerated: the same record


def test_the_readme_rows_agree_with_the_certificates_and_the_runs():
    proved = _proved_ranks()
    nn_max, re_max = max(proved["nonnegative"][0]), max(proved["real"][0])
    nn_min, re_min = min(proved["nonnegative"][1]), min(proved["real"][1])
    readme = (SEC5 / "README.md").read_text()
    runs = _runs()
    cannot_total = 0
    for rank in sorted({int(r["rank"]) for r in runs}):
        rs = [r for r in runs if int(r["rank"]) == rank]
        failed = sum(r["solved"] != "True" for r in rs)
        row = re.search(rf"^\| {rank} \| {len(rs)} \| .*$", readme, re.M)
        assert row, f"README: no Sec. 5.1 row for r = {rank}"
        cells = [c.strip() for c in row.group(0).strip("|").split("|")]

        def cell(lo, hi):
            return ("**infeasible** (certified)" if rank <= lo
                    else "feasible (certified)" if rank >= hi else "open")
        assert cells[5] == cell(nn_max, nn_min) and cells[6] == cell(re_max, re_min), row.group(0)
        cannot = failed if rank <= nn_max else 0
        assert (int(cells[7]), int(cells[8])) == (cannot, failed - cannot), row.group(0)
        cannot_total += cannot
    assert cannot_total == 15                     # all runs at r = 4, 8, 12
    assert f"| 15/15 runs at r <= {nn_max} fail, as they must |" in readme
    assert "optimization, not capacity" not in readme


def test_figure1_shades_the_certified_ranks(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    spans = []
    real_axvspan = Axes.axvspan
    monkeypatch.setattr(Axes, "axvspan", lambda self, a, b, **kw: spans.append((a, b, kw.get("label")))
                        or real_axvspan(self, a, b, **kw))
    for name in ("sec51_runs.csv", "sec51_ratios.csv", "sweeps.json", "sec51_certified.json"):
        shutil.copy(SEC5 / name, tmp_path / name)
    figure1(tmp_path)
    proved = _proved_ranks()
    want = {(0, max(proved[f][0]) + 0.5) for f in ("nonnegative", "real")}
    assert {(a, b) for a, b, _ in spans} == want and len(spans) == 4       # panels (a) and (b)
    assert not any(b == 7.5 for _, b, _ in spans)   # the paper's bound is a line, not the shading


def _cert(tmp_path, claims):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"claims": claims}))
    return p


def _claim(kind, rank, features="nonnegative", verdict="proved", family="paper-5.1"):
    return {"kind": kind, "verdict": verdict,
            "parameters": {"rank": rank, "features": features, "class": "paper", "family": family}}


def test_contradicting_certificates_are_refused(tmp_path):
    ok = _cert(tmp_path, [_claim("infeasible", 9), _claim("feasible", 12),
                          _claim("infeasible", 13, verdict="unknown"),      # not proved: ignored
                          _claim("infeasible", 20, family="other")])        # another family
    got = certified_ranks([ok])["nonnegative"]
    assert (got.infeasible_max, got.feasible_min) == (9, 12)
    bad = _cert(tmp_path, [_claim("infeasible", 12), _claim("feasible", 10)])
    with pytest.raises(ValueError, match="witness at rank 10"):
        certified_ranks([bad])
    weaker = _cert(tmp_path, [_claim("infeasible", 11, "real"), _claim("infeasible", 9)])
    with pytest.raises(ValueError, match="incomplete"):
        certified_ranks([weaker])


def test_a_run_solving_at_a_certified_infeasible_rank_is_an_error():
    cert = certified_ranks()["nonnegative"]
    v = run_verdicts({8: (5, 0), 15: (5, 2), 32: (5, 5)}, cert)
    assert [(v[r]["cannot"], v[r]["did_not"]) for r in (8, 15, 32)] == [(5, 0), (0, 3), (0, 0)]
    with pytest.raises(ValueError, match="certified infeasible"):
        run_verdicts({12: (5, 1)}, cert)
