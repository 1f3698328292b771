"""The figures of ``reports/feasibility/brackets.md`` and ``docs/paper.md``, read
from committed files, so that neither page can drift from what it cites.

A page marks each figure as a span ``<!--f:NAME-->TEXT<!--/f-->`` (the markers are
HTML comments: invisible when the page is rendered). :func:`figures` computes
every NAME's TEXT from a committed file:

* ``cert.*``, ``sweep.*``, ``sdp13.*``, ``<family>.<features>.*``: the feasibility
  certificates ``reports/feasibility/*.json`` (their claims' ranks, verdicts,
  timings, ``info`` and the command that made them);
* ``r12.*``: the exact research files of ``reports/feasibility/rank12/`` (each
  checked by its ``check_*.py``);
* ``rec.*``: ``reports/recorded-figures.json``, the figures of runs
  whose output is not kept (a benchmark run, an earlier search), each with where
  it came from. They cannot be re-derived, but they live in one file.

``python benchmarks/report.py --pages`` rewrites every span (:func:`render`);
:func:`stale` lists the spans whose text differs from their file and
:func:`unsourced` the figure-like numbers (decimals, times, percentages,
thousands) outside any span; ``tests/test_page_figures.py`` requires both empty.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FEAS = ROOT / "reports" / "feasibility"
RECORDED = ROOT / "reports" / "recorded-figures.json"
PAGES = (FEAS / "brackets.md", ROOT / "docs" / "paper.md")

SPAN = re.compile(r"<!--f:([\w.\-]+)-->(.*?)<!--/f-->", re.S)
#: figure-like: thousands, decimals, scientific notation, durations, percentages, ratios
FIGURE_LIKE = re.compile(
    r"(?<![\w.\-])(?:\d{1,3}(?:,\d{3})+|\d+\.\d+(?:e-?\d+)?|\d+(?:\.\d+)?e-?\d+|"
    r"\d+(?:\.\d+)?\s?(?:s|min|%)(?![\w])|\d+(?:\.\d+)?x(?![\w]))")
#: figure-like text that is a name, not a measured figure
NOT_FIGURES = re.compile(r"(?:Sec\.|paper-|arXiv|Sec\. 2\.)\s?\d+\.\d+|\d+\.\d+ (?=of the paper)")


def _command(cmd: list[str]) -> str:
    """A certificate's command as a reader re-runs it (no progress, output or JSON
    flags), as code: a span cannot sit inside backticks, so it holds them."""
    out, skip = [], False
    for a in cmd:
        if skip:
            skip = False
            continue
        if a in ("--out", "--table"):
            skip = True
            continue
        if a in ("--no-progress", "--json"):
            continue
        out.append(a)
    return "`" + " ".join(out) + "`"


def _sci(x: float) -> str:
    """4 significant digits in the page's notation: ``1.108e-3``."""
    m, e = f"{x:.3e}".split("e")
    return f"{m}e{int(e)}"


def _seconds(x: float) -> str:
    return f"{x:.0f} s" if x >= 100 else f"{x:.1f} s"


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def _proved(claims: list[dict], kind: str) -> list[dict]:
    return [c for c in claims if c["kind"] == kind and c["verdict"] == "proved"]


def certificate_figures(feas: Path = FEAS) -> dict[str, str]:
    """The figures the feasibility certificates hold."""
    C = {p.name: json.loads(p.read_text()) for p in sorted(feas.glob("*.json"))}
    f: dict[str, str] = {}
    every = [c for d in C.values() for c in d["claims"]]
    f["cert.claims"] = str(len(every))
    f["cert.with_class"] = str(sum("class" in c["parameters"] for c in every))
    f["cert.files"] = str(len(C))

    sdp = C["paper51-r13-real-sdp.json"]
    (c13,) = sdp["claims"]
    f["sdp13.command"] = _command(sdp["command"])
    f["sdp13.seconds"] = _seconds(sum(c13["timings"].values()))
    f["sdp13.solves"] = str(c13["info"]["sdp_solves"])
    f["sdp13.margin"] = _sci(c13["info"]["margin_float"])
    f["sdp13.rank"] = str(c13["parameters"]["rank"])

    sw = C["paper51_sweep.json"]
    f["sweep.command"] = _command(sw["command"])
    f["sweep.claims"] = str(len(sw["claims"]))
    f["sweep.proved"] = str(sum(c["verdict"] == "proved" for c in sw["claims"]))
    f["sweep.unknown"] = str(sum(c["verdict"] == "unknown" for c in sw["claims"]))
    f["sweep.seconds"] = _seconds(sum(v for c in sw["claims"] for v in c["timings"].values()))
    f["sweep.search_limit"] = _seconds(float(_flag(sw["command"], "--time-limit")))
    (unk,) = [c for c in sw["claims"] if c["verdict"] == "unknown"]
    f["sweep.unknown_search"] = _seconds(unk["timings"]["search_s"])
    f["sweep.chain_bound"] = unk["info"]["chain_bound"]
    for feats in ("real", "nonnegative"):
        cl = [c for c in sw["claims"] if c["parameters"]["features"] == feats]
        lo = max(c["parameters"]["rank"] for c in _proved(cl, "infeasible"))
        hi = min(c["parameters"]["rank"] for c in _proved(cl, "feasible"))
        f[f"sweep.{feats}.lower"] = str(lo)
        f[f"sweep.{feats}.upper"] = str(hi)
        f[f"sweep.{feats}.bracket"] = f"[{lo + 1}, {hi}]"

    nn = C["paper51-nonnegative-12-15.json"]
    f["nn.command"] = _command(nn["command"])
    f["nn.lower"] = str(max(c["parameters"]["rank"] for c in _proved(nn["claims"], "infeasible")))
    f["nn.upper"] = str(min(c["parameters"]["rank"] for c in _proved(nn["claims"], "feasible")))
    f["nn.ranks"] = "-".join(str(c["parameters"]["rank"]) for c in nn["claims"][::len(nn["claims"]) - 1])

    for fam, tag in (("paper-5.1", "paper51"), ("greedy-12-6-3", "g12"), ("thm6-24-cut30", "thm6")):
        for feats in ("real", "nonnegative"):
            d = C[f"bracket-{fam}-{feats}.json"]
            (low,) = _proved(d["claims"], "infeasible")
            (up,) = _proved(d["claims"], "feasible")
            lo, hi = low["parameters"]["rank"], up["parameters"]["rank"]
            key = f"{tag}.{feats}"
            f[f"{key}.lower"] = str(lo)
            f[f"{key}.upper"] = str(hi)
            f[f"{key}.bracket"] = f"[{lo + 1}, {hi}]"
            f[f"{key}.budget"] = f"{_flag(d['command'], '--budget')} s"
            f[f"{key}.command"] = _command(d["command"])
            if "search_s" in up["timings"]:
                f[f"{key}.search"] = _seconds(up["timings"]["search_s"])
    # the nonnegative paper-5.1 row combines two files: the packing lemma's lower end
    f["paper51.nonnegative.bracket_combined"] = f"[{int(f['nn.lower']) + 1}, {f['paper51.nonnegative.upper']}]"
    return f


