"""The one renderer of claim statements: (kind, parameters, evidence) -> sentence.

A claim is data; its sentence is a view. Producers never write a statement by
hand: :class:`certify.core.certificate.Claim` renders it here, and ``certify verify``
renders it again and fails a claim whose stored statement differs. So a
statement cannot say more, or other, than the claim's parameters and the
evidence fields the checker re-derives.

What each kind's sentence reads is the field table :data:`FIELDS` (version 2;
everything else is ignored, so it cannot leak into a sentence unchecked). Every
value a sentence prints is re-derived by the kind's checker; every name is
bound by :mod:`certify.checkers.binding` or printed as a content hash:

==================  =====================================================================
kind                the sentence names (version 2)
==================  =====================================================================
bound               the bound's inputs and values (re-derived exactly)
exact_rank,         the kernel: its source (a file with its sha256, a construction, or
eps_rank,           one head of a model's weights) and its token set ({0,1}^m, the tokens
code_rank,          of a built-in family, K tokens by the hash of their list, a model's
nonnegative         vocabulary, or a matrix's row indices); code_rank also the code (a
                    built-in name or the hash of its words)
feasible,           the rank, feature and model class, the family (a built-in name or its
infeasible          sha256), the error
correctness,        the head (its weights file and the canonical hash of its tensors, or
gap_domination      the hash of its exact tables), the family, eps (and n)
transcript          the family (M, s, h, q), the quantizer and the hash of the exact weights
==================  =====================================================================

A kernel built in memory (adapter ``memory``) is named by the content hash of
the data the evidence embeds (its features' or its exact matrix's hash, which
the kind's checker re-derives): two different kernels never read alike.

Family names: a built-in name (``paper-5.1``, ``multilevel-M..-s..-h..-q..``,
``ood-M-q-n-split``) stands for exactly one content, which the checker pins or
rebuilds (:mod:`certify.checkers.families`); any other family is named in the
sentence by its sha256, so that two different families can never read alike.

The renderer is versioned (:data:`RENDERER`): each certificate version fixes
its renderer (:data:`certify.checkers.schema.RENDERER_OF`), and a sentence is
accepted only when it read every field of :data:`FIELDS` the claim carries
(:func:`check_statement`), so no field can change a claim's meaning without
changing its sentence. A later wording is a new certificate version; the
version-1 renderer, which printed only part of later claim shapes, is retired
with certificate/1.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Mapping

from certify.checkers import kinds as _kinds
from certify.checkers.names import BUILTIN_CODES, builtin_kind

RENDERER = "certify-attention/statements/3"
RENDERERS = (RENDERER,)

#: model classes of feasibility claims, from the widest to the narrowest:
#: a nonnegative-feature head is in the paper's class, which is in used-pairs.
CLASSES = {
    "paper": ("in the paper's class (alpha >= 0 on the whole Boolean domain, positive "
              "denominators)",
              r"in the paper's class ($\alpha \ge 0$ on $\{0,1\}^m$, positive denominators)"),
    "used-pairs": ("in the used-pairs class (alpha >= 0 only on the (query, token) pairs the "
                   "inputs use)",
                   r"in the used-pairs class ($\alpha \ge 0$ only on the (query, token) pairs "
                   r"the inputs use)"),
}
FEATURES = ("real", "nonnegative")
#: finite values of each float format of a transcript quantizer (-0 == +0)
_FLOAT_ALPHABETS = {"fp8-e4m3": 253, "fp8-e5m2": 247, "bf16": 65279, "fp16": 63487}


#: a claim's parameters or evidence, as read from JSON
Fields = Mapping[str, Any]


class RenderError(Exception):
    """The parameters do not determine a statement (a missing or ill-typed field)."""


@dataclass(frozen=True)
class Statement:
    text: str
    latex: str


#: a kind's sentence from its parameters and evidence
Renderer = Callable[[Fields, Fields], Statement]


# ---------------------------------------------------------------- small helpers

class _Reads:
    """The fields a rendering read, as ``("parameters"|"evidence", key)``: the
    field table (:data:`FIELDS`) must cover them (a test checks)."""

    current: set | None = None


def _get(obj: Mapping[str, Any], key: str, types: type | tuple, what: str) -> Any:
    if _Reads.current is not None:
        _Reads.current.add((what, key))
    if not isinstance(obj, Mapping) or key not in obj:
        raise RenderError(f"{what}.{key} is missing")
    v = obj[key]
    if isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise RenderError(f"{what}.{key} has the wrong type")
    if not isinstance(v, types):
        raise RenderError(f"{what}.{key} has the wrong type ({type(v).__name__})")
    return v


def _p(params: Fields, key: str, types: type | tuple[type, ...] = (int, str)) -> Any:
    return _get(params, key, types, "parameters")


def _e(evidence: Fields, key: str, types: type | tuple[type, ...] = (int, str)) -> Any:
    return _get(evidence, key, types, "evidence")


def _q(v: Any) -> str:
    """A JSON int or "p/q" string, normalised ("2/4" -> "1/2")."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise RenderError(f"not an exact number: {v!r:.40}")
    try:
        x = Fraction(v) if isinstance(v, int) else Fraction(v.strip())
    except (ValueError, ZeroDivisionError):
        raise RenderError(f"not an exact number: {v!r:.40}") from None
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _tq(v: Any) -> str:
    s = _q(v)
    if "/" not in s:
        return s
    a, b = s.split("/")
    neg = a.startswith("-")
    return ("-" if neg else "") + rf"\tfrac{{{a.lstrip('-')}}}{{{b}}}"


def _tt(s: str) -> str:
    """Plain text for LaTeX (escape the special characters)."""
    out = []
    for ch in str(s):
        out.append({"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#",
                    "$": r"\$", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                    "^": r"\textasciicircum{}"}.get(ch, ch))
    return "".join(out)


