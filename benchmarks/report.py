"""The benchmark report: ``reports/bench/README.md`` and the plot of time vs n
(``rank_time_vs_n.png``) and of time vs the rank (``rank_time_vs_r.png``),
drawn from the results the benchmarks wrote into ``reports/bench/``
(``rank.json``, ``rank_sweep.json``, ``transcript.json``, ``based.json``,
``parallel.json``); the two tables of ``docs/benchmarks.md`` (between its
``<!-- bench ... -->`` markers) and the headline figures of the top-level README
(between its ``<!-- headline ... -->`` markers), rendered from the same files and
from ``reports/suite-times.json`` (written by ``make suite-times``), so that the
pages quote only what a file under ``reports/`` holds (a test compares them); and
the feature-map table of ``docs/layouts.md``, rendered from
:mod:`models.feature_table` (``tests/test_feature_table.py`` compares it); and
every figure of ``reports/feasibility/brackets.md`` and ``docs/paper.md``, read
from the certificates and files it cites (:mod:`page_figures`,
``tests/test_page_figures.py`` compares them).
``make bench`` runs the benchmarks and then this script; ``python
benchmarks/report.py`` redraws the report from the files alone, and ``python
benchmarks/report.py --pages`` only rewrites the pages' generated blocks.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "reports" / "bench"
README = ROOT / "README.md"
BENCH_PAGE = ROOT / "docs" / "benchmarks.md"
LAYOUTS_PAGE = ROOT / "docs" / "layouts.md"
SUITE_TIMES = ROOT / "reports" / "suite-times.json"


def _load(name: str, folder: Path | None = None) -> dict | None:
    p = (folder or OUT) / name
    return json.loads(p.read_text()) if p.is_file() else None


def _unit(d: dict) -> str:
    """What a result file's seconds are: CPU (the rank benchmarks now) or wall."""
    return "CPU s" if d.get("seconds") == "cpu" else "s"


