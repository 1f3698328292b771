"""``report.tex``: the claims as a paper-ready LaTeX fragment.

The fragment is meant for ``\\input{DIR/report.tex}`` in a paper whose preamble
loads ``booktabs`` and ``graphicx``, from any folder, with no macro to define;
several reports can be input into one paper. It holds

* a ``table`` (caption, label ``tab:certify-NAME-claims``, booktabs rules,
  ``p`` columns) of every claim: certificate, claim kind, statement with its
  mathematics typeset and long exact numbers rounded, the verdict, and a method
  mark ``M1``, ``M2``... ;
* a ``table`` of the methods (``tab:certify-NAME-methods``), one line each;
* an appendix ``table`` of the exact values behind every rounded number
  (``tab:certify-NAME-exact``);
* a ``figure`` per figure file (``fig:certify-NAME-FIGURE``).

``NAME`` is the report's name (its folder's name, letters, digits and ``-``):
two reports in one paper have distinct labels. Every table's columns are
``p`` columns whose widths, with the space between them, add up to
``\\linewidth``. The figures are found beside ``report.tex``: its folder is
LaTeX's ``\\CurrentFilePath`` (the path given to ``\\input``, relative to the
paper's folder; LaTeX 2019-10 and later), read once at the top of the fragment,
so nothing global (``\\graphicspath``) is changed. A paper may still define
``\\certifyreportdir`` (the folder, with a trailing slash) to override it, as
earlier releases required; a path with spaces needs that override in quotes.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Callable, Sequence

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
        "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}

#: (substring of a method, one-line explanation); first match wins
METHODS: list[tuple[str, str]] = [
    ("descartes_charpoly_core", "singular values enclosed exactly: the characteristic polynomial "
     "of the small Gram core is computed over Q and its roots above and below eps^2 are counted "
     "by Descartes' rule of signs"),
    ("inertia_congruence_core", "singular values above eps counted exactly by a verified "
     "floating-point congruence: the inertia of [[GK, I], [I, GQ/eps^2]] read off a diagonally "
     "dominant X^T Z X with rigorous rounding-error bounds (Sylvester's law of inertia); the exact "
     "characteristic polynomial runs only where floats cannot decide"),
    ("inertia_balls_core", "singular values above eps counted exactly by the same congruence "
     "proved in arb ball arithmetic at 106 to 424 bits (a singular value too close to eps for "
     "binary64); the exact characteristic polynomial runs only where no precision decides"),
    ("closed form", "the paper's closed-form bound evaluated in exact integer and rational arithmetic"),
    ("Gram core", "rank over Q of PhiQ PhiK^T computed exactly as the rank of the small Gram "
     "product GQ GK"),
    ("modular", "rank over Q: a nonzero minor modulo random primes (lower bound) and an exact "
     "span or null-space witness (upper bound)"),
    ("Lemma 4 with per-pair", "Lemma 4 (rank >= t^2/||C||_F^2) on the row-normalized code matrix "
     "B[S,U], with per-pair ratios Lambda_SU"),
    ("every feature is >= 0", "nonnegativity read off the features: every feature value on every "
     "token is checked to be >= 0 exactly"),
    ("every scored position", "every scored position of every input evaluated in exact rational "
     "arithmetic"),
    ("Lemma 3 inequality", "Lemma 3's gap-domination inequality checked jump by jump in exact "
     "rationals; a failing jump names its input"),
    ("Lemma 3 chains", "infeasibility: Lemma 3 chains in the family bound the kernel's "
     "off-diagonal ratios, then Lemma 4 (or its nonnegative refinement) bounds the rank"),
    ("alternating LP", "witness search by alternating linear programs; a witness found is "
     "re-checked in exact arithmetic, otherwise the verdict is unknown"),
    ("one feature per query", "the explicit construction with one feature per query token, "
     "verified exactly on every input"),
    ("transcript", "Thm 9: transcripts counted against the (s+1)^q assignments; collisions "
     "are exhibited exactly"),
]

_GREEK = {"alpha": r"\alpha", "beta": r"\beta", "gamma": r"\gamma", "delta": r"\delta",
          "epsilon": r"\varepsilon", "eps": r"\varepsilon", "sigma": r"\sigma", "rho": r"\rho",
          "lambda": r"\lambda", "Lambda": r"\Lambda", "kappa": r"\kappa", "tau": r"\tau",
          "mu": r"\mu", "phi": r"\phi", "Phi": r"\Phi"}

_GROUP = r"\((?:[^()]|\([^()]*\))*\)"
_TOKEN = re.compile("|".join([
    r"(?P<norm>\|\|(?P<nv>[A-Za-z])\|\|_(?P<ns>\w)(?:\^(?P<np>\d+))?)",
    r"(?P<phiqk>\bPhi(?P<pq>[QK])\b(?:\^(?P<pqe>\w+))?)",
    r"(?P<that>\bt_hat\b)",
    rf"(?P<greek>\b(?P<gn>{'|'.join(sorted(_GREEK, key=len, reverse=True))})"
    rf"(?P<gs>_(?:\w+|{_GROUP}))?(?P<ga>{_GROUP})?(?:\^(?P<gp>\w+))?(?![A-Za-z]))",
    rf"(?P<sub>\b(?P<sb>[A-Za-z])_(?P<ss>[A-Za-z0-9]+|{_GROUP}))",
    r"(?P<pow>(?:\b\w+|\([^()]*\))\^(?P<pe>-?(?:\w+|<\w+,\w+>)))",
    r"(?P<ip><(?P<ia>\w+),(?P<ib>\w+)>)",
    r"(?P<times>\b(?P<t1>\d+) x (?P<t2>\d+)\b)",
    r"(?P<rel>(?<![\w.-])(?P<rl>[b-zB-HJ-Z]) (?P<ro><=|>=|!=|<|>|=) (?P<rr>-?\d+(?:/\d+)?|[A-Za-z])(?![\w/.(]))",
    r"(?P<frac>(?<![\w/.])(?P<fn>\d+)/(?P<fd>\d+)(?![\w/]))",
    r"(?P<op>(?<=\s)(?:<=|>=|!=|<|>|=)(?=\s))",
    r"(?P<bar>\|)",
]))
_OPS = {"<=": r"\le", ">=": r"\ge", "!=": r"\ne", "<": "<", ">": ">", "=": "="}


def tex_escape(s: Any) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_TEX.get(ch, ch) for ch in str(s))


def _math_inner(s: str) -> str:
    """ASCII mathematics inside a group -> LaTeX math (no ``$``)."""
    out, pos = [], 0
    for m in _TOKEN.finditer(s):
        out.append(_plain_math(s[pos:m.start()]))
        out.append(_atom(m, math=True))
        pos = m.end()
    out.append(_plain_math(s[pos:]))
    return "".join(out)


def _plain_math(s: str) -> str:
    return "".join({"_": r"\_", "^": r"\^{}", "&": r"\&", "%": r"\%", "#": r"\#", "{": r"\{",
                    "}": r"\}", "~": r"\sim{}", "\\": r"\backslash{}"}.get(ch, ch) for ch in s)


def _group(g: str | None) -> str:
    if not g:
        return ""
    return "(" + _math_inner(g[1:-1]) + ")"


#: the alternatives of the atom pattern, in the order they are tried
_ATOMS = ("norm", "phiqk", "that", "greek", "sub", "pow", "ip", "times", "rel", "frac", "op")


def _atom(m: re.Match, math: bool = False) -> str:
    k = next((name for name in _ATOMS if m.group(name)), "bar")
    if k == "norm":
        body = rf"\|{m.group('nv')}\|_{{{m.group('ns')}}}" + (f"^{{{m.group('np')}}}" if m.group("np") else "")
    elif k == "phiqk":
        body = rf"\Phi_{{{m.group('pq')}}}" + (f"^{{{m.group('pqe')}}}" if m.group("pqe") else "")
    elif k == "that":
        body = r"\hat t"
    elif k == "greek":
        sub = m.group("gs")
        sub_tex = ""
        if sub:
            sub_tex = "_{" + (_math_inner(sub[2:-1]) if sub[1] == "(" else _plain_math(sub[1:])) + "}"
        body = _GREEK[m.group("gn")] + sub_tex + _group(m.group("ga")) \
            + (f"^{{{m.group('gp')}}}" if m.group("gp") else "")
    elif k == "sub":
        ss = m.group("ss")
        body = m.group("sb") + "_{" + (_math_inner(ss[1:-1]) if ss.startswith("(") else ss) + "}"
    elif k == "pow":
        pe = m.group("pe")
        if "<" in pe:                                     # an inner product <x,z>
            pe = pe.replace("<", r"\langle ").replace(">", r"\rangle ")
        else:
            pe = _plain_math(pe)
        base = m.group("pow")[:m.group("pow").rindex("^")]
        body = _plain_math(base) + "^{" + pe + "}"
    elif k == "ip":
        body = rf"\langle {m.group('ia')},{m.group('ib')}\rangle"
    elif k == "times":
        body = f"{m.group('t1')} \\times {m.group('t2')}"
    elif k == "rel":
        body = f"{m.group('rl')} {_OPS[m.group('ro')]} {m.group('rr')}"
    elif k == "frac":
        body = _fraction(m.group("fn"), m.group("fd"))
    elif k == "op":
        body = _OPS[m.group("op")]
    else:
        body = "|"
    return body if math else f"${body}$"


def _fraction(num: str, den: str) -> str:
    if len(num) + len(den) > 8 and int(den) != 0:
        return rf"\approx {rounded(Fraction(int(num), int(den)))}"
    return f"{num}/{den}"


def rounded(q: Fraction | int | float, digits: int = 4) -> str:
    """A readable rounded number (the exact value belongs in the appendix)."""
    x = float(q)
    if x == 0:
        return "0"
    if abs(x) >= 1e6 or abs(x) < 1e-3:
        mant, exp = f"{x:.{digits - 1}e}".split("e")
        return rf"{mant} \times 10^{{{int(exp)}}}"
    return f"{x:.{digits}g}"


def tex_statement(text: str) -> str:
    """A claim's ASCII statement -> LaTeX text with its mathematics typeset."""
    if "{0,1}^m" in text:                      # the Boolean cube, as the renderer writes it
        return r"$\{0,1\}^m$".join(tex_statement(t) for t in text.split("{0,1}^m"))
    out, pos = [], 0
    for m in _TOKEN.finditer(text):
        out.append(tex_escape(text[pos:m.start()]))
        out.append(_atom(m))
        pos = m.end()
    out.append(tex_escape(text[pos:]))
    return "".join(out).replace("$$", "")