def is_builtin_family_name(name: str) -> bool:
    return builtin_kind(name) is not None


def family_ref(params: Mapping[str, Any]) -> tuple[str, str]:
    """How a family is named in a sentence: a built-in name as is; anything else
    by its hash (and its stated name in quotes, for people)."""
    name = _p(params, "family", str)
    sha = _p(params, "family_sha256", str)
    if is_builtin_family_name(name):
        return name, r"\texttt{" + _tt(name) + "}"
    short = sha[:16]
    return (f"the family {name!r} with sha256 {short}...",
            rf"the family \texttt{{{_tt(name)}}} (sha256 \texttt{{{short}}}\ldots)")


# ---------------------------------------------------------------- kinds

def _rank_sentence(k: str, lk: str, shape: list, lo: int, hi: int) -> Statement:
    what, wl = f"{k} ({shape[0]} x {shape[1]})", rf"{lk} (${shape[0]} \times {shape[1]}$)"
    if lo == hi:
        return Statement(f"{what} has rank exactly {lo} over Q",
                         rf"{wl} has rank exactly ${lo}$ over $\mathbb{{Q}}$")
    return Statement(f"{what} has rank over Q in [{lo}, {hi}]",
                     rf"{wl} has rank over $\mathbb{{Q}}$ in $[{lo}, {hi}]$")


def _eps_sentence(k_: str, lk_: str, p: Fields, e: Fields) -> Statement:
    eps, k, exact = _q(_p(p, "eps")), _e(e, "k", int), _e(e, "exact", bool)
    text = (f"{k} singular values of {k_} exceed eps = {eps}: every matrix within eps in "
            f"spectral norm has rank >= {k}")
    latex = (rf"${k}$ singular values of {lk_} exceed $\varepsilon = {_tq(eps)}$: every "
             rf"matrix within $\varepsilon$ in spectral norm has rank $\ge {k}$")
    if exact:
        text += f"; sigma_{k + 1} <= eps, so the eps-rank is exactly {k}"
        latex += rf"; $\sigma_{{{k + 1}}} \le \varepsilon$, so the $\varepsilon$-rank is exactly ${k}$"
    return Statement(text, latex)


def _feasibility(kind: str) -> Renderer:
    def render(p: Fields, e: Fields) -> Statement:
        r, feats = _p(p, "rank", int), _p(p, "features", str)
        cls, err = _p(p, "class", str), _q(_p(p, "error"))
        if feats not in FEATURES:
            raise RenderError(f"parameters.features must be one of {FEATURES}")
        if cls not in CLASSES:
            raise RenderError(f"parameters.class must be one of {tuple(CLASSES)}")
        scope = _opt(p, "scope", str, "parameters") or "family"
        if scope not in ("family", "cube"):
            raise RenderError("parameters.scope must be 'family' or 'cube'")
        fam, lfam = family_ref(p)
        ctext, clatex = CLASSES[cls]
        where = " on the family's tokens" if scope == "family" else " on the whole cube {0,1}^m"
        lwhere = (" on the family's tokens" if scope == "family"
                  else r" on the whole cube $\{0,1\}^m$")
        head = f"rank-{r} {feats}-feature head{where} {ctext}"
        lhead = f"rank-${r}$ {feats}-feature head{lwhere} {clatex}"
        where = lwhere = ""
        if kind == "feasible":
            return Statement(f"a {head}{where} solves {fam} with error < {err}",
                             rf"a {lhead}{lwhere} solves {lfam} with error $< {_tq(err)}$")
        return Statement(f"no {head}{where} solves {fam} with error < {err}",
                         rf"no {lhead}{lwhere} solves {lfam} with error $< {_tq(err)}$")
    return render


def _num_inputs(e: Fields) -> int:
    fam = e.get("family") if isinstance(e, Mapping) else None
    inputs = fam.get("inputs") if isinstance(fam, Mapping) else None
    if not isinstance(inputs, list):
        raise RenderError("evidence.family.inputs is missing")
    return len(inputs)


def _correctness_sentence(model: str, lmodel: str, p: Fields, e: Fields) -> Statement:
    eps = _q(_p(p, "eps"))
    fam, lfam = family_ref(p)
    n = _e(e, "scored_positions", int)
    if _Reads.current is not None:
        _Reads.current.add(("evidence", "family"))
    k = _num_inputs(e)
    return Statement(f"{model} solves {fam} exactly: |t_hat - t| < {eps} at all {n} scored "
                     f"positions of {k} inputs",
                     rf"{lmodel} solves {lfam}: $|\hat t - t| < {_tq(eps)}$ at all "
                     rf"${n}$ scored positions of ${k}$ inputs")


def _gap_sentence(model: str, lmodel: str, p: Fields, e: Fields) -> Statement:
    eps, n = _q(_p(p, "eps")), _p(p, "n", int)
    fam, lfam = family_ref(p)
    a = _e(e, "applicable", int)
    return Statement(f"the kernel of {model} satisfies Lemma 3's gap domination alpha(x,y) > "
                     f"(n-2)(d-2eps)/(2eps) alpha(x,z) on all {a} jumps of {fam} "
                     f"(n = {n}, eps = {eps})",
                     rf"the kernel of {lmodel} satisfies Lemma 3's gap domination "
                     rf"$\alpha(x,y) > \frac{{(n-2)(d-2\varepsilon)}}{{2\varepsilon}}\alpha(x,z)$ "
                     rf"on all ${a}$ jumps of {lfam} ($n = {n}$, $\varepsilon = {_tq(eps)}$)")