def plot_rank(rank: dict, path: Path) -> None:
    """Time vs n, log-log: numpy matrix_rank, the certified exact rank (the library
    call), the `certify rank` command end to end, and `certify verify`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = sorted(rank["matrix"], key=lambda r: r["n"])
    n = [r["n"] for r in rows]
    fig = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for key, runs, label, style in (
            ("numpy_median_s", "numpy_s", "numpy.linalg.matrix_rank (SVD, unverified)", "o-"),
            ("exact_median_s", "exact_s", "certified exact rank (float -> integer, proof)", "s-")):
        ax.plot(n, [r[key] for r in rows], style, label=label)
        for r in rows:
            ax.scatter([r["n"]] * len(r[runs]), r[runs], s=9, alpha=0.35, color=ax.lines[-1].get_color())
    ax.plot(n, [r["cli_s"] for r in rows], "^--", label="`certify rank` command (+ its own check, I/O)")
    ax.plot(n, [r["verify_s"] for r in rows], "v:", label="`certify verify` (re-derives from the file)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(n)
    ax.set_xticklabels([str(v) for v in n])
    ax.set_xlabel("n (n x n float64 matrix, planted rank 64)")
    ax.set_ylabel(("CPU seconds" if rank.get("seconds") == "cpu" else "seconds") + " (one BLAS thread)")
    ax.set_title("Exact rank, certified, vs numpy's float rank", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130)
    path.write_bytes(buf.getvalue())


def plot_rank_sweep(sweep: dict, path: Path) -> None:
    """Time vs r, log-log, one panel per n: SVD, QRCP, the certified rank with the
    exact and with the Freivalds upper bound (in-process medians, 12-bit factors
    solid, small factors dashed), and both modes' `certify rank` end to end."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sizes = sorted({p["n"] for p in sweep["points"]})
    fig = Figure(figsize=(6.2 * len(sizes), 4.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    series = (("svd", "SVD (numpy matrix_rank)", "o", "C0"), ("qrcp", "QR with pivoting (scipy)", "D", "C1"),
              ("exact", "certified, exact upper bound", "s", "C2"),
              ("freivalds", "certified, Freivalds upper bound (<= 2^-128)", "^", "C3"))
    for ax, n in zip(axes, sizes):
        pts = [p for p in sweep["points"] if p["n"] == n]
        for kind, ls in (("12bit", "-"), ("small", "--")):
            kp = sorted((p for p in pts if p["kind"] == kind), key=lambda p: p["planted"])
            for key, label, mk, col in series:
                xy = [(p["planted"], p["median_s"][key]) for p in kp if key in p["median_s"]]
                if xy:
                    ax.plot(*zip(*xy), ls, marker=mk, color=col, ms=4,
                            label=f"{label}, {kind} factors", alpha=1.0 if kind == "12bit" else 0.6)
            for mode, mk in (("exact", "x"), ("freivalds", "+")):
                xy = [(p["planted"], p[f"{mode}_cli_s"]) for p in kp if f"{mode}_cli_s" in p]
                if xy:
                    ax.plot(*zip(*xy), ":", marker=mk, color="C2" if mode == "exact" else "C3", ms=7,
                            label=f"`certify rank --upper-bound {mode}` end to end, {kind}")
            xy = [(p["planted"], p["svd_e2e_s"]) for p in kp if "svd_e2e_s" in p]
            if xy:
                ax.plot(*zip(*xy), ":", marker="o", color="C0", ms=4, mfc="none",
                        label=f"SVD script end to end, {kind}")
        cube = [p for p in pts if p["kind"].startswith("cube")]
        for p in cube:
            for key, _, mk, col in series:
                if key in p["median_s"]:
                    ax.scatter([p["planted"]], [p["median_s"][key]], marker=mk, color=col, s=60,
                               facecolors="none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"rank r (n = {n}; hollow markers: cube kernels (1 + x.z)^d)")
        ax.set_ylabel(("CPU seconds" if _cpu(sweep) else "seconds") + " (one BLAS thread, shared machine)")
        ax.set_title(f"n = {n}: time against the rank", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    path.write_bytes(buf.getvalue())


def _ordered(sweep: dict) -> list[dict]:
    """The sweep's points by n, kind and rank."""
    kinds = {"small": 0, "12bit": 1}
    return sorted(sweep["points"], key=lambda p: (p["n"], kinds.get(p["kind"], 2), p["kind"], p["planted"]))


def _cpu(sweep: dict) -> bool:
    return all(p.get("seconds") == "cpu" for p in sweep["points"])


def _where(p: dict) -> str:
    """Where the in-process exact mode's time goes: the shares of its own step
    timings (wall clock, so shares rather than seconds), the primes and bounds."""
    if "exact" in p:
        t, d = p["exact"]["timings"], p["exact"]["details"]
        total = t.get("total") or sum(v for k, v in t.items() if k != "total") or 1.0
        bound = d.get("span_bound_bits", "?")
        had = d.get("span_hadamard_bits")
        return (f"minor {(t.get('proposal', 0) + t.get('modular', 0)) / total:.0%}, span check "
                f"{t.get('span_check', 0) / total:.0%} ({d.get('span_primes', '?')} primes of "
                f"{d.get('span_prime_bits', '?')} bits for {bound} bound bits"
                + (f", Hadamard's {had}" if had and had != bound else "") + ")")
    return "skipped: " + p["exact_skipped"] if "exact_skipped" in p else "-"


def sweep_section(sweep: dict) -> list[str]:
    """The table of ``rank_sweep.json`` (benchmarks/bench_rank_sweep.py)."""
    unit = "CPU seconds" if _cpu(sweep) else "seconds (wall)"
    L = ["## The certified rank at every rank (`bench_rank_sweep.py`)", "",
         "n x n integer matrices as float64: `small` = `U V` with factor entries in [-8, 8), `12bit` = "
         "entries in [-2^12, 2^12), planted rank r; `cube` = the kernel `(1 + x.z)^d` on {0,1}^m. "
         f"In-process medians of interleaved runs ({unit}, one BLAS thread): `numpy.linalg.matrix_rank` "
         "(SVD), `scipy.linalg.qr(pivoting=True)` (QRCP; both unverified floats), and "
         "`solvers.exact.exact_rank` with the exact upper bound and with the Freivalds upper bound "
         "(the lower bound is exact in both). End to end, each a fresh process, medians of interleaved "
         "runs: a script loading the file and running `matrix_rank`; `certify rank M.npy "
         "--upper-bound MODE --out C.json` (reading, hashing, the producer, its own check run, "
         "writing) and `certify verify C.json` (re-derives everything from the file). The exact mode "
         f"is skipped where its predicted work exceeds {sweep.get('exact_work_limit', 0):.3g} "
         f"multiply-adds. Machine: {sweep.get('machine', '')}.", "",
         "| n | matrix | r | SVD | QRCP | exact | Freivalds | Freivalds / SVD | exact rank | "
         "float ranks (SVD, QRCP) | SVD e2e | `rank` exact | `verify` | `rank` Freivalds | "
         "`verify` | exact e2e / SVD e2e | Freivalds e2e / SVD e2e | exact in process: where the time goes |",
         "|" + "---|" * 18]
    for p in _ordered(sweep):
        m = p["median_s"]
        f = lambda k: f"{m[k]:.2f}" if k in m else "-"                           # noqa: E731
        g = lambda k: f"{p[k]:.2f}" if k in p else "-"                           # noqa: E731
        ex = p.get("exact") or p.get("freivalds") or {}
        ratio = f"**{m['freivalds'] / m['svd']:.2f}**" if "freivalds" in m and "svd" in m else "-"
        e2e = {mode: f"**{p[f'{mode}_cli_s'] / p['svd_e2e_s']:.2f}**"
               if f"{mode}_cli_s" in p and p.get("svd_e2e_s") else "-" for mode in ("exact", "freivalds")}
        L.append(f"| {p['n']} | {p['kind']} | {p['planted']} | {f('svd')} | {f('qrcp')} | {f('exact')} | "
                 f"{f('freivalds')} | {ratio} | {ex.get('rank', '-')} | {p['svd_rank']}, {p['qrcp_rank']} | "
                 f"{g('svd_e2e_s')} | {g('exact_cli_s')} | {g('exact_verify_s')} | {g('freivalds_cli_s')} | "
                 f"{g('freivalds_verify_s')} | {e2e['exact']} | {e2e['freivalds']} | {_where(p)} |")
    L += ["", "![time vs r](rank_time_vs_r.png)", ""]
    return L


def eps_rank_section(res: dict) -> list[str]:
    """The table of ``eps_rank.json`` (benchmarks/bench_eps_rank.py)."""
    L = ["## Certified eps-rank at r in the hundreds (`bench_eps_rank.py`)", "",
         f"Performer-like factor kernels (`relu(E W) + 1e-3`, {res['tokens']:,} tokens, r features; the "
         "spectrum shape of a `Performer(dim=512, heads=8, generalized_attention=True)` head, r = 266). "
         "Ours: the producer's eps-rank claim from the exact Grams (the count by a verified float "
         "congruence, `solvers.congruence`, and for r <= 128 certified enclosures of every singular value; "
         "the exact characteristic polynomial only where floats cannot decide) and the checker's "
         "re-derivation of it (Grams taken as stated, so its PSD test of both Grams is included). "
         f"Baseline: {res['baseline']}. Previous: the exact characteristic polynomial (Descartes' rule, Arb "
         "enclosures), producer and checker. CPU seconds, one BLAS thread, medians of "
         f"{res['reps']} interleaved runs.", "",
         "| r | eps | k | method | producer s | checker s | numpy s | producer / numpy | checker / numpy "
         "| previous producer s | previous checker s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        prev = (f"{r['previous_producer_s']:.2f} | {r['previous_checker_s']:.2f}"
                if "previous_producer_s" in r else "- | -")
        L.append(f"| {r['r']} | {r['eps']} | {r['k']} | {r['method']} | {r['producer_s']:.3f} | "
                 f"{r['checker_s']:.3f} | {r['numpy_s']:.4f} | **{r['producer_ratio']:.0f}** | "
                 f"**{r['checker_ratio']:.0f}** | {prev} |")
    bar = res["bar"]
    met = all(r["producer_s"] < bar["cpu_s"] and r["checker_s"] < bar["cpu_s"]
              for r in res["rows"] if r["r"] == bar["r"])
    L += ["", f"Bar: at r = {bar['r']} producer and checker each under {bar['cpu_s']:.0f} CPU s: "
          f"{'met' if met else 'MISSED'}. Load average at the end of the run: {_load_str(res['loadavg_end'])}.", ""]
    return L


def factor_files_section(res: dict) -> list[str]:
    """The table of ``factor_files.json`` (benchmarks/bench_factor_files.py)."""
    L = ["## Factor files end to end (`bench_factor_files.py`)", "",
         "`certify rank F.npz --eps 1/1000` and `certify verify` on float32 factor files (`phi_q`, "
         "`phi_k`, 20,000 tokens x r) against numpy's SVD of the product in factored form (QR of both "
         "factors, SVD of the r x r product; unverified). `performer`: `relu(E W) + 1e-3`, full rank, "
         "the float congruence decides; `low-rank`: `E W` (64-dim `E`) rounded to float32, whose r - 64 "
         "rounding-scale singular values sit near eps: binary64 cannot decide, the arb-ball congruence "
         "does. The eps-rank claim's producer time is read from the certificate (wall clock, so it "
         "includes waiting for a loaded machine); the commands' CPU "
         "seconds include reading, hashing, the exact Grams, the exact rank claim, the producer's own "
         "check and Python's start. `verify` re-derives the stated Grams from the present file "
         "(no `trusted:` left). One BLAS thread; a shared 2-core machine.", "",
         "| kind | r | k (numpy) | method | numpy SVD s | eps-rank claim s (/ SVD) | `certify rank` s (/ SVD), "
         "exit | `verify` s (/ SVD), exit |", "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        L.append(f"| {r['kind']} | {r['r']} | {r['k']} ({r['numpy_k']}) | {r['method']} | {r['numpy_svd_s']:.2f} | "
                 f"{r['eps_rank_claim_s']:.2f} (**{r['eps_rank_over_svd']:.1f}**) | {r['rank_cmd']['cpu_s']:.1f} "
                 f"({r['rank_cmd_over_svd']:.1f}), {r['rank_cmd']['rc']} | {r['verify_cmd']['cpu_s']:.1f} "
                 f"({r['verify_over_svd']:.1f}), {r['verify_cmd']['rc']} |")
    note = f" Run: {res['command']}." if res.get("command") else ""
    return L + ["", f"Load average at the end of the run: {_load_str(res['load_average'])}.{note}", ""]


def page_sweep_table(sweep: dict) -> list[str]:
    """The rank sweep's table for ``docs/benchmarks.md`` (a subset of the columns)."""
    unit = "CPU s" if _cpu(sweep) else "s"
    L = [f"| n | matrix | r | SVD {unit} | exact {unit} | Freivalds {unit} | SVD e2e {unit} | "
         f"`rank` exact e2e / `verify` {unit} | `rank --upper-bound freivalds` e2e / `verify` {unit} | "
         "exact e2e / SVD e2e | Freivalds e2e / SVD e2e | default (`auto`) e2e / SVD e2e: its choice |",
         "|" + "---|" * 12]
    for p in _ordered(sweep):
        m = p["median_s"]
        f = lambda k: f"{m[k]:.2f}" if k in m else "-"                           # noqa: E731

        def pair(mode: str) -> str:
            if f"{mode}_cli_s" not in p:
                return "skipped (predicted work)" if mode == "exact" and "exact_skipped" in p else "-"
            return f"{p[f'{mode}_cli_s']:.2f} / {p[f'{mode}_verify_s']:.2f}"

        def ratio(mode: str) -> str:
            if f"{mode}_cli_s" not in p or not p.get("svd_e2e_s"):
                return "-"
            return f"**{p[f'{mode}_cli_s'] / p['svd_e2e_s']:.2f}**"
        choice = ((p.get("auto") or {}).get("details") or {}).get("upper_auto", {}).get("choice")
        auto = f"{ratio('auto')}: {choice}" if choice and ratio("auto") != "-" else "-"
        L.append(f"| {p['n']} | {p['kind']} | {p['planted']} | {f('svd')} | {f('exact')} | {f('freivalds')} | "
                 f"{p['svd_e2e_s']:.2f} | {pair('exact')} | {pair('freivalds')} | {ratio('exact')} | "
                 f"{ratio('freivalds')} | {auto} |" if "svd_e2e_s" in p else
                 f"| {p['n']} | {p['kind']} | {p['planted']} | {f('svd')} | {f('exact')} | {f('freivalds')} | "
                 "- | - | - | - | - | - |")
    return L


def page_summary_table(folder: Path | None = None) -> list[str]:
    """One row per result file for ``docs/benchmarks.md``: what, ours, the baseline of
    the same run, the ratio."""
    rank, tr, based, par = (_load(f, folder) for f in ("rank.json", "transcript.json", "based.json",
                                                       "parallel.json"))
    L = ["| what | ours | baseline (same run) | ratio |", "|---|---|---|---|"]
    if rank and rank.get("matrix"):
        rows = sorted(rank["matrix"], key=lambda r: r["n"])
        u = _unit(rank)
        ns = " / ".join(str(r["n"]) for r in rows)
        L.append(f"| certified exact rank, planted rank {rows[0]['planted']}, n = {ns} (proof of both bounds, "
                 "float -> integer conversion included; `certify verify` re-derives it from the file, exit "
                 + "/".join(str(r["verify_exit"]) for r in rows) + ") | "
                 + " / ".join(f"{r['exact_median_s']:.2f}" for r in rows) + f" {u} | `numpy.linalg.matrix_rank` "
                 + " / ".join(f"{r['numpy_median_s']:.2f}" for r in rows) + f" {u} | "
                 + " / ".join(f"**{r['ratio']:.2f}**" for r in rows) + " |")
    if tr and tr.get("cases"):
        c = tr["cases"][0]
        L.append(f"| transcript, {c['case']}: {c['assignments']:,} assignments, every one decided exactly | "
                 f"{c['certified_cpu_s']:.2f} CPU s" + (f"; the command {c['command_cpu_s']:.1f} CPU s, torch "
                                                        f"imported: {c['command_imports_torch']}"
                                                        if "command_cpu_s" in c else "")
                 + f" | flop limit {c['flops_per_assignment']:,} flops x {c['assignments']:,} at "
                   f"{c['gemm_gflops']:.1f} GFlop/s: {c['limit_s']:.3f} s | **{c['fraction_of_limit']:.1%}** "
                   "of the limit |")
        for c in tr["cases"][1:]:
            L.append(f"| transcript, {c['case']} (general path) | {c['certified_cpu_s']:.1f} CPU s | float64 "
                     f"search (proposes only) {c['float_search_cpu_s']:.1f} CPU s | "
                     f"{c['certified_cpu_s'] / c['float_search_cpu_s']:.1f} |")
    if based:
        v = based["verdicts"]
        b = based["baseline"]
        L.append(f"| Based head, {b['features']} features, {b['tokens']:,} tokens: "
                 + ", ".join(f"{k} {c['verdict']}" for k, c in v.items())
                 + f" | `certify checkpoint` {based['certify_cpu_s']:.1f} CPU s, `certify verify` "
                   f"{based['verify_cpu_s']:.1f} CPU s | float64 answers, unverified: {b['cpu_s']:.1f} CPU s | "
                   f"{based['ratio_cpu']:.2f} (CPU) |")
    eps = _load("eps_rank.json", folder)
    if eps and eps.get("rows"):
        rows = sorted((r for r in eps["rows"] if r["eps"] == "1/1000"), key=lambda r: r["r"])
        rs = " / ".join(str(r["r"]) for r in rows)
        L.append(f"| certified eps-rank of a performer-like head ({eps['tokens']:,} tokens, eps = 1/1000), r = {rs}: "
                 "verified float congruence, exact only near eps | producer "
                 + " / ".join(f"{r['producer_s']:.3f}" for r in rows) + ", checker "
                 + " / ".join(f"{r['checker_s']:.3f}" for r in rows) + " CPU s | numpy's float SVD count "
                 "(unverified) " + " / ".join(f"{r['numpy_s']:.4f}" for r in rows) + " CPU s | "
                 + " / ".join(f"{r['producer_ratio']:.0f}" for r in rows) + " |")
    L += realsize_rows(_load("realsize.json", folder))
    L += layers_rows(_load("layers.json", folder))
    rows = [r for r in (par or {}).get("rows", []) if "one_process_s" in r]
    if rows:
        L.append(f"| sweeps with --workers {rows[0]['workers']} ("
                 + " / ".join(r["task"] + (" [Ray]" if r.get("ray_started") else
                                            " [forked]" if r.get("forked") else " [in process]")
                              for r in rows) + ") | "
                 + " / ".join(f"{r.get('workers_s', r.get('ray_s', 0.0)):.1f}" for r in rows)
                 + " s | one process " + " / ".join(f"{r['one_process_s']:.1f}" for r in rows) + " s | "
                 + ("claims and rows identical" if all(r["identical"] for r in rows) else "NOT identical") + " |")
    return L


def _weights(res: dict, m: dict | None = None) -> str:
    """What a real-size model's weights are: briefly trained (its ``trained`` summary), else
    ``realsize.json``'s ``weights`` (earlier files re-drew them)."""
    t = (m or {}).get("trained")
    if t:
        return (f"the libraries' own initialisation trained {t['steps']} steps on a synthetic corpus, "
                f"loss {t['loss_first']:.2f} -> {t['loss_last']:.2f}")
    return (res.get("weights") or "weights re-drawn at a trained scale").split(";")[0]


def realsize_rows(res: dict | None) -> list[str]:
    """One row per model of ``realsize.json``: ``certify checkpoint`` (every head of layer 0)
    and ``verify --replay-extraction`` against the torch float32 forward of the same feature maps."""
    if not res or not res.get("models"):
        return []
    out = []
    for m in res["models"]:
        b, c, rp = m["baseline"], m["checkpoint"], m.get("replay") or {}
        out.append(f"| real-size checkpoint `{m['model']}` ({_weights(res, m)}, {b.get('heads')} heads of layer 0, "
                   f"{b.get('tokens', 0):,} tokens): certify exit {c['rc']}, replay exit {rp.get('rc')} | "
                   f"`certify checkpoint` {c['cpu_s']:.1f} CPU s (peak {c['peak_rss_mb']:.0f} MB), "
                   f"`verify --replay-extraction` {rp.get('cpu_s', float('nan')):.1f} CPU s | torch float32 "
                   f"forward of the feature maps {b.get('torch_float32_s')} CPU s | "
                   f"**{m.get('checkpoint_ratio_float32')}** / **{m.get('replay_ratio_float32')}** |")
    return out


def layers_rows(res: dict | None) -> list[str]:
    """One row per model of ``layers.json``: every head of every layer on stated sequences,
    ``certify checkpoint`` and ``verify --replay-extraction`` against fla's own float32 forward
    of the whole model on the same ids."""
    if not res or not res.get("rows"):
        return []
    out = []
    for m in res["rows"]:
        c, rp, b = m["checkpoint"], m.get("replay") or {}, m.get("baseline") or {}
        out.append(f"| every layer of `{m['model']}` ({res['layers']} layers, hidden {res['hidden']}, "
                   f"{m.get('heads_certified')} heads, library initialisation) on {m['sequences']} "
                   f"({b.get('tokens', 0):,} positions): certify exit {c['rc']}, replay exit {rp.get('rc')} | "
                   f"`certify checkpoint` {c['cpu_s']:.1f} CPU s (peak {c['peak_rss_mb']:.0f} MB), "
                   f"`verify --replay-extraction` {rp.get('cpu_s', float('nan')):.1f} CPU s (peak "
                   f"{rp.get('peak_rss_mb', float('nan')):.0f} MB) | fla's float32 forward of the whole model "
                   f"{b.get('forward_float32_s')} CPU s | **{m.get('checkpoint_ratio')}** / "
                   f"**{m.get('replay_ratio')}** |")
    return out


#: the generated blocks of ``docs/benchmarks.md``
MARKS = {"summary": ("<!-- bench summary: written by benchmarks/report.py from reports/bench/*.json -->",
                     "<!-- end bench summary -->"),
         "sweep": ("<!-- rank sweep table: written by benchmarks/report.py from reports/bench/rank_sweep.json -->",
                   "<!-- end rank sweep table -->")}
#: the generated block of ``docs/layouts.md``: the feature-map table
LAYOUTS_MARKS = {"feature maps": ("<!-- feature maps: written by benchmarks/report.py --pages from "
                                  "models/feature_table.py -->", "<!-- end feature maps -->")}
#: the generated block of the top-level README
README_MARKS = {"headline": ("<!-- headline figures: written by benchmarks/report.py from reports/ -->",
                            "<!-- end headline figures -->")}


def page_blocks(folder: Path | None = None) -> dict[str, str]:
    """The blocks of ``docs/benchmarks.md``, rendered from the result files."""
    sweep = _load("rank_sweep.json", folder)
    return {"summary": "\n".join(page_summary_table(folder)),
            "sweep": "\n".join(page_sweep_table(sweep)) if sweep and sweep.get("points") else ""}


def layouts_blocks() -> dict[str, str]:
    """The block of ``docs/layouts.md``: the feature-map table (:func:`models.feature_table.markdown`)."""
    from models.feature_table import markdown
    return {"feature maps": markdown()}


def suite_times_line(path: Path = SUITE_TIMES) -> str:
    """The default suite's time as ``make suite-times`` last measured it, or what to run."""
    if not path.is_file():
        return ("- The default suite's time: not measured in this tree yet (`make suite-times` writes "
                "`reports/suite-times.md`).")
    s = json.loads(path.read_text())
    scope = "the default suite" if s["tests"] == ["tests"] else "the tests " + " ".join(s["tests"])
    return (f"- `make suite-times` ({scope}): {s['passed']:,} tests passed in {s['pytest_s']:.0f} s of "
            f"pytest time, {s['cpu_s']:.0f} CPU s, on {s['cores']} cores (load average "
            f"{_load_str(s['loadavg_start'])} at the start); the 15 slowest tests"
            + (" and the 15 that use the most CPU seconds" if s.get("most_cpu") else "")
            + " are in [`reports/suite-times.md`](reports/suite-times.md).")


def readme_blocks(folder: Path | None = None, suite: Path = SUITE_TIMES) -> dict[str, str]:
    """The README's headline figures: the exact rank against numpy at the largest n of
    ``rank.json``, and the suite's time from ``reports/suite-times.json``."""
    L = []
    rank = _load("rank.json", folder)
    if rank and rank.get("matrix"):
        r = max(rank["matrix"], key=lambda r: r["n"])
        u = _unit(rank)
        L.append(f"- The certified exact rank of an n = {r['n']:,} float64 matrix of planted rank "
                 f"{r['planted']} (both bounds proved, `certify verify` exit {r['verify_exit']}): "
                 f"{r['exact_median_s']:.2f} {u} against numpy's unverified `matrix_rank` "
                 f"{r['numpy_median_s']:.2f} {u}, ratio ours / numpy {r['ratio']:.2f} "
                 "([`reports/bench/rank.json`](reports/bench/rank.json)).")
    real = _load("realsize.json", folder)
    for m in (real or {}).get("models", []):
        L.append(f"- A real-size checkpoint ({m['model']}, {_weights(real, m)}, {m['baseline'].get('heads')} heads "
                 f"of layer 0, {m['baseline'].get('tokens', 0):,} tokens): `certify checkpoint` "
                 f"{m['checkpoint_ratio_float32']}x and `verify --replay-extraction` "
                 f"{m.get('replay_ratio_float32')}x the CPU time of the torch float32 forward of the same "
                 "feature maps ([`reports/bench/realsize.json`](reports/bench/realsize.json)).")
    L.append(suite_times_line(suite))
    return {"headline": "\n".join(L)}


def blocks_in(text: str, marks: dict[str, tuple[str, str]]) -> dict[str, str | None]:
    """The generated blocks as a page holds them (None where a marker is missing)."""
    out: dict[str, str | None] = {}
    for key, (a, b) in marks.items():
        m = re.search(re.escape(a) + r"\n(.*?)\n?" + re.escape(b), text, re.S)
        out[key] = m.group(1).strip("\n") if m else None
    return out


def write_blocks(path: Path, blocks: dict[str, str], marks: dict[str, tuple[str, str]]) -> None:
    """Replace each marked block of ``path`` (atomically: a temporary file, then a rename)."""
    text = path.read_text()
    for key, block in blocks.items():
        a, b = marks[key]
        if a not in text or b not in text:
            raise SystemExit(f"{path.name}: the markers of the {key} block are missing")
        text = re.sub(re.escape(a) + r".*?" + re.escape(b), lambda _: f"{a}\n{block}\n{b}", text, flags=re.S)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_pages() -> None:
    """The generated blocks of ``docs/benchmarks.md``, of the README and of
    ``docs/layouts.md``, and the figures of ``brackets.md`` and ``docs/paper.md``."""
    write_blocks(BENCH_PAGE, page_blocks(), MARKS)
    print(f"wrote the benchmark tables of {BENCH_PAGE.relative_to(ROOT)}")
    write_blocks(README, readme_blocks(), README_MARKS)
    print(f"wrote the headline figures of {README.relative_to(ROOT)}")
    write_blocks(LAYOUTS_PAGE, layouts_blocks(), LAYOUTS_MARKS)
    print(f"wrote the feature-map table of {LAYOUTS_PAGE.relative_to(ROOT)}")
    from page_figures import write_pages as write_figures
    for page in write_figures():
        print(f"wrote the figures of {page.relative_to(ROOT)}")


def _short(assumption: str) -> str:
    """An assumption name with a temporary folder cut to the file name."""
    kind, _, rest = assumption.partition(":")
    return f"{kind}:{Path(rest).name}" if "/" in rest else assumption


def _load_str(v) -> str:
    return ", ".join(f"{x:.2f}" for x in v)


def write_report() -> Path:
    rank, tr, based, par = (_load(f) for f in ("rank.json", "transcript.json", "based.json",
                                              "parallel.json"))
    L = ["# Benchmarks: exact at float speed", "",
         "Made by `make bench` (the `benchmarks/bench_*.py` scripts, then `benchmarks/report.py`, which "
         "draws this page and the plot from the JSON files beside it; `python benchmarks/report.py` "
         "redraws them without re-running). Every ratio compares the project with a named baseline "
         "measured in the same run, one BLAS (and torch) thread each; the machine is a shared 2-core "
         "box, so load averages are printed with each result and the ratios, not the seconds, are "
         "the figures to compare.", ""]
    if rank:
        d0 = sorted(rank["matrix"], key=lambda r: r["n"])[0]["details"]
        L += ["## Certified exact rank vs `numpy.linalg.matrix_rank`", "",
              f"Planted rank {rank['matrix'][0]['planted']}: `A = (U V) 2^-20`, `U`, `V` with 12-bit integer "
              "entries, as float64. Ours: `solvers.exact.exact_rank(dyadic(A))`, the lossless "
              "float -> integer conversion, the canonical minor modulo a small prime by blocked "
              "elimination on a random projection (lower bound, checked nonsingular), and the exact "
              f"column-span witness checked modulo {d0.get('span_primes', '?')} primes of "
              f"{d0.get('span_prime_bits', '?')} bits (at the smallest n) whose product exceeds the smaller "
              "of the Hadamard bound of the bordered (r+1)-minors and the bound from `|det M|` and a "
              f"proved `||M^-1||` (upper bound). Medians of interleaved runs, {_unit(rank)}. The command "
              "`certify rank F.npy --out C.json` adds reading, hashing and the producer's own run of "
              "the independent checker; `certify verify C.json` re-reads the file and re-derives the "
              "rank with its own code (exit 0: no assumption left).", "",
              "| n | numpy s | certified s | ratio | bar | rank | `certify rank` s | `certify verify` s, exit |",
              "|---|---|---|---|---|---|---|---|"]
        for r in sorted(rank["matrix"], key=lambda r: r["n"]):
            bar = rank["bars"].get(str(r["n"]))
            met = "-" if bar is None else (f"<= {bar} " + ("met" if r["ratio"] <= bar else "MISSED"))
            L.append(f"| {r['n']} | {r['numpy_median_s']:.2f} ({_load_str(r['numpy_s'])}) | "
                     f"{r['exact_median_s']:.2f} ({_load_str(r['exact_s'])}) | **{r['ratio']:.2f}** | {met} | "
                     f"[{r['exact_lower']}, {r['exact_upper']}] {r['verdict']} | {r['cli_s']:.1f} | "
                     f"{r['verify_s']:.1f}, {r['verify_exit']} |")
        L += ["", f"Load average at the end of the run: {_load_str(rank['loadavg_end'])}.", "",
              "![time vs n](rank_time_vs_n.png)", ""]
        if rank.get("cube"):
            L += ["Factor form on the whole cube (r = 64, `exp(+-W x)` float32 features; "
                  "`bench_rank.py --cube`):", "", "| m | exact s | float64 s | ratio | peak RSS MB | dense matrix GiB |",
                  "|---|---|---|---|---|---|"]
            for c in rank["cube"]:
                e, f = c["exact"], c["float"]
                L.append(f"| {c['m']} | {e['seconds']:.1f} | {f['seconds']:.1f} | {e['seconds'] / f['seconds']:.2f} "
                         f"| {e['maxrss_mb']:.0f} | {c['dense_gib']:,.0f} |")
            L.append("")
    sweep = _load("rank_sweep.json")
    if sweep and sweep.get("points"):
        L += sweep_section(sweep)
    if tr:
        L += ["## Certified transcript enumeration vs the flop limit", "",
              "`certify transcript --M 14 --s 1 --h 7 --q 20 --bits 1` (the built-in injective model, "
              "2^20 assignments, every one decided exactly: proved, injective). The flop limit is the "
              "float64 GEMM rate of one core measured in the same run (median of runs interleaved "
              "with ours) times the flops one assignment needs (value and radius products, counted "
              "from the shapes). Baseline: the float64 hashing search (proposes only).", "",
              "| case | assignments | certified CPU s | float search CPU s | GEMM GFlop/s | flop limit s | fraction of the limit |",
              "|---|---|---|---|---|---|---|"]
        for c in tr["cases"]:
            L.append(f"| {c['case']} | {c['assignments']:,} | {c['certified_cpu_s']:.2f} | "
                     f"{c['float_search_cpu_s']:.1f} | {c['gemm_gflops']:.1f} | {c['limit_s']:.3f} | "
                     f"**{c['fraction_of_limit']:.1%}** |")
        first = tr["cases"][0]
        if "command_wall_s" in first:
            L += ["", f"The command itself: {first['command_wall_s']:.1f} s wall, {first['command_cpu_s']:.1f} "
                  f"CPU s (including the checker's exact integer replay of every assignment), torch "
                  f"imported: {first['command_imports_torch']}. Bar: at least {tr['bar']:.0%} of the limit "
                  f"for q = 20 ({'met' if first['fraction_of_limit'] >= tr['bar'] else 'MISSED'}). The "
                  "two-layer model goes through the general path (no one-layer tables).", ""]
    if based:
        c = based["verdicts"]
        b = based["baseline"]
        L += ["## A 153-feature Based head on the whole 16-bit cube", "",
              "fla's `BasedLinearAttention(hidden_size=16, feature_dim=16)` (taylor_exp: 1 + 16 + 136 "
              "features, kernel `1 + s + s^2/2`), weights N(0, 0.5^2), saved as a state dict: its tokens "
              "are the 65,536 points of {0,1}^16 (2^32 pairs). `certify checkpoint` proves the exact rank "
              "(exact Gram core), the eps-rank (Descartes on the exact characteristic polynomial; the "
              "Grams are PSD by construction) and nonnegativity (the quadratic-kernel lemma on the "
              "features' structure: alpha >= A_q A_k - 1/(4 c2) - rounding terms > 0), then "
              "`certify verify` re-derives every claim from the certificate. Baseline: the float64 "
              "answer on the same features (rank, eps-rank, minimum over all 2^32 pairs), unverified.", "",
              "| claim | verdict | method |", "|---|---|---|"]
        for kind, v in c.items():
            L.append(f"| {kind} | {v['verdict']}" + (f" ({v['value']})" if v["value"] is not None else "")
                     + f" | {v['method'] or 'exact'} |")
        L += ["", "| step | wall s | CPU s | bar |", "|---|---|---|---|",
              f"| `certify checkpoint` | {based['certify_s']:.1f} | {based['certify_cpu_s']:.1f} | "
              f"< {based['bars']['certify_s']:.0f} s {'met' if based['certify_s'] < based['bars']['certify_s'] else 'MISSED'} |",
              f"| `certify verify` (exit {based['verify_exit']}) | {based['verify_s']:.1f} | "
              f"{based['verify_cpu_s']:.1f} | < {based['bars']['verify_s']:.0f} s "
              f"{'met' if based['verify_s'] < based['bars']['verify_s'] else 'MISSED'} |",
              f"| float64 baseline (rank {b['float_rank']}, eps-rank {b['float_eps_rank']}"
              + (f", min alpha {b['float_min_alpha']:.3f}" if b.get("float_min_alpha") is not None else "")
              + f") | {b['wall_s']:.1f} | {b['cpu_s']:.1f} | - |", "",
              f"Ratio certified / float64 (CPU): {based['ratio_cpu']:.2f}. `verify` holds"
              + (f", assuming {', '.join(_short(a) for a in based['verify_assumptions'])}"
                 if based["verify_assumptions"] else "")
              + " (the extraction by torch, and the summaries of 10 million feature entries, which are "
                "not embedded).", ""]
    eps = _load("eps_rank.json")
    if eps:
        L += eps_rank_section(eps)
    ff = _load("factor_files.json")
    if ff:
        L += factor_files_section(ff)
    if par:
        L += ["## Sweeps with --workers vs one process", "",
              "Wall seconds in one run (`benchmarks/bench_parallel.py`); the engine's line says where the "
              "tasks ran and why.", "",
              "| task | 1 process s | --workers s | speed-up | workers | engine | identical |",
              "|---|---|---|---|---|---|---|"]
        for r in par["rows"]:
            if "ray_start_s" in r:                    # the engines' start-up rows
                L.append(f"| {r['task']} | | {r['ray_start_s']:.1f} | | | | |")
                continue
            if "fork_start_s" in r:
                L.append(f"| {r['task']} | | {r['fork_start_s']:.3f} | | | | |")
                continue
            ws = r.get("workers_s", r.get("ray_s", 0.0))
            L.append(f"| {r['task']} | {r['one_process_s']:.1f} | {ws:.1f} | **{r['one_process_s'] / ws:.2f}** | "
                     f"{r['workers']} | {r.get('engine', 'Ray')} | {'yes' if r['identical'] else 'NO'} |")
        L.append("")
    path = OUT / "README.md"
    path.write_text("\n".join(L))
    if rank:
        plot_rank(rank, OUT / "rank_time_vs_n.png")
    if sweep and sweep.get("points"):
        plot_rank_sweep(sweep, OUT / "rank_time_vs_r.png")
    return path


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["--pages"]):
        raise SystemExit("usage: python benchmarks/report.py [--pages]")
    if not sys.argv[1:]:
        print(f"wrote {write_report().relative_to(ROOT)}")
    write_pages()