def long_numbers(text: str) -> list[str]:
    """The exact fractions in ``text`` that :func:`tex_statement` rounds."""
    return [f"{m.group('fn')}/{m.group('fd')}" for m in _TOKEN.finditer(text)
            if m.group("frac") and len(m.group("fn")) + len(m.group("fd")) > 8]


def _shortened(text: str, n: int = 80) -> str:
    """At most ``n`` characters, cut between words and never after an operator."""
    if len(text) <= n:
        return text
    cut = text[:n].rsplit(" ", 1)[0].rstrip(" <>=!(,;:+-*/")
    return cut + "..."


def explain(method: str) -> str:
    for key, line in METHODS:
        if key in method:
            return line
    return method


_TT = re.compile(r"\\texttt\{((?:[^{}\\]|\\.)*)\}")


def _breakable_tt(latex: str) -> str:
    """Let long file names in ``\\texttt`` break after ``/``, ``-``, ``.`` and ``_`` (a
    table column is narrow, and typewriter type is never hyphenated)."""
    def one(m: re.Match) -> str:
        t = m.group(1).replace("/", r"/\allowbreak{}").replace(".", r".\allowbreak{}")
        t = re.sub(r"(?<!\\)-", r"-\\allowbreak{}", t).replace(r"\_", r"\_\allowbreak{}")
        return r"\texttt{" + t + "}"
    return _TT.sub(one, latex)


