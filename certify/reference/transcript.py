"""``transcript`` (Thm 9 against a quantized sketch model), replayed in Fractions.

The model, from its definition (the evidence embeds its exact weights, value =
``ints 2^exp``, bound by their canonical hash): ``h_i = E x_i (+ P_i)``; per
layer and head ``phiK_j = f(WK h_j + bK)``, ``v_j = WV h_j + bV``, the sketch ``S =
sum_j phiK_j v_j^T`` and ``z = sum_j phiK_j``, each coordinate quantized (``S``
row-major, then ``z``: the transcript); ``phiQ_i = f(WQ h_i + bQ)``, ``a_i =
phiQ_i^T Sq / (phiQ_i . zq)`` (0 when that is exactly 0); ``h_i += sum_c WO_c a_i^c
+ bO``; output ``w . h_i + b``. ``f`` is identity or relu, replayed in Fractions; or ``exp`` or
``elu1`` (``elu(x) + 1``), replayed in python-flint ``arb`` balls at
:data:`PRECISION` bits (each ball contains the exact value): a sketch coordinate's
quantizer cell is decided only when both ends of its ball fall in one cell, a
denominator only when its ball excludes 0 (or is exactly 0), an error test only
when the whole ball of ``|y - t|`` is on one side of 1/2; anything else is
undecided, and the claim fails (as in ``certify verify``). An ``error`` needs an
exact output, so it is refuted only through identity or relu; a collision
through them records ``query_outputs`` and ``failing`` (re-derived), through
balls neither. The family's inputs are
built from the paper's definition (Sec. 4): queries ``q_S = (0, 1, x_(S^c),
1^s)``, database tokens ``d_(S,k) = (1, 0, x_S, 1^k 0^(s-k))``, the input of an
assignment ``kappa`` is the queries then ``d_(S, kappa_S)``; its Min-IP targets at
the queries are recomputed.

The code: the family's words must be the first ``q`` words of the greedy packing
(:func:`certify.reference.builtin.greedy_code`: the sentence names "the
multilevel family (M, s, h, q)"), or, when that scan is beyond its limit, the
assumption ``family:multilevel-M..-s..-h..-q..``.

Re-derived: the capacity numbers; ``all`` -- every one of the ``(s+1)^q``
assignments replayed, every query output within < 1/2 of its target, up to
:data:`~certify.reference.limits.MAX_TRANSCRIPT_ASSIGNMENTS` (above it, refused).
The format lets a claim name the enumeration as the assumption
``replay:transcript-enumeration`` only where ``certify verify`` does not replay it
either (more than 2^16 assignments, and more than 2^24 or not a one-layer
identity/relu model without positions with a uniform quantizer); such a claim
holds under that assumption after the format's seeded spot check (``random.Random(N)``:
64 assignments, then all-0 and all-s) replays without an error; a
claim naming it where the replay is possible fails. ``all`` otherwise; a
``collision`` -- both inputs are the family's, their targets differ, their
replayed transcripts are equal and the stated one (with exact maps, the
failing output too); an ``error`` -- the replayed output errs by >= 1/2.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import product
from typing import Any, Mapping

from certify.reference.builtin import MAX_M, TooLarge, greedy_code
from certify.reference.exact import Fails, Refused, canonical_sha256, num, same_json, whole
from certify.reference.limits import MAX_TRANSCRIPT_ASSIGNMENTS

#: the format's bound on a power-of-two exponent (docs/trust.md, "Bounded work before any check"):
#: a tensor's exponent beyond it fails the claim, before any power is formed
MAX_EXPONENT = 4096

HALF = Fraction(1, 2)
#: bits of the arb balls of the exp / elu1 replay (python-flint's default working precision)
PRECISION = 53
EXACT_MAPS = ("identity", "relu")
#: the format's assumption for an enumeration no checker replays, and where it may be named:
#: above REPLAYED assignments, and above INTEGER_REPLAYED ones for a one-layer identity/relu
#: model without positions and with a uniform quantizer
ENUMERATION = "replay:transcript-enumeration"
REPLAYED, INTEGER_REPLAYED, SPOT_CHECK = 1 << 16, 1 << 24, 64
_FLOATS = {"fp8-e4m3": (3, -6, Fraction(448), 253), "fp8-e5m2": (2, -14, Fraction(57344), 247),
           "bf16": (7, -126, Fraction(255 * 2 ** 120), 65279), "fp16": (10, -14, Fraction(65504), 63487)}
PARAMS = ("M", "s", "h", "q", "layers", "heads", "rank", "dv", "feature_map", "quantizer", "weights_sha256")
TYPES = {"none": (), "all": ("exact_checked",),
         "error": ("kappa", "index", "input", "position", "target", "output"),
         "collision": ("kappa_a", "kappa_b", "index_a", "index_b", "input_a", "input_b", "targets_a",
                       "targets_b", "transcript")}


class Quantizer:
    def __init__(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise Fails("the quantizer must be an object")
        self.kind = obj.get("kind")
        if self.kind == "uniform" and set(obj) - {"calibrated"} == {"kind", "bits", "lo", "hi"} \
                and isinstance(obj.get("calibrated", ""), str):
            self.p = whole(obj["bits"], "quantizer bits", 1)
            self.lo, self.hi = num(obj["lo"], "quantizer lo"), num(obj["hi"], "quantizer hi")
            if not self.lo < self.hi:
                raise Fails("the uniform quantizer needs lo < hi")
            self.top = 2 ** self.p - 1
            self.step = (self.hi - self.lo) / self.top
            self.alphabet = 2 ** self.p
        elif self.kind == "float" and set(obj) == {"kind", "format"} and obj["format"] in _FLOATS:
            self.man, self.emin, self.max, self.alphabet = _FLOATS[obj["format"]]
        else:
            raise Fails(f"unknown quantizer {obj!r:.80}")

    def symbol(self, x: Fraction) -> int | Fraction:
        if self.kind == "uniform":
            return min(max(math.floor((x - self.lo) / self.step + HALF), 0), self.top)
        if x == 0:
            return Fraction(0)
        ax, e = abs(x), 0
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
        return self.lo + sym * self.step if self.kind == "uniform" else Fraction(sym)


class Undecided(Exception):
    """A ball meets a cell boundary, 0 (a denominator) or the error threshold."""


class Exact:
    """Fractions (identity, relu): every step exact."""

    def __init__(self, fmap: str) -> None:
        self.fmap = fmap

    def num(self, x: Fraction) -> Any:
        return x

    def f(self, v: Any) -> Any:
        return v if self.fmap == "identity" or v > 0 else Fraction(0)

    def symbol(self, x: Any, quant: "Quantizer") -> Any:
        return quant.symbol(x)

    def is_zero(self, x: Any) -> bool:
        return bool(x == 0)

    def errs(self, y: Any, t: int) -> bool:
        return not abs(y - t) < HALF


class Balls(Exact):
    """arb balls (exp, elu1): each contains the exact value; a step function is decided
    only where it is constant on the whole ball."""

    def num(self, x: Fraction) -> Any:
        import flint
        return flint.arb(flint.fmpq(x.numerator, x.denominator))

    def f(self, v: Any) -> Any:
        if self.fmap == "exp":
            return v.exp()
        g = lambda e: e + 1 if e >= 0 else e.exp()        # noqa: E731  (elu + 1, nondecreasing)
        return g(v) if v.is_exact() else g(v.lower()).union(g(v.upper()))

    def ends(self, x: Any) -> tuple[Fraction, Fraction]:
        if not x.is_finite():
            raise Undecided("an infinite ball")
        (m0, e0), (m1, e1) = x.lower().man_exp(), x.upper().man_exp()
        return Fraction(int(m0)) * Fraction(2) ** int(e0), Fraction(int(m1)) * Fraction(2) ** int(e1)

    def symbol(self, x: Any, quant: "Quantizer") -> Any:
        lo, hi = self.ends(x)
        a = quant.symbol(lo)
        if quant.symbol(hi) != a:                 # the quantizer is nondecreasing: the ends decide
            raise Undecided("a sketch coordinate's ball straddles a quantizer cell boundary")
        return a

    def is_zero(self, x: Any) -> bool:
        if x.is_zero():
            return True
        if x.contains(0):
            raise Undecided("a denominator's ball contains 0")
        return False

    def errs(self, y: Any, t: int) -> bool:
        d, h = abs(y - t), self.num(HALF)
        if d >= h:
            return True
        if d < h:
            return False
        raise Undecided("an output's ball meets the error threshold 1/2")


def numbers(fmap: Any) -> Exact:
    if fmap in EXACT_MAPS:
        return Exact(fmap)
    if fmap in ("exp", "elu1"):
        return Balls(fmap)
    raise Fails(f"feature map {fmap!r:.20} is not identity, relu, exp or elu1")


def _weights(model: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(cfg, dict) or set(cfg) != {"m", "d", "layers", "heads", "rank", "dv",
                                                 "feature_map", "positions"}:
        raise Fails("the model config has the wrong keys")
    for k in ("m", "d", "layers", "heads", "rank", "dv"):
        whole(cfg[k], f"config {k}", 1)
    whole(cfg["positions"], "config positions", 0)
    d, m, r, dv, P = cfg["d"], cfg["m"], cfg["rank"], cfg["dv"], cfg["positions"]
    shapes = {"embed.weight": [d, m], "readout.weight": [d], "readout.bias": [1]}
    if P:
        shapes["embed.pos"] = [P, d]
    for l in range(cfg["layers"]):
        for c in range(cfg["heads"]):
            pre = f"layers.{l}.heads.{c}."
            shapes.update({pre + "q.weight": [r, d], pre + "q.bias": [r], pre + "k.weight": [r, d],
                           pre + "k.bias": [r], pre + "v.weight": [dv, d], pre + "v.bias": [dv],
                           pre + "o.weight": [d, dv]})
        shapes[f"layers.{l}.o.bias"] = [d]
    W = model["weights"]
    if not isinstance(W, dict) or set(W) != set(shapes):
        raise Fails("the model's weights are not the architecture's tensors")
    if model["weights_sha256"] != canonical_sha256(W):
        raise Fails("weights_sha256 is not the hash of the weights")
    out: dict[str, Any] = {}
    for name, shape in shapes.items():
        t = W[name]
        if not isinstance(t, dict) or set(t) != {"shape", "exp", "ints"} or not same_json(t["shape"], shape) \
                or not isinstance(t["ints"], list) or len(t["ints"]) != math.prod(shape):
            raise Fails(f"tensor {name} is not {{shape {shape}, exp, ints}}")
        if abs(whole(t["exp"], f"{name} exp")) > MAX_EXPONENT:
            raise Fails(f"tensor {name}: exponent beyond +-{MAX_EXPONENT}")
        f = Fraction(2) ** t["exp"]
        flat = [whole(v, name) * f for v in t["ints"]]
        out[name] = [flat[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])] \
            if len(shape) == 2 else flat
    return out


def _mv(A: list[list[Any]], x: list[Any], zero: Any) -> list[Any]:
    return [sum((a * b for a, b in zip(row, x)), zero) for row in A]


def replay(cfg: Mapping[str, Any], W: Mapping[str, Any], quant: Quantizer,
           tokens: list[list[int]], ops: Exact) -> tuple[list[Any], list[Any]]:
    """(transcript, outputs) of one input: exactly (Fractions), or in balls that
    contain the exact values (``ops``, :func:`numbers`; ``W`` already in its numbers).
    :class:`Undecided` when a symbol or a denominator is not decided."""
    if cfg["positions"] and len(tokens) > cfg["positions"]:
        raise Fails("the input is longer than the model's positions")
    zero = ops.num(Fraction(0))
    H = []
    for i, tok in enumerate(tokens):
        h = _mv(W["embed.weight"], [ops.num(Fraction(b)) for b in tok], zero)
        if cfg["positions"]:
            h = [a + b for a, b in zip(h, W["embed.pos"][i])]
        H.append(h)
    r, dv, d = cfg["rank"], cfg["dv"], cfg["d"]
    f = ops.f
    transcript: list[Any] = []
    for l in range(cfg["layers"]):
        delta = [[zero] * d for _ in H]
        for c in range(cfg["heads"]):
            pre = f"layers.{l}.heads.{c}."
            PK = [[f(u + b) for u, b in zip(_mv(W[pre + "k.weight"], h, zero), W[pre + "k.bias"])] for h in H]
            V = [[u + b for u, b in zip(_mv(W[pre + "v.weight"], h, zero), W[pre + "v.bias"])] for h in H]
            raw = [sum((PK[j][a] * V[j][b] for j in range(len(H))), zero)
                   for a in range(r) for b in range(dv)]
            raw += [sum((PK[j][a] for j in range(len(H))), zero) for a in range(r)]
            vals = []
            for x in raw:
                sym = ops.symbol(x, quant)
                transcript.append(sym)
                vals.append(ops.num(quant.value(sym)))
            Sq = [vals[a * dv:(a + 1) * dv] for a in range(r)]
            zq = vals[r * dv:]
            for i, h in enumerate(H):
                pq = [f(u + b) for u, b in zip(_mv(W[pre + "q.weight"], h, zero), W[pre + "q.bias"])]
                den = sum((pq[a] * zq[a] for a in range(r)), zero)
                att = [zero] * dv if ops.is_zero(den) else \
                    [sum((pq[a] * Sq[a][b] for a in range(r)), zero) / den for b in range(dv)]
                delta[i] = [x + y for x, y in zip(delta[i], _mv(W[pre + "o.weight"], att, zero))]
        H = [[x + y + b for x, y, b in zip(h, dl, W[f"layers.{l}.o.bias"])] for h, dl in zip(H, delta)]
    outs = [sum((a * b for a, b in zip(W["readout.weight"], h)), zero) + W["readout.bias"][0] for h in H]
    return transcript, outs


def _in(ops: Exact, W: Mapping[str, Any]) -> dict[str, Any]:
    """The weights in the replay's numbers."""
    return {k: [[ops.num(x) for x in row] for row in v] if v and isinstance(v[0], list)
            else [ops.num(x) for x in v] for k, v in W.items()}


