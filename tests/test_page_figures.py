"""Every figure of ``reports/feasibility/brackets.md`` and ``docs/paper.md`` is the
one its committed file holds: each sits in a span that ``benchmarks/page_figures.py``
fills from a certificate, a file of ``rank12/`` or ``reports/recorded-figures.json``;
a span that differs from its file, or a figure outside any span, fails here."""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BRACKETS = ROOT / "reports" / "feasibility" / "brackets.md"
PAPER = ROOT / "docs" / "paper.md"


@pytest.fixture(scope="module")
def pf():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import page_figures
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return page_figures


@pytest.fixture(scope="module")
def figs(pf):
    return pf.figures()


@pytest.mark.parametrize("page", [BRACKETS, PAPER], ids=lambda p: p.name)
def test_every_figure_of_the_page_is_its_files(pf, figs, page):
    text = page.read_text()
    assert pf.stale(text, figs) == [], f"{page.name}: run python benchmarks/report.py --pages"
    assert pf.unsourced(text) == [], f"{page.name}: figures outside a span"
    assert pf.render(text, figs) == text
    assert len(pf.SPAN.findall(text)) >= (40 if page == BRACKETS else 15)


def test_a_planted_wrong_number_is_caught(pf, figs):
    text = BRACKETS.read_text()
    # the SDP witness's margin as the page once had it
    margin = figs["sdp13.margin"]
    planted = text.replace(f"<!--f:sdp13.margin-->{margin}<!--/f-->", "<!--f:sdp13.margin-->9.5e-4<!--/f-->", 1)
    assert planted != text
    assert pf.stale(planted, figs) == [("sdp13.margin", "9.5e-4", margin)]
    # a figure typed outside a span
    bare = text.replace(f"<!--f:sdp13.seconds-->{figs['sdp13.seconds']}<!--/f-->", "73 s", 1)
    assert pf.unsourced(bare) == ["73 s"]
    seconds = figs["sweep.seconds"]
    paper = PAPER.read_text().replace(f"<!--f:sweep.seconds-->{seconds}<!--/f-->",
                                      "<!--f:sweep.seconds-->3.5 min<!--/f-->")
    assert pf.stale(paper, figs) == [("sweep.seconds", "3.5 min", seconds)]
    # a wrong rank bracket in a table cell, and a recorded figure changed on the page only
    row = text.replace("<!--f:g12.nonnegative.bracket-->[6, 8]<!--/f-->", "<!--f:g12.nonnegative.bracket-->[6, 7]<!--/f-->")
    assert [s[0] for s in pf.stale(row, figs)] == ["g12.nonnegative.bracket"]
    rec = text.replace("<!--f:rec.r12_seconds-->409 s<!--/f-->", "<!--f:rec.r12_seconds-->408 s<!--/f-->")
    assert [s[0] for s in pf.stale(rec, figs)] == ["rec.r12_seconds"]
    with pytest.raises(KeyError):
        pf.render("<!--f:no.such.figure-->1<!--/f-->", figs)


def test_the_figures_are_the_certificates_values(figs):
    """Known values, read independently here: the four errors of issue 54 are gone."""
    feas = ROOT / "reports" / "feasibility"
    (c13,) = json.loads((feas / "paper51-r13-real-sdp.json").read_text())["claims"]
    assert float(figs["sdp13.margin"]) == pytest.approx(c13["info"]["margin_float"], rel=1e-3)
    assert float(figs["sdp13.seconds"].removesuffix(" s")) == pytest.approx(sum(c13["timings"].values()), rel=0.01)
    sweep = json.loads((feas / "paper51_sweep.json").read_text())["claims"]
    total = sum(v for c in sweep for v in c["timings"].values())
    assert figs["sweep.seconds"] == f"{total:.0f} s"
    assert (figs["sweep.claims"], figs["sweep.proved"], figs["sweep.unknown"]) == ("16", "15", "1")
    assert (figs["cert.claims"], figs["cert.with_class"]) == ("33", "33")
    assert figs["paper51.nonnegative.bracket"] == "[12, 15]"            # the bracket file alone
    assert figs["paper51.nonnegative.bracket_combined"] == "[15, 15]"   # with the packing lemma's file
    assert figs["sweep.real.bracket"] == "[12, 13]" and figs["r12.delsarte"] == "0.2472136"
    text = BRACKETS.read_text()
    assert "do not yet name" not in text and "9.5e-4" not in text
    assert "73 s" not in text and "277 s" not in text
    row = next(line for line in text.splitlines() if line.startswith("| nonnegative | **"))
    assert "(two files)" in row and "bracket-paper-5.1-nonnegative.json" in text.split(row)[1][:600]
    assert "3.5 min" not in PAPER.read_text()


def test_every_recorded_figure_says_where_it_came_from_and_is_used(pf):
    data = json.loads(pf.RECORDED.read_text())["figures"]
    used = {m.group(1)[4:] for p in (BRACKETS, PAPER) for m in pf.SPAN.finditer(p.read_text())
            if m.group(1).startswith("rec.")}
    assert used == set(data)
    for name, v in data.items():
        assert len(v["source"]) > 20 and re.search(r"\d", v["text"]), name