def _breakable(label: str) -> str:
    """A name in a narrow column: it may break after ``-`` and ``_``, and each part may be
    hyphenated (``\\hspace{0pt}``: TeX hyphenates only a word that follows glue)."""
    return r"\hspace{0pt}" + tex_escape(label).replace("-", r"-\allowbreak\hspace{0pt}").replace(
        r"\_", r"\_\allowbreak\hspace{0pt}")


def _cell(text: str) -> str:
    """A narrow cell whose first word may be hyphenated too."""
    return r"\hspace{0pt}" + text


def _exact_params(c: dict) -> list[tuple[str, str]]:
    out = []
    for k, v in (c.get("parameters") or {}).items():
        if isinstance(v, str) and re.fullmatch(r"-?\d+/\d+", v) and len(v) > 9:
            out.append((k, v))
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**9:
            out.append((k, str(v)))
    return out


FIGURE_CAPTIONS = {
    "singular_values": "Certified enclosures of the singular values $\\sigma_i$ of each kernel "
                       "with an eps-rank claim; one line per threshold $\\varepsilon$.",
    "verdict_vs_rank": "Feasibility verdicts across the feature dimension $r$: proved infeasible, "
                       "proved feasible (exactly verified witness) and unknown.",
    "transcript_bits": "Transcript bits available against the $q\\log_2(s+1)$ bits needed (Thm 9).",
    "eps_rank_heads": "Certified eps-rank of every head by layer and head: the number of singular "
                      "values of the head's kernel above $\\varepsilon$ on the stated token set "
                      "(hatched: not proved).",
}