def quantizer_text(qz: Any) -> str:
    if not isinstance(qz, Mapping):
        raise RenderError("parameters.quantizer must be an object")
    if qz.get("kind") == "uniform":
        bits = qz.get("bits")
        if not isinstance(bits, int) or isinstance(bits, bool):
            raise RenderError("quantizer.bits must be an integer")
        return f"uniform {bits}-bit on [{_q(qz.get('lo'))}, {_q(qz.get('hi'))}]"
    if qz.get("kind") == "float":
        name = qz.get("format")
        if name not in _FLOAT_ALPHABETS:
            raise RenderError(f"quantizer.format must be one of {tuple(_FLOAT_ALPHABETS)}")
        return (f"{name} (round to nearest even, saturating; {_FLOAT_ALPHABETS[name]} values)")
    raise RenderError(f"unknown quantizer kind {qz.get('kind')!r:.20}")


def _transcript_sentence(who: str, lwho: str, p: Fields) -> Statement:
    M, s, h, q = (_p(p, k, int) for k in ("M", "s", "h", "q"))
    qt = quantizer_text(_p(p, "quantizer", dict))
    total = (s + 1) ** q
    return Statement(f"the quantized sketch model {who}({qt}) solves the multilevel family "
                     f"(M, s, h, q) = ({M}, {s}, {h}, {q}) with error < 1/2 at every query position "
                     f"of all {total} assignments",
                     rf"the quantized sketch model {lwho}({_tt(qt)}) solves the multilevel family "
                     rf"$(M, s, h, q) = ({M}, {s}, {h}, {q})$ with error $< \tfrac12$ at every query "
                     rf"position of all ${total}$ assignments")


# ---------------------------------------------------------------- bounds

def _bound(p: Fields, e: Fields) -> Statement:
    name = _p(p, "bound", str)
    fn = _BOUNDS.get(name)
    if fn is None:
        raise RenderError(f"unknown bound {name!r:.30}")
    return fn(p, e)


def _b_lemma3(p: Fields, e: Fields) -> Statement:
    eps, n, d, f = _q(_p(p, "eps")), _p(p, "n", int), _q(_p(p, "d")), _q(_e(e, "factor"))
    return Statement(f"Lemma 3: correct with error < {eps} at exact length {n}, a gap d = {d} "
                     f"forces alpha(x,y) > {f} alpha(x,z)",
                     rf"Lemma 3: correct with error $< {_tq(eps)}$ at exact length ${n}$, a gap "
                     rf"$d = {_tq(d)}$ forces $\alpha(x,y) > {_tq(f)}\,\alpha(x,z)$")


def _b_lemma4(p: Fields, e: Fields) -> Statement:
    t, lam, strict = _p(p, "t", int), _q(_p(p, "lam")), _p(p, "strict", bool)
    rb = _e(e, "rank_bound", int)
    rel, lrel = ("<", "<") if strict else ("<=", r"\le")
    return Statement(f"Lemma 4: a {t} x {t} matrix with unit diagonal and |C_ij| {rel} 1/{lam} "
                     f"has rank >= {rb}",
                     rf"Lemma 4: a ${t} \times {t}$ matrix with unit diagonal and "
                     rf"$|C_{{ij}}| {lrel} 1/{_tq(lam)}$ has rank $\ge {rb}$")


