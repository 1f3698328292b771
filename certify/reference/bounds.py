"""``bound``: the paper's closed forms (``/work/shared/paper/THEOREMS.md``; the
formulas are restated per bound below), recomputed from the claim's parameters
with Python ints and Fractions. Every evidence field must be the recomputed
value (ints as ints, booleans as booleans, rationals as ``"p/q"``); a proved
claim needs every hypothesis to hold.

* Lemma 3: ``n >= 3``, ``0 < eps <= 1/2``, gap ``d >= 2 eps (n-1)/(n-2)``:
  ``alpha(x,y) > (n-2)(d - 2eps)/(2eps) alpha(x,z)``.
* Lemma 4: ``rank C >= t^2 / ||C||_F^2 >= t / (1 + (t-1)/lam^2)`` (strict with
  strict entries and ``t >= 2``: the least rank is then ``floor + 1``); per pair
  ``||C||_F^2 <= t + sum Lambda_ij^-2`` (1 where no bound is given).
* Thm 5: code of G words at distance Delta, ``g <= Delta``, ``g > 2 eps
  (n-1)/(n-2)``, ``mu = (n-2)(g - 2eps)/(2eps) > 1``, ``Lambda = mu^floor(Delta/g)``:
  ``r >= G / (1 + (G-1)/Lambda^2) >= min(G, Lambda^2)/2``.
* Thm 6: ``M = 2 floor(m/2)``, ``Delta = floor(M/8)``, middle-layer code of size
  ``T >= binom(M, M/2) / sum_{a < Delta} binom(M/2, a)^2``, Thm 5 with ``n = 3,
  eps = 1/2, g = 5`` (``mu = 4``); ``r >= 2^(4 floor(M/40) - 1)``.
* Cor 7: least ``k`` with ``(n-2)^(2k) >= 2^M``, ``Delta = 2k``, ``g = 2``, ``mu = n-2``.
* Eq. 8: ``L H r (dv+1) p >= q log2(s+1)`` (bits needed: least b, ``2^b >= (s+1)^q``).
* Prop 10: ``s`` largest with ``m^s <= 2^m``, ``M = m - s - 2``, ``h = floor(M/2)``,
  greedy code ``>= binom(M,h) / sum_{a<=s} binom(h,a) binom(M-h,a)``, the paper's
  ``2^M / ((M+1)(s+1)(eM/s)^(2s))`` with ``e <= 27183/10000``.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb
from typing import Any, Callable, Mapping

from certify.reference.exact import Fails, Refused, ceil, floor, num, q_text, whole
from certify.reference.limits import MAX_BOUND_M

PARAMETERS = {"lemma3": ("n", "eps", "d"), "lemma4": ("t", "lam", "strict"),
              "lemma4_per_pair": ("t", "Lambda", "strict"), "thm5": ("code_size", "delta", "g", "n", "eps"),
              "thm6": ("m", "extended"), "cor7": ("m", "n"), "eq8": ("L", "H", "r", "dv", "p", "s", "q"),
              "prop10": ("m",)}


def _eps(p: Mapping[str, Any]) -> Fraction:
    e = num(p["eps"], "eps")
    if not 0 < e <= Fraction(1, 2):
        raise Fails(f"eps = {q_text(e)} is outside (0, 1/2]")
    return e


def _bool(p: Mapping[str, Any], k: str) -> bool:
    if not isinstance(p[k], bool):
        raise Fails(f"parameter {k} must be a boolean")
    return p[k]


def _m(p: Mapping[str, Any], lo: int) -> int:
    m = whole(p["m"], "m", lo)
    if m > MAX_BOUND_M:
        raise Refused(f"a bound at m = {m}, above the reference checker's limit of {MAX_BOUND_M}")
    return m


def _least_rank(t: int, frob: Fraction, strict: bool) -> tuple[Fraction, int]:
    b = Fraction(t * t) / frob
    return b, (floor(b) + 1 if strict else ceil(b))


def _lemma3(p: Mapping[str, Any]) -> tuple[dict, bool]:
    n, e, d = whole(p["n"], "n", 3), _eps(p), num(p["d"], "d")
    thr = 2 * e * (n - 1) / (n - 2)
    return {"gap_threshold": thr, "factor": (n - 2) * (d - 2 * e) / (2 * e)}, d >= thr


def _lemma4(p: Mapping[str, Any]) -> tuple[dict, bool]:
    t, lam = whole(p["t"], "t", 1), num(p["lam"], "lam")
    if lam <= 0:
        raise Fails("lam must be > 0")
    b, r = _least_rank(t, t + t * (t - 1) / (lam * lam), _bool(p, "strict") and t >= 2)
    return {"bound": b, "rank_bound": r}, True


def _per_pair(p: Mapping[str, Any]) -> tuple[dict, bool]:
    t, strict, L = whole(p["t"], "t", 1), _bool(p, "strict"), p["Lambda"]
    if not isinstance(L, list) or len(L) != t or any(not isinstance(r, list) or len(r) != t for r in L):
        raise Fails("Lambda must be t x t")
    fro, bounded = Fraction(t), False
    for i in range(t):
        for j in range(t):
            if i != j:
                x = Fraction(0) if L[i][j] is None else num(L[i][j], "Lambda")
                if x < 0:
                    raise Fails("a Lambda entry is negative")
                fro += 1 if x == 0 else 1 / (x * x)
                bounded = bounded or x != 0
    applied = strict and t >= 2 and bounded
    b, r = _least_rank(t, fro, applied)
    return {"frobenius_sq_max": fro, "bound": b, "strict_applied": applied, "rank_bound": r}, True


def _thm5_of(G: int, delta: int, g: int, n: int, e: Fraction) -> tuple[dict, bool]:
    thr = 2 * e * (n - 1) / (n - 2)
    mu = (n - 2) * (g - 2 * e) / (2 * e)
    steps = delta // g
    if steps * max(mu.numerator.bit_length(), mu.denominator.bit_length()) > 1 << 24:
        raise Refused(f"mu^floor(delta/g) with floor(delta/g) = {steps} is above the reference checker's "
                      "limit of 2^(2^24)")
    lam = mu ** steps
    lam2 = lam * lam
    if lam2 == 0 and G > 1:
        b, rank = Fraction(0), 1
    else:
        b, rank = _least_rank(G, G + G * (G - 1) / lam2, G > 1)
    weak = min(Fraction(G), lam2) / 2
    return ({"gap_threshold": thr, "mu": mu, "steps": steps, "lam": lam, "bound": b, "rank_bound": rank,
             "weak_bound": weak, "weak_rank_bound": ceil(weak)},
            g <= delta and g > thr and mu > 1 and G >= 1)


def _thm5(p: Mapping[str, Any]) -> tuple[dict, bool]:
    return _thm5_of(whole(p["code_size"], "code_size", 1), whole(p["delta"], "delta", 1),
                    whole(p["g"], "g", 1), whole(p["n"], "n", 3), _eps(p))


def _middle_code(M: int, delta: int) -> tuple[int, int, int]:
    num_ = comb(M, M // 2)
    den = sum(comb(M // 2, a) ** 2 for a in range(0, min(delta - 1, M // 2) + 1))
    return num_, den, -(-num_ // den)


def _thm6(p: Mapping[str, Any]) -> tuple[dict, bool]:
    ext = _bool(p, "extended")
    m = _m(p, 40 if ext else 168)
    if ext and m >= 168:
        raise Fails("extended is set although m >= 168")
    M = 2 * (m // 2)
    delta = M // 8
    cn, cd, T = _middle_code(M, delta)
    t5, ok = _thm5_of(T, delta, 5, 3, Fraction(1, 2))
    lam_sq_log2 = 4 * (delta // 5)
    if t5["lam"] ** 2 != Fraction(2) ** lam_sq_log2:
        raise Fails("Lambda^2 is not 2^(4 floor(Delta/5))")
    hyp, covers = T ** 10 >= 2 ** M, T >= 2 ** lam_sq_log2
    log2 = t5["weak_rank_bound"].bit_length() - 1 if ok and hyp and covers else None
    paper = 4 * (M // 40) - 1
    return ({"M": M, "delta": delta, "g": 5, "mu": 4, "lam_sq_log2": lam_sq_log2, "code_numerator": cn,
             "code_denominator": cd, "code_size_lower": T, "code_hypothesis": hyp,
             "code_covers_lambda": covers, "log2_lower_bound": log2, "paper_exponent": paper,
             "paper_second_inequality": 10 * paper >= m - 60, "sharp_bound": t5["bound"],
             "sharp_rank_bound": t5["rank_bound"]}, ok and log2 is not None)


def _cor7(p: Mapping[str, Any]) -> tuple[dict, bool]:
    m, n = _m(p, 2), whole(p["n"], "n", 4)
    if n.bit_length() > MAX_BOUND_M:
        raise Refused(f"a bound at n of {n.bit_length()} bits, above the limit of {MAX_BOUND_M}")
    M = 2 * (m // 2)
    k = 1
    while (n - 2) ** (2 * k) < 2 ** M:
        k += 1
    cn, cd, T = _middle_code(M, 2 * k)
    t5, ok = _thm5_of(T, 2 * k, 2, n, Fraction(1, 2))
    return ({"M": M, "k": k, "delta": 2 * k, "g": 2, "mu": n - 2, "lam": (n - 2) ** k, "code_numerator": cn,
             "code_denominator": cd, "code_size_lower": T, "bound": t5["bound"],
             "rank_bound": t5["rank_bound"], "delta_le_quarter": 8 * k <= M}, ok)


def _eq8(p: Mapping[str, Any]) -> tuple[dict, bool]:
    L, H, r, dv = (whole(p[k], k, 1) for k in ("L", "H", "r", "dv"))
    s, q = whole(p["s"], "s", 1), whole(p["q"], "q", 1)
    if q * (s + 1).bit_length() > 1 << 24:
        raise Refused("(s+1)^q is above the reference checker's limit of 2^(2^24)")
    have = L * H * r * (dv + 1) * whole(p["p"], "p", 0)
    need = ((s + 1) ** q - 1).bit_length()
    return {"bits_available": have, "bits_needed": need, "holds": have >= need}, True


def _prop10(p: Mapping[str, Any]) -> tuple[dict, bool]:
    m = _m(p, 32)
    s = 0
    while m ** (s + 1) <= 2 ** m:
        s += 1
    M = m - s - 2
    h = M // 2
    gn = comb(M, h)
    gd = sum(comb(h, a) * comb(M - h, a) for a in range(s + 1))
    paper = (2 ** M * (10000 * s) ** (2 * s)) // ((M + 1) * (s + 1) * (27183 * M) ** (2 * s))
    return ({"s": s, "M": M, "h": h, "radius_legal": h > s + 1, "greedy_numerator": gn,
             "greedy_denominator": gd, "greedy_lower": -(-gn // gd), "e_upper": Fraction(27183, 10000),
             "paper_lower": paper}, True)


BOUNDS: dict[str, Callable[[Mapping[str, Any]], tuple[dict, bool]]] = {
    "lemma3": _lemma3, "lemma4": _lemma4, "lemma4_per_pair": _per_pair, "thm5": _thm5, "thm6": _thm6,
    "cor7": _cor7, "eq8": _eq8, "prop10": _prop10}


def _equal(want: Any, got: Any) -> bool:
    if isinstance(want, bool) or want is None:
        return got is want
    if isinstance(want, int):
        return type(got) is int and got == want
    try:
        return num(got, "value") == want
    except Fails:
        return False


def check(claim: Mapping[str, Any]) -> list[str]:
    p, ev, verdict = claim["parameters"], claim["evidence"], claim["verdict"]
    name = p.get("bound")
    if name not in BOUNDS:
        return [f"unknown bound {name!r:.30}"]
    if set(p) != {"bound", *PARAMETERS[name]}:
        return [f"{name} parameters are bound and {', '.join(PARAMETERS[name])}"]
    if verdict not in ("proved", "unknown"):
        return [f"a bound is proved or unknown, not {verdict}"]
    want, holds = BOUNDS[name](p)
    if not isinstance(ev, dict) or set(ev) != set(want):
        return [f"{name} evidence must be exactly {sorted(want)}"]
    problems = [f"{name}: evidence {k!r} is not the recomputed value" for k in sorted(want)
                if not _equal(want[k], ev[k])]
    if verdict == "proved" and not holds:
        problems.append(f"{name}: a hypothesis fails, the bound is not proved")
    return problems
