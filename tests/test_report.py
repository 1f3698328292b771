"""certify.report: Markdown, LaTeX table and figures made from certificates only."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from certify.cli import feasibility as feasibility_cli
from certify.cli import rank as rank_cli
from certify.cli import report as report_cli
from certify.cli import transcript as transcript_cli
from certify.core.certificate import Certificate
from certify.core.errors import InputError
from certify.report import build as report

ROOT = Path(__file__).resolve().parent.parent


def _chain_family():
    from certify.core import families
    words = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1, 0], [1, 0, 0, 0, 0, 1, 1, 1]],
                     dtype=np.uint8)
    return families.chain_family(words, n=3)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """Real certificates from the producers (small inputs); the ones whose producer
    has not landed are left out."""
    d = tmp_path_factory.mktemp("report_certs")
    paths = []
    from certify.core import bounds
    c = Certificate(claims=[bounds.bound_claim(bounds.thm5(15, 6, 3)),
                            bounds.bound_claim(bounds.lemma4(15, 4, True))],
                    command=["python", "-m", "certify", "bounds", "--m", "200"], seeds={"x": 3})
    c.write(d / "bounds.json")
    paths.append(d / "bounds.json")
    if importlib.util.find_spec("certify.feasibility"):
        fam = d / "family.json"
        _chain_family().save(fam)
        for r in ("1", "4"):
            feasibility_cli.main(["--rank", r, "--family", str(fam), "--no-progress",
                              "--out", str(d / f"feas{r}.json")])
            paths.append(d / f"feas{r}.json")
    if importlib.util.find_spec("certify.transcript"):
        transcript_cli.main(["--M", "6", "--s", "1", "--h", "3", "--q", "2", "--no-progress",
                         "--model", "builtin-planted", "--bits", "4", "--out", str(d / "tr.json")])
        paths.append(d / "tr.json")
    if importlib.util.find_spec("certify.rank"):
        rng = np.random.default_rng(1)
        np.savez(d / "fac.npz", phi_q=rng.integers(0, 3, size=(16, 4)).astype(float),
                 phi_k=rng.integers(0, 3, size=(16, 4)).astype(float))
        rank_cli.main([str(d / "fac.npz"), "--tokens", "cube:4", "--eps", "1/10",
                   "--out", str(d / "rank.json")])
        paths.append(d / "rank.json")
    return paths


def test_report_files_and_numbers(certs, tmp_path):
    out = tmp_path / "rep"
    assert report_cli.main([*map(str, certs), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    for p in certs:
        cert = json.loads(p.read_text())
        for c in cert["claims"]:
            assert c["statement"].replace("|", "\\|") in md
    # numbers from the certificates appear verbatim
    assert "`rank_bound` = 9" in md                         # Thm 5 at |G| = 15, Delta = 6, g = 3
    assert "python -m certify bounds --m 200" in md and "x = 3" in md
    tex = (out / "report.tex").read_text()
    assert "\\toprule" in tex and "\\bottomrule" in tex
    # every data row of the claims table has exactly 5 column separators (6 columns;
    # an escaped & never splits a cell)
    claims = tex.split("\\label{tab:certify-rep-claims}")[1].split("\\end{table}")[0]
    rows = [l for l in claims.splitlines() if l.endswith("\\\\") and "Certificate" not in l]
    assert rows and all(l.count(" & ") == 5 for l in rows)
    names = {f.name for f in out.iterdir()}
    assert {"report.md", "report.tex"} <= names
    if any("feas" in p.name for p in certs):
        assert {"verdict_vs_rank.png", "verdict_vs_rank.pdf"} <= names
    if any(p.name == "tr.json" for p in certs):
        assert {"transcript_bits.png", "transcript_bits.pdf"} <= names
    if any(p.name == "rank.json" for p in certs):
        assert {"singular_values.png", "singular_values.pdf"} <= names
    import matplotlib.image
    for png in out.glob("*.png"):
        img = matplotlib.image.imread(png)
        assert img.shape[0] > 300 and img.shape[1] > 600
        assert img[..., :3].std() > 0.05                      # not a blank canvas


def test_feasibility_points_match_certificates(certs):
    if not any("feas" in p.name for p in certs):
        pytest.skip("certify.feasibility has not landed")
    loaded = report.load([p for p in certs if "feas" in p.name])
    pts = sorted((p["rank"], p["kind"], p["verdict"]) for p in report.feasibility_points(loaded))
    # the 3-word chain family: rank 1 excluded by Lemma 3 + Lemma 4, rank 4 (>= 3 queries) feasible
    assert pts == [(1, "infeasible", "proved"), (4, "feasible", "proved")]


def test_tex_escape():
    s = r"a_b & 50% $x$ #1 {y} ~ ^ \ <=|"
    e = report.tex_escape(s)
    for raw in ("_", "&", "%", "$", "#", "{", "}"):
        assert re.search(r"(?<!\\)" + re.escape(raw), e.replace("\\textbackslash{}", "")
                         .replace("\\textasciitilde{}", "").replace("\\textasciicircum{}", "")
                         .replace("\\textless{}", "").replace("\\textbar{}", "")) is None
    assert report.tex_escape("plain") == "plain"


def test_output_folder_is_replaced_atomically(certs, tmp_path, monkeypatch):
    out = tmp_path / "rep"
    report_cli.main([str(certs[0]), "--out", str(out)])
    before = (out / "report.md").read_text()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report, "markdown", boom)
    with pytest.raises(RuntimeError):
        report_cli.main([*map(str, certs), "--out", str(out)])
    assert (out / "report.md").read_text() == before       # the old report is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]   # no temporary left behind


def test_failing_certificate_is_reported(certs, tmp_path):
    bad = json.loads(certs[0].read_text())
    bad["claims"][0]["evidence"]["rank_bound"] += 1
    p = tmp_path / "tampered.json"
    p.write_text(json.dumps(bad))
    out = tmp_path / "rep"
    assert report_cli.main([str(p), "--out", str(out)]) == 1
    assert "**FAILS**" in (out / "report.md").read_text()


def test_bad_input_exits_2(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2")
    with pytest.raises(InputError):
        report_cli.main([str(bad), "--out", str(tmp_path / "o")])
    p = subprocess.run([sys.executable, "-m", "certify.report", str(bad), "--out",
                        str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed here")
def test_report_tex_compiles(certs, tmp_path):
    out = tmp_path / "rep"
    report_cli.main([*map(str, certs), "--out", str(out)])
    (out / "doc.tex").write_text("\\documentclass{article}\\usepackage{booktabs}\\usepackage{graphicx}"
                                 "\\begin{document}\\input{report.tex}\\end{document}\n")
    p = subprocess.run(["pdflatex", "-interaction=nonstopmode", "doc.tex"], cwd=out,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:]


def test_the_singular_value_figure_draws_at_most_sixteen_kernels(monkeypatch, tmp_path):
    """A model's every head with enclosures (40 here) is not a legend of 40 lines: the first
    16 are drawn and the title says how many there are."""
    from certify.report import build as b
    series = [{"label": f"head {i}", "intervals": [(1.0 / (j + 1), 1.0001 / (j + 1)) for j in range(4)],
               "eps": 1e-3, "k": 4, "verdict": "proved"} for i in range(40)]
    seen = {}

    def keep(fig, folder, name):
        ax = fig.axes[0]
        seen.update(title=ax.get_title(), labels=[t.get_text() for t in ax.get_legend().get_texts()])
        b._plt().close(fig)
        return [f"{name}.png"]
    monkeypatch.setattr(b, "_save", keep)
    b.figure_singular_values(series, tmp_path)
    assert "the first 16 of 40 kernels" in seen["title"]
    assert sum(t.startswith("head ") for t in seen["labels"]) == 16


def test_log_axis_labels_are_powers_of_ten_in_superscripts():
    from certify.report.build import _power_of_ten
    assert [_power_of_ten(v) for v in (1e-3, 1.0, 100.0, 1e-300, 2e-3, 0.0, -1.0)] == \
        ["10\u207b\u00b3", "10\u2070", "10\u00b2", "10\u207b\u00b3\u2070\u2070", "", "", ""]