def _b_lemma4_pp(p: Fields, e: Fields) -> Statement:
    import hashlib
    import json
    t, strict = _p(p, "t", int), _p(p, "strict", bool)
    lam = _p(p, "Lambda", list)
    sha = hashlib.sha256(json.dumps(lam, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    sa, b, rb = _e(e, "strict_applied", bool), _q(_e(e, "bound")), _e(e, "rank_bound", int)
    rel, lrel = (">", ">") if sa else (">=", r"\ge")
    brel, lbrel = ("<", "<") if strict else ("<=", r"\le")
    return Statement(f"Lemma 4 per pair: a {t} x {t} unit-diagonal matrix with |C_ij| {brel} "
                     f"1/Lambda_ij (Lambda sha256 {_short(sha)}) has rank {rel} {b}, so rank >= {rb}",
                     rf"Lemma 4 per pair: a ${t} \times {t}$ unit-diagonal matrix with "
                     rf"$|C_{{ij}}| {lbrel} 1/\Lambda_{{ij}}$ ($\Lambda$ sha256 \texttt{{{sha[:16]}}}\ldots) "
                     rf"has rank ${lrel} {_tq(b)}$, so rank $\ge {rb}$")


def _b_thm5(p: Fields, e: Fields) -> Statement:
    eps, n = _q(_p(p, "eps")), _p(p, "n", int)
    size, delta, g = _p(p, "code_size", int), _p(p, "delta", int), _p(p, "g", int)
    rb = _e(e, "rank_bound", int)
    return Statement(f"Thm 5: a head correct with error < {eps} on all length-{n} inputs over a "
                     f"code of {size} words at directed distance >= {delta} (g = {g}) has rank "
                     f"r >= {rb}",
                     rf"Thm 5: a head correct with error $< {_tq(eps)}$ on all length-${n}$ inputs "
                     rf"over a code of ${size}$ words at directed distance $\ge {delta}$ "
                     rf"($g = {g}$) has rank $r \ge {rb}$")


def _b_thm6(p: Fields, e: Fields) -> Statement:
    m, ext = _p(p, "m", int), _p(p, "extended", bool)
    lg = e.get("log2_lower_bound") if isinstance(e, Mapping) else None
    where = " (Thm 6's argument below m = 168, code size checked exactly)" if ext else ""
    if lg is None:
        t = (f"Thm 6{where}: at m = {m} the guaranteed code size fails the hypothesis; "
             "no bound is claimed")
        return Statement(t, _tt(t))
    if not isinstance(lg, int) or isinstance(lg, bool):
        raise RenderError("evidence.log2_lower_bound must be an integer or null")
    sharp = _e(e, "sharp_rank_bound", int)
    return Statement(f"Thm 6{where}: at m = {m} every one-head normalized nonnegative kernel model "
                     f"correct with error < 1/2 on all length-3 inputs has r >= 2^{lg} "
                     f"(sharp form of Thm 5: r >= {sharp})",
                     rf"Thm 6{_tt(where)}: at $m = {m}$ every one-head normalized nonnegative "
                     rf"kernel model correct with error $< \tfrac12$ on all length-3 inputs has "
                     rf"$r \ge 2^{{{lg}}}$ (sharp form of Thm 5: $r \ge {sharp}$)")


def _b_cor7(p: Fields, e: Fields) -> Statement:
    m, n = _p(p, "m", int), _p(p, "n", int)
    rb = _e(e, "rank_bound", int)
    lg = rb.bit_length() - 1 if rb >= 1 else 0          # floor(log2 rb)
    return Statement(f"Cor 7 construction: at m = {m}, exact length n = {n}, every one-head "
                     f"normalized nonnegative kernel model correct with error < 1/2 has "
                     f"r >= {rb} (>= 2^{lg}; code size from the greedy counting bound)",
                     rf"Cor 7 construction: at $m = {m}$, exact length $n = {n}$, every one-head "
                     rf"normalized nonnegative kernel model correct with error $< \tfrac12$ has "
                     rf"$r \ge {rb}$ ($\ge 2^{{{lg}}}$; code size from the greedy counting bound)")


def _b_eq8(p: Fields, e: Fields) -> Statement:
    q, s = _p(p, "q", int), _p(p, "s", int)
    L, H, r, dv, bits = (_p(p, k, int) for k in ("L", "H", "r", "dv", "p"))
    avail, need, holds = _e(e, "bits_available", int), _e(e, "bits_needed", int), _e(e, "holds", bool)
    model = f"(L, H, r, dv, p) = ({L}, {H}, {r}, {dv}, {bits})"
    lmodel = rf"$(L, H, r, d_v, p) = ({L}, {H}, {r}, {dv}, {bits})$"
    if holds:
        return Statement(f"Eq. 8: a sketch model with {model} has {avail} transcript bits >= {need} = "
                         f"ceil({q} log2 {s + 1}); the counting bound does not exclude it",
                         rf"Eq.~8: a sketch model with {lmodel} has ${avail}$ transcript bits "
                         rf"$\ge {need} = \lceil {q}\log_2 {s + 1}\rceil$; the counting bound does "
                         r"not exclude it")
    return Statement(f"Eq. 8: a sketch model with {model} has {avail} transcript bits < {need} = "
                     f"ceil({q} log2 {s + 1}); no such model solves every assignment",
                     rf"Eq.~8: a sketch model with {lmodel} has ${avail}$ transcript bits "
                     rf"$< {need} = \lceil {q}\log_2 {s + 1}\rceil$; no such model solves every "
                     r"assignment")


def _b_prop10(p: Fields, e: Fields) -> Statement:
    m = _p(p, "m", int)
    s, M, h = _e(e, "s", int), _e(e, "M", int), _e(e, "h", int)
    gl, pl = _e(e, "greedy_lower", int), _e(e, "paper_lower", int)
    return Statement(f"Prop 10: at m = {m} (s = {s}, M = {M}, h = {h}) a code with |U \\ S| >= "
                     f"{s + 1} and at least {gl} words exists (greedy guarantee; the paper's "
                     f"closed form gives >= {pl})",
                     rf"Prop 10: at $m = {m}$ ($s = {s}$, $M = {M}$, $h = {h}$) a code with "
                     rf"$|U \setminus S| \ge {s + 1}$ and at least ${gl}$ words exists (greedy "
                     rf"guarantee; the paper's closed form gives $\ge {pl}$)")


# ---------------------------------------------------------------- version 2: every name bound

def _opt(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], what: str) -> Any:
    """An optional field (``None`` when absent), recorded like :func:`_get`."""
    if _Reads.current is not None:
        _Reads.current.add((what, key))
    if not isinstance(obj, Mapping) or obj.get(key) is None:
        return None
    return _get(obj, key, types, what)


def _short(sha: str) -> str:
    return sha[:16] + "..."


def tokens_ref(p: Mapping[str, Any]) -> tuple[str, str]:
    """The token set of a kernel claim, in words verify binds: ``{0,1}^m`` for
    ``cube:m``; "the K tokens of NAME" for a built-in family (its tokens pinned or
    rebuilt by the checker); otherwise "K tokens (sha256 ...)" (the hash of the
    token list); for a matrix without tokens, its K row indices."""
    ts = _p(p, "token_set", str)
    k = _p(p, "num_tokens", int)
    if ts.startswith("cube:"):
        m = ts[5:]
        if not m.isdigit():
            raise RenderError("parameters.token_set: cube:M needs an integer M")
        return f"{{0,1}}^{int(m)}", rf"$\{{0,1\}}^{{{int(m)}}}$"
    if ts == "index":
        return f"its {k} row indices", f"its ${k}$ row indices"
    if ts.startswith("vocab:"):
        return (f"its {k} vocabulary tokens (the embedding's rows)",
                f"its ${k}$ vocabulary tokens (the embedding's rows)")
    if ts.startswith("positions:"):
        return positions_ref(p, ts, k)
    sha = _p(p, "tokens_sha256", str)
    if ts.startswith("family:") and is_builtin_family_name(ts[7:]):
        name = ts[7:]
        return f"the {k} tokens of {name}", rf"the ${k}$ tokens of \texttt{{{_tt(name)}}}"
    if ts == "tokens" or ts.startswith("family:"):
        return (f"{k} tokens (sha256 {_short(sha)})",
                rf"${k}$ tokens (sha256 \texttt{{{sha[:16]}}}\ldots)")
    raise RenderError(f"parameters.token_set {ts!r:.40} is not cube:M, family:NAME, vocab:N, "
                      "positions:SxT, tokens or index")


def positions_ref(p: Mapping[str, Any], ts: str, k: int) -> tuple[str, str]:
    """``positions:SxT``: the inputs to the claim's layer at every position of S token
    sequences of length T, named by the ids' content hash and by where they come from
    (a file of the certificate's inputs, or the seeded probe, which the sentence calls one)."""
    S, _, T = ts[len("positions:"):].partition("x")
    if not (S.isdigit() and T.isdigit()):
        raise RenderError("parameters.token_set: positions:SxT needs integers S and T")
    layer = _p(p, "layer", int)
    src = _p(p, "sequences", str)
    sha = _p(p, "sequences_sha256", str)
    what = (f"the seeded random probe {src}" if src.startswith("random:") else f"the sequences file {src}")
    lwhat = (rf"the seeded random probe \texttt{{{_tt(src)}}}" if src.startswith("random:")
             else rf"the sequences file \texttt{{{_tt(src)}}}")
    return (f"the {k} inputs to layer {layer} at every position of {int(S)} token sequences of length "
            f"{int(T)} ({what}, ids sha256 {_short(sha)})",
            rf"the ${k}$ inputs to layer ${layer}$ at every position of ${int(S)}$ token sequences of length "
            rf"${int(T)}$ ({lwhat}, ids sha256 \texttt{{{sha[:16]}}}\ldots)")


def memory_sha256(e: Mapping[str, Any]) -> str | None:
    """The content hash of a kernel built in memory: sha256 of ``features:<phi_q
    sha256>:<phi_k sha256>`` or ``matrix:<matrix sha256>``, whichever its evidence
    embeds (:func:`certify.checkers.common.embedded_kernel_sha`; the kind's checker
    re-derives the hashes from the embedded data); ``None`` when it embeds
    neither (such a claim is bound to nothing, and verify fails it)."""
    import hashlib
    fs = _opt(e, "features_sha256", dict, "evidence")
    if fs is not None:
        q, k = fs.get("phi_q"), fs.get("phi_k")
        if not isinstance(q, str) or not isinstance(k, str):
            raise RenderError("evidence.features_sha256 needs phi_q and phi_k")
        ident = f"features:{q}:{k}"
    else:
        m = _opt(e, "matrix_sha256", str, "evidence")
        if m is None and "values_sha256" in e:              # float values (numerical_rank)
            m = _opt(e, "values_sha256", str, "evidence")
        if m is None:               # nothing embedded: verify cannot bind it and fails the claim
            return None
        ident = f"matrix:{m}"
    return hashlib.sha256(ident.encode()).hexdigest()


def source_ref(p: Mapping[str, Any], e: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """A kernel's source: a file named with its sha256 (verify ties the name to
    the hash through the certificate's inputs and re-reads a present file), or
    a construction (re-derived by ``--replay-extraction``, else assumed)."""
    src = _p(p, "source", str)
    sha = _opt(p, "source_sha256", str, "parameters")
    layer, head = _opt(p, "layer", int, "parameters"), _opt(p, "head", int, "parameters")
    where = lwhere = ""
    if layer is not None or head is not None:           # one head of a model's weights
        where = f"head {head} of layer {layer} of "
        lwhere = f"head ${head}$ of layer ${layer}$ of "
    st, lst = stated_ref(p)
    un, lun = normalization_ref(p)
    st, lst = un + ("," if un and st else "") + st, lun + ("," if lun and lst else "") + lst
    if p.get("adapter") in ("memory", "matrix-file") and "dtype" in p:
        # the values' type is read but not printed: the content hash names the exact values
        # (verify binds it to the dtype of the re-read file)
        _opt(p, "dtype", str, "parameters")
    if p.get("adapter") == "memory":                  # named by the content it embeds
        h = memory_sha256(e if isinstance(e, Mapping) else {})
        if h is None:
            return "memory (no content embedded: unbound)", "memory (no content embedded: unbound)"
        return (f"memory (sha256 {_short(h)})",
                rf"memory (sha256 \texttt{{{h[:16]}}}\ldots)")
    if p.get("adapter") != "matrix-file":
        # an extraction's features are part of what the kernel is: any precision but the
        # canonical float64 is named, so two precisions never read alike
        dt = _opt(p, "dtype", str, "parameters") if "dtype" in p else None
        fs = _opt(e, "features_sha256", dict, "evidence") if isinstance(e, Mapping) else None
        dt = dt or (fs.get("dtype") if isinstance(fs, Mapping) else None)
        if isinstance(dt, str) and dt != "float64":
            st, lst = f"{st} (features computed in {dt})", rf"{lst} (features computed in {_tt(dt)})"
    if sha is None:
        return where + src + st, lwhere + rf"\texttt{{{_tt(src)}}}" + lst
    return (f"{where}{src} (sha256 {_short(sha)}){st}",
            rf"{lwhere}\texttt{{{_tt(src)}}} (sha256 \texttt{{{sha[:16]}}}\ldots){lst}")


#: how a head without a normalizing denominator is named (``parameters.normalized`` false)
UNNORMALIZED = "unnormalized kernel attention (the paper's normalized-head theorems do not apply)"


def normalization_ref(p: Mapping[str, Any]) -> tuple[str, str]:
    """``", unnormalized kernel attention (...)"`` for a head whose layer outputs
    ``sum_j alpha(x, z_j) v_j`` without dividing by ``sum_j alpha(x, z_j)``
    (``parameters.normalized`` false; re-derived from the model's config by
    ``--replay-extraction``); nothing for a normalized head (the field absent)."""
    v = _opt(p, "normalized", bool, "parameters")
    if "normalized" not in p:
        return "", ""
    if v is not False:
        raise RenderError("parameters.normalized is present only as false (a head without a denominator)")
    return f", {UNNORMALIZED}", f", {UNNORMALIZED}"


#: where a stated constructor argument came from
STATED_FROM = ("config.json", "library default, assumed")


def _stated_value(v: Any) -> str:
    if isinstance(v, str):
        return v
    import json
    return json.dumps(v, sort_keys=True)


def stated_ref(p: Mapping[str, Any]) -> tuple[str, str]:
    """The constructor arguments a third-party head's kernel rests on beyond its
    weights (``parameters.stated``: name -> value and where it came from, the
    model's config.json or a library default the user accepted), named in the
    sentence: the claim holds for the model built with them. ``--replay-extraction``
    re-derives them from the config and the accepted names."""
    st = _opt(p, "stated", dict, "parameters")
    if not st:
        return "", ""
    parts, lparts = [], []
    for name in sorted(st):
        e = st[name]
        if not isinstance(e, Mapping) or set(e) != {"value", "from"} or e["from"] not in STATED_FROM \
                or not isinstance(e["value"], (str, int, float, bool, type(None), list)):
            raise RenderError(f"parameters.stated.{name:.40}: needs value and from ({' | '.join(STATED_FROM)})")
        v = _stated_value(e["value"])
        parts.append(f"{name} = {v} ({e['from']})")
        lparts.append(rf"\texttt{{{_tt(name)}}} $=$ \texttt{{{_tt(v)}}} ({e['from']})")
    return (" built with the stated arguments " + ", ".join(parts),
            " built with the stated arguments " + ", ".join(lparts))


def _kernel_ref(p: Fields, e: Fields) -> tuple[str, str]:
    src, lsrc = source_ref(p, e)
    ts, lts = tokens_ref(p)
    if _p(p, "token_set", str) == "index":
        return f"the kernel matrix of {src}", rf"the kernel matrix of {lsrc}"
    return f"the kernel of {src} on {ts}", rf"the kernel of {lsrc} on {lts}"


def _exact_rank2(p: Fields, e: Fields) -> Statement:
    shape = _p(p, "shape", list)
    if len(shape) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in shape):
        raise RenderError("parameters.shape must be two integers")
    k, lk = _kernel_ref(p, e)
    st = _rank_sentence(k, lk, shape, _e(e, "rank_lower", int), _e(e, "rank_upper", int))
    method = _opt(p, "upper_bound", str, "parameters")
    err = _opt(p, "error_log2", int, "parameters")
    if method is None and err is None:
        return st
    if method != "freivalds" or err is None or isinstance(err, bool) or err < 1:
        raise RenderError("parameters.upper_bound must be 'freivalds' with an integer error_log2 >= 1")
    return Statement(f"{st.text}, the upper bound by a Freivalds test with error probability <= 2^-{err}",
                     rf"{st.latex}, the upper bound by a Freivalds test with error probability "
                     rf"$\le 2^{{-{err}}}$")


def _eps_rank2(p: Fields, e: Fields) -> Statement:
    return _eps_sentence(*_kernel_ref(p, e), p, e)


def _numerical_rank2(p: Fields, e: Fields) -> Statement:
    k_, lk_ = _kernel_ref(p, e)
    shape = _e(e, "shape", list)
    if len(shape) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in shape):
        raise RenderError("evidence.shape must be two integers")
    lo, hi, tol = _e(e, "k_lower", int), _e(e, "k_upper", int), _p(p, "tol", str)
    what, lwhat = f"{k_} ({shape[0]} x {shape[1]})", rf"{lk_} (${shape[0]} \times {shape[1]}$)"
    if tol == "default":
        N = max(shape)
        at = f"numpy's default tolerance tol = sigma_1 x {N} x 2^-52 (numpy.linalg.matrix_rank's)"
        lat = (rf"numpy's default tolerance $\mathrm{{tol}} = \sigma_1 \cdot {N} \cdot 2^{{-52}}$ "
               rf"(\texttt{{numpy.linalg.matrix\_rank}}'s)")
    else:
        at, lat = f"tol = {_q(tol)}", rf"$\mathrm{{tol}} = {_tq(tol)}$"
    rest = min(shape) - hi
    if lo == hi:
        text = (f"{what} has numerical rank exactly {lo} at {at}: {lo} singular values > tol, the other "
                f"{rest} <= tol")
        latex = (rf"{lwhat} has numerical rank exactly ${lo}$ at {lat}: ${lo}$ singular values "
                 rf"$> \mathrm{{tol}}$, the other ${rest}$ $\le \mathrm{{tol}}$")
    else:
        text = (f"{what} has numerical rank in [{lo}, {hi}] at {at}: {lo} singular values > tol, "
                f"at most {hi} (the count is undecided at this tolerance)")
        latex = (rf"{lwhat} has numerical rank in $[{lo}, {hi}]$ at {lat}: ${lo}$ singular values "
                 rf"$> \mathrm{{tol}}$, at most ${hi}$ (the count is undecided at this tolerance)")
    note = "; the exact rank over Q of the stored float values is a different question"
    lnote = r"; the exact rank over $\mathbb{Q}$ of the stored float values is a different question"
    return Statement(text + note, latex + lnote)