#: estimated text lines of one table float (a page, with the caption)
PAGE_LINES = 44
#: characters of a statement, and of a certificate's name, on one line of their columns (the
#: statement column is about 130 pt wide in a one-column article, the name's about 55 pt)
STATEMENT_CHARS, LABEL_CHARS = 28, 10


def label_name(name: str) -> str:
    """A report's name as it enters its labels: letters, digits and ``-`` (``report``
    when nothing is left)."""
    return re.sub(r"-+", "-", re.sub(r"[^A-Za-z0-9]+", "-", name)).strip("-") or "report"


#: the space on each side of a column (LaTeX's default is 6pt), set inside each table float
TABCOLSEP = "4pt"


def _cols(*widths: str) -> str:
    """``p`` columns whose widths (fractions of what is left of ``\\linewidth`` after the
    gaps between the columns, or fixed ``em``) add up to ``\\linewidth``; ``@{}`` at both
    ends. ``widths``: ``"0.2"`` (a fraction) or ``"2em"`` (fixed)."""
    fixed = "".join(f"-{w}" for w in widths if w.endswith("em"))
    gaps = f"-{2 * (len(widths) - 1)}\\tabcolsep"
    cols = []
    for w in widths:
        if w.endswith("em"):
            cols.append(f"p{{{w}}}")
        else:
            cols.append(f"p{{{w}\\dimexpr\\linewidth{gaps}{fixed}\\relax}}")
    return "@{}" + "".join(cols) + "@{}"


def _preamble(key: str, tab: Callable[[str], str]) -> list[str]:
    """The report's first lines: how to \\input it, where its figures are read, the macros."""
    return [
        f"% Made by certify.report (report {key}). \\input{{DIR/report.tex}} from any folder needs",
        "% \\usepackage{booktabs} and \\usepackage{graphicx}, nothing else. The figures are read",
        "% beside this file (LaTeX's \\CurrentFilePath); define \\certifyreportdir (this folder,",
        "% with a trailing /) only to override that. Labels: " + f"{tab('claims')}, {tab('methods')}, "
        f"{tab('exact')}, fig:certify-{key}-*.",
        "\\makeatletter",
        "\\@ifundefined{certifyreportdir}{%",
        "  \\@ifundefined{CurrentFilePath}{\\def\\CertifyReportHere{}}{%",
        "    \\edef\\CertifyReportHere{\\CurrentFilePath}%",
        "    \\ifx\\CertifyReportHere\\@empty\\else\\edef\\CertifyReportHere{\\CertifyReportHere/}\\fi}}%",
        "  {\\edef\\CertifyReportHere{\\certifyreportdir}}",
        "\\makeatother",
        "% statements use amsmath's \\tfrac and amssymb's \\mathbb; plain fallbacks otherwise",
        "\\providecommand{\\tfrac}[2]{{\\textstyle\\frac{#1}{#2}}}",
        "\\providecommand{\\mathbb}[1]{\\mathbf{#1}}",
    ]


def _pages(body: list, heights: list[float]) -> list[list]:
    """The claims table's rows in chunks of at most a page: a float never breaks across
    pages, so a long table goes into several floats."""
    chunks: list[list[tuple[bool, str, str]]] = []
    cur: list[tuple[bool, str, str]] = []
    used = 0.0
    for entry, h in zip(body, heights):
        if cur and used + h > PAGE_LINES:
            chunks.append(cur)
            cur, used = [], 0.0
        cur.append(entry)
        used += h
    if cur:
        chunks.append(cur)
    return chunks


