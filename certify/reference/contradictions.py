"""Claims that contradict each other, across every certificate of one ``verify
--reference`` call: both claims fail.

Why a checker that re-derives every claim exactly still needs this: two claims
about one object, each re-derived, cannot both hold -- unless one of them holds
only under an assumption (``extraction:<source>``: the features are the
evidence's, not the checkpoint's; ``source:<name>``: the file is absent;
``trusted:...``, ``family:...``, ``replay:transcript-enumeration``). Two
certificates of one checkpoint head, one embedding features of rank 3 and one of
rank 4, each hold under ``extraction:`` (exit 4); taken together they say the
head's kernel has rank 3 and rank 4, so at least one is false, and the call
fails (exit 1), as ``certify verify`` does. Where no assumption is left the rule
never fires (one of the two claims already fails its re-derivation).

The rules, each on claims that hold alone (an ``unknown`` verdict states nothing
to contradict): one sentence proved and refuted; a head of rank ``r`` proved
feasible on a family and every head of rank ``r' >= r`` of a class containing
it proved infeasible on the same family (by its sha256); two proved exact ranks
of one kernel that do not overlap; an eps-rank of one kernel above its exact
rank, or above an exact eps-rank at the same eps; correctness of one head on one
family proved at eps and refuted at ``eps' >= eps`` (gap domination: at the same
eps); a transcript claim of one model (weights' hash, quantizer, (M, s, h, q))
proved and refuted; nonnegativity of one kernel proved and refuted, or proved on
a token set that holds the pair of tokens where another claim of the same
source refutes it.

A kernel is identified by the content it is bound to (:func:`kernel_key`), never
by a label: a matrix file by its sha256, a kernel in memory by its embedded
data's hashes, an extraction by its source's sha256 (a construction by its
name), adapter, layer and head, stated arguments, features' dtype and token set
by content (``{0,1}^m`` by m, a vocabulary by its size, a token list by its
hash, else the row count).
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any, Hashable, Mapping, Sequence

#: (certificate key, claim index, claim); the key is any hashable label of the certificate
Item = tuple[Hashable, int, Mapping[str, Any]]

_CUBE = re.compile(r"cube:(\d+)")
_VOCAB = re.compile(r"vocab:(\d+)")
_WIDER_FEATURES = {"nonnegative": 0, "real": 1}
_WIDER_CLASS = {"paper": 0, "used-pairs": 1}
_WIDER_SCOPE = {"cube": 0, "family": 1}


def _tokens_by_content(p: Mapping[str, Any]) -> tuple:
    ts = p.get("token_set")
    if isinstance(ts, str):
        if (m := _CUBE.fullmatch(ts)) is not None:
            return ("cube", int(m.group(1)))
        if (v := _VOCAB.fullmatch(ts)) is not None:
            return ("vocab", int(v.group(1)))
    if isinstance(p.get("tokens_sha256"), str):
        return ("tokens", p["tokens_sha256"])
    return ("rows", p.get("num_tokens"))


def kernel_key(claim: Mapping[str, Any]) -> tuple | None:
    """The kernel a kernel claim is about, by the content it is bound to; None when
    it is bound to nothing (such a claim has failed already)."""
    p, ev = claim.get("parameters"), claim.get("evidence")
    if not isinstance(p, Mapping) or not isinstance(ev, Mapping):
        return None
    src, sha, adapter = p.get("source"), p.get("source_sha256"), p.get("adapter")
    if not isinstance(src, str) or not isinstance(adapter, str):
        return None
    fs = ev.get("features_sha256")
    if adapter == "matrix-file":
        return ("file", sha) if isinstance(sha, str) else None
    if adapter == "memory":
        if isinstance(fs, Mapping) and isinstance(fs.get("phi_q"), str) and isinstance(fs.get("phi_k"), str):
            return ("memory", "features", fs["phi_q"], fs["phi_k"])
        if "features_sha256" not in ev and isinstance(ev.get("matrix_sha256"), str):
            return ("memory", "matrix", ev["matrix_sha256"])
        if "features_sha256" not in ev and isinstance(ev.get("values_sha256"), str):
            return ("memory", "matrix", ev["values_sha256"])
        return None
    if sha is None and adapter != "construction":
        return None
    if sha is not None and not isinstance(sha, str):
        return None
    dtype = fs.get("dtype") if isinstance(fs, Mapping) else p.get("dtype")
    return ("extraction", sha if sha is not None else src, adapter, p.get("layer"), p.get("head"),
            json.dumps(p.get("stated"), sort_keys=True), _tokens_by_content(p), dtype)


def _source_key(p: Mapping[str, Any]) -> tuple | None:
    """The kernel up to its token set (nonnegativity on one token set and a pair of another)."""
    src = p.get("source_sha256") or p.get("source")
    if not isinstance(src, str):
        return None
    return (src, p.get("adapter"), p.get("layer"), p.get("head"), json.dumps(p.get("stated"), sort_keys=True))


def _head_key(p: Mapping[str, Any]) -> str | None:
    for k in ("weights_sha256", "head_sha256"):
        if isinstance(p.get(k), str):
            return f"{k}:{p[k]}"
    return None


def _rational(v: Any) -> Fraction | None:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        return None
    try:
        return Fraction(v)
    except (ValueError, ZeroDivisionError):
        return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _contains(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Every head of feasibility class ``a`` is one of class ``b``."""
    try:
        return (_WIDER_FEATURES[a["features"]] <= _WIDER_FEATURES[b["features"]]
                and _WIDER_CLASS[a["class"]] <= _WIDER_CLASS[b["class"]]
                and _WIDER_SCOPE[a.get("scope", "family")] <= _WIDER_SCOPE[b.get("scope", "family")])
    except (KeyError, TypeError):
        return False


