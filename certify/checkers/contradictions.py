"""Claims that contradict each other, within one certificate or across the certificates
of one ``verify`` call: each rule names both claims (:func:`contradictions`). Kernels,
heads and models are compared by identity from bound content only
(:func:`certify.checkers.binding.kernel_identity`), never by their labels."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any, Callable, Mapping, Sequence

from certify.checkers import binding as _binding_mod
from certify.checkers.kinds import BY_NAME

_TRANSCRIPT = BY_NAME["transcript"]
#: the parameters that name a transcript claim's family (M, s, h, q): those its embedded
#: family also carries (declared in certify.checkers.kinds)
_FAMILY_PARAMETERS = tuple(k for k in _TRANSCRIPT.params().fields if k in _TRANSCRIPT.part("family").fields)

_FEATURE_ORDER = {"nonnegative": 0, "real": 1}
_CLASS_ORDER = {"paper": 0, "used-pairs": 1}
_SCOPE_ORDER = {"cube": 0, "family": 1}


def _within(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Every head of class ``a`` is a head of class ``b`` (same family)."""
    try:
        return (_FEATURE_ORDER[a["features"]] <= _FEATURE_ORDER[b["features"]]
                and _CLASS_ORDER[a["class"]] <= _CLASS_ORDER[b["class"]]
                and _SCOPE_ORDER[a.get("scope", "family")] <= _SCOPE_ORDER[b.get("scope", "family")])
    except (KeyError, TypeError):
        return False


def _matrix_key(claim: Mapping[str, Any]) -> tuple | None:
    """The kernel a claim is about (:func:`certify.checkers.binding.kernel_identity`)."""
    return _binding_mod.kernel_identity(claim)


def _model_key(p: Mapping[str, Any]) -> str | None:
    """A head's identity: its weights' canonical hash, else its exact tables' hash."""
    for k in ("weights_sha256", "head_sha256"):
        if isinstance(p.get(k), str):
            return f"{k}:{p[k]}"
    return None


def _kernel_source(p: Mapping[str, Any]) -> tuple | None:
    src = p.get("source_sha256") or p.get("source")
    return ((src, p.get("adapter"), p.get("layer"), p.get("head"),
             json.dumps(p.get("stated"), sort_keys=True)) if isinstance(src, str) else None)


def _token_of(ts: Any, ev: Mapping[str, Any], i: Any) -> str | None:
    """Token ``i`` of a claim's token set as a bit string, when the claim shows it."""
    if not isinstance(i, int) or isinstance(i, bool) or i < 0:
        return None
    if isinstance(ts, str) and ts.startswith("cube:") and ts[5:].isdigit():
        m = int(ts[5:])
        return "".join(str(i >> b & 1) for b in range(m)) if i < 1 << m else None
    toks = ev.get("tokens")
    return toks[i] if isinstance(toks, list) and i < len(toks) else None


def _has_token(p: Mapping[str, Any], ev: Mapping[str, Any], tok: str) -> bool | None:
    """Whether a claim's token set holds ``tok`` (None: the claim does not show it)."""
    ts = p.get("token_set")
    if isinstance(ts, str) and ts.startswith("cube:") and ts[5:].isdigit():
        return len(tok) == int(ts[5:])
    toks = ev.get("tokens")
    return tok in toks if isinstance(toks, list) else None


def _pair(ev: Mapping[str, Any]) -> Any:
    if isinstance(ev.get("pair"), list):
        return ev["pair"]
    return ev.get("argmin")


#: records a contradiction between two claims, each given as (certificate label, claim index, ...)
Add = Callable[[tuple, tuple, str], None]


def _where(label: str, i: int) -> str:
    return f"claim {i} of {label}"


