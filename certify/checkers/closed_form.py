"""Independent re-check of ``bound`` claims (closed-form bounds of the paper).

Imports only the standard library, :mod:`certify.checkers.common` and the kinds'
declarations. The parameters must be exactly the bound's (declared in
:data:`PARAMETERS`); every
number is recomputed from the claim's ``parameters`` with ints and ``Fraction`` and compared with its
``evidence``; a ``proved`` claim also needs every hypothesis to hold exactly.

Evidence format. ``parameters["bound"]`` names the bound; integers are JSON
ints, exact rationals are ``"p/q"`` strings (``"p"`` when integral), never
floats. Fields per bound (parameters -> evidence):

- ``lemma3``: ``n, eps, d`` -> ``gap_threshold = 2eps(n-1)/(n-2)``,
  ``factor = (n-2)(d-2eps)/(2eps)``. Hypotheses: ``n >= 3``,
  ``0 < eps <= 1/2``, ``d >= gap_threshold``.
- ``lemma4``: ``t, lam, strict`` -> ``bound = t/(1+(t-1)/lam^2)``,
  ``rank_bound`` (``ceil(bound)``; ``floor(bound)+1`` when strict and t >= 2).
- ``lemma4_per_pair``: ``t, strict, Lambda`` (t x t of ``"p/q"`` or null; the
  diagonal is ignored; null or 0 = only ``|C_ij| <= 1``) ->
  ``frobenius_sq_max = t + sum_{i!=j} Lambda_ij^-2`` (1 per null entry),
  ``bound = t^2 / frobenius_sq_max``, ``strict_applied`` (strict, t >= 2 and
  some bounded entry), ``rank_bound``.
- ``thm5``: ``code_size, delta, g, n, eps`` -> ``gap_threshold, mu, steps =
  floor(delta/g), lam = mu^steps, bound = G/(1+(G-1)/lam^2), rank_bound``
  (1 if G = 1, else ``floor(bound)+1``: the proof's bounds are strict),
  ``weak_bound = min(G, lam^2)/2``, ``weak_rank_bound = ceil(weak_bound)``.
  Hypotheses: ``g <= delta``, ``g > gap_threshold``, ``mu > 1``.
- ``thm6``: ``m, extended`` -> ``M = 2 floor(m/2), delta = floor(M/8), g = 5,
  mu = 4, lam_sq_log2 = 4 floor(delta/5), code_numerator = binom(M, M/2),
  code_denominator = sum_{a<delta} binom(M/2, a)^2, code_size_lower =
  ceil(num/den), code_hypothesis = (T^10 >= 2^M), code_covers_lambda =
  (T >= 2^lam_sq_log2), log2_lower_bound = floor(log2 ceil(min(T, lam^2)/2))``
  (null unless both hypotheses hold), ``paper_exponent = 4 floor(M/40) - 1``,
  ``paper_second_inequality = (10 paper_exponent >= m - 60)``,
  ``sharp_bound`` / ``sharp_rank_bound`` (Thm 5 with G = T, strict).
  Needs ``m >= 168`` (``m >= 40`` when ``extended``).
- ``cor7``: ``m, n`` (n >= 4) -> ``M, k`` (least k >= 1 with
  ``(n-2)^(2k) >= 2^M``), ``delta = 2k, g = 2, mu = n-2, lam = (n-2)^k``,
  ``code_numerator, code_denominator`` (middle layer, ``a < delta``),
  ``code_size_lower, bound, rank_bound, delta_le_quarter = (4 delta <= M)``.
- ``eq8``: ``L, H, r, dv, p, s, q`` -> ``bits_available = L H r (dv+1) p``,
  ``bits_needed`` (least b with ``2^b >= (s+1)^q``), ``holds``.
- ``prop10``: ``m`` (>= 32) -> ``s`` (largest with ``m^s <= 2^m``),
  ``M = m-s-2, h = floor(M/2), radius_legal = (h > s+1)``,
  ``greedy_numerator = binom(M,h)``, ``greedy_denominator = sum_{a<=s}
  binom(h,a) binom(M-h,a)``, ``greedy_lower = ceil(num/den)``,
  ``e_upper = "27183/10000"``, ``paper_lower = floor(2^M (10000 s)^(2s) /
  ((M+1)(s+1)(27183 M)^(2s)))``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

from certify.checkers.common import Bad as _Bad
from certify.checkers.common import boolean, integer, q_str, rational
from certify.checkers.kernel.attention import lemma3, lemma4_rank
from certify.checkers.kinds import BOUNDS

_MAX_M = 1 << 13          # larger parameters are not re-derived here
_MAX_POWER_BITS = 1 << 24

#: bound name -> its parameters (declared in :mod:`certify.checkers.kinds`); exactly
#: these are allowed
PARAMETERS = BOUNDS


def _int(p: dict, key: str, lo: int | None = None) -> int:
    return integer(p.get(key), f"parameter {key!r}", lo)


def _rat(v: Any, what: str) -> Fraction:
    return rational(v, what)


def _bool(p: dict, key: str) -> bool:
    return boolean(p.get(key), f"parameter {key!r}")


def _eps(p: dict) -> Fraction:
    e = _rat(p.get("eps"), "parameter 'eps'")
    if not (0 < e <= Fraction(1, 2)):
        raise _Bad(f"eps = {e} is outside (0, 1/2]")
    return e


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def _m(p: dict, lo: int) -> int:
    m = _int(p, "m", lo)
    if m > _MAX_M:
        raise _Bad(f"m = {m} is larger than this checker re-derives ({_MAX_M})")
    return m


# Each recompute returns (expected evidence, hypotheses hold). Values: int,
# bool, None or Fraction (compared as an exact rational).
Recomputed = tuple[dict[str, Any], bool]


def _lemma3(p: dict) -> Recomputed:
    n = _int(p, "n", 3)
    e = _eps(p)
    d = _rat(p.get("d"), "parameter 'd'")
    thr, factor = lemma3(n, e, d)
    return {"gap_threshold": thr, "factor": factor}, d >= thr


def _lemma4(p: dict) -> Recomputed:
    t = _int(p, "t", 1)
    lam = _rat(p.get("lam"), "parameter 'lam'")
    if lam <= 0:
        raise _Bad("lam must be > 0")
    strict = _bool(p, "strict")
    b, r = lemma4_rank(t, t + t * (t - 1) / (lam * lam), strict and t >= 2)
    return {"bound": b, "rank_bound": r}, True


def _per_pair(p: dict) -> Recomputed:
    t = _int(p, "t", 1)
    strict = _bool(p, "strict")
    L = p.get("Lambda")
    if not isinstance(L, list) or len(L) != t or any(not isinstance(r, list) or len(r) != t for r in L):
        raise _Bad("Lambda must be a t x t list of lists")
    fro = Fraction(t)
    bounded = False
    for i in range(t):
        for j in range(t):
            if i == j:
                continue
            v = L[i][j]
            x = Fraction(0) if v is None else _rat(v, f"Lambda[{i}][{j}]")
            if x < 0:
                raise _Bad(f"Lambda[{i}][{j}] < 0")
            if x == 0:
                fro += 1
            else:
                bounded = True
                fro += 1 / (x * x)
    applied = strict and t >= 2 and bounded
    b, r = lemma4_rank(t, fro, applied)
    return {"frobenius_sq_max": fro, "bound": b, "strict_applied": applied, "rank_bound": r}, True


def _thm5_core(G: int, delta: int, g: int, n: int, e: Fraction) -> Recomputed:
    thr, mu = lemma3(n, e, g)
    ok = g <= delta and g > thr and mu > 1 and G >= 1
    steps = delta // g
    if steps * max(mu.numerator.bit_length(), mu.denominator.bit_length()) > _MAX_POWER_BITS:
        raise _Bad("mu^floor(delta/g) is larger than this checker re-derives")     # before forming it
    lam = mu ** steps
    lam2 = lam * lam
    # lam = 0 (mu = 0): no bound, G lam^2 / (lam^2 + G - 1) = 0
    b, rank = (Fraction(0), 1) if lam2 == 0 and G > 1 else lemma4_rank(G, G + G * (G - 1) / lam2, G > 1)
    weak = min(Fraction(G), lam2) / 2
    return {"gap_threshold": thr, "mu": mu, "steps": steps, "lam": lam, "bound": b,
            "rank_bound": rank, "weak_bound": weak, "weak_rank_bound": _ceil(weak)}, ok


def _thm5(p: dict) -> Recomputed:
    n = _int(p, "n", 3)
    return _thm5_core(_int(p, "code_size", 1), _int(p, "delta", 1), _int(p, "g", 1), n, _eps(p))


def _middle(M: int, delta: int) -> tuple[int, int, int]:
    h = M // 2
    num = math.comb(M, h)
    den = 0
    for a in range(0, min(delta - 1, h) + 1):
        den += math.comb(h, a) * math.comb(h, a)
    return num, den, -(-num // den)


def _thm6(p: dict) -> Recomputed:
    extended = _bool(p, "extended")
    m = _m(p, 40 if extended else 168)
    if extended and m >= 168:
        raise _Bad("extended is set although m >= 168")
    M = m - (m % 2)
    delta = M // 8
    num, den, T = _middle(M, delta)
    t5, ok = _thm5_core(T, delta, 5, 3, Fraction(1, 2))
    lam2 = t5["lam"] ** 2
    lam_sq_log2 = 4 * (delta // 5)
    if lam2 != Fraction(2) ** lam_sq_log2:
        raise _Bad("internal: Lambda^2 is not 2^(4 floor(Delta/5))")
    hyp = T ** 10 >= 2 ** M
    covers = T >= 2 ** lam_sq_log2
    e = None
    if ok and hyp and covers:
        w = t5["weak_rank_bound"]
        e = w.bit_length() - 1
    paper = 4 * (M // 40) - 1
    return {"M": M, "delta": delta, "g": 5, "mu": 4, "lam_sq_log2": lam_sq_log2,
            "code_numerator": num, "code_denominator": den, "code_size_lower": T,
            "code_hypothesis": hyp, "code_covers_lambda": covers, "log2_lower_bound": e,
            "paper_exponent": paper, "paper_second_inequality": 10 * paper >= m - 60,
            "sharp_bound": t5["bound"], "sharp_rank_bound": t5["rank_bound"]}, ok and e is not None


def _cor7(p: dict) -> Recomputed:
    m = _m(p, 2)
    n = _int(p, "n", 4)
    if n.bit_length() > _MAX_M:
        raise _Bad("n is larger than this checker re-derives")
    M = m - (m % 2)
    k = 1
    while (n - 2) ** (2 * k) < 2 ** M:
        k += 1
    delta = 2 * k
    num, den, T = _middle(M, delta)
    t5, ok = _thm5_core(T, delta, 2, n, Fraction(1, 2))
    return {"M": M, "k": k, "delta": delta, "g": 2, "mu": n - 2, "lam": (n - 2) ** k,
            "code_numerator": num, "code_denominator": den, "code_size_lower": T,
            "bound": t5["bound"], "rank_bound": t5["rank_bound"],
            "delta_le_quarter": 4 * delta <= M}, ok


def _eq8(p: dict) -> Recomputed:
    L, H, r, dv = (_int(p, k, 1) for k in ("L", "H", "r", "dv"))
    bits = L * H * r * (dv + 1) * _int(p, "p", 0)
    s, q = _int(p, "s", 1), _int(p, "q", 1)
    if q * (s + 1).bit_length() > _MAX_POWER_BITS:
        raise _Bad("(s+1)^q is larger than this checker re-derives")
    need = ((s + 1) ** q - 1).bit_length()
    return {"bits_available": bits, "bits_needed": need, "holds": bits >= need}, True


def _prop10(p: dict) -> Recomputed:
    m = _m(p, 32)
    s = 0
    while m ** (s + 1) <= 2 ** m:
        s += 1
    M = m - s - 2
    h = M // 2
    num = math.comb(M, h)
    den = sum(math.comb(h, a) * math.comb(M - h, a) for a in range(s + 1))
    paper = (2 ** M * (10000 * s) ** (2 * s)) // ((M + 1) * (s + 1) * (27183 * M) ** (2 * s))
    return {"s": s, "M": M, "h": h, "radius_legal": h > s + 1, "greedy_numerator": num,
            "greedy_denominator": den, "greedy_lower": -(-num // den),
            "e_upper": Fraction(27183, 10000), "paper_lower": paper}, True


_RECHECK: dict[str, Callable[[dict], tuple[dict, bool]]] = {
    "lemma3": _lemma3, "lemma4": _lemma4, "lemma4_per_pair": _per_pair, "thm5": _thm5,
    "thm6": _thm6, "cor7": _cor7, "eq8": _eq8, "prop10": _prop10,
}


def _same(expected: Any, got: Any, key: str) -> str | None:
    if isinstance(expected, bool) or expected is None:
        ok = got is expected
    elif isinstance(expected, int):
        ok = isinstance(got, int) and not isinstance(got, bool) and got == expected
    else:
        try:
            ok = _rat(got, f"evidence {key!r}") == expected
        except _Bad as exc:
            return str(exc)
    if ok:
        return None
    shown = expected if not isinstance(expected, Fraction) else q_str(expected)
    if isinstance(got, int) and abs(got).bit_length() > 200 or isinstance(got, str) and len(got) > 80:
        got = "<long value>"
    if isinstance(shown, int) and abs(shown).bit_length() > 200 or isinstance(shown, str) and len(shown) > 80:
        shown = "<long value>"
    return f"evidence {key!r} is {got!r}, re-derived {shown}"


def check(claim: dict, cert: dict | None = None) -> list[str]:
    """Problems with a ``bound`` claim; ``[]`` when its verdict is re-derived."""
    if not isinstance(claim, dict):
        return ["claim is not a JSON object"]
    if claim.get("kind") != "bound":
        return [f"not a bound claim (kind {claim.get('kind')!r})"]
    params, evidence = claim.get("parameters"), claim.get("evidence")
    if not isinstance(params, dict) or not isinstance(evidence, dict):
        return ["parameters and evidence must be JSON objects"]
    name = params.get("bound")
    fn = _RECHECK.get(name) if isinstance(name, str) else None
    if fn is None:
        return [f"unknown bound {name!r}"]
    verdict = claim.get("verdict")
    if verdict == "refuted":
        return [f"a {name} bound claim cannot be refuted"]
    if verdict not in ("proved", "unknown"):
        return [f"unknown verdict {verdict!r}"]
    try:
        PARAMETERS[str(name)].check_keys(params, f"{name} parameters")
        expected, holds = fn(params)
    except _Bad as exc:
        return [f"{name}: {exc}"]
    problems = []
    missing = sorted(set(expected) - set(evidence))
    extra = sorted(set(evidence) - set(expected))
    if missing:
        problems.append(f"{name}: evidence lacks {missing}")
    if extra:
        problems.append(f"{name}: evidence has unknown fields {extra}")
    for key in sorted(set(expected) & set(evidence)):
        msg = _same(expected[key], evidence[key], key)
        if msg:
            problems.append(f"{name}: {msg}")
    if verdict == "proved" and not holds:
        problems.append(f"{name}: a hypothesis fails, the claim cannot be proved")
    if verdict == "unknown" and not claim.get("reason"):
        problems.append(f"{name}: an unknown claim needs a reason")
    return problems