def _token(p: Mapping[str, Any], ev: Mapping[str, Any], i: Any) -> str | None:
    """Token ``i`` of the claim's token set, as bits, when the claim shows it."""
    if _int(i) is None or i < 0:
        return None
    ts = p.get("token_set")
    m = _CUBE.fullmatch(ts) if isinstance(ts, str) else None
    if m is not None:
        w = int(m.group(1))
        return "".join(str(i >> b & 1) for b in range(w)) if i < 1 << w else None
    toks = ev.get("tokens")
    return toks[i] if isinstance(toks, list) and i < len(toks) and isinstance(toks[i], str) else None


def _holds_token(p: Mapping[str, Any], ev: Mapping[str, Any], tok: str) -> bool:
    ts = p.get("token_set")
    m = _CUBE.fullmatch(ts) if isinstance(ts, str) else None
    if m is not None:
        return len(tok) == int(m.group(1))
    toks = ev.get("tokens")
    return isinstance(toks, list) and tok in toks


def contradictions(items: Sequence[Item]) -> dict[tuple[Hashable, int], list[str]]:
    """Problems per (certificate key, claim index) of the claims that contradict another."""
    out: dict[tuple[Hashable, int], list[str]] = {}

    def both(a: tuple, b: tuple, msg: str) -> None:
        out.setdefault((a[0], a[1]), []).append(msg)
        out.setdefault((b[0], b[1]), []).append(msg)

    def at(x: tuple) -> str:
        label = x[0][1] if isinstance(x[0], tuple) and len(x[0]) == 2 else x[0]
        return f"claim {x[1]} of {label}"

    proved: dict[str, list[tuple]] = {}
    for cert, i, c in items:
        p = c.get("parameters") if isinstance(c.get("parameters"), Mapping) else {}
        ev = c.get("evidence") if isinstance(c.get("evidence"), Mapping) else {}
        if c.get("verdict") in ("proved", "refuted"):
            proved.setdefault(str(c.get("kind")), []).append((cert, i, c.get("verdict"), p, ev,
                                                              c.get("statement")))
    every = [x for group in proved.values() for x in group]

    # one sentence, proved and refuted
    for a in every:
        for b in every:
            if a[2] == "proved" and b[2] == "refuted" and isinstance(a[5], str) and a[5] == b[5]:
                both(a, b, f"contradiction: {at(a)} proves and {at(b)} refutes the same sentence: "
                           f"{a[5][:160]}")
    # feasible at r inside a class proved infeasible at r' >= r, on one family
    for a in proved.get("feasible", []):
        for b in proved.get("infeasible", []):
            if a[2] != "proved" or b[2] != "proved" or a[3].get("family_sha256") != b[3].get("family_sha256"):
                continue
            r, r2 = _int(a[3].get("rank")), _int(b[3].get("rank"))
            if r is not None and r2 is not None and r <= r2 and _contains(a[3], b[3]):
                both(a, b, f"contradiction: {at(a)} proves a rank-{r} head solves the family, {at(b)} "
                           f"that no head of rank {r2} >= {r} of a class containing it does")
    # exact ranks and eps-ranks of one kernel
    ranks, eps = [], []
    for kind in ("exact_rank", "eps_rank"):
        for x in proved.get(kind, []):
            if x[2] != "proved":
                continue
            key = kernel_key({"parameters": x[3], "evidence": x[4]})
            if key is None:
                continue
            if kind == "exact_rank":
                lo, hi = _int(x[4].get("rank_lower")), _int(x[4].get("rank_upper"))
                if lo is not None and hi is not None:
                    ranks.append((x, key, lo, hi))
            elif _int(x[4].get("k")) is not None:
                eps.append((x, key, x[4]["k"], x[3].get("eps"), x[4].get("exact") is True))
    for n, (a, ka, loa, hia) in enumerate(ranks):
        for b, kb, lob, hib in ranks[n + 1:]:
            if ka == kb and (hia < lob or hib < loa):
                both(a, b, f"contradiction: {at(a)} puts the rank of one kernel in [{loa}, {hia}], "
                           f"{at(b)} in [{lob}, {hib}]")
    for a, ka, k_a, e_a, _ in eps:
        for b, kb, k_b, e_b, exact_b in eps:
            if a is not b and ka == kb and e_a == e_b and exact_b and k_a > k_b:
                both(a, b, f"contradiction: {at(a)} proves {k_a} singular values above eps = {e_a}, "
                           f"{at(b)} exactly {k_b} of the same kernel")
        for b, kb, _lo, hi in ranks:
            if ka == kb and k_a > hi:
                both(a, b, f"contradiction: {at(a)} proves {k_a} singular values above eps, {at(b)} "
                           f"that the same kernel has rank <= {hi}")
    # one head on one family: correct at eps and incorrect at eps' >= eps
    for kind in ("correctness", "gap_domination"):
        group = proved.get(kind, [])
        for a in group:
            for b in group:
                if a[2] != "proved" or b[2] != "refuted":
                    continue
                ha = _head_key(a[3])
                if ha is None or ha != _head_key(b[3]) or a[3].get("family_sha256") != b[3].get("family_sha256"):
                    continue
                ea, eb = _rational(a[3].get("eps")), _rational(b[3].get("eps"))
                if ea is None or eb is None:
                    continue
                if (eb >= ea) if kind == "correctness" else (eb == ea):
                    both(a, b, f"contradiction: {at(a)} proves and {at(b)} refutes {kind} of one head "
                               f"on one family (eps {ea} and {eb})")
    # one transcript model on one family, proved and refuted
    def model_key(x: tuple) -> tuple | None:
        model = x[4].get("model")
        w = model.get("weights_sha256") if isinstance(model, Mapping) else None
        if not isinstance(w, str):
            return None
        return (w, json.dumps(x[3].get("quantizer"), sort_keys=True),
                tuple(x[3].get(k) for k in ("M", "s", "h", "q")))
    for a in proved.get("transcript", []):
        for b in proved.get("transcript", []):
            if a[2] == "proved" and b[2] == "refuted" and model_key(a) is not None \
                    and model_key(a) == model_key(b):
                both(a, b, f"contradiction: {at(a)} proves the transcript claim of a model that {at(b)} "
                           "refutes (the same weights, quantizer and family)")
    # nonnegativity of one kernel, proved and refuted
    for a in proved.get("nonnegative", []):
        for b in proved.get("nonnegative", []):
            if a[2] != "proved" or b[2] != "refuted":
                continue
            kernel_a = kernel_key({"parameters": a[3], "evidence": a[4]})
            if kernel_a is not None and kernel_a == kernel_key({"parameters": b[3], "evidence": b[4]}):
                both(a, b, f"contradiction: {at(a)} proves and {at(b)} refutes nonnegativity of one kernel")
                continue
            if _source_key(a[3]) is None or _source_key(a[3]) != _source_key(b[3]):
                continue
            pair = b[4].get("pair") if isinstance(b[4].get("pair"), list) else b[4].get("argmin")
            if not isinstance(pair, list) or len(pair) != 2:
                continue
            toks = [_token(b[3], b[4], j) for j in pair]
            if _tokens_by_content(a[3]) == _tokens_by_content(b[3]) or \
                    all(t is not None and _holds_token(a[3], a[4], t) for t in toks):
                both(a, b, f"contradiction: {at(a)} proves alpha >= 0 on a token set that holds the "
                           f"pair where {at(b)} finds alpha < 0 (one kernel)")
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}