def code_ref(p: Fields) -> tuple[str, str]:
    """A code: a built-in name (its words pinned by the checker), else the hash of
    its word list."""
    nw = _p(p, "num_words", int)
    name = _opt(p, "code", str, "parameters")
    sha = _p(p, "code_sha256", str)
    if name is not None and name in BUILTIN_CODES:
        return f"the {nw}-word code {name}", rf"the ${nw}$-word code \texttt{{{_tt(name)}}}"
    return (f"the {nw}-word code with sha256 {_short(sha)}",
            rf"the ${nw}$-word code with sha256 \texttt{{{sha[:16]}}}\ldots")


def _lemma4_sentence(base: str, lbase: str, lo: int, trivial: str, proves: str) -> Statement:
    """The end of a Lemma 4 sentence: the trivial bound said to be trivial, else the
    bound it proves (``trivial``/``proves``: the words before ``rank >= lo``, plain
    text; the LaTeX says ``rank`` after the trivial bound, as it always has)."""
    if lo <= 1:
        return Statement(f"{base} gives only the trivial bound: {trivial} >= {lo}",
                         rf"{lbase} gives only the trivial bound: rank $\ge {lo}$")
    return Statement(f"{base} proves {proves} >= {lo}", rf"{lbase} proves {proves} $\ge {lo}$")