def contradictions(items: Sequence[tuple[str, int, Mapping[str, Any]]]) -> dict[tuple[str, int], list[str]]:
    """Problems per (certificate, claim index) for claims that contradict each other.
    ``items`` are (certificate label, claim index, claim) of claims that hold alone.

    Checked, each naming both claims: one sentence proved and refuted; feasible at
    rank r in a class inside a class proved infeasible at r' >= r; two exact ranks
    of one matrix that do not overlap; an eps-rank above the exact rank of the same
    matrix; correctness of one head on one family proved at eps and refuted at
    eps' >= eps (gap domination: proved and refuted); a transcript claim of one
    model (weights and quantizer) on one family proved and refuted; nonnegativity
    of one kernel proved on a token set and refuted at a pair of its tokens (token
    sets compared through the tokens themselves). One function per rule below."""
    out: dict[tuple[str, int], list[str]] = {}
    feas, infeas, ranks, eps = [], [], [], []
    by_sentence: dict[str, list] = {}
    by_kind: dict[str, list] = {}
    for label, i, c in items:
        p = c.get("parameters") or {}
        ev = c.get("evidence") or {}
        verdict, kind = c.get("verdict"), c.get("kind")
        if verdict in ("proved", "refuted") and isinstance(c.get("statement"), str):
            by_sentence.setdefault(c["statement"], []).append((label, i, verdict))
        by_kind.setdefault(str(kind), []).append((label, i, verdict, p, ev))
        if verdict != "proved":
            continue
        if kind == "feasible":
            feas.append((label, i, p))
        elif kind == "infeasible":
            infeas.append((label, i, p))
        elif kind in ("exact_rank", "eps_rank"):
            key = _matrix_key(c)
            if key is None:
                continue
            if kind == "exact_rank" and isinstance(ev.get("rank_lower"), int) \
                    and isinstance(ev.get("rank_upper"), int):
                ranks.append((label, i, key, ev["rank_lower"], ev["rank_upper"]))
            elif kind == "eps_rank" and isinstance(ev.get("k"), int):
                eps.append((label, i, key, ev["k"], p.get("eps"), ev.get("exact") is True))

    def both(a: tuple[Any, ...], b: tuple[Any, ...], msg: str) -> None:
        out.setdefault((a[0], a[1]), []).append(msg)
        out.setdefault((b[0], b[1]), []).append(msg)

    _same_sentence(by_sentence, both)
    _feasibility(feas, infeas, both)
    _ranks(ranks, eps, both)
    _heads(by_kind, both)
    _transcripts(by_kind.get("transcript", []), both)
    _nonnegativity(by_kind.get("nonnegative", []), both)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def _same_sentence(by_sentence: Mapping[str, list], both: Add) -> None:
    """One sentence proved by one claim and refuted by another."""
    for sentence, group in by_sentence.items():
        pro = [g for g in group if g[2] == "proved"]
        ref = [g for g in group if g[2] == "refuted"]
        for a in pro:
            for b in ref:
                both(a, b, f"contradiction: {_where(a[0], a[1])} proves and {_where(b[0], b[1])} "
                           f"refutes the same sentence: {sentence[:160]}")


def _feasibility(feas: list, infeas: list, both: Add) -> None:
    """Feasible at rank r in a class inside a class proved infeasible at r' >= r."""
    for fl, fi, fp in feas:
        for il, ii, ip in infeas:
            if fp.get("family_sha256") != ip.get("family_sha256"):
                continue
            r, r2 = fp.get("rank"), ip.get("rank")
            if isinstance(r, int) and isinstance(r2, int) and r <= r2 and _within(fp, ip):
                both((fl, fi), (il, ii),
                     f"contradiction: {_where(fl, fi)} proves a rank-{r} {fp.get('features')} "
                     f"head ({fp.get('class')}) solves the family, {_where(il, ii)} proves none of "
                     f"rank {r2} >= {r} ({ip.get('features')}, {ip.get('class')}) does")


def _ranks(ranks: list, eps: list, both: Add) -> None:
    """Exact ranks of one matrix that do not overlap; eps-ranks above an exact count or
    above the exact rank of the same matrix."""
    for a in range(len(ranks)):
        for b in range(a + 1, len(ranks)):
            la, ia, ka, loa, hia = ranks[a]
            lb, ib, kb, lob, hib = ranks[b]
            if ka == kb and (hia < lob or hib < loa):
                both((la, ia), (lb, ib),
                     f"contradiction: {_where(la, ia)} puts the rank of the same matrix in "
                     f"[{loa}, {hia}], {_where(lb, ib)} in [{lob}, {hib}]")
    for x in eps:
        for y in eps:
            # at one eps: x proves k_x values above eps; y, when exact, proves exactly k_y
            if x is not y and x[2] == y[2] and x[4] == y[4] and y[5] and x[3] > y[3]:
                both((x[0], x[1]), (y[0], y[1]),
                     f"contradiction: {_where(x[0], x[1])} proves {x[3]} singular values above "
                     f"eps = {x[4]}, {_where(y[0], y[1])} proves exactly {y[3]} of the same kernel")
    for el, ei, ek, k, _, _ in eps:
        for rl, ri, rk, _lo, hi in ranks:
            if ek == rk and k > hi:
                both((el, ei), (rl, ri),
                     f"contradiction: {_where(el, ei)} proves {k} singular values above eps, "
                     f"{_where(rl, ri)} proves the same matrix has rank <= {hi}")


