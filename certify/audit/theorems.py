"""The paper's theorems about concrete objects, decided exactly (``theorem`` claims, checked by
:mod:`certify.checkers.theorems`).

* :func:`cube_claim` -- Thm 1 (the dense softmin head, ``s_ij = -tau <x_i, x_j>``, ``v(x) = x``,
  readout ``<x_i, y_i>``) or Thm 6's first part (the rank-1 head ``alpha = 1``, ``v(z) = z``,
  readout ``2 <x_i, a_i> - |x_i|_1``) at every position of every sequence of length ``1..n``
  over ``{0,1}^m``. Both heads are normalized and position-free, so a position's output and
  target depend only on its query and the multiset of the other tokens: each such *class*
  is evaluated once (those with the same overlaps once). With ``tau = log(q)`` (weights
  ``q^-<x,z>``) and for Thm 6 every number is a Fraction; with a rational ``tau > 0`` the
  weights ``e^(-tau <x,z>)`` are python-flint arb balls, and ``|t_hat - t| < eps`` is decided
  only when the whole ball agrees, the working precision doubled from 64 bits until it is
  (up to 4096; a class undecided then makes the claim ``unknown``, never ``proved``).
* :func:`positional_claim` -- Thm 8 on a head with position-dependent key maps
  (:class:`models.constructions.PositionalConstruction`) and a family with positions
  (:func:`certify.core.families.positional.causal_family`): its correctness at every scored
  position, its least contribution, Lemma 3's domination for its effective kernel
  ``sum_(j < n-1) alpha_j`` on every jump, the exact rank of that kernel, and the bound Thm 8
  gives every head of its class correct on the family (Lemma 4 on the family's chains).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from itertools import combinations_with_replacement
from typing import Any, Iterator

from certify.core.certificate import Claim, ClaimKind
from certify.core.errors import InputError
from certify.core.families import JUMP_COLUMNS, Family
from certify.core.files import sha256_json
from certify.core.numbers import exact_product, q_to_str
from certify.core.verdict import Verdict

HALF = Fraction(1, 2)
#: the most classes a cube claim evaluates (the checker's limit)
MAX_CLASSES = 1 << 17
PRECISIONS = (64, 128, 256, 512, 1024, 2048, 4096)
_METHOD_CUBE = ("every class (query, multiset of the other tokens) of every sequence of length <= n "
                "evaluated once: exact rationals, or arb balls decided at a doubling precision")


def default_tau(n: int, eps: Fraction) -> str:
    """Thm 1's sufficient temperature ``log(n/eps)`` as a ``tau`` parameter."""
    return f"log({q_to_str(Fraction(n) / eps)})"


def check_tau(text: str) -> str:
    """A ``tau`` parameter from the command line, normalized: ``log(q)`` with a rational
    ``q >= 1`` or a rational ``tau >= 0`` (``"p"`` or ``"p/q"``, at most 40 digits each)."""
    inner = text[4:-1] if text.startswith("log(") and text.endswith(")") else text
    try:
        q = Fraction(inner.strip())
    except (ValueError, ZeroDivisionError):
        raise InputError(f"--tau must be log(q) or a rational, got {text!r:.60}") from None
    if text.startswith("log(") and q < 1 or q < 0:
        raise InputError(f"--tau must be >= 0 (log(q) with q >= 1), got {text!r:.60}")
    if max(len(str(q.numerator)), len(str(q.denominator))) > 40:
        raise InputError(f"--tau has more than 40 digits: {text!r:.60}")
    return f"log({q_to_str(q)})" if inner is not text else q_to_str(q)


def _bits(i: int, m: int) -> str:
    return "".join(str((i >> k) & 1) for k in range(m))


def _classes(m: int, n: int) -> Iterator[tuple[int, tuple[int, ...]]]:
    for N in range(1, n + 1):
        for x in range(1 << m):
            for others in combinations_with_replacement(range(1 << m), N - 1):
                yield x, others