def latex(rows: Sequence[tuple[str, int, dict]], fails: Callable[[str, int], bool],
          figures: Sequence[str] = (), name: str = "report") -> str:
    """``rows``: (certificate label, claim index, claim); ``fails(label, i)``: the
    claim fails the re-check; ``name``: the report's name in its labels."""
    key = label_name(name)
    tab = lambda what: f"tab:certify-{key}-{what}"  # noqa: E731
    methods: dict[str, int] = {}
    exact: list[tuple[str, str, str]] = []
    body: list[tuple[bool, str, str]] = []
    last: str | None = None
    heights: list[float] = []
    for label, i, c in rows:
        meth = c.get("method") or ""
        mark = ""
        if meth:
            methods.setdefault(meth, len(methods) + 1)
            mark = f"M{methods[meth]}"
        verdict = {"refuted": "REFUTED (false)"}.get(c["verdict"], c["verdict"]) \
            + (" (fails re-check)" if fails(label, i) else "")
        stmt = str(c.get("statement") or "")
        ref = f"{label} \\#{i}"
        for v in long_numbers(stmt):
            exact.append((ref, "statement", v))
        for name, v in _exact_params(c):
            exact.append((ref, name.replace("_", " "), v))
        new_cert = label != last
        last = label
        typeset = _breakable_tt(c.get("statement_latex") or tex_statement(stmt))  # the renderer's
        body.append((new_cert, f"{i} & {_cell(tex_escape(c['kind'].replace('_', ' ')))} & "
                               f"{_cell(typeset)} & {_cell(tex_escape(verdict))} & {mark} \\\\", label))
        heights.append(max(1, -(-len(stmt) // STATEMENT_CHARS), -(-len(label) // LABEL_CHARS))
                       + (0.4 if new_cert else 0))
    lines = _preamble(key, tab)
    chunks = _pages(body, heights)
    for k, chunk in enumerate(chunks):
        lines += ["\\begin{table}[htbp]", "\\centering\\small", f"\\setlength{{\\tabcolsep}}{{{TABCOLSEP}}}"]
        if k == 0:
            lines += [
                "\\caption{Certified claims. Verdicts: \\emph{proved} after an exact check, "
                "\\emph{refuted} by an exact counterexample, \\emph{unknown} otherwise. "
                f"Numbers are rounded (exact values in Table~\\ref{{{tab('exact')}}}); "
                f"methods M$k$ in Table~\\ref{{{tab('methods')}}}.}}",
                f"\\label{{{tab('claims')}}}"]
        else:
            lines += [f"\\caption{{Certified claims (continued, part {k + 1} of {len(chunks)}).}}",
                      f"\\label{{{tab('claims')}-{k + 1}}}"]
        lines += [
            "\\begin{tabular}{" + _cols("0.2", "1.4em", "0.15", "0.48", "0.17", "2.6em") + "}",
            "\\toprule",
            "Certificate & \\# & Claim & Statement & Verdict & Meth. \\\\",
            "\\midrule"]
        for j, (new_cert, row, label) in enumerate(chunk):
            if new_cert and j > 0:
                lines.append(r"\addlinespace")
            cell = _breakable(label) if new_cert else (f"{_breakable(label)} (cont.)" if j == 0 else "")
            lines.append(f"{cell} & {row}")
        lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    lines += [
        "\\begin{table}[htbp]",
        "\\centering\\small",
        f"\\setlength{{\\tabcolsep}}{{{TABCOLSEP}}}",
        f"\\caption{{Methods named in Table~\\ref{{{tab('claims')}}}, one line each.}}",
        f"\\label{{{tab('methods')}}}",
        "\\begin{tabular}{" + _cols("2.8em", "1") + "}",
        "\\toprule",
        "Mark & Method \\\\",
        "\\midrule",
    ]
    for meth, k in methods.items():
        lines.append(f"M{k} & {tex_statement(explain(meth))} "
                     f"{{\\footnotesize ({tex_statement(_shortened(meth))})}} \\\\")
    if not methods:
        lines.append("-- & no method named \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    for name in figures:
        stem = name.rsplit(".", 1)[0]
        if not name.endswith(".pdf"):
            continue
        lines += ["\\begin{figure}[htbp]", "\\centering",
                  f"\\includegraphics[width=0.8\\linewidth]{{\\CertifyReportHere {stem}.pdf}}",
                  f"\\caption{{{FIGURE_CAPTIONS.get(stem, tex_escape(stem))}}}",
                  f"\\label{{fig:certify-{key}-{stem.replace('_', '-')}}}", "\\end{figure}", ""]
    lines += ["% Appendix: exact values behind the rounded numbers.",
              "\\begin{table}[htbp]", "\\centering\\small", f"\\setlength{{\\tabcolsep}}{{{TABCOLSEP}}}",
              f"\\caption{{Exact values of the numbers rounded in Table~\\ref{{{tab('claims')}}}.}}",
              f"\\label{{{tab('exact')}}}",
              "\\begin{tabular}{" + _cols("0.3", "0.22", "0.48") + "}", "\\toprule",
              "Claim & Quantity & Exact value \\\\", "\\midrule"]
    for ref, quantity, v in exact:
        lines.append(f"{_breakable(ref.split(' ')[0])} {ref.split(' ', 1)[1]} & {tex_escape(quantity)} & "
                     f"\\ensuremath{{{_exact_tex(v)}}} \\\\")
    if not exact:
        lines.append("-- & -- & every number is shown exactly \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


def _exact_tex(v: str) -> str:
    """An exact rational, breakable across lines."""
    def chunks(d: str) -> str:
        return r"\allowbreak ".join(d[i:i + 40] for i in range(0, len(d), 40))
    return r"\,/\,".join(chunks(part) for part in v.split("/"))