def _decimal(x: Fraction | float, places: int) -> str:
    return f"{float(x):.{places}f}"


def rank12_figures(folder: Path = FEAS / "rank12") -> dict[str, str]:
    """The exact values of the rank-12 research files (each checked by its checker)."""
    load = lambda n: json.loads((folder / n).read_text())                 # noqa: E731
    f: dict[str, str] = {}
    a, b = (Fraction(v) for v in load("delsarte_certificate.json")["claim"]["t_at_least"])
    t_d = float(a) + float(b) * math.sqrt(5)
    f["r12.delsarte"] = _decimal(t_d, 7)
    f["r12.gap"] = f"{(0.25 - t_d) / 0.25 * 100:.1f} %"        # how far below 1/4 the bound stops
    f["r12.core"] = _decimal(Fraction(load("core_rank12_exact.json")["t"]), 6)
    f["r12.witness16"] = _decimal(Fraction(load("witness16.json")["t"]), 4)
    R = Fraction(load("iso_ceiling.json")["claim"]["R_at_least"])
    f["r12.iso_R"], f["r12.iso"] = _decimal(R, 7), _decimal(1 / R, 7)
    tau = Fraction(load("iso_rows_ceiling.json")["claim"]["tau_at_least"])
    f["r12.rows_tau"], f["r12.rows"] = _decimal(tau, 7), _decimal(1 / tau, 7)
    tp = load("three_point_ceiling.json")
    f["r12.threepoint_R"] = _decimal(Fraction(tp["claim"]["R_at_least"]), 5)
    f["r12.threepoint_D2"] = _decimal(Fraction(tp["D2"]), 3)
    return f


def recorded_figures(path: Path = RECORDED) -> dict[str, str]:
    """The figures of runs whose output is not kept (``recorded-figures.json``)."""
    data = json.loads(path.read_text())
    for name, v in data["figures"].items():
        if not (isinstance(v, dict) and isinstance(v.get("text"), str) and v.get("source")):
            raise ValueError(f"{path.name}: figure {name!r} needs a text and a source")
    return {f"rec.{k}": v["text"] for k, v in data["figures"].items()}


def figures() -> dict[str, str]:
    """Every figure a page may cite, by name."""
    return {**certificate_figures(), **rank12_figures(), **recorded_figures()}


def render(text: str, figs: dict[str, str]) -> str:
    """``text`` with every span's text replaced by its figure; an unknown name is an error."""
    def sub(m: re.Match) -> str:
        if m.group(1) not in figs:
            raise KeyError(f"no figure named {m.group(1)!r}")
        return f"<!--f:{m.group(1)}-->{figs[m.group(1)]}<!--/f-->"
    return SPAN.sub(sub, text)


def stale(text: str, figs: dict[str, str]) -> list[tuple[str, str, str | None]]:
    """(name, text on the page, text of its file) for every span that differs."""
    return [(m.group(1), m.group(2), figs.get(m.group(1))) for m in SPAN.finditer(text)
            if figs.get(m.group(1)) != m.group(2)]


def unsourced(text: str) -> list[str]:
    """Figure-like numbers outside any span (names such as ``paper-5.1`` excepted)."""
    bare = NOT_FIGURES.sub(" ", SPAN.sub(" ", text))
    return FIGURE_LIKE.findall(bare)


def write_pages() -> list[Path]:
    """Rewrite the spans of both pages from their files (atomically)."""
    figs = figures()
    for page in PAGES:
        text = render(page.read_text(), figs)
        tmp = page.with_name(f".{page.name}.tmp")
        tmp.write_text(text)
        tmp.replace(page)
    return list(PAGES)