def _weights(theorem: str, tau: str | None) -> tuple[Fraction | None, Fraction | None]:
    """``(c, None)`` (every weight ``c^o`` rational) or ``(None, tau)`` (balls)."""
    if theorem == "thm6":
        return Fraction(1), None
    assert tau is not None
    if tau.startswith("log(") and tau.endswith(")"):
        q = Fraction(tau[4:-1])
        if q < 1:
            raise InputError(f"tau = log(q) needs q >= 1, got {tau}")
        return 1 / q, None
    t = Fraction(tau)
    if t < 0:
        raise InputError(f"tau must be >= 0, got {tau}")
    return (Fraction(1), None) if t == 0 else (None, t)


def _error(theorem: str, c: Fraction | None, tau: Fraction | None, w: int, others: tuple[int, ...]) -> Any:
    """``t_hat - t`` of a class (query weight ``w``, overlaps ``others``): a Fraction, or an arb
    ball at the current precision."""
    ov = (w,) + others
    t = min(ov)
    if theorem == "thm6":
        return Fraction(sum(2 * o - w for o in ov), len(ov)) - t
    if c is not None:
        a = [c ** (o - t) for o in ov]
        return sum(ai * (o - t) for ai, o in zip(a, ov)) / sum(a)
    import flint
    a = [(-flint.arb(flint.fmpq(tau.numerator, tau.denominator)) * (o - t)).exp() for o in ov]  # type: ignore
    return sum(ai * (o - t) for ai, o in zip(a, ov)) / sum(a)


def _decide(theorem: str, c: Fraction | None, tau: Fraction | None, eps: Fraction,
            keys: set[tuple[int, tuple[int, ...]]]) -> dict[tuple, tuple[str, Any]]:
    """key -> ``("ok" | "fails" | "undecided", exact error, or its float for people)``."""
    if c is not None:
        out = {}
        for k in keys:
            e = _error(theorem, c, None, *k)
            out[k] = ("ok" if abs(e) < eps else "fails", e)
        return out
    import flint
    res: dict[tuple, tuple[str, Any]] = {}
    pending, old = set(keys), flint.ctx.prec
    e_ball = flint.arb(flint.fmpq(eps.numerator, eps.denominator))
    try:
        for prec in PRECISIONS:
            flint.ctx.prec = prec
            e_ball = flint.arb(flint.fmpq(eps.numerator, eps.denominator))
            for k in sorted(pending):
                x = _error(theorem, None, tau, *k)
                if abs(x) < e_ball:
                    res[k] = ("ok", float(x.mid()))
                elif abs(x) >= e_ball:
                    res[k] = ("fails", float(x.mid()))
                else:
                    continue
                pending.discard(k)
            if not pending:
                break
    finally:
        flint.ctx.prec = old
    res.update({k: ("undecided", None) for k in pending})
    return res


def cube_counts(m: int, n: int) -> tuple[int, int, int]:
    """``(sequences, positions, classes)`` of lengths ``1..n`` over ``{0,1}^m``."""
    K = 1 << m
    return (sum(K ** N for N in range(1, n + 1)), sum(N * K ** N for N in range(1, n + 1)),
            sum(K * math.comb(K + N - 2, N - 1) for N in range(1, n + 1)))


