"""Certificates -> a report (``certify report CERT.json... --out DIR``).

Made from certificates only, never from a live run. Writes into ``DIR``:

* ``report.md`` -- a table of every claim (kind, verdict, statement), the
  details of each (reason, method, parameters, the evidence's scalar values,
  the evidence fields it declares trusted, and its ``info`` on a separate
  line marked "not certified"),
  the figures, the result of re-checking each certificate with
  :mod:`certify.checkers.verify` (skip with ``--no-verify``), and a reproducibility block
  (command lines, input hashes, seeds, package versions, git commit);
* ``report.tex`` -- a fragment to ``\\input`` in a paper (needs ``booktabs`` and
  ``graphicx``): the claims in ``table`` floats with caption and label,
  statements typeset, numbers rounded with the exact values in an appendix
  table, every method explained in one line, ``figure`` environments
  (:mod:`certify.report.latex`);
* figures as PNG and PDF, each drawn only when the certificates hold the data:
  ``singular_values`` (certified enclosures of ``eps_rank`` claims, with eps),
  ``verdict_vs_rank`` (``feasible`` / ``infeasible`` verdicts across ranks),
  ``transcript_bits`` (``transcript`` claims: bits available vs
  ``q log2(s+1)``), ``eps_rank_heads`` (a layer x head heat map of the heads' eps-rank
  claims, one panel per model and eps, when a model has two heads or more).

The folder is built in a locked stage folder next to it and renamed into
place (:mod:`certify.core.outputs`): a reader never sees a half-written report, and
an existing ``--out`` is replaced only when it is an earlier report.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from certify.checkers import verify as _verify
from certify.checkers.common import NotACertificate, path_problem
from certify.core import outputs as _outputs
from certify.core.errors import InputError
from certify.core.files import sha256_file, write_text

#: a verdict as the report prints it next to (or before) its sentence: a refuted
#: sentence is false, and says so first
VERDICT_MARK = {"proved": "proved", "refuted": "REFUTED (false)", "unknown": "unknown"}
COLORS = {"proved": "#1b7837", "refuted": "#b2182b", "unknown": "#878787"}


@dataclass(frozen=True)
class Loaded:
    label: str                   # short name used in the report
    path: Path
    sha256: str
    cert: dict


def load(paths: Sequence[str | os.PathLike]) -> list[Loaded]:
    out, seen = [], set()
    for p in paths:
        path = Path(p)
        why = path_problem(path)            # a folder, a FIFO, a symbolic link loop, a permission problem
        if why is not None:
            raise InputError(f"{path}: {why}")
        if not os.path.lexists(path):
            raise InputError(f"no such file: {path}")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            cert = _verify.parse(text)
        except NotACertificate as exc:
            raise InputError(f"{path}: {exc}") from None
        _check_shape(cert, path)
        label = path.stem
        k = 2
        while label in seen:
            label, k = f"{path.stem}-{k}", k + 1
        seen.add(label)
        out.append(Loaded(label, path, sha256_file(path), cert))
    if not out:
        raise InputError("no certificate given")
    return out


def _check_shape(cert: dict, path: Path) -> None:
    """The fields the report reads have the types it expects (one line, exit 2)."""
    claims = cert.get("claims")
    if not isinstance(claims, list) or not claims:
        raise InputError(f"{path}: certificate has no claims")
    for i, c in enumerate(claims):
        if not isinstance(c, dict):
            raise InputError(f"{path}: claim {i} is not an object")
        for key, typ in (("kind", str), ("verdict", str), ("evidence", dict)):
            if not isinstance(c.get(key), typ):
                raise InputError(f"{path}: claim {i} has no {key} {'object' if typ is dict else 'string'}")
        for key, typ in (("statement", str), ("parameters", dict), ("method", str),
                         ("reason", str), ("info", dict), ("timings", dict)):
            if c.get(key) is not None and not isinstance(c[key], typ):
                raise InputError(f"{path}: claim {i}: {key} has the wrong type")
    cmd = cert.get("command", [])
    if not isinstance(cmd, list) or not all(isinstance(x, str) for x in cmd):
        raise InputError(f"{path}: command must be a list of strings")
    for key in ("inputs", "seeds", "environment"):
        v = cert.get(key, {})
        if v is not None and not isinstance(v, dict):
            raise InputError(f"{path}: {key} must be an object")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in (cert.get("inputs") or {}).items()):
        raise InputError(f"{path}: inputs must map file names to sha256 strings")


# ---------------------------------------------------------------- figures

def _q(v: Any) -> Fraction | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float):
        return Fraction(v) if math.isfinite(v) else None
    from certify.core.limits import parse_exact
    try:
        return parse_exact(str(v), "value")      # bounded: "1e999999999" is no number here
    except InputError:
        return None


def _sqrt_down(q: Fraction) -> float:
    return math.sqrt(max(float(q), 0.0))


def singular_value_series(certs: list[Loaded]) -> list[dict[str, Any]]:
    """Per eps_rank claim with enclosures: sigma_i intervals (sqrt of the certified
    sigma_i^2 enclosures), eps and k."""
    out = []
    for L in certs:
        for _i, c in enumerate(L.cert["claims"]):
            ev = c.get("evidence", {})
            encl = ev.get("sigma_sq_enclosures")
            if c["kind"] != "eps_rank" or not isinstance(encl, list) or not encl:
                continue
            pairs = []
            for e in encl:
                lo, hi = (_q(e[0]), _q(e[1])) if isinstance(e, list) and len(e) == 2 else (None, None)
                if lo is not None and hi is not None:
                    pairs.append((_sqrt_down(lo), _sqrt_down(hi)))
            pairs.sort(key=lambda p: -p[1])
            eps = _q(ev.get("eps"))
            out.append({"label": _series_name(L), "intervals": pairs,
                        "eps": None if eps is None else float(eps), "k": ev.get("k"),
                        "verdict": c["verdict"]})
    return out


def eps_rank_grids(certs: list[Loaded]) -> list[dict[str, Any]]:
    """Per model (its ``source_sha256``, else its ``source``) and eps: the ``eps_rank``
    claims of its heads by layer and head (the claims' ``layer`` and ``head`` parameters),
    each cell the count ``k`` of singular values above eps, the claim's verdict and whether
    ``k`` is exact (the evidence's ``exact``; else a lower bound), and
    ``r`` the largest feature dimension among them (the colour scale's top). Only models
    with two heads or more: one head is not a grid."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for L in certs:
        for c in L.cert["claims"]:
            p, ev = c.get("parameters") or {}, c.get("evidence") or {}
            layer, head, k = p.get("layer"), p.get("head"), ev.get("k")
            if c["kind"] != "eps_rank" or not all(isinstance(v, int) and not isinstance(v, bool)
                                                  for v in (layer, head, k)):
                continue
            key = (str(p.get("source_sha256") or p.get("source") or L.label), str(p.get("eps")))
            g = groups.setdefault(key, {"label": _series_name(L), "eps": str(p.get("eps")),
                                        "cells": {}, "r": 0})
            g["cells"][(layer, head)] = (k, c["verdict"], ev.get("exact") is True)
            r = ev.get("r")
            g["r"] = max(g["r"], k, r if isinstance(r, int) and not isinstance(r, bool) else 0)
    return [g for g in groups.values() if len(g["cells"]) >= 2]


def _series_name(L: Loaded) -> str:
    """A kernel's name for a figure legend: its model or matrix file (from a
    claim's ``source`` parameter), else the certificate's name."""
    for c in L.cert["claims"]:
        src = (c.get("parameters") or {}).get("source")
        if isinstance(src, str) and src:
            name = Path(src).name
            if "(" in name:                     # a construction: module.function(args)
                name = name.rsplit(".", 1)[-1] if "." in name.split("(")[0] else name
            for suf in (".json", ".safetensors", ".npz", ".npy", ".csv"):
                if name.endswith(suf):
                    name = name[: -len(suf)]
            if name:
                return name
    return L.label


def feasibility_points(certs: list[Loaded]) -> list[dict[str, Any]]:
    out = []
    for L in certs:
        for c in L.cert["claims"]:
            if c["kind"] not in ("feasible", "infeasible"):
                continue
            p = c.get("parameters", {})
            r = p.get("rank")
            if not isinstance(r, int):
                continue
            out.append({"rank": r, "kind": c["kind"], "verdict": c["verdict"],
                        "features": str(p.get("features", "real")),
                        "family": str(p.get("family", "?"))})
    return out


def transcript_points(certs: list[Loaded]) -> list[dict[str, Any]]:
    out = []
    for L in certs:
        for c in L.cert["claims"]:
            if c["kind"] != "transcript":
                continue
            cap = {**c.get("evidence", {}).get("capacity", {}), **{
                k: v for k, v in (c.get("info") or {}).items() if k in ("bits_available", "bits_needed")}}
            p = c.get("parameters", {})
            quant = p.get("quantizer", {}) if isinstance(p.get("quantizer"), dict) else {}
            avail, need = cap.get("bits_available"), cap.get("bits_needed")
            s, q = p.get("s"), p.get("q")
            if isinstance(s, int) and isinstance(q, int):
                need = q * math.log2(s + 1)
            if not isinstance(avail, (int, float)) or not isinstance(need, (int, float)):
                continue
            model = c.get("evidence", {}).get("model")
            source = model.get("source") if isinstance(model, dict) else None
            out.append({"p": quant.get("bits"), "format": quant.get("format"), "source": source,
                        "bits_available": float(avail), "bits_needed": float(need),
                        "verdict": c["verdict"], "family": f"(M,s,h,q)=({p.get('M')},{s},"
                                                           f"{p.get('h')},{q})"})
    return out


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


#: resolution of the PNG figures; the figure is laid out at it too, so that the layout and the
#: PNG share matplotlib's text-metrics cache (a mathtext string is parsed once per resolution)
PNG_DPI = 150

_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _power_of_ten(v: float, _pos: object = None) -> str:
    """A log axis's tick label ``10^k`` in Unicode superscripts (what matplotlib's default
    draws with mathtext, which parses each label once per tick and per resolution: most of
    a figure's time), and no label between powers of ten."""
    import math
    if v <= 0:
        return ""
    k = round(math.log10(v))
    return f"10{str(k).translate(_SUPERSCRIPT)}" if math.isclose(v, 10.0 ** k, rel_tol=1e-9) else ""


def _log_axis(axis) -> None:
    """:func:`_power_of_ten` labels on a log-scaled ``axis`` (``ax.yaxis``, ``ax.xaxis``)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    axis.set_major_formatter(FuncFormatter(_power_of_ten))
    axis.set_minor_formatter(NullFormatter())


def _save(fig, folder: Path, name: str) -> list[str]:
    fig.set_dpi(PNG_DPI)
    fig.tight_layout()
    fig.savefig(folder / f"{name}.png", dpi=PNG_DPI, bbox_inches="tight")   # legends outside the axes
    fig.savefig(folder / f"{name}.pdf", bbox_inches="tight")
    _plt().close(fig)
    return [f"{name}.png", f"{name}.pdf"]


#: kernels drawn in one singular-value figure (a model's every head would make a legend of
#: hundreds of lines; the eps-rank heat map shows them all)
MAX_SERIES = 16


def figure_singular_values(series, folder: Path) -> list[str]:
    plt = _plt()
    total = len(series)
    series = series[:MAX_SERIES]
    fig, ax = plt.subplots(figsize=(6.4, 4.2 + 0.18 * len(series)))
    positive = [a for s in series for a, _ in s["intervals"] if a > 0]
    positive += [s["eps"] for s in series if s["eps"]]
    floor = min(positive) / 100 if positive else 1e-12
    names = [s["label"] for s in series]
    for k, s in enumerate(series):        # one legend name per series
        if names.count(s["label"]) > 1:
            s = s | {"label": f"{s['label']} ({names[:k + 1].count(s['label'])})"}
        xs = list(range(1, len(s["intervals"]) + 1))
        color = ax._get_lines.get_next_color()
        # an enclosure [lo, hi]: a bar; lo = 0 (sigma may vanish): a downward marker at
        # hi, or at the bottom edge when hi lies below the plotted range
        pos = [(x, a, b) for x, (a, b) in zip(xs, s["intervals"]) if a > 0]
        zero = [(x, max(b, floor)) for x, (a, b) in zip(xs, s["intervals"]) if a <= 0]
        if pos:
            ax.vlines([x for x, _, _ in pos], [a for _, a, _ in pos], [b for _, _, b in pos],
                      color=color, lw=3)
            ax.scatter([x for x, _, _ in pos], [b for _, _, b in pos],
                       marker="_" if len(xs) <= 16 else ".", s=160 if len(xs) <= 16 else 20,
                       color=color, label=f"{s['label']}: {s['k']} values > \u03b5")
        if zero:
            ax.scatter(*zip(*zero), marker="v", s=40, color=color,
                       label=f"{s['label']}: 0 \u2264 \u03c3\u1d62 \u2264 marker")
    for j, eps in enumerate(sorted({s["eps"] for s in series if s["eps"]})):   # one line per eps
        ax.axhline(eps, ls=("--", ":", "-.")[j % 3], lw=1, color="0.3",
                   label=f"\u03b5 = {eps:.3g}")
    ax.set_yscale("log")
    _log_axis(ax.yaxis)
    ax.set_ylim(bottom=floor / 2)
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=12))
    ax.set_xlabel("index i")
    ax.set_ylabel("\u03c3\u1d62 (certified enclosure)")
    ax.set_title("Singular values with certified enclosures"
                 + (f" (the first {len(series)} of {total} kernels)" if total > len(series) else ""))
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, folder, "singular_values")


def figure_eps_rank_heads(grids, folder: Path) -> list[str]:
    """The eps-rank of every head as a layer x head heat map (one panel per model and
    eps); a cell whose claim is not ``proved`` is hatched and marked ``?``, a proved lower
    bound is hatched and marked ``>=k``, a head without an eps-rank claim is left blank."""
    import numpy as np
    plt = _plt()
    grids = grids[:6]
    shapes = [(1 + max(L for L, _ in g["cells"]), 1 + max(h for _, h in g["cells"])) for g in grids]
    fig, axes = plt.subplots(len(grids), 1, squeeze=False,
                             figsize=(max(4.8, min(12.0, 1.2 + 0.42 * max(w for _, w in shapes))),
                                      sum(1.6 + 0.3 * min(n, 40) for n, _ in shapes)))
    for ax, g, (nl, nh) in zip(axes[:, 0], grids, shapes):
        val = np.full((nl, nh), np.nan)
        for (L, h), (k, verdict, _) in g["cells"].items():
            if verdict == "proved":
                val[L, h] = k
        top = max([k for k, _, _ in g["cells"].values()] + [1])         # the contrast of the counts
        im = ax.imshow(np.ma.masked_invalid(val), cmap="viridis", vmin=0, vmax=top,
                       aspect="auto", interpolation="nearest", origin="upper")
        for (L, h), (k, verdict, exact) in g["cells"].items():
            if verdict != "proved" or not exact:
                ax.add_patch(plt.Rectangle((h - 0.5, L - 0.5), 1, 1, fill=False, hatch="///",
                                           edgecolor="0.5", lw=0))
            if nl * nh <= 600:
                shown = "?" if verdict != "proved" else str(k) if exact else f">={k}"
                light = verdict == "proved" and k < 0.6 * top
                ax.text(h, L, shown, ha="center", va="center", fontsize=7 if nh <= 24 else 5,
                        color="white" if light else "black")
        ax.set_xticks(range(nh))
        ax.set_yticks(range(nl))
        ax.tick_params(labelsize=7)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"{g['label']}: eps-rank by layer and head (eps = {g['eps']}; of up to {g['r']} "
                     "features)", fontsize=9)
        from matplotlib.ticker import MaxNLocator
        fig.colorbar(im, ax=ax, label="number of \u03c3\u1d62 > \u03b5", fraction=0.04, pad=0.02,
                     ticks=MaxNLocator(integer=True))
    return _save(fig, folder, "eps_rank_heads")


def figure_verdict_vs_rank(points, folder: Path) -> list[str]:
    plt = _plt()
    classes = sorted({p["features"] for p in points})
    fig, ax = plt.subplots(figsize=(6.4, 2.0 + 0.8 * len(classes)))
    style = {("infeasible", "proved"): ("x", "infeasible (proved)"),
             ("feasible", "proved"): ("o", "feasible (proved)")}
    seen = set()
    for p in points:
        y = classes.index(p["features"])
        marker, label = style.get((p["kind"], p["verdict"]), ("s", f"{p['kind']} ({p['verdict']})"))
        color = COLORS["refuted"] if p["kind"] == "infeasible" and p["verdict"] == "proved" else \
            COLORS["proved"] if p["verdict"] == "proved" else COLORS["unknown"]
        ax.scatter([p["rank"]], [y], marker=marker, s=70, color=color,
                   label=None if label in seen else label, zorder=3)
        seen.add(label)
    for y, cls in enumerate(classes):
        inf = [p["rank"] for p in points if p["features"] == cls and p["kind"] == "infeasible"
               and p["verdict"] == "proved"]
        fea = [p["rank"] for p in points if p["features"] == cls and p["kind"] == "feasible"
               and p["verdict"] == "proved"]
        if inf and fea:
            lo, hi = max(inf) + 1, min(fea)
            ax.annotate(f"minimal rank in [{lo}, {hi}]", (hi, y), textcoords="offset points",
                        xytext=(0, 10), ha="right", fontsize=8)
    ranks = sorted({p["rank"] for p in points})
    ax.set_yticks(range(len(classes)), classes)
    ax.set_ylim(-0.6, len(classes) - 0.4)
    ax.set_xticks(ranks)
    ax.set_xlabel("rank r (feature dimension)")
    fams = sorted({p["family"] for p in points})
    ax.set_title(f"Feasibility verdicts vs rank ({', '.join(fams)})", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=3, frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, folder, "verdict_vs_rank")


def figure_transcript(points, folder: Path) -> list[str]:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    pts = sorted(points, key=lambda p: (p["p"] is None, p["p"] or 0, p["bits_available"]))
    xs = [p["p"] if p["p"] is not None else i for i, p in enumerate(pts)]
    for x, p in zip(xs, pts):
        ax.scatter([x], [p["bits_available"]], s=60, color=COLORS[p["verdict"]] if p["verdict"]
                   in COLORS else "k", zorder=3)
        name = p["format"] or p["source"]
        ax.annotate(f"{name}: {p['verdict']}" if name else p["verdict"],
                    (x, p["bits_available"]), textcoords="offset points", xytext=(5, 5), fontsize=8)
    for need in sorted({p["bits_needed"] for p in pts}):
        ax.axhline(need, ls="--", color="k", lw=1, label=f"q log2(s+1) = {need:.3g}")
    ax.set_xlabel("p (bits per coordinate)" if all(p["p"] is not None for p in pts) else "run")
    ax.set_ylabel("transcript bits available")
    ax.set_title("Theorem 9: transcript bits vs the bound", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(True, alpha=0.3)
    return _save(fig, folder, "transcript_bits")


# ---------------------------------------------------------------- text

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def tex_escape(s: str) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_TEX.get(ch, ch) for ch in str(s))


def _md_cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _scalars(obj: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """Scalar fields of an evidence / parameter object (short ones), one level deep."""
    out: list[tuple[str, Any]] = []
    if not isinstance(obj, dict):
        return out
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, (int, float, bool)) or v is None:
            out.append((key, v))
        elif isinstance(v, str) and len(v) <= 80:
            out.append((key, v))
        elif isinstance(v, list) and len(v) <= 8 and all(
                isinstance(x, (int, str)) and len(str(x)) <= 20 for x in v):
            out.append((key, v))
        elif isinstance(v, dict) and depth < 1:
            out += _scalars(v, f"{key}.", depth + 1)
    return out


def _rows(certs: list[Loaded]):
    """(certificate, index, claim) with the claim's statement *rendered* from its
    parameters (:mod:`certify.checkers.statements`), never the stored text: a
    report says what the claim means; the re-check column says whether it holds."""
    from certify.checkers import statements as _st
    for L in certs:
        version = L.cert.get("renderer") or _st.RENDERER
        for i, c in enumerate(L.cert["claims"]):
            try:
                st = _st.render(c["kind"], c.get("parameters") or {}, c.get("evidence") or {},
                                version)
                text, latex = st.text, st.latex
            except _st.RenderError as exc:
                text = f"(no statement: the parameters do not determine one: {exc})"
                latex = None
            yield L, i, {**c, "statement": text, "statement_latex": latex}


def _held(cc) -> str:
    """A claim's re-check as the report prints it."""
    if not cc.holds:
        return "**FAILS**"
    return "holds, assuming: " + ", ".join(cc.assumptions) if cc.assumptions else "holds"


def markdown(certs: list[Loaded], checks: dict[str, Any] | None, figures: list[str]) -> str:
    lines = ["# Certificate report", "",
             "Made from the certificates listed below (no live run). Every claim's evidence is "
             "re-checked by `certify verify CERT.json` with exact arithmetic only; statements are "
             "rendered from each claim's parameters. \"holds, assuming: ...\" means the claim "
             "holds only under the named assumptions (`verify` exit 4).", ""]
    counts: dict[str, int] = {}
    for _, _, c in _rows(certs):
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    lines += [f"{sum(counts.values())} claims in {len(certs)} certificate(s): "
              + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), ""]
    head = "| certificate | # | kind | verdict | statement |"
    if checks is not None:
        head = "| certificate | # | kind | verdict | re-checked | statement |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for L, i, c in _rows(certs):
        cells = [L.label, str(i), c["kind"], VERDICT_MARK.get(c["verdict"], c["verdict"])]
        if checks is not None:
            cc = checks[L.label].claims[i]
            cells.append(_held(cc))
        cells.append(_md_cell(c.get("statement", "")))
        lines.append("| " + " | ".join(cells) + " |")
    if figures:
        lines += ["", "## Figures", ""]
        for f in figures:
            if f.endswith(".png"):
                lines += [f"![{f[:-4]}]({f})", ""]
    lines += ["", "## Claims", ""]
    for L, i, c in _rows(certs):
        lines += [f"### {L.label} #{i}: {c['kind']}", "",
                  f"{VERDICT_MARK.get(c['verdict'], c['verdict']).upper()}: {c.get('statement', '')}",
                  ""]
        if c.get("reason"):
            lines += [f"- reason: {c['reason']}"]
        if c.get("method"):
            from certify.report.latex import explain
            lines += [f"- method: [{c['method']}](#methods) -- {explain(c['method'])}"]
        params = _scalars(c.get("parameters", {}))
        if params:
            lines += ["- parameters: " + ", ".join(f"`{k}` = {_fmt(v)}" for k, v in params)]
        ev = [(k, v) for k, v in _scalars(c.get("evidence", {})) if k != "trusted"]
        if ev:
            lines += ["- evidence: " + ", ".join(f"`{k}` = {_fmt(v)}" for k, v in ev)]
        trusted = c.get("evidence", {}).get("trusted") if isinstance(c.get("evidence"), dict) else None
        if isinstance(trusted, list) and trusted:
            lines += ["- trusted, not re-derived (features too large to embed): "
                      + ", ".join(f"`{t}`" for t in trusted)]
        info = _scalars(c.get("info", {})) if isinstance(c.get("info"), dict) else []
        if info:
            lines += ["- info (not certified): " + ", ".join(f"`{k}` = {_fmt(v)}" for k, v in info)]
        if c.get("timings"):
            lines += ["- seconds: " + ", ".join(f"{k} {float(v):.3g}" for k, v in c["timings"].items())]
        if checks is not None:
            cc = checks[L.label].claims[i]
            lines += ["- re-checked: " + (_held(cc) if cc.holds else "FAILS: " + "; ".join(cc.problems))]
        lines.append("")
    from certify.report.latex import explain
    meths = list(dict.fromkeys(c.get("method") for _, _, c in _rows(certs) if c.get("method")))
    if meths:
        lines += ["## Methods", "", "<a id=\"methods\"></a>", ""]
        lines += [f"- **{m}**: {explain(m)}" for m in meths] + [""]
    lines += ["## Reproducibility", ""]
    for L in certs:
        cert = L.cert
        env = cert.get("environment", {}) or {}
        lines += [f"### {L.label}", "", f"- file: `{L.path.name}` (sha256 `{L.sha256}`)",
                  f"- created: {cert.get('created', '')}"]
        if cert.get("command"):
            lines += [f"- command: `{shlex.join(str(a) for a in cert['command'])}`"]
        for name, digest in (cert.get("inputs") or {}).items():
            lines += [f"- input `{name}`: sha256 `{digest}`"]
        if cert.get("seeds"):
            lines += ["- seeds: " + ", ".join(f"{k} = {v}" for k, v in cert["seeds"].items())]
        if env:
            pk = env.get("packages") or {}
            lines += [f"- python {env.get('python')} on {env.get('platform')}; git commit "
                      f"`{env.get('git_commit')}`",
                      "- packages: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v)]
            if isinstance(env.get("compiled"), dict):
                lines += ["- compiled kernels: " + _compiled_line(env["compiled"])]
        if checks is not None:
            r = checks[L.label]
            lines += [f"- `certify verify {L.path.name}`: exit {r.exit_code()}, "
                      + ("FAILS" if not r.holds else
                         f"holds, assuming: {', '.join(r.open_assumptions)} (accept with "
                         "`--assume`, or re-derive the extraction with `--replay-extraction`)"
                         if r.open_assumptions else "holds")]
        lines.append("")
    return "\n".join(lines) + "\n"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, str):
        q = _q(v)
        if q is not None and q.denominator != 1 and len(v) > 12:
            return f"{v} (~{float(q):.6g})"
    return str(v)


def _compiled_line(status: dict) -> str:
    """Which compiled kernels the certificate's making used (its ``environment.compiled``)."""
    used = [m for m, v in status.items() if v == "in use"]
    if used and len(used) == len(status):
        return f"in use ({len(used)} of {len(status)})"
    return (f"{len(used)} of {len(status)} in use; " + "; ".join(
        f"`{str(m).rsplit('.', 1)[-1]}` {v}" for m, v in status.items() if v != "in use")
        + " (the pure paths give the same answers)")


def latex(certs: list[Loaded], checks: dict[str, Any] | None, figures: Sequence[str] = (),
          name: str = "report") -> str:
    """The paper-ready LaTeX fragment (see :mod:`certify.report.latex`); ``name``: the
    report's name in its labels (its folder's name)."""
    from certify.report import latex as report_tex

    def fails(label: str, i: int) -> bool:
        return checks is not None and not checks[label].claims[i].holds
    return report_tex.latex([(L.label, i, c) for L, i, c in _rows(certs)], fails, figures, name)


# ---------------------------------------------------------------- the report

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str, *, tex: bool = False) -> str:
    """``text`` with every lone surrogate (valid in a JSON string, so in a
    certificate that ``verify`` accepts, but not encodable as UTF-8) shown as its
    JSON escape ``\\udXXX`` (``\\textbackslash{}udXXX`` in LaTeX)."""
    slash = "\\textbackslash{}" if tex else "\\"
    return _LONE_SURROGATE.sub(lambda m: f"{slash}u{ord(m.group()):04x}", text)


@dataclass(frozen=True)
class ReportFiles:
    folder: Path
    files: tuple[str, ...]
    holds: bool | None            # every certificate re-checked and holding (None: not checked)


def build(certs: list[Loaded], out: str | os.PathLike, *, command: str, check: bool = True,
          extra: dict[str, str] | None = None, verified: Sequence[Any] | None = None) -> ReportFiles:
    """Write the report folder ``out`` (atomically replaced, see :mod:`certify.core.outputs`:
    only a new, empty or earlier ``certify <command>`` folder is replaced); ``extra``
    adds files (name -> text) to the folder, e.g. the certificate itself. ``command``
    (required: the folder's manifest names it) is the command the user ran.
    ``verified``: the checker's results for ``certs`` (same order), each computed by
    the caller on the same text with base its file's folder
    (:meth:`certify.core.certificate.Certificate.checked_dumps`): the same call this
    function would make, so it is not made twice."""
    out = _outputs.check_out_dir(out, command)
    if verified is not None and len(verified) != len(certs):
        raise ValueError("verified must give one result per certificate")
    checks = ({L.label: v for L, v in zip(certs, verified)} if verified is not None else
              {L.label: _verify.verify_certificate(L.cert, base=L.path.resolve().parent)
               for L in certs}) if check else None
    files: list[str] = []

    def fill(tmp: Path) -> None:
        figures: list[str] = []
        sv = singular_value_series(certs)
        if sv:
            figures += figure_singular_values(sv, tmp)
        fp = feasibility_points(certs)
        if fp:
            figures += figure_verdict_vs_rank(fp, tmp)
        tp = transcript_points(certs)
        if tp:
            figures += figure_transcript(tp, tmp)
        grids = eps_rank_grids(certs)
        if grids:
            figures += figure_eps_rank_heads(grids, tmp)
        (tmp / "report.md").write_text(encodable(markdown(certs, checks, figures)),
                                       encoding="utf-8")
        (tmp / "report.tex").write_text(encodable(latex(certs, checks, figures, Path(out).name), tex=True),
                                        encoding="utf-8")
        for name, text in (extra or {}).items():
            with open(tmp / name, "wb") as f:
                write_text(f, encodable(text))
        files.extend(["report.md", "report.tex", *figures, *(extra or {})])

    _outputs.write_dir(out, command, fill)
    holds = None if checks is None else all(r.holds for r in checks.values())
    return ReportFiles(out, tuple(files), holds)


def loaded_from_text(text: str, path: str | os.PathLike) -> Loaded:
    """A certificate held in memory, labelled by the path it will be written to."""
    path = Path(path)
    try:
        cert = _verify.parse(text)
    except NotACertificate as exc:
        raise InputError(f"{path}: {exc}") from None
    _check_shape(cert, path)
    import hashlib
    h = hashlib.sha256()
    for i in range(0, len(text), 1 << 24):       # the file's bytes, 16 M characters at a time
        h.update(text[i:i + (1 << 24)].encode())
    return Loaded(path.stem, path, h.hexdigest(), cert)


def build_with_certificate(text: str, out: str | os.PathLike, *, command: str,
                           name: str = "certificate.json", verified: Any = None) -> Path:
    """``out/name`` (the certificate) and its report, written in one atomic step.
    ``verified``: the checker's result on ``text`` read from folder ``out``
    (:meth:`certify.core.certificate.Certificate.checked_dumps` with base ``out``), which
    the report then takes instead of checking the same text a second time."""
    out = Path(out)
    build([loaded_from_text(text, out / name)], out, extra={name: text}, command=command,
          verified=None if verified is None else [verified])
    return out
