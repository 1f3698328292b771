"""Every bound at (m, n, eps) as one table (the ``certify bounds`` command's
content) and :func:`bound_claim`, which turns a result into a ``BOUND`` claim.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from certify.core.bounds.codes import Thm6Bound, cor7, prop10, thm6
from certify.core.bounds.exact import HALF, MAX_TABLE_N, _check_m, _qs, as_int, ceil_q, check_eps
from certify.core.bounds.lemmas import lemma3, lemma3_min_gap
from certify.core.bounds.temperature import thm1_temperature
from certify.core.bounds.transcript import bits_needed
from certify.core.certificate import Claim, ClaimKind
from certify.core.errors import UncertifiableError
from certify.core.verdict import Verdict

# ------------------------------------------------------------------ claims

def bound_claim(result: Any) -> Claim:
    """A ``BOUND`` claim for a result of this module (its hypotheses were checked
    exactly when it was built). A Thm 6 result whose code-size check failed
    gives an ``unknown`` claim with the reason."""
    for attr in ("NAME", "parameters", "evidence", "statement"):
        if not hasattr(result, attr):
            raise TypeError(f"not a bound result: {type(result).__name__}")
    verdict, reason = Verdict.PROVED, None
    if isinstance(result, Thm6Bound) and result.log2_lower_bound is None:
        verdict = Verdict.UNKNOWN
        reason = "the guaranteed code size failed T^10 >= 2^M or T >= Lambda^2"
    return Claim(kind=ClaimKind.BOUND, statement=None, verdict=verdict,
                 parameters=result.parameters(), evidence=result.evidence(),
                 method="closed form, exact integer/rational arithmetic (certify.bounds)",
                 reason=reason)


# ------------------------------------------------------------------ table and command

def bounds_table(m: Any, n: Any = 3, eps: Any = HALF) -> tuple[dict[str, Any], list[Any]]:
    """Every bound applicable at ``(m, n, eps)``: the JSON object of the command
    and the list of result values (for claims)."""
    m = _check_m(m)
    n = as_int(n, "n", minimum=3)
    if n > MAX_TABLE_N:
        raise UncertifiableError(f"n = {n} exceeds {MAX_TABLE_N}, the largest n tabulated here")
    e = check_eps(eps)
    results: list[Any] = []
    out: dict[str, Any] = {"m": m, "n": n, "eps": _qs(e)}

    tau = thm1_temperature(n, e)
    out["thm1"] = {"ratio": _qs(tau.ratio), "tau_display": str(tau.value(20)),
                   "statement": f"tau = log({_qs(tau.ratio)}) suffices at lengths <= {n}"}
    out["thm2_upper_log2"] = m

    gap = lemma3_min_gap(n, e)
    d = max(1, ceil_q(gap))
    l3 = lemma3(n, e, d)
    results.append(l3)
    out["lemma3"] = {**l3.evidence(), "d": _qs(l3.d)}

    t6 = thm6(m)
    out["thm6_log2_lower_bound"] = None if t6 is None else t6.log2_lower_bound
    t6x = thm6(m, extended=True) if t6 is None else None
    out["thm6_extended_log2_lower_bound"] = None if t6x is None else t6x.log2_lower_bound
    t6 = t6 if t6 is not None else t6x
    if t6 is None:
        out["thm6"] = None
    else:
        results.append(t6)
        out["thm6"] = {**t6.evidence(), "agrees_with_paper": t6.agrees_with_paper,
                       "sharp_log2_lower_bound": t6.sharp_log2_lower_bound}

    if n >= 4 and m >= 2:
        c7 = cor7(m, n)
        results.append(c7)
        out["cor7"] = {**c7.evidence(), "log2_lower_bound": c7.log2_lower_bound}
    else:
        out["cor7"] = None

    if m >= 32:
        p10 = prop10(m)
        results.append(p10)
        q = min(n // 2, p10.greedy_lower)
        out["prop10"] = p10.evidence()
        if q >= 1:
            out["eq8"] = {"s": p10.s, "q": q, "bits_needed": bits_needed(p10.s, q)}
        else:
            out["eq8"] = None
    else:
        out["prop10"] = None
        out["eq8"] = None
    return out, results


def _log2_display(x: int | Fraction) -> str:
    import mpmath
    x = Fraction(x)
    if x <= 0:
        return "-inf"
    with mpmath.workdps(15):
        return mpmath.nstr(mpmath.log(mpmath.mpf(x.numerator) / x.denominator, 2), 6)


def _show_int(x: int) -> str:
    return str(x) if x < 10**12 else f"~2^{_log2_display(x)}"


def format_table(obj: dict[str, Any]) -> str:
    """The table for people."""
    m, n, eps = obj["m"], obj["n"], obj["eps"]
    rows = [("Thm 1", f"softmin temperature tau = log({obj['thm1']['ratio']})",
             obj["thm1"]["tau_display"][:12]),
            ("Thm 2", "upper bound r*(m,n) <= 2^m", f"2^{m}"),
            ("Thm 6 (1)", "r*(m,1) = r*(m,2)", "1"),
            ("Lemma 3", f"min gap 2eps(n-1)/(n-2) = {obj['lemma3']['gap_threshold']}; "
             f"factor at d = {obj['lemma3']['d']}", obj["lemma3"]["factor"])]
    t6 = obj["thm6"]
    if t6 is None:
        rows.append(("Thm 6", "r >= 2^e (needs m >= 168; exact-check extension m >= 40)", "n/a"))
    else:
        name = "Thm 6" if obj["thm6_log2_lower_bound"] is not None else "Thm 6 ext."
        rows.append((name, f"M={t6['M']} Delta={t6['delta']} g=5 mu=4; code T >= 2^"
                     f"{_log2_display(t6['code_size_lower'])} (T^10>=2^M: {t6['code_hypothesis']})",
                     f"r >= 2^{t6['log2_lower_bound']}"))
        rows.append(("Thm 6 paper", "4 floor(M/40) - 1", f"{t6['paper_exponent']} "
                     f"({'agrees' if t6['agrees_with_paper'] else 'DIFFERS'})"))
        rows.append(("Thm 5 sharp", "strict Lemma 4 with the same code size",
                     f"r >= {_show_int(t6['sharp_rank_bound'])} "
                     f"(>= 2^{t6['sharp_log2_lower_bound']})"))
    c7 = obj["cor7"]
    if c7 is None:
        rows.append(("Cor 7", "growing n (needs n >= 4)", "n/a"))
    else:
        rows.append(("Cor 7", f"n={n}: Delta={c7['delta']} g=2 mu={c7['mu']}; "
                     f"code T >= 2^{_log2_display(c7['code_size_lower'])} (counting)",
                     f"r >= {_show_int(c7['rank_bound'])} (>= 2^{c7['log2_lower_bound']})"))
    p10 = obj["prop10"]
    if p10 is None:
        rows.append(("Prop 10", "multilevel code (needs m >= 32)", "n/a"))
    else:
        rows.append(("Prop 10", f"s={p10['s']} M={p10['M']} h={p10['h']}; greedy |C| >= "
                     f"2^{_log2_display(p10['greedy_lower'])}; paper form >= {_show_int(p10['paper_lower'])}",
                     _show_int(p10["greedy_lower"])))
    e8 = obj["eq8"]
    if e8 is not None:
        rows.append(("Thm 9/Eq 8", f"q = {e8['q']} pairs, s = {e8['s']}: bits >= ceil(q log2(s+1))",
                     str(e8["bits_needed"])))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    head = f"bounds at m = {m}, n = {n}, eps = {eps}"
    lines = [head, "-" * len(head)]
    lines += [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    return "\n".join(lines)
