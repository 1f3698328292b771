"""Independent checker of ``transcript`` claims (Thm 9 on a quantized sketch model).

Imports only the standard library, numpy, :mod:`certify.checkers.common` and the
kernel's exact numbers (:mod:`certify.checkers.kernel.replay`: Fractions, arb balls
that decide or say undecided, exact integer array products, a uniform quantizer's
cells and the final error test). Every object has exactly the keys listed here.

The model (re-implemented here from its definition): tokens ``x`` (0/1 rows),
``h_i = E x_i (+ P_i)``; per layer ``l`` and head ``c``:
``phiK_j = f(WK h_j + bK)``, ``v_j = WV h_j + bV``, ``S = sum_j phiK_j v_j^T``,
``z = sum_j phiK_j``, every coordinate quantized (``S`` row-major, then ``z``);
``phiQ_i = f(WQ h_i + bQ)``, ``a_i = phiQ_i^T Sq / (phiQ_i . zq)`` (0 when the
denominator is exactly 0); ``h_i += sum_c WO_c a_i^c + bO``; output
``w . h_i + b``. ``f`` in identity / relu (replayed with Fractions), elu1 /
exp (arb balls; a coordinate is certain when both ends of its ball fall in one
quantizer cell). Tokens meet only through the quantized sketches, so equal
transcripts give equal query outputs (the query block is fixed).

Quantizers: ``{"kind": "uniform", "bits": p, "lo", "hi"}`` (optional
``calibrated``: a description of how ``[lo, hi]`` was chosen) with index
``clamp(floor((x - lo)/step + 1/2), 0, 2^p - 1)``, ``step = (hi - lo)/(2^p - 1)``;
``{"kind": "float", "format": "fp8-e4m3"|"fp8-e5m2"|"bf16"|"fp16"}``: round to
nearest even on the format's finite values, saturating at +-max; the symbol is
the rounded value.

Parameters: ``M, s, h, q`` (equal to the family's), ``layers, heads, rank, dv,
feature_map`` (equal to the model config's), ``quantizer`` (equal to the
model's). The context length, float64 search counts and display bit counts
are in ``info`` (never read).

Evidence fields (claim ``evidence``), always:
* ``capacity``: ``{"coordinates": T, "alphabet": A, "assignments": (s+1)^q,
  "holds": A^T >= (s+1)^q, "bits_needed": least b with 2^b >= (s+1)^q,
  "bits_available": T log2 A (an integer when A is a power of two, else null)}``
  -- all re-derived, all exact.
* ``family``: ``{"M", "s", "h", "q", "words": [bitstrings]}`` -- q words of
  length M and weight ``h``, pairwise ``|U \\ S| >= s + 1``.
* ``model``: ``{"config", "weights": {name: {"shape", "exp", "ints"}},
  "weights_sha256", "quantizer", "source"}`` -- value = ``ints * 2^exp``
  exactly; ``source`` is a label.
* ``type`` and its fields:
  - ``"collision"`` (verdict refuted): ``kappa_a``, ``kappa_b``, ``index_a``,
    ``index_b`` (lexicographic positions, kappa_0 most significant),
    ``input_a``, ``input_b`` (bitstrings, the multilevel inputs of the kappas),
    ``targets_a``, ``targets_b`` (Min-IP targets at the query positions,
    recomputed), ``transcript`` (ints or "p/q"); both inputs are replayed and
    must give this transcript with certainty. With an exact feature map
    (identity / relu) also ``query_outputs`` (input_a's outputs at the q query
    positions) and
    ``failing`` ``{"input", "position", "target", "output"}`` (the first query
    position where the targets differ and the input that errs there) --
    both re-derived.
  - ``"error"`` (refuted): ``kappa``, ``index``, ``input``, ``position``,
    ``target``, ``output``: the exact replay's query output errs by >= 1/2.
  - ``"all"`` (proved): ``exact_checked = (s+1)^q``; every assignment is
    replayed and every query output lies within < 1/2 of its target. A
    one-layer identity/relu model without positions with a uniform quantizer,
    up to ``MAX_INTEGER`` assignments, by an exact integer replay in numpy
    (whatever the number of assignments: it is exact, and seconds where
    Fractions take minutes); any other model up to ``MAX_ALL`` assignments
    with Fractions. The integer replay (per-slot partial sums of
    the layer-1 sketch as integers, the quantizer index as an integer floor
    division, and each query's error test ``|y - t| < 1/2`` multiplied out over
    the heads' denominators; about 1-3 s per million assignments of the
    built-in q = 20 model). Anything larger must list
    ``"replay:transcript-enumeration"`` in the optional ``assumptions`` (the
    step the checker could not replay); the checker then replays a seeded
    sample of ``SAMPLE`` assignments with Fractions and the claim holds only
    under that named assumption.
  - ``"none"`` (unknown, with a reason): nothing beyond the above.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import product
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from certify.checkers.common import Bad as _Bad
from certify.checkers.common import (
    bits,
    canonical_sha256,
    guarded,
    int_max_abs,
    integer,
    min_ip_targets,
    rational,
    same_json,
)
from certify.checkers.families import multilevel_database, multilevel_input, multilevel_query
from certify.checkers.fields import MAX_EXPONENT
from certify.checkers.kernel.replay import Numbers, Undecided, cells, sum_at_least
from certify.checkers.kernel.replay import product as int_product
from certify.checkers.kinds import BY_NAME
from certify.checkers.parallel import first_problem

HALF = Fraction(1, 2)
MAX_ALL = 1 << 16
MAX_INTEGER = 1 << 24
SAMPLE = 64
REPLAY_ASSUMPTION = "replay:transcript-enumeration"
_FLOATS = {  # mantissa bits, emin, max, finite values (-0 == +0)
    "fp8-e4m3": (3, -6, Fraction(448), 253),
    "fp8-e5m2": (2, -14, Fraction(57344), 247),
    "bf16": (7, -126, Fraction(255 * 2 ** 120), 65279),
    "fp16": (10, -14, Fraction(65504), 63487),
}
#: the claim's parameters, evidence types and nested objects (declared in certify.checkers.kinds)
_DECLARED = BY_NAME["transcript"]
_CONFIG_KEYS = frozenset(_DECLARED.part("model.config").fields)
_EXACT_MAPS = ("identity", "relu")


def _q(s: Any) -> Fraction:
    return rational(s, "transcript value")


# ---------------------------------------------------------------- quantizers

class _Quant:
    def __init__(self, obj: dict) -> None:
        self.kind = obj.get("kind") if isinstance(obj, dict) else None
        if self.kind == "uniform":
            _DECLARED.part("model.quantizer:uniform").check_keys(obj, "quantizer")
            if not isinstance(obj.get("calibrated", ""), str):
                raise _Bad("quantizer.calibrated must be a string (how the range was chosen)")
            self.p = integer(obj["bits"], "uniform quantizer bits", 1)
            self.lo, self.hi = _q(obj["lo"]), _q(obj["hi"])
            if not self.lo < self.hi:
                raise _Bad("uniform quantizer needs lo < hi")
            self.top = 2 ** self.p - 1
            self.step = (self.hi - self.lo) / self.top
            self.alphabet = 2 ** self.p
        elif self.kind == "float":
            _DECLARED.part("model.quantizer:float").check_keys(obj, "quantizer")
            if obj.get("format") not in _FLOATS:
                raise _Bad(f"unknown float format {obj.get('format')!r}")
            self.man, self.emin, self.max, self.alphabet = _FLOATS[obj["format"]]
        else:
            raise _Bad(f"unknown quantizer kind {self.kind!r}")

    def symbol(self, x: Fraction) -> int | Fraction:
        if self.kind == "uniform":
            k = math.floor((x - self.lo) / self.step + HALF)
            return min(max(k, 0), self.top)
        if x == 0:
            return Fraction(0)
        ax = abs(x)
        e = 0
        while Fraction(2) ** e > ax:
            e -= 1
        while Fraction(2) ** (e + 1) <= ax:
            e += 1
        ulp = Fraction(2) ** (max(e, self.emin) - self.man)
        t = ax / ulp
        n = math.floor(t)
        if t - n > HALF or (t - n == HALF and n % 2):
            n += 1
        r = min(n * ulp, self.max)
        return r if x > 0 else -r

    def value(self, sym: Any) -> Fraction:
        return self.lo + sym * self.step if self.kind == "uniform" else sym


# ---------------------------------------------------------------- model replay

def _weights(model: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, list]:
    if set(cfg) != _CONFIG_KEYS:
        raise _Bad(f"model config keys {sorted(cfg)} differ from {sorted(_CONFIG_KEYS)}")
    for k in _CONFIG_KEYS - {"feature_map", "positions"}:
        integer(cfg[k], f"model config {k}", 1)        # a JSON integer: not true, not 1.0
    d, m, r, dv, P = cfg["d"], cfg["m"], cfg["rank"], cfg["dv"], cfg["positions"]
    W = model["weights"]
    # the architecture's tensors are embedded: their count bounds the loops below before any
    # name is built (a config claiming 2^64 layers is refused, not enumerated)
    if not isinstance(W, dict) or not isinstance(P, int) or isinstance(P, bool) or P < 0 \
            or cfg["layers"] * (7 * cfg["heads"] + 1) + 3 + (1 if P else 0) != len(W):
        raise _Bad("model weights do not match the architecture's tensor names")
    shapes = {"embed.weight": [d, m], "readout.weight": [d], "readout.bias": [1]}
    if P:
        shapes["embed.pos"] = [P, d]
    for l in range(cfg["layers"]):
        for c in range(cfg["heads"]):
            p = f"layers.{l}.heads.{c}."
            shapes.update({p + "q.weight": [r, d], p + "q.bias": [r], p + "k.weight": [r, d],
                           p + "k.bias": [r], p + "v.weight": [dv, d], p + "v.bias": [dv],
                           p + "o.weight": [d, dv]})
        shapes[f"layers.{l}.o.bias"] = [d]
    if set(W) != set(shapes):
        raise _Bad("model weights do not match the architecture's tensor names")
    if model.get("weights_sha256") != canonical_sha256(W):
        raise _Bad("weights_sha256 does not match the weights")
    out = {}
    for name, shape in shapes.items():
        e = _DECLARED.part("model.weights.*").check_keys(W[name], f"tensor {name}")
        if abs(integer(e["exp"], f"tensor {name} exp")) > MAX_EXPONENT:
            raise _Bad(f"tensor {name} exp is beyond +-{MAX_EXPONENT}")
        if not same_json(e["shape"], shape) or len(e["ints"]) != math.prod(shape):
            raise _Bad(f"tensor {name} has the wrong shape")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in e["ints"]):
            raise _Bad(f"tensor {name} entries must be integers")
        sc = Fraction(2) ** e["exp"]
        flat = [i * sc for i in e["ints"]]
        if len(shape) == 2:
            flat = [flat[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]
        out[name] = flat
    return out


def _matvec_plain(A: Sequence[Sequence[Any]], x: Sequence[Any]) -> list:
    """``A x`` term by term (any numbers: Fractions or arb balls)."""
    return [sum((a * b for a, b in zip(row, x)), 0) for row in A]


def _common(v: Sequence[Fraction]) -> tuple[list[int], int]:
    """Integers ``n`` and ``d`` with ``v[i] == n[i] / d`` (``d`` the denominators' lcm)."""
    d = math.lcm(*(a.denominator for a in v))
    return [a.numerator * (d // a.denominator) for a in v], d


def _matvec(A: Sequence[Sequence[Any]], x: Sequence[Any]) -> list:
    """``A x``, the same numbers as :func:`_matvec_plain` (a test compares them). When
    ``x`` and a row hold Fractions only (the exact feature maps), the row's dot product
    is one integer sum over the common denominator, normalised once, instead of a
    normalised Fraction per product and per partial sum."""
    if not x or any(type(b) is not Fraction for b in x):
        return _matvec_plain(A, x)
    nx, dx = _common(x)
    out: list = []
    for row in A:
        if not row or any(type(a) is not Fraction for a in row):
            out.extend(_matvec_plain([row], x))
            continue
        nr, dr = _common(row)
        out.append(Fraction(sum(a * b for a, b in zip(nr, nx)), dr * dx))
    return out


def replay(cfg: dict, W: dict, quant: _Quant,
           tokens: list[list[int]]) -> tuple[list, list, Numbers]:
    """Transcript (list of symbols) and outputs (list) of one input, in the kernel's
    exact numbers (Fractions, or arb balls for elu1 / exp). Raises ``Undecided`` when
    a symbol is not certain."""
    if cfg["feature_map"] not in ("identity", "relu", "elu1", "exp"):
        raise _Bad(f"unknown feature map {cfg['feature_map']!r}")
    ops = Numbers(cfg["feature_map"])
    V: dict[str, Any] = {k: ([[ops.num(x) for x in row] for row in v] if v and isinstance(v[0], list)
                              else [ops.num(x) for x in v]) for k, v in W.items()}
    N = len(tokens)
    if cfg["positions"] and N > cfg["positions"]:
        raise _Bad("input longer than the model's positions")
    zero = ops.num(Fraction(0))
    H = []
    for i, tok in enumerate(tokens):
        hi: Any = _matvec(V["embed.weight"], [ops.num(Fraction(b)) for b in tok])
        if cfg["positions"]:
            hi = [a + b for a, b in zip(hi, V["embed.pos"][i])]
        H.append(hi)
    r, dv, d = cfg["rank"], cfg["dv"], cfg["d"]
    transcript = []
    for l in range(cfg["layers"]):
        delta = [[zero] * d for _ in range(N)]
        for c in range(cfg["heads"]):
            p = f"layers.{l}.heads.{c}."
            PK = [[ops.f(u + b) for u, b in zip(_matvec(V[p + "k.weight"], h), V[p + "k.bias"])]
                  for h in H]
            VV = [[u + b for u, b in zip(_matvec(V[p + "v.weight"], h), V[p + "v.bias"])]
                  for h in H]
            raw = [sum((PK[j][a] * VV[j][b] for j in range(N)), zero)
                   for a in range(r) for b in range(dv)]
            raw += [sum((PK[j][a] for j in range(N)), zero) for a in range(r)]
            qv = []
            for x in raw:
                try:
                    sym = ops.cell(x, quant.symbol)          # the quantizer is nondecreasing
                except Undecided as exc:
                    raise Undecided(f"layer {l} head {c}: {exc}") from None
                transcript.append(sym)
                qv.append(ops.num(quant.value(sym)))
            Sq = [qv[a * dv:(a + 1) * dv] for a in range(r)]
            zq = qv[r * dv:]
            for i, h in enumerate(H):
                phq = [ops.f(u + b) for u, b in zip(_matvec(V[p + "q.weight"], h), V[p + "q.bias"])]
                den = sum((phq[a] * zq[a] for a in range(r)), zero)
                if ops.is_zero(den):
                    att = [zero] * dv
                else:
                    att = [sum((phq[a] * Sq[a][b] for a in range(r)), zero) / den for b in range(dv)]
                out = _matvec(V[p + "o.weight"], att)
                delta[i] = [x + y for x, y in zip(delta[i], out)]
        H = [[x + y + b for x, y, b in zip(h, dl, V[f"layers.{l}.o.bias"])]
             for h, dl in zip(H, delta)]
    outs = [sum((a * b for a, b in zip(V["readout.weight"], h)), zero) + V["readout.bias"][0]
            for h in H]
    return transcript, outs, ops


# ---------------------------------------------------------------- family

def _family(fam: dict) -> tuple[int, int, int, list[list[int]]]:
    _DECLARED.part("family").check_keys(fam, "family")
    M, s, h, q = (integer(fam[k], f"family {k}", 1 if k != "h" else 0) for k in ("M", "s", "h", "q"))
    if not isinstance(fam["words"], list):
        raise _Bad("family words must be a list of bit strings")
    words = [bits(w, "code word", M) for w in fam["words"]]
    if len(words) != q:
        raise _Bad("the family needs q words of length M")
    if any(sum(w) != h for w in words):
        raise _Bad("a code word does not have weight h")
    for a in range(q):
        for b in range(q):
            if a != b and sum(1 for x, y in zip(words[a], words[b]) if y and not x) < s + 1:
                raise _Bad("code words violate |U \\ S| >= s + 1")
    return M, s, q, words


def _index(kappa: list[int], s: int) -> int:
    """Position of an assignment in lexicographic order (kappa_0 most significant)."""
    out = 0
    for k in kappa:
        out = out * (s + 1) + k
    return out


def _kappa(v: Any, what: str, s: int, q: int) -> list[int]:
    if not isinstance(v, list) or len(v) != q:
        raise _Bad(f"{what} must list q levels")
    out = [integer(k, what, 0) for k in v]
    if any(k > s for k in out):
        raise _Bad(f"{what} has a level above s")
    return out


def _min_ip(tokens: list[list[int]]) -> list[int]:
    return min_ip_targets(tokens)


def _is_input(tokens: list[list[int]], kappa: Sequence[int], words: list[list[int]],
              M: int, s: int, q: int) -> bool:
    """Membership: ``tokens`` is the family's input of ``kappa``, token for token
    (a level vector of the right weight but another arrangement is not one)."""
    return len(kappa) == q and tokens == _canonical_input(kappa, words, M, s, q)


def _tokens(rows: Any) -> list[list[int]]:
    if not isinstance(rows, list):
        raise _Bad("an input must be a list of bit strings")
    return [bits(row, "input token") for row in rows]


def _canonical_input(kappa: Sequence[int], words: list[list[int]], M: int, s: int,
                     q: int) -> list[list[int]]:
    """The family's input of assignment ``kappa`` (the one definition, shared with
    the family's enumeration: :func:`certify.checkers.families.multilevel_input`)."""
    return multilevel_input(list(kappa), words, s)


# ---------------------------------------------------------------- check

def check(claim: dict, cert: dict | None = None) -> list[str]:
    return guarded(_check)(claim)


def _check(claim: dict) -> list[str]:
    probs: list[str] = []
    if claim.get("kind") != "transcript":
        return [f"not a transcript claim: {claim.get('kind')!r}"]
    ev, verdict = claim["evidence"], claim["verdict"]
    typ = ev.get("type")
    if typ not in _DECLARED.evidence:
        return [f"unknown evidence type {typ!r}"]
    declared = _DECLARED.form(typ)
    # a collision records its failing output (query_outputs, failing) exactly when it is exact
    exact = typ == "collision" and ev.get("model", {}).get("config", {}).get("feature_map") in _EXACT_MAPS
    declared.check_keys(ev, f"{typ} evidence", forbid=declared.optional if typ == "collision" and not exact
                        else ())
    if exact and not all(k in ev for k in declared.optional):
        raise _Bad("an exact collision records query_outputs and failing")
    M, s, q, words = _family(ev["family"])
    model = _DECLARED.part("model").check_keys(ev["model"], "model")
    if not isinstance(model["source"], str):
        raise _Bad("model source must be a string (a label)")
    cfg = model["config"]
    if not isinstance(cfg, dict):
        raise _Bad("model config must be an object")
    W = _weights(model, cfg)
    if cfg["m"] != 2 + M + s:
        return ["model token dimension differs from 2 + M + s"]
    quant = _Quant(model["quantizer"])
    p = _DECLARED.params().check_keys(claim["parameters"], "parameters")
    fam = ev["family"]
    names = tuple(_DECLARED.params().fields)
    stated = {k: p[k] for k in names}
    derived = {"M": M, "s": s, "h": fam["h"], "q": q, "layers": cfg["layers"], "heads": cfg["heads"],
               "rank": cfg["rank"], "dv": cfg["dv"], "feature_map": cfg["feature_map"],
               "quantizer": model["quantizer"], "weights_sha256": canonical_sha256(model["weights"])}
    for k in names:                          # as JSON values: 1, 1.0 and true are three
        if not same_json(stated[k], derived[k]):
            probs.append(f"parameters.{k} is {stated[k]!r:.40}, the evidence's is {derived[k]!r:.40}")
    cap = _DECLARED.part("capacity").check_keys(ev["capacity"], "capacity")
    T = cfg["layers"] * cfg["heads"] * cfg["rank"] * (cfg["dv"] + 1)
    A, N = quant.alphabet, (s + 1) ** q
    want = {"coordinates": T, "alphabet": A, "assignments": N, "holds": A ** T >= N,
            "bits_available": T * (A.bit_length() - 1) if A & (A - 1) == 0 else None,
            "bits_needed": (N - 1).bit_length()}
    for k, v in want.items():
        if cap[k] != v or isinstance(cap[k], bool) != isinstance(v, bool) or isinstance(cap[k], float):
            probs.append(f"capacity.{k} is {cap[k]!r}, re-derived {v!r}")
    if typ == "none":
        return probs + ([] if verdict == "unknown" and claim.get("reason") else
                        ["a claim without a decisive replay must be unknown with a reason"])
    try:
        if typ == "collision":
            probs += _check_collision(ev, verdict, cfg, W, quant, M, s, q, words)
        elif typ == "error":
            probs += _check_error(ev, verdict, cfg, W, quant, M, s, q, words)
        else:
            probs += _check_all(ev, verdict, cfg, W, quant, M, s, q, words)
    except Undecided as exc:
        probs.append(f"replay is not certain: {exc}")
    return probs


def _check_collision(ev: dict[str, Any], verdict: str, cfg: dict[str, Any], W: dict[str, list], quant: _Quant,
                     M: int, s: int, q: int, words: list[list[int]]) -> list[str]:
    probs = []
    if verdict != "refuted":
        probs.append("a certified collision must refute the claim")
    ka, kb = _kappa(ev["kappa_a"], "kappa_a", s, q), _kappa(ev["kappa_b"], "kappa_b", s, q)
    if not same_json([ev["index_a"], ev["index_b"]], [_index(ka, s), _index(kb, s)]):
        probs.append("index_a / index_b are not the assignments' lexicographic positions")
    if ka == kb:
        probs.append("the two assignments are equal")
    ta, tb = _tokens(ev["input_a"]), _tokens(ev["input_b"])
    for nm, toks, kap, tg in (("a", ta, ka, ev["targets_a"]), ("b", tb, kb, ev["targets_b"])):
        if not _is_input(toks, kap, words, M, s, q):
            probs.append(f"input_{nm} is not the multilevel input of kappa_{nm}")
        if not same_json(tg, _min_ip(toks)[:q]) or not same_json(tg, kap):
            probs.append(f"targets_{nm} are not the Min-IP targets of input_{nm}")
    if ev["targets_a"] == ev["targets_b"]:
        probs.append("the targets do not differ")
    if probs:
        return probs
    tra, ya, ops = replay(cfg, W, quant, ta)
    trb, yb, _ = replay(cfg, W, quant, tb)
    claimed = [_q(x) if quant.kind == "float" else x for x in ev["transcript"]]
    if quant.kind == "uniform" and not all(type(x) is int for x in ev["transcript"]):
        probs.append("uniform transcript symbols must be integers")
    if tra != trb:
        probs.append("the two inputs' exact transcripts differ")
    if tra != claimed:
        probs.append("the recorded transcript differs from the replay")
    if "failing" in ev:
        outs = ev["query_outputs"]
        if not isinstance(outs, list) or [_q(y) for y in outs] != ya[:q]:
            probs.append("query_outputs are not the exact outputs of input_a")
        i = next(i for i in range(q) if ka[i] != kb[i])
        which = "a" if abs(ya[i] - ka[i]) >= HALF else "b"
        t = ka[i] if which == "a" else kb[i]
        y = ya[i]           # the transcripts are equal, so are the query outputs
        want = {"input": which, "position": i, "target": t, "output": _q(ev["failing"]["output"])}
        f = _DECLARED.part("failing").check_keys(ev["failing"], "failing")
        if not same_json({**f, "output": None}, {**want, "output": None}) or _q(f["output"]) != y \
                or y != want["output"] or abs(y - t) < HALF:
            probs.append("the recorded failing output does not replay")
    return probs


def _check_error(ev: dict[str, Any], verdict: str, cfg: dict[str, Any], W: dict[str, list], quant: _Quant,
                 M: int, s: int, q: int, words: list[list[int]]) -> list[str]:
    if verdict != "refuted":
        return ["an exact error >= 1/2 must refute the claim"]
    toks, kap = _tokens(ev["input"]), _kappa(ev["kappa"], "kappa", s, q)
    pos = integer(ev["position"], "position")
    if not same_json(ev["index"], _index(kap, s)):
        return ["index is not the assignment's lexicographic position"]
    if not _is_input(toks, kap, words, M, s, q) or not 0 <= pos < q:
        return ["the input is not a multilevel input at a query position"]
    t = _min_ip(toks)[pos]
    _, ys, ops = replay(cfg, W, quant, toks)
    y = ys[pos]
    if not same_json(ev["target"], t) or not isinstance(y, Fraction) or y != _q(ev["output"]) \
            or abs(y - t) < HALF:
        return ["the recorded error does not replay exactly"]
    return []


def _integer_exact(cfg: dict, N: int, kind: str | None) -> bool:
    """Whether the exact integer replay (:func:`_integer_all`) covers the model."""
    return N <= MAX_INTEGER and kind == "uniform" and cfg["layers"] == 1 \
        and cfg["feature_map"] in _EXACT_MAPS and not cfg["positions"]


def integer_replayable(cfg: dict, N: int, kind: str | None = "uniform") -> bool:
    """Whether :func:`_check_all` replays all ``N`` assignments itself."""
    return N <= MAX_ALL or _integer_exact(cfg, N, kind)


def _check_all(ev: dict[str, Any], verdict: str, cfg: dict[str, Any], W: dict[str, list], quant: _Quant,
               M: int, s: int, q: int, words: list[list[int]]) -> list[str]:
    if verdict != "proved":
        return ["an exhaustive exact check supports only a proved verdict"]
    N = (s + 1) ** q
    if not same_json(ev.get("exact_checked"), N):
        return ["exact_checked differs from (s+1)^q"]
    assumptions = ev.get("assumptions", [])
    if not isinstance(assumptions, list) or not all(isinstance(a, str) for a in assumptions):
        return ["assumptions must be a list of names"]
    if assumptions and assumptions != [REPLAY_ASSUMPTION]:
        return [f"unknown assumptions {assumptions!r}"]
    if integer_replayable(cfg, N, quant.kind):
        if assumptions:
            return ["an assumption is named for a replay the checker can do"]
        if _integer_exact(cfg, N, quant.kind):        # wherever it is exact: seconds, not minutes
            return _integer_all(cfg, W, quant, M, s, q, words)
        kappas: Iterable[Sequence[int]] = product(range(s + 1), repeat=q)
    elif not assumptions:
        return [f"{N} assignments exceed the checker's replay limits and no assumption "
                f"names the enumeration"]
    else:                                       # seeded sample; the rest is assumed
        import random
        rng = random.Random(N)
        kappas = [[rng.randrange(s + 1) for _ in range(q)] for _ in range(SAMPLE)] + [[0] * q, [s] * q]
    for kappa in kappas:
        toks = _canonical_input(kappa, words, M, s, q)
        tg = _min_ip(toks)[:q]
        if tg != list(kappa):
            return [f"Min-IP targets of {list(kappa)} differ from kappa"]
        _, ys, ops = replay(cfg, W, quant, toks)
        for i in range(q):
            if ops.at_least(abs(ys[i] - tg[i]), HALF):
                return [f"assignment {list(kappa)}: query {i} errs by >= 1/2"]
    return []


# ---------------------------------------------------------------- exact integer replay

def _fit(*arrays: np.ndarray) -> bool:
    """All entries below 2^26: gathered as int64 (the kernel's :func:`cells` decides its sums' type)."""
    return all(int_max_abs(a) < (1 << 26) for a in arrays)


def _ints(fracs: list, den: int) -> list[int]:
    out = [f * den for f in fracs]
    assert all(v.denominator == 1 for v in out)
    return [int(v) for v in out]


def _lcm_den(fracs: Iterable[Fraction]) -> int:
    d = 1
    for f in fracs:
        d = math.lcm(d, f.denominator)
    return d


def _integer_all(cfg: dict[str, Any], W: dict[str, list], quant: _Quant, M: int, s: int, q: int,
                 words: list[list[int]]) -> list[str]:
    """Exact integer replay of every assignment of a one-layer rational model."""

    ops = Numbers(cfg["feature_map"])
    r, dv, H = cfg["rank"], cfg["dv"], cfg["heads"]
    Q = [multilevel_query(w, s) for w in words]
    D = [[multilevel_database(w, k, s) for k in range(s + 1)] for w in words]
    h0 = lambda tok: _matvec(W["embed.weight"], [Fraction(b) for b in tok])  # noqa: E731
    HQ = [h0(t) for t in Q]
    HD = [[h0(t) for t in row] for row in D]
    wr = W["readout.weight"]
    c0 = [sum((a * b for a, b in zip(wr, [x + y for x, y in zip(h, W["layers.0.o.bias"])])),
              Fraction(0)) + W["readout.bias"][0] for h in HQ]                    # (q,)
    heads = []
    for c in range(H):
        p = f"layers.0.heads.{c}."
        def contrib(h: list[Fraction]) -> list[Fraction]:
            pk = [ops.f(u + b) for u, b in zip(_matvec(W[p + "k.weight"], h), W[p + "k.bias"])]
            v = [u + b for u, b in zip(_matvec(W[p + "v.weight"], h), W[p + "v.bias"])]
            return [pk[a] * v[b] for a in range(r) for b in range(dv)] + pk
        CQ = [contrib(h) for h in HQ]
        CD = [[contrib(h) for h in row] for row in HD]
        flat = [x for row in CQ for x in row] + [x for rr in CD for row in rr for x in row]
        den = _lcm_den(flat)
        base = [sum(col) for col in zip(*CQ)]
        PQ = [[ops.f(u + b) for u, b in zip(_matvec(W[p + "q.weight"], h), W[p + "q.bias"])]
              for h in HQ]                                                   # (q, r)
        dp = _lcm_den([x for row in PQ for x in row])
        g = [sum((W[p + "o.weight"][i][b] * wr[i] for i in range(cfg["d"])), Fraction(0))
             for b in range(dv)]                                             # WO^T w (dv,)
        heads.append((den, base, CD, [[int(x * dp) for x in row] for row in PQ], g))
    Gd = _lcm_den(c0 + [x for hd in heads for x in hd[4]])
    C0 = np.array(_ints(c0, Gd), dtype=object)                               # (q,)
    lo, step, top = quant.lo, quant.step, quant.top
    ln, ld, sn, sd = lo.numerator, lo.denominator, step.numerator, step.denominator
    q1 = q // 2
    nlo = (s + 1) ** (q - q1)
    tables = []
    for den, base, CD, P, g in heads:
        # the partial sums over the first and the last positions, times den (integers: den is
        # the common denominator of every contribution), row (k_0, k_1, ...) in lexicographic order
        CDi = [np.array([_ints(CD[i][k], den) for k in range(s + 1)], dtype=object) for i in range(q)]
        A_int = np.array([_ints(base, den)], dtype=object)
        for i in range(q1):
            A_int = (A_int[:, None, :] + CDi[i][None, :, :]).reshape(-1, len(base))
        B_int = np.zeros((1, len(base)), dtype=object)
        for i in range(q1, q):
            B_int = (B_int[:, None, :] + CDi[i][None, :, :]).reshape(-1, len(base))
        alpha, beta, gam = 2 * sd * ld, sn * ld * den - 2 * sd * ln * den, 2 * sn * ld * den
        A2, B2 = A_int * alpha + beta, B_int * alpha                               # alpha x + beta
        if _fit(A2, B2):
            A2, B2 = A2.astype(np.int64), B2.astype(np.int64)
        Pm = np.array(P, dtype=object)
        Gc = np.array(_ints(g, Gd), dtype=object)
        tables.append((A2, B2, gam, Pm, Gc))
    chunk = max(1, (1 << 15) // nlo)
    nhi = (s + 1) ** q1
    pw = (s + 1) ** np.arange(q - 1, -1, -1, dtype=np.int64)
    def block(h0i: int) -> list[str]:
        """The assignments whose first q1 levels are rows h0i.. of the first table."""
        hs = np.arange(h0i, min(nhi, h0i + chunk), dtype=np.int64)
        idx = (hs[:, None] * nlo + np.arange(nlo, dtype=np.int64)[None]).reshape(-1)
        kap = (idx[:, None] // pw) % (s + 1)                                 # (B, q) = targets
        Bn = len(idx)
        terms = []                              # per head: (G g.n (B, q), d (B, q))
        for A2, B2, gam, Pm, Gc in tables:
            # L = ln sd + k sn ld, k = clamp(floor((alpha x + beta) / gam), 0, top): the dequantized
            # coordinates times ld sd (B, T1), by the kernel's exact cells
            rows = np.repeat(hs, nlo), np.tile(np.arange(nlo), len(hs))
            L = cells(A2[rows[0]], B2[rows[1]], gam, top, ln * sd, sn * ld)
            Ls = L[:, :r * dv].reshape(Bn, r, dv)
            Lz = L[:, r * dv:]
            n = int_product(Pm, Ls)                                           # (B, q, dv)
            d = int_product(Lz, Pm.T)                                         # (B, q)
            gn = int_product(n, Gc)                                           # (B, q)
            terms.append((np.where(d == 0, 0, gn), np.where(d == 0, 1, d)))
        # y - t = (C0 - t G)/G + sum_c gn_c / (G d_c)   (a_c = 0 when d_c = 0), so
        # |y - t| >= 1/2 iff |C0 - t G + sum_c gn_c / d_c| >= G / 2 (the kernel's exact test)
        bad = sum_at_least([(1, C0[None, :], 1), (-Gd, kap, 1)] + [(1, gn, d) for gn, d in terms],
                           Fraction(Gd, 2))
        if bad.any():
            b, i = map(int, np.argwhere(bad)[0])
            return [f"assignment {kap[b].tolist()}: query {i} errs by >= 1/2 (integer replay)"]
        return []

    # blocks in order, the first problem reported (on forked processes when asked: the same answer)
    return first_problem(block, range(0, nhi, chunk))