def _code_rank2(p: Fields, e: Fields) -> Statement:
    code, lcode = code_ref(p)
    k, lk = _kernel_ref(p, e)
    t, lo = _e(e, "t", int), _e(e, "rank_lower", int)
    base = (f"Lemma 4 on B[S,U] = alpha(x_S, x_(U^c)) over {code} (row-normalized, t = {t} "
            f"nonzero diagonal entries) for {k}")
    lbase = (rf"Lemma 4 on $B[S,U] = \alpha(x_S, x_{{U^c}})$ over {lcode} (row-normalized, "
             rf"$t = {t}$ nonzero diagonal entries) for {lk}")
    return _lemma4_sentence(base, lbase, lo, "rank", "rank")


def _nonnegative2(p: Fields, e: Fields) -> Statement:
    k, lk = _kernel_ref(p, e)
    if _p(p, "token_set", str) == "index":
        return Statement(f"every entry of {k} is >= 0", rf"every entry of {lk} is $\ge 0$")
    return Statement(f"{k} is nonnegative: alpha(x, z) >= 0 for every pair of its tokens",
                     rf"{lk} is nonnegative: $\alpha(x, z) \ge 0$ for every pair of its tokens")


def model_ref(p: Fields) -> tuple[str, str]:
    """A head: the weights file it was read from (name tied to its sha256 by the
    inputs) and the canonical hash of its tensors; a head built in memory by the
    hash of its exact tables."""
    src = _opt(p, "source", str, "parameters")
    if src is None:
        h = _p(p, "head_sha256", str)
        return f"the head with tables sha256 {_short(h)}", \
            rf"the head with tables sha256 \texttt{{{h[:16]}}}\ldots"
    w = _p(p, "weights_sha256", str)
    h = _opt(p, "head_sha256", str, "parameters")
    if h is None:
        return (f"the head of {src} (weights sha256 {_short(w)})",
                rf"the head of \texttt{{{_tt(src)}}} (weights sha256 \texttt{{{w[:16]}}}\ldots)")
    return (f"the head of {src} (weights sha256 {_short(w)}, tables sha256 {_short(h)})",
            rf"the head of \texttt{{{_tt(src)}}} (weights sha256 \texttt{{{w[:16]}}}\ldots, "
            rf"tables sha256 \texttt{{{h[:16]}}}\ldots)")