def cube_claim(theorem: str, m: int, n: int, eps: Fraction = HALF, tau: str | None = None) -> Claim:
    """A ``theorem`` claim: Thm 1 (``theorem = "thm1"``, ``tau`` default ``log(n/eps)``) or Thm 6
    part 1 (``"thm6"``) decided at every position of every sequence of length ``1..n`` over
    ``{0,1}^m`` (module docstring)."""
    t0 = time.perf_counter()
    eps = Fraction(eps)
    if theorem not in ("thm1", "thm6"):
        raise InputError(f"a construction on the cube is thm1 or thm6, not {theorem!r}")
    if not 0 < eps <= HALF:
        raise InputError(f"eps must lie in (0, 1/2], got {eps}")
    if not (1 <= m <= 16 and 1 <= n <= 8):
        raise InputError(f"need 1 <= m <= 16 and 1 <= n <= 8, got m = {m}, n = {n}")
    seqs, poss, ncls = cube_counts(m, n)
    if ncls > MAX_CLASSES:
        raise InputError(f"{ncls} classes at m = {m}, n = {n}: above the limit of {MAX_CLASSES} "
                         "(the checker's); take a smaller m or n")
    if theorem == "thm1":
        tau = default_tau(n, eps) if tau is None else tau
    c, t = _weights(theorem, tau)
    pop = [bin(i).count("1") for i in range(1 << m)]
    key = lambda x, o: (pop[x], tuple(sorted(pop[x & z] for z in o)))     # noqa: E731
    status = _decide(theorem, c, t, eps, {key(x, o) for x, o in _classes(m, n)})
    failures = undecided = 0
    first = None
    for x, o in _classes(m, n):
        s = status[key(x, o)][0]
        failures += s == "fails"
        undecided += s == "undecided"
        if s == "fails" and first is None:
            first = (x, o)
    errors = [e for _, e in status.values()]
    exact = c is not None
    max_err = max(abs(e) for e in errors) if exact else None
    params: dict[str, Any] = {"theorem": theorem, "m": m, "n": n, "eps": q_to_str(eps)}
    if theorem == "thm1":
        params["tau"] = tau
    evidence = {"sequences": seqs, "positions": poss, "classes": ncls, "failures": failures,
                "max_error": None if max_err is None else q_to_str(max_err),
                "counterexample": None if first is None else {
                    "query": _bits(first[0], m), "others": [_bits(z, m) for z in first[1]]}}
    verdict = Verdict.REFUTED if failures else (Verdict.UNKNOWN if undecided else Verdict.PROVED)
    reason = None
    if verdict is Verdict.REFUTED:
        cx = evidence["counterexample"]
        assert isinstance(cx, dict)
        reason = (f"{failures} of {ncls} classes fail; the first: query {cx['query']} with the other "
                  f"tokens {cx['others']}")
    elif verdict is Verdict.UNKNOWN:
        reason = f"{undecided} classes undecided at {PRECISIONS[-1]} bits of precision"
    info: dict[str, Any] = {}
    if not exact:
        floats = [e for s, e in status.values() if e is not None]
        info["max_error_float"] = max(floats) if floats else None
    return Claim(kind=ClaimKind.THEOREM, statement=None, verdict=verdict, parameters=params,
                 evidence=evidence, reason=reason, method=_METHOD_CUBE, info=info,
                 timings={"decide": round(time.perf_counter() - t0, 3)})


# ---------------------------------------------------------------- Thm 8

def positional_head_json(con: Any) -> dict[str, Any]:
    """The head of a :class:`models.constructions.PositionalConstruction` as the claim embeds it:
    ``phi_k`` row ``z`` the blocks ``phiK_0(z) .. phiK_(n-1)(z)``, ``g`` row ``x`` the blocks
    ``g_0(x, .) .. g_(n-1)(x, .)``."""
    n, K = len(con.phi_k), con.phi_k[0].shape[0]
    return {"query_tokens": [int(t) for t in con.query_tokens],
            "phi_q": [[q_to_str(v) for v in row] for row in con.phi_q],
            "phi_k": [[q_to_str(v) for j in range(n) for v in con.phi_k[j][z]] for z in range(K)],
            "g": [[q_to_str(v) for j in range(n) for v in con.g[j][a]] for a in range(len(con.query_tokens))]}


def _chain_lambdas(fam: Family, factor: dict[int, Fraction]) -> dict[tuple[int, int], Fraction]:
    """``Lambda_SU``: the product of the Lemma 3 factors along the jumps of each word pair."""
    col = {c: k for k, c in enumerate(JUMP_COLUMNS)}
    lam: dict[tuple[int, int], Fraction] = {}
    assert fam.jumps is not None
    for j, row in enumerate(fam.jumps.tolist()):
        k = (row[col["word_s"]], row[col["word_u"]])
        lam[k] = lam.get(k, Fraction(1)) * factor[j]
    return lam