def _heads(by_kind: Mapping[str, list], both: Add) -> None:
    """Correctness of one head on one family proved at eps and refuted at eps' >= eps;
    gap domination proved and refuted at one eps."""
    for kind in ("correctness", "gap_domination"):
        group = by_kind.get(kind, [])
        for a in group:
            for b in group:
                if a[2] != "proved" or b[2] != "refuted":
                    continue
                ma, mb = _model_key(a[3]), _model_key(b[3])
                if ma is None or ma != mb or a[3].get("family_sha256") != b[3].get("family_sha256"):
                    continue
                try:
                    ea, eb = _fraction(a[3].get("eps")), _fraction(b[3].get("eps"))
                except (ValueError, ZeroDivisionError, TypeError):
                    continue
                if eb >= ea if kind == "correctness" else eb == ea:
                    both(a, b, f"contradiction: {_where(a[0], a[1])} proves and {_where(b[0], b[1])} "
                               f"refutes {kind} of the same head ({ma[:40]}...) on the same "
                               f"family (eps {ea} and {eb})")


def _transcripts(group: list, both: Add) -> None:
    """A transcript claim of one model (weights, quantizer) on one family proved and refuted."""
    for a in group:
        for b in group:
            if a[2] != "proved" or b[2] != "refuted":
                continue
            if _transcript_key(a[3], a[4]) is not None and \
                    _transcript_key(a[3], a[4]) == _transcript_key(b[3], b[4]):
                both(a, b, f"contradiction: {_where(a[0], a[1])} proves the transcript claim of a "
                           f"model that {_where(b[0], b[1])} refutes (the same weights, quantizer "
                           "and family)")


def _nonnegativity(group: list, both: Add) -> None:
    """Nonnegativity of one kernel proved on a token set and refuted at a pair of its tokens."""
    for a in group:
        for b in group:
            if a[2] != "proved" or b[2] != "refuted":
                continue
            na = _binding_mod.kernel_identity({"kind": "nonnegative", "parameters": a[3],
                                               "evidence": a[4]})
            nb = _binding_mod.kernel_identity({"kind": "nonnegative", "parameters": b[3],
                                               "evidence": b[4]})
            if na is not None and na == nb:
                both(a, b, f"contradiction: {_where(a[0], a[1])} proves and {_where(b[0], b[1])} "
                           "refutes nonnegativity of the same kernel")
                continue
            if _kernel_source(a[3]) is None or _kernel_source(a[3]) != _kernel_source(b[3]):
                continue
            pair = _pair(b[4])
            if not isinstance(pair, list) or len(pair) != 2:
                continue
            toks = [_token_of(b[3].get("token_set"), b[4], j) for j in pair]
            same_set = _binding_mod.token_content(a[3]) == _binding_mod.token_content(b[3])
            inside = same_set or all(t is not None and _has_token(a[3], a[4], t) for t in toks)
            if inside:
                both(a, b, f"contradiction: {_where(a[0], a[1])} proves alpha >= 0 on a token set "
                           f"that holds the pair where {_where(b[0], b[1])} finds alpha < 0 "
                           "(the same kernel)")


def _fraction(v: Any) -> Fraction:
    from fractions import Fraction
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError
    return Fraction(v)


def _transcript_key(p: Mapping[str, Any], ev: Mapping[str, Any]) -> tuple | None:
    model = ev.get("model") if isinstance(ev, Mapping) else None
    w = model.get("weights_sha256") if isinstance(model, Mapping) else None
    if not isinstance(w, str):
        return None
    fam = tuple(p.get(k) for k in _FAMILY_PARAMETERS)
    return (w, json.dumps(p.get("quantizer"), sort_keys=True), fam)