def _correctness2(p: Fields, e: Fields) -> Statement:
    return _correctness_sentence(*model_ref(p), p, e)


def _gap_domination2(p: Fields, e: Fields) -> Statement:
    return _gap_sentence(*model_ref(p), p, e)


def _transcript2(p: Fields, e: Fields) -> Statement:
    w = _p(p, "weights_sha256", str)
    return _transcript_sentence(f"with weights sha256 {_short(w)} ",
                                rf"with weights sha256 \texttt{{{w[:16]}}}\ldots ", p)


# ---------------------------------------------------------------- theorems

def _tau_text(tau: Any) -> tuple[str, str]:
    """Thm 1's temperature as given: ``log(q)`` or a rational."""
    if not isinstance(tau, str):
        raise RenderError("parameters.tau must be a string")
    if tau.startswith("log(") and tau.endswith(")"):
        q = _q(tau[4:-1])
        return f"log({q})", rf"\log({_tq(q)})"
    q = _q(tau)
    return q, _tq(q)


def _cube_inputs(p: Fields, e: Fields) -> tuple[str, str]:
    m, n, eps = _p(p, "m", int), _p(p, "n", int), _q(_p(p, "eps"))
    k = _e(e, "sequences", int)
    return (f"solves Min-IP with error < {eps} at every position of all {k} sequences of length "
            f"<= {n} over {{0,1}}^{m}",
            rf"solves Min-IP with error $< {_tq(eps)}$ at every position of all ${k}$ sequences of "
            rf"length $\le {n}$ over $\{{0,1\}}^{{{m}}}$")


