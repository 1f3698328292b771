"""report.tex is paper-ready: typeset mathematics, rounded numbers with exact
values in an appendix, table/figure environments, explained methods -- and it
compiles with a real LaTeX engine when wrapped in a minimal document."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from certify.report import build as report
from certify.report import latex as report_tex

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "reports" / "reference"


def test_statement_math_is_typeset():
    t = report_tex.tex_statement("sigma_16 <= eps, so alpha(x, z) >= 0 on a 41 x 41 matrix; "
                                 "rank >= t^2/||C||_F^2 and |t_hat - t| < 1/2")
    assert r"$\sigma_{16}$" in t and r"$\le$" in t and r"$\varepsilon$" in t
    assert r"$\alpha(x, z)$" in t and r"$\ge$" in t and r"$41 \times 41$" in t
    assert r"$\|C\|_{F}^{2}$" in t and r"\hat t" in t and "$t^{2}$" in t
    assert "sigma\\_" not in t and "alpha(" not in t.replace(r"\alpha(", "")
    # a long exact fraction is rounded in the table and listed exactly
    long = "Lemma 4 bound 1920000000001/239000000000 here"
    assert r"\approx 8.033" in report_tex.tex_statement(long)
    assert report_tex.long_numbers(long) == ["1920000000001/239000000000"]


def test_plain_text_is_escaped():
    t = report_tex.tex_statement("100% of a_b & c_d #1 {x}")
    assert r"100\%" in t and r"\&" in t and r"\#" in t and r"\{x\}" in t


def test_every_method_is_explained():
    for key, line in report_tex.METHODS:
        assert report_tex.explain(f"xx {key} yy") == line
    assert "Descartes" in report_tex.explain("descartes_charpoly_core")


def _reference_certs():
    certs = sorted(p for p in REF.glob("*.json") if not p.name.startswith("."))
    if not certs:
        pytest.skip("no reference certificates committed")
    return certs


def test_report_tex_structure(tmp_path):
    out = tmp_path / "rep"
    report.build(report.load(_reference_certs()), out, command="report", check=False)
    tex = (out / "report.tex").read_text()
    for env in ("table", "tabular"):
        assert tex.count(f"\\begin{{{env}}}") == tex.count(f"\\end{{{env}}}") >= 3
    assert "\\label{tab:certify-rep-claims}" in tex and "\\caption{Certified claims" in tex
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert "\\label{tab:certify-rep-methods}" in tex and "\\label{tab:certify-rep-exact}" in tex
    assert "\\begin{figure}" in tex and "\\includegraphics" in tex
    assert "fig:certify-rep-singular-values" in tex and "fig:certify-rep-verdict-vs-rank" in tex
    assert "sigma\\_" not in tex and "alpha(x" not in tex.replace("\\alpha(x", "")
    # every formula typeset: no caret or angle bracket left as text
    assert "textasciicircum" not in tex and "textless" not in tex, \
        [l for l in tex.splitlines() if "textasciicircum" in l or "textless" in l][:3]
    # every method mark used in the claims table is explained in the methods table
    used = set(re.findall(r"& (M\d+) \\\\", tex.split("\\label{tab:certify-rep-methods}")[0]))
    explained = set(re.findall(r"^(M\d+) &", tex, re.M))
    assert used and used == explained
    assert "Sylvester" in tex          # the eps-rank method explained (the verified congruence)
    md = (out / "report.md").read_text()
    assert "## Methods" in md and "(#methods)" in md


def test_figure_series_named_by_model(tmp_path):
    certs = report.load(_reference_certs())
    names = [s["label"] for s in report.singular_value_series(certs)]
    assert "paper51-lookup-r8-s0" in names and not any("#" in n for n in names)


def _engine():
    return shutil.which("latexmk") or shutil.which("pdflatex")


@pytest.mark.slow  # a second LaTeX run; the two-report compile runs by default
@pytest.mark.skipif(_engine() is None, reason="no LaTeX engine: `make test` installs "
                    "texlive-latex-recommended and latexmk (as root or with passwordless sudo; "
                    "otherwise: sudo apt-get install texlive-latex-recommended latexmk)")
def test_report_tex_compiles_in_a_paper_with_the_earlier_folder_macro(tmp_path):
    """``\\certifyreportdir``, which earlier releases required, still overrides the folder."""
    out = tmp_path / "rep"
    report.build(report.load(_reference_certs()), out, command="report", check=False)
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "paper.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n"
        f"\\newcommand{{\\certifyreportdir}}{{{out.as_posix()}/}}\n"
        "\\begin{document}\nSee Table~\\ref{tab:certify-rep-claims}.\n"
        f"\\input{{{out.as_posix()}/report.tex}}\n\\end{{document}}\n")
    eng = _engine()
    cmd = ([eng, "-pdf", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"]
           if eng.endswith("latexmk") else [eng, "-interaction=nonstopmode", "-halt-on-error", "paper.tex"])
    p = subprocess.run(cmd, cwd=paper, capture_output=True, text=True, timeout=600)
    log = (paper / "paper.log").read_text(errors="replace") if (paper / "paper.log").exists() else ""
    assert p.returncode == 0, (p.stdout + log)[-3000:]
    assert (paper / "paper.pdf").stat().st_size > 10_000
    assert "Undefined control sequence" not in log and "Missing $ inserted" not in log
    if eng.endswith("latexmk"):
        assert "undefined references" not in log.lower()



def _overfull(log: str) -> list[float]:
    """The widths (pt) by which each overfull box of a LaTeX log is too wide."""
    return [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="no latexmk: `make test` installs "
                    "texlive-latex-recommended and latexmk (as root or with passwordless sudo; "
                    "otherwise: sudo apt-get install texlive-latex-recommended latexmk)")
def test_two_reports_input_from_another_folder_compile_with_no_macro(tmp_path):
    """README step 3 as a paper does it: two reports, each `\\input` from the paper's own folder
    with only booktabs and graphicx loaded and nothing defined; the figures are found beside each
    report, the labels are each report's own (both tables referenced, none defined twice) and
    every table and cell fits \textwidth (no overfull box over 1 pt)."""
    certs = _reference_certs()
    ref, gal = tmp_path / "reports" / "ref", tmp_path / "reports" / "gallery-lat"
    report.build(report.load(certs), ref, command="report", check=False)
    report.build(report.load([ROOT / "reports" / "gallery" / "lat" / "certificate.json",
                              ROOT / "reports" / "gallery" / "width24" / "certificate.json"]),
                 gal, command="report", check=False)
    assert {"singular_values.pdf"} <= {p.name for p in ref.iterdir()} & {p.name for p in gal.iterdir()}
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "paper.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n\\begin{document}\n"
        "Tables~\\ref{tab:certify-ref-claims} and~\\ref{tab:certify-gallery-lat-claims}, "
        "Figures~\\ref{fig:certify-ref-singular-values} and~\\ref{fig:certify-gallery-lat-singular-values}.\n"
        "\\input{../reports/ref/report.tex}\n\\input{../reports/gallery-lat/report.tex}\n\\end{document}\n")
    p = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                       cwd=paper, capture_output=True, text=True, timeout=600)
    log = (paper / "paper.log").read_text(errors="replace") if (paper / "paper.log").exists() else ""
    assert p.returncode == 0, (p.stdout + log)[-3000:]
    # both reports' figures were read from their own folders
    assert "../reports/ref/singular_values.pdf" in log and "../reports/gallery-lat/singular_values.pdf" in log
    assert "multiply defined" not in log and "undefined" not in log.lower(), \
        [line for line in log.splitlines() if "defined" in line][:5]
    assert all(w <= 1.0 for w in _overfull(log)), [w for w in _overfull(log) if w > 1.0]
    assert "Float too large" not in log
    aux = (paper / "paper.aux").read_text()
    for key in ("ref", "gallery-lat"):
        for what in ("claims", "methods", "exact"):
            assert f"\\newlabel{{tab:certify-{key}-{what}}}" in aux