def positional_claim(fam: Family, con: Any, eps: Fraction = HALF) -> Claim:
    """A ``theorem`` claim (Thm 8) on the head ``con`` (a positional construction) and the family
    with positions ``fam`` (module docstring)."""
    import flint
    t0 = time.perf_counter()
    eps = Fraction(eps)
    n, L = fam.n, fam.n - 1
    row_of = {int(t): i for i, t in enumerate(con.query_tokens)}
    alpha = [exact_product(con.phi_q, pk.T) for pk in con.phi_k]          # n x (Q, K)
    outs = []
    for i, seq in enumerate(fam.inputs.tolist()):
        x = row_of[seq[-1]]
        a = [alpha[j][x, z] for j, z in enumerate(seq)]
        num = sum((a[j] * con.g[j][x, z] for j, z in enumerate(seq)), Fraction(0))
        den = sum(a, Fraction(0))
        outs.append((i, seq, num, den, int(fam.targets[i, -1])))
    err = [abs(nu / de - t) if de > 0 else None for _, _, nu, de, t in outs]
    failing = [k for k, e in enumerate(err) if e is None or e >= eps]
    eff: Any = sum(alpha[:L])                                              # (Q, K) effective kernel
    col = {c: k for k, c in enumerate(JUMP_COLUMNS)}
    assert fam.jumps is not None and fam.words is not None
    factor, dominated = {}, 0
    for j, row in enumerate(fam.jumps.tolist()):
        x, y, z, t, u = (row[col[k]] for k in ("x", "y", "z", "t", "u"))
        if u - t < 2 * eps * (n - 1) / (n - 2):
            raise InputError(f"jump {j} of {fam.name!r}: its gap {u - t} is below Lemma 3's threshold")
        factor[j] = (n - 2) * (u - t - 2 * eps) / (2 * eps)
        dominated += eff[row_of[x], y] > factor[j] * eff[row_of[x], z]
    lam = _chain_lambdas(fam, factor)
    W = len(fam.words)
    if W < 2 or len(lam) != W * (W - 1):
        raise InputError(f"family {fam.name!r}: Thm 8's bound needs a chain for every ordered pair of its "
                         f"{W} code words ({len(lam)} have one)")
    s = sum((1 / (v * v) for v in lam.values()), Fraction(0))
    bound = Fraction(W * W) / (W + s)
    rank_bound = bound.numerator // bound.denominator + 1                  # strict
    eff_rank = flint.fmpq_mat([[flint.fmpq(v.numerator, v.denominator) for v in row]
                                for row in eff.tolist()]).rank()
    least = min(min(v for v in a.ravel()) for a in alpha)
    max_err = None if any(e is None for e in err) else max(err)           # type: ignore[type-var]
    cx = None
    if failing:
        i, seq, nu, de, t = outs[failing[0]]
        cx = {"input": i, "position": n - 1, "sequence": seq, "numerator": q_to_str(nu),
              "denominator": q_to_str(de), "t_hat": q_to_str(nu / de) if de > 0 else None, "target": t}
    head = positional_head_json(con)
    params = {"theorem": "thm8", "family": fam.name, "family_sha256": fam.sha256,
              "head_sha256": sha256_json(head), "rank": con.rank, "eps": q_to_str(eps), "n": n}
    evidence = {"family": fam.to_json(), "head": head, "scored_positions": len(outs),
                "failures": len(failing), "max_error": None if max_err is None else q_to_str(max_err),
                "counterexample": cx, "min_contribution": q_to_str(least),
                "jumps": len(fam.jumps), "dominated": dominated, "effective_rank": eff_rank,
                "lemma4_bound": q_to_str(bound), "rank_bound": rank_bound}
    verdict = Verdict.REFUTED if failing else Verdict.PROVED
    reason = None if not failing else (f"{len(failing)} of {len(outs)} inputs fail; the first is input "
                                       f"{failing[0]}")
    return Claim(kind=ClaimKind.THEOREM, statement=None, verdict=verdict, parameters=params,
                 evidence=evidence, reason=reason,
                 method="every input evaluated in exact rationals; Lemma 3 per jump on the effective "
                        "kernel, Lemma 4 on the family's chains, the rank over Q by python-flint",
                 timings={"certify": round(time.perf_counter() - t0, 3)})