def _theorem(p: Fields, e: Fields) -> Statement:
    name = _p(p, "theorem", str)
    if name == "thm1":
        tau, ltau = _tau_text(_p(p, "tau", str))
        rest, lrest = _cube_inputs(p, e)
        return Statement(f"Thm 1 (dense softmin): the head with scores s_ij = -tau <x_i, x_j>, tau = {tau}, "
                         f"values v(x) = x and readout <x_i, y_i> {rest}",
                         rf"Thm 1 (dense softmin): the head with scores $s_{{ij}} = -\tau\langle x_i, "
                         rf"x_j\rangle$, $\tau = {ltau}$, values $v(x) = x$ and readout $\langle x_i, "
                         rf"y_i\rangle$ {lrest}")
    if name == "thm6":
        rest, lrest = _cube_inputs(p, e)
        return Statement(f"Thm 6 (first part): the rank-1 head alpha = 1, v(z) = z with readout "
                         f"2 <x_i, a_i> - |x_i|_1 {rest}",
                         rf"Thm 6 (first part): the rank-1 head $\alpha = 1$, $v(z) = z$ with readout "
                         rf"$2\langle x_i, a_i\rangle - \|x_i\|_1$ {lrest}")
    if name != "thm8":
        raise RenderError(f"unknown theorem {name!r:.20}")
    h, r, n, eps = _p(p, "head_sha256", str), _p(p, "rank", int), _p(p, "n", int), _q(_p(p, "eps"))
    fam, lfam = family_ref(p)
    k, rk, lo = _e(e, "scored_positions", int), _e(e, "effective_rank", int), _e(e, "rank_bound", int)
    return Statement(f"Thm 8 (position-dependent key maps, final query): the head with tables sha256 "
                     f"{_short(h)}, r = {r} shared features and a key map phiK_j per position j, "
                     f"every alpha_j(x, z) = <phiQ(x), phiK_j(z)> >= 0, solves {fam} (length {n}) with "
                     f"error < {eps} at all {k} scored positions; its effective kernel, sum_j alpha_j "
                     f"over the source positions, has rank exactly {rk} over Q, at least the bound "
                     f"r >= {lo} that Thm 8 with "
                     f"Lemma 3 and Lemma 4 on the family's chains gives every such head",
                     rf"Thm 8 (position-dependent key maps, final query): the head with tables sha256 "
                     rf"\texttt{{{h[:16]}}}\ldots, $r = {r}$ shared features and a key map $\phi_{{K,j}}$ "
                     rf"per position $j$, every $\alpha_j(x, z) = \langle \phi_Q(x), \phi_{{K,j}}(z)"
                     rf"\rangle \ge 0$, solves {lfam} (length ${n}$) with error $< {_tq(eps)}$ at all "
                     rf"${k}$ scored positions; its effective kernel, $\sum_j \alpha_j$ over the source "
                     rf"positions, has rank exactly "
                     rf"${rk}$ over $\mathbb{{Q}}$, at least the bound $r \ge {lo}$ that Thm 8 with "
                     rf"Lemma 3 and Lemma 4 on the family's chains gives every such head")


_BOUNDS = {"lemma3": _b_lemma3, "lemma4": _b_lemma4, "lemma4_per_pair": _b_lemma4_pp,
           "thm5": _b_thm5, "thm6": _b_thm6, "cor7": _b_cor7, "eq8": _b_eq8, "prop10": _b_prop10}

_KINDS: dict[str, Renderer] = {
    "bound": _bound, "exact_rank": _exact_rank2, "eps_rank": _eps_rank2, "numerical_rank": _numerical_rank2,
    "code_rank": _code_rank2, "nonnegative": _nonnegative2, "feasible": _feasibility("feasible"),
    "infeasible": _feasibility("infeasible"), "correctness": _correctness2,
    "gap_domination": _gap_domination2, "transcript": _transcript2, "theorem": _theorem,
}

#: What each kind's sentence reads, as ``(where, key)``, from the kinds' declarations
#: (:mod:`certify.checkers.kinds`): every field a sentence prints is either re-derived
#: by the kind's checker or bound by verify (:mod:`certify.checkers.binding`);
#: ``tests/test_trust.py`` mutates each one.
FIELDS = _kinds.FIELDS


def render(kind: str, parameters: Mapping[str, Any], evidence: Mapping[str, Any] | None = None,
           version: str = RENDERER, reads: set | None = None) -> Statement:
    """The statement of a claim; :class:`RenderError` when the claim's fields do
    not determine one. ``reads`` collects the ``(where, key)`` fields it read."""
    if version not in RENDERERS:
        raise RenderError(f"unknown statement renderer {version!r:.60}")
    fn = _KINDS.get(kind)
    if fn is None:
        raise RenderError(f"no statement for claim kind {kind!r:.30}")
    if not isinstance(parameters, Mapping):
        raise RenderError("parameters must be an object")
    prev, _Reads.current = _Reads.current, reads
    try:
        return fn(parameters, evidence if isinstance(evidence, Mapping) else {})
    finally:
        _Reads.current = prev


def check_statement(claim: Mapping[str, Any], version: str | None) -> list[str]:
    """Problems with a stored statement: it must equal the rendered one, and the
    rendering must have read every parameter of :data:`FIELDS` the claim carries
    (a parameter the sentence never reads could change the claim's meaning and
    leave its sentence as it was)."""
    if version not in RENDERERS:
        return [f"the certificate's renderer {str(version)!r:.60} is not one this checker "
                "renders with"]
    reads: set = set()
    try:
        want = render(str(claim.get("kind")), claim.get("parameters") or {}, claim.get("evidence"), version,
                      reads=reads)
    except RenderError as exc:
        return [f"cannot render the statement: {exc}"]
    p = claim.get("parameters") or {}
    kind = str(claim.get("kind"))
    table = FIELDS[kind] if kind in FIELDS else tuple(("parameters", k) for k in p)
    unread = [k for where, k in table
              if where == "parameters" and p.get(k) is not None and (where, k) not in reads]
    if unread:
        return [f"the sentence does not print parameters {', '.join(unread)}: the renderer "
                "cannot state this claim completely"]
    if claim.get("statement") != want.text:
        return [f"the stored statement is not the one its parameters say: stored "
                f"{str(claim.get('statement'))!r:.200}, rendered {want.text!r:.200}"]
    return []