def family_input(kappa: list[int], words: list[list[int]], s: int) -> list[list[int]]:
    """The paper's multilevel input of assignment ``kappa`` (Sec. 4)."""
    queries = [[0, 1] + [1 - b for b in w] + [1] * s for w in words]
    database = [[1, 0] + list(w) + [1] * k + [0] * (s - k) for w, k in zip(words, kappa)]
    return queries + database


def min_ip(tokens: list[list[int]]) -> list[int]:
    return [min(sum(a & b for a, b in zip(x, y)) for y in tokens) for x in tokens]


def _bits(s: Any) -> list[int]:
    if not isinstance(s, str) or not s or set(s) - {"0", "1"}:
        raise Fails("a token must be a 0/1 string")
    return [int(c) for c in s]


def _kappa(v: Any, s: int, q: int, what: str) -> list[int]:
    if not isinstance(v, list) or len(v) != q or any(whole(k, what, 0) > s for k in v):
        raise Fails(f"{what} must list q levels in 0..s")
    return list(v)


def _index(kappa: list[int], s: int) -> int:
    out = 0
    for k in kappa:
        out = out * (s + 1) + k
    return out


def check(claim: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(problems, assumptions)`` of one transcript claim."""
    import flint
    prec = flint.ctx.prec
    flint.ctx.prec = PRECISION                    # the balls' precision, for this claim only
    try:
        return _check(claim)
    except Undecided as exc:
        return [f"the replay is not certain: {exc}"], []
    finally:
        flint.ctx.prec = prec


def _code(M: int, s: int, h: int, q: int, words: list[list[int]]) -> tuple[list[str], list[str]]:
    """The sentence names the multilevel family (M, s, h, q): its code is the greedy one."""
    name = f"multilevel-M{M}-s{s}-h{h}-q{q}"
    if M > MAX_M:
        return [], [f"family:{name}"]
    try:
        want = greedy_code(M, h, s, q)
    except TooLarge:
        return [], [f"family:{name}"]
    if want != words:
        return [f"the code words are not the first q words of the greedy packing ({name})"], []
    return [], []


def _enumerable(cfg: Mapping[str, Any], N: int, quant: Quantizer) -> bool:
    """Where the format lets no assumption stand in for the enumeration."""
    return N <= REPLAYED or (N <= INTEGER_REPLAYED and quant.kind == "uniform" and cfg["layers"] == 1
                             and cfg["feature_map"] in EXACT_MAPS and not cfg["positions"])


def _check(claim: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    ev, p, verdict = claim["evidence"], claim["parameters"], claim["verdict"]
    typ = ev.get("type")
    if typ not in TYPES:
        return [f"unknown evidence type {typ!r:.20}"], []
    model = ev.get("model")
    fmap = model.get("config", {}).get("feature_map") if isinstance(model, dict) and \
        isinstance(model.get("config"), dict) else None
    optional = {"collision": {"query_outputs", "failing"} if fmap in EXACT_MAPS else set(),
                "all": {"assumptions"}}.get(typ, set())
    base = {"capacity", "type", "family", "model"} | set(TYPES[typ])
    if not base <= set(ev) or set(ev) - base - optional:
        return [f"{typ} evidence does not have the documented keys"], []
    if typ == "collision" and optional and not optional <= set(ev):
        return ["a collision through an exact feature map records query_outputs and failing"], []
    fam = ev["family"]
    if not isinstance(fam, dict) or set(fam) != {"M", "s", "h", "q", "words"}:
        return ["the family must be {M, s, h, q, words}"], []
    M, s, h, q = (whole(fam[k], f"family {k}", 0 if k == "h" else 1) for k in ("M", "s", "h", "q"))
    words = [_bits(w) for w in fam["words"]] if isinstance(fam["words"], list) else []
    if len(words) != q or any(len(w) != M or sum(w) != h for w in words):
        return ["the family needs q words of length M and weight h"], []
    for a in range(q):
        for b in range(q):
            if a != b and sum(1 for x, y in zip(words[a], words[b]) if y and not x) < s + 1:
                return ["the code's words violate |U \\ S| >= s + 1"], []
    problems, assumptions = _code(M, s, h, q, words)
    if not isinstance(model, dict) or set(model) != {"config", "weights", "weights_sha256", "quantizer",
                                                     "source"} or not isinstance(model["source"], str):
        return problems + ["the model must be {config, weights, weights_sha256, quantizer, source}"], []
    cfg = model["config"]
    W = _weights(model, cfg)
    if cfg["m"] != 2 + M + s:
        return problems + ["the model's token width is not 2 + M + s"], []
    quant = Quantizer(model["quantizer"])
    ops = numbers(cfg["feature_map"])
    derived = {"M": M, "s": s, "h": h, "q": q, "layers": cfg["layers"], "heads": cfg["heads"],
               "rank": cfg["rank"], "dv": cfg["dv"], "feature_map": cfg["feature_map"],
               "quantizer": model["quantizer"], "weights_sha256": model["weights_sha256"]}
    if not set(PARAMS) - {"weights_sha256"} <= set(p) <= set(PARAMS):
        return problems + [f"transcript parameters are {sorted(PARAMS)} (weights_sha256 optional)"], []
    problems += [f"parameters.{k} is not the evidence's" for k in PARAMS      # as JSON values
                 if k in p and not same_json(p[k], derived[k])]
    T = cfg["layers"] * cfg["heads"] * cfg["rank"] * (cfg["dv"] + 1)
    A, N = quant.alphabet, (s + 1) ** q
    want = {"coordinates": T, "alphabet": A, "assignments": N, "holds": A ** T >= N,
            "bits_available": T * (A.bit_length() - 1) if A & (A - 1) == 0 else None,
            "bits_needed": (N - 1).bit_length()}
    cap = ev["capacity"]
    if not isinstance(cap, dict) or set(cap) != set(want) or any(
            cap[k] != v or type(cap[k]) is not type(v) for k, v in want.items()):
        problems.append(f"the capacity is not {want}")
    if typ == "none":
        return problems + ([] if verdict == "unknown" else ["without a replay the claim is unknown"]), \
            assumptions
    W = _in(ops, W)
    if typ == "all":
        if verdict != "proved" or not same_json(ev["exact_checked"], N):
            return problems + ["an exhaustive check is proved with exact_checked = (s+1)^q"], assumptions
        named = ev.get("assumptions", [])
        if not isinstance(named, list) or named not in ([], [ENUMERATION]):
            return problems + [f"the only assumption an exhaustive check may name is {ENUMERATION}"], []
        if named and _enumerable(cfg, N, quant):
            return problems + [f"{ENUMERATION} is named for {N} assignments, which the format has "
                               "replayed in full"], []
        if not named and not _enumerable(cfg, N, quant):
            return problems + [f"{N} assignments are beyond every checker's replay and no assumption "
                               "names the enumeration"], []
        if named:                                  # the format's seeded spot check; the rest assumed
            import random
            rng = random.Random(N)
            kappas: Any = [[rng.randrange(s + 1) for _ in range(q)] for _ in range(SPOT_CHECK)] \
                + [[0] * q, [s] * q]
            assumptions = assumptions + [ENUMERATION]
        elif N > MAX_TRANSCRIPT_ASSIGNMENTS:
            raise Refused(f"a transcript family of {N} assignments, above the reference checker's "
                          f"limit of {MAX_TRANSCRIPT_ASSIGNMENTS}")
        else:
            kappas = product(range(s + 1), repeat=q)
        for kappa in kappas:
            toks = family_input(list(kappa), words, s)
            if min_ip(toks)[:q] != list(kappa):
                return problems + [f"the Min-IP targets of {list(kappa)} are not kappa"], assumptions
            _, ys = replay(cfg, W, quant, toks, ops)
            for i in range(q):
                if ops.errs(ys[i], kappa[i]):
                    return problems + [f"assignment {list(kappa)}: query {i} errs by >= 1/2"], assumptions
        return problems, assumptions
    if verdict != "refuted":
        return problems + [f"a {typ} replay refutes the claim: the verdict must be refuted"], assumptions
    if typ == "error":
        if fmap not in EXACT_MAPS:
            return problems + ["an error refutes only through an exact replay (identity, relu)"], assumptions
        kap = _kappa(ev["kappa"], s, q, "kappa")
        given = [_bits(t) for t in ev["input"]] if isinstance(ev["input"], list) else None
        pos = ev["position"]
        if given is None or given != family_input(kap, words, s) \
                or not same_json(ev["index"], _index(kap, s)) \
                or not (isinstance(pos, int) and not isinstance(pos, bool) and 0 <= pos < q):
            return problems + ["the input is not the family's input of kappa at a query position"], assumptions
        t = min_ip(given)[pos]
        _, ys = replay(cfg, W, quant, given, ops)
        if not same_json(ev["target"], t) or num(ev["output"], "output") != ys[pos] \
                or abs(ys[pos] - t) < HALF:
            return problems + ["the recorded error does not replay exactly"], assumptions
        return problems, assumptions
    return problems + _collision(ev, cfg, W, quant, ops, words, s, q), assumptions


def _collision(ev: Mapping[str, Any], cfg: Mapping[str, Any], W: Mapping[str, Any], quant: Quantizer,
               ops: Exact, words: list[list[int]], s: int, q: int) -> list[str]:
    ka, kb = _kappa(ev["kappa_a"], s, q, "kappa_a"), _kappa(ev["kappa_b"], s, q, "kappa_b")
    ta = [_bits(t) for t in ev["input_a"]] if isinstance(ev["input_a"], list) else None
    tb = [_bits(t) for t in ev["input_b"]] if isinstance(ev["input_b"], list) else None
    if ka == kb or not same_json([ev["index_a"], ev["index_b"]], [_index(ka, s), _index(kb, s)]) \
            or ta != family_input(ka, words, s) or tb != family_input(kb, words, s):
        return ["the collision's inputs are not two different inputs of the family"]
    if not same_json(ev["targets_a"], min_ip(ta)[:q]) or not same_json(ev["targets_b"], min_ip(tb)[:q]):
        return ["the targets are not the Min-IP targets of the inputs"]
    tra, ya = replay(cfg, W, quant, ta, ops)
    trb, _ = replay(cfg, W, quant, tb, ops)
    stated = ev["transcript"] if isinstance(ev["transcript"], list) else None
    if stated is None or (quant.kind == "uniform" and not all(
            isinstance(v, int) and not isinstance(v, bool) for v in stated)):
        return ["the transcript must be a list of symbols"]
    if quant.kind == "float":
        stated = [num(v, "transcript symbol") for v in stated]
    if tra != trb or tra != stated:
        return ["the two inputs' replayed transcripts are not equal to each other and to the stated one"]
    if "failing" in ev:                            # exact maps only (checked above)
        outs, fail = ev.get("query_outputs"), ev.get("failing")
        if not isinstance(outs, list) or [num(y, "query output") for y in outs] != ya[:q]:
            return ["query_outputs are not the exact outputs of input_a"]
        i = next(j for j in range(q) if ka[j] != kb[j])
        which = "a" if abs(ya[i] - ka[i]) >= HALF else "b"
        t = ka[i] if which == "a" else kb[i]
        if not isinstance(fail, dict) or set(fail) != {"input", "position", "target", "output"} \
                or not same_json([fail["input"], fail["position"], fail["target"]], [which, i, t]) \
                or num(fail["output"], "output") != ya[i] or abs(ya[i] - t) < HALF:
            return ["the recorded failing output does not replay"]
    return []
