"""``theorem``: a paper theorem on a concrete object, re-derived the direct way.

* Thm 1 and Thm 6 (first part), on the cube: the head is rebuilt from the
  parameters and evaluated at **every position of every sequence** of length
  ``1..n`` over ``{0,1}^m`` (no grouping of positions: the paper's statement as
  written), in Fractions when every weight is rational (``tau = log(q)``, ``tau
  = 0``, Thm 6) and otherwise in python-flint ``arb`` balls, a position decided
  only when its whole ball lies on one side of ``eps`` (precision doubled from
  64 to 4096 bits). The counts are recomputed (sequences, positions; the
  classes ``(N, query, multiset of the others)`` by their formula); a failing
  class is the class of a failing position, the first in the order ``N``,
  query index, others; the largest error is exact or null.
* Thm 8, on a family with positions: the positional head's output at every
  scored (final) position in Fractions; every contribution ``alpha_j``; each
  jump's inputs ``Y``, ``Z``, ``M_l`` found in the family; Lemma 3's factor and
  the domination of the effective kernel ``sum_(j < n-1) alpha_j``; each word
  pair's chain and its ``Lambda``; Lemma 4 (strict) ``t^2 / (t + sum
  Lambda^-2)``; the effective kernel's rank over Q by flint.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import product
from typing import Any, Mapping

import flint

from certify.reference.exact import Fails, Refused, canonical_sha256, num, q_text, rank, whole
from certify.reference.families import JUMP_COLUMNS, bits, family

#: positions of a cube claim evaluated one by one (above: refused, exit 2)
MAX_CUBE_POSITIONS = 1 << 16
PRECISIONS = (64, 128, 256, 512, 1024, 2048, 4096)
HALF = Fraction(1, 2)
CUBE_EVIDENCE = {"sequences", "positions", "classes", "failures", "max_error", "counterexample"}
POSITIONAL_EVIDENCE = {"family", "head", "scored_positions", "failures", "max_error", "counterexample",
                       "min_contribution", "jumps", "dominated", "effective_rank", "lemma4_bound",
                       "rank_bound"}


def check(claim: Mapping[str, Any]) -> list[str]:
    p, ev = claim["parameters"], claim["evidence"]
    eps = num(p.get("eps"), "eps")
    if not 0 < eps <= HALF:
        raise Fails(f"eps must lie in (0, 1/2], got {q_text(eps)}")
    if p.get("theorem") in ("thm1", "thm6"):
        if set(ev) != CUBE_EVIDENCE:
            return [f"the evidence of a construction on the cube has exactly {sorted(CUBE_EVIDENCE)}"]
        return _cube(claim, eps)
    if p.get("theorem") == "thm8":
        if set(ev) != POSITIONAL_EVIDENCE:
            return [f"the evidence of Thm 8 has exactly {sorted(POSITIONAL_EVIDENCE)}"]
        return _positional(claim, eps)
    return [f"unknown theorem {p.get('theorem')!r:.20}"]


# ---------------------------------------------------------------- the cube

def _error(theorem: str, c: Fraction | None, tau: Any, seq: tuple[list[int], ...], i: int) -> Any:
    """``t_hat - t`` at position ``i`` of ``seq``: a Fraction, or a ball at the current precision."""
    x = seq[i]
    ov = [sum(a & b for a, b in zip(x, z)) for z in seq]
    t = min(ov)
    if theorem == "thm6":
        w = sum(x)
        return Fraction(sum(2 * o - w for o in ov), len(ov)) - t
    if c is not None:
        a = [c ** o for o in ov]
        return sum(ai * o for ai, o in zip(a, ov)) / sum(a) - t
    a = [(-tau * o).exp() for o in ov]
    return sum(ai * o for ai, o in zip(a, ov)) / sum(a) - t


def _temperature(p: Mapping[str, Any]) -> tuple[Fraction | None, Fraction | None]:
    if p["theorem"] == "thm6":
        return Fraction(1), None
    tau = p.get("tau")
    if not isinstance(tau, str):
        raise Fails("thm1 needs tau")
    if tau.startswith("log(") and tau.endswith(")"):
        q = num(tau[4:-1], "tau")
        if q < 1:
            raise Fails("tau = log(q) needs q >= 1")
        return 1 / q, None
    t = num(tau, "tau")
    if t < 0:
        raise Fails("tau must be >= 0")
    return (Fraction(1), None) if t == 0 else (None, t)


def _cube(claim: Mapping[str, Any], eps: Fraction) -> list[str]:
    p, ev, verdict = claim["parameters"], claim["evidence"], claim["verdict"]
    theorem = p["theorem"]
    m, n = whole(p.get("m"), "m", 1), whole(p.get("n"), "n", 1)
    K = 2 ** m
    positions = sum(N * K ** N for N in range(1, n + 1))
    if positions > MAX_CUBE_POSITIONS:
        raise Refused(f"{positions} positions of sequences over {{0,1}}^{m}, above the reference "
                      f"checker's limit of {MAX_CUBE_POSITIONS}")
    c, tau = _temperature(p)
    tokens = [[(i >> k) & 1 for k in range(m)] for i in range(K)]
    status: dict[tuple[int, int, tuple[int, ...]], str] = {}       # class -> worst status
    errors: list[Fraction] = []
    pending: list[tuple[tuple[int, ...], int]] = []
    for N in range(1, n + 1):
        for idx in product(range(K), repeat=N):
            for i in range(N):
                cls = (N, idx[i], tuple(sorted(idx[:i] + idx[i + 1:])))
                if c is not None:
                    e = _error(theorem, c, None, tuple(tokens[j] for j in idx), i)
                    errors.append(abs(e))
                    if abs(e) >= eps:
                        status[cls] = "fails"
                    status.setdefault(cls, "ok")
                else:
                    pending.append((idx, i))
    if tau is not None:
        old = flint.ctx.prec
        try:
            for prec in PRECISIONS:
                flint.ctx.prec = prec
                a_tau, e_ball = flint.arb(flint.fmpq(tau.numerator, tau.denominator)), \
                    flint.arb(flint.fmpq(eps.numerator, eps.denominator))
                left = []
                for idx, i in pending:
                    cls = (len(idx), idx[i], tuple(sorted(idx[:i] + idx[i + 1:])))
                    x = abs(_error(theorem, None, a_tau, tuple(tokens[j] for j in idx), i))
                    if x >= e_ball:
                        status[cls] = "fails"
                    elif x < e_ball:
                        status.setdefault(cls, "ok")
                    else:
                        left.append((idx, i))
                pending = left
                if not pending:
                    break
        finally:
            flint.ctx.prec = old
        for idx, i in pending:
            cls = (len(idx), idx[i], tuple(sorted(idx[:i] + idx[i + 1:])))
            if status.get(cls) != "fails":
                status[cls] = "undecided"
    return _cube_compare(ev, verdict, m, n, status, max(errors) if c is not None else None)


def _cube_compare(ev: Mapping[str, Any], verdict: str, m: int, n: int,
                  status: dict[tuple[int, int, tuple[int, ...]], str], worst: Fraction | None) -> list[str]:
    K = 2 ** m
    want = {"sequences": sum(K ** N for N in range(1, n + 1)),
            "positions": sum(N * K ** N for N in range(1, n + 1)),
            "classes": sum(K * math.comb(K + N - 2, N - 1) for N in range(1, n + 1)),
            "failures": sum(s == "fails" for s in status.values())}
    problems = [f"{k}: re-derived {v}, the claim says {ev[k]!r:.30}" for k, v in want.items() if ev[k] != v]
    if len(status) != want["classes"]:
        problems.append(f"{len(status)} classes seen, {want['classes']} by the formula")
    stated = None if ev["max_error"] is None else num(ev["max_error"], "max_error")
    if stated != worst:
        problems.append(f"the largest error is {None if worst is None else q_text(worst)}, the claim "
                        f"says {ev['max_error']!r:.40}")
    order = sorted(status)
    failing = [k for k in order if status[k] == "fails"]
    undecided = [k for k in order if status[k] == "undecided"]
    bitstr = lambda i: "".join(str((i >> k) & 1) for k in range(m))           # noqa: E731
    cx = None if not failing else {"query": bitstr(failing[0][1]),
                                   "others": [bitstr(z) for z in failing[0][2]]}
    if ev["counterexample"] != cx:
        problems.append(f"the first failing class is {cx}, the claim's counterexample "
                        f"{ev['counterexample']!r:.100}")
    if failing and undecided and undecided[0] < failing[0]:
        problems.append("a class before the first failing one is undecided")
    expect = "refuted" if failing else ("unknown" if undecided else "proved")
    if verdict != expect:
        problems.append(f"re-derived: {len(failing)} failing and {len(undecided)} undecided classes, so "
                        f"{expect}, not {verdict}")
    return problems


# ---------------------------------------------------------------- Thm 8

def _rows(v: Any, n_rows: int, width: int | None, what: str) -> list[list[Fraction]]:
    if not isinstance(v, list) or len(v) != n_rows or any(not isinstance(r, list) for r in v):
        raise Fails(f"head.{what} must have {n_rows} rows")
    rows = [[num(x, what) for x in r] for r in v]
    if len({len(r) for r in rows}) != 1 or not rows[0] or (width is not None and len(rows[0]) != width):
        raise Fails(f"head.{what} has rows of the wrong length")
    return rows


def _positional(claim: Mapping[str, Any], eps: Fraction) -> list[str]:
    p, ev, verdict = claim["parameters"], claim["evidence"], claim["verdict"]
    fam = family(ev["family"], p)
    n, K, L = fam.n, len(fam.tokens), fam.n - 1
    if n < 3 or p.get("n") != n:
        raise Fails("parameters.n must be the family's length, at least 3")
    if any(row != [0] * L + [1] for row in fam.scored):
        raise Fails("every input of the family must be scored at its final position only")
    head = ev["head"]
    if not isinstance(head, dict) or set(head) != {"query_tokens", "phi_q", "phi_k", "g"}:
        raise Fails("evidence.head must be {query_tokens, phi_q, phi_k, g}")
    if canonical_sha256(head) != p.get("head_sha256"):
        raise Fails("parameters.head_sha256 is not the hash of the evidence's head")
    qt = head["query_tokens"]
    if not isinstance(qt, list) or not qt or len(set(map(str, qt))) != len(qt):
        raise Fails("the head's query tokens must be distinct")
    row = {whole(t, "query token", 0): i for i, t in enumerate(qt)}
    if any(t >= K for t in row):
        raise Fails("a query token is out of range")
    phi_q = _rows(head["phi_q"], len(qt), None, "phi_q")
    r = len(phi_q[0])
    if p.get("rank") != r:
        raise Fails(f"parameters.rank must be the feature dimension {r}")
    phi_k = _rows(head["phi_k"], K, n * r, "phi_k")
    g = _rows(head["g"], len(qt), n * K, "g")
    # alpha[j][a][z] = <phi_q[a], phiK_j(z)>
    alpha = [[[sum((u * v for u, v in zip(q, phi_k[z][j * r:(j + 1) * r])), Fraction(0)) for z in range(K)]
              for q in phi_q] for j in range(n)]
    outs = []
    for i, seq in enumerate(fam.inputs):
        if seq[-1] not in row:
            raise Fails(f"input {i} queries a token without query features")
        a = row[seq[-1]]
        D = sum((alpha[j][a][z] for j, z in enumerate(seq)), Fraction(0))
        N = sum((alpha[j][a][z] * g[a][j * K + z] for j, z in enumerate(seq)), Fraction(0))
        outs.append((N, D, fam.targets[i][-1]))
    bad = [i for i, (N, D, t) in enumerate(outs) if not (D > 0 and abs(N / D - t) < eps)]
    worst = None if any(D <= 0 for _, D, _ in outs) else max(abs(N / D - t) for N, D, t in outs)
    least = min(v for Aj in alpha for rw in Aj for v in rw)
    eff = [[sum((alpha[j][a][z] for j in range(L)), Fraction(0)) for z in range(K)] for a in range(len(qt))]
    dominated, lam = _chains(fam, ev["family"]["words"], eff, row, eps)
    W = len(ev["family"]["words"])
    bound = Fraction(W * W) / (W + sum((1 / (v * v) for v in lam.values()), Fraction(0)))
    rank_bound = bound.numerator // bound.denominator + 1
    den = math.lcm(*(v.denominator for rw in eff for v in rw))
    eff_rank = rank([[int(v * den) for v in rw] for rw in eff])
    want = {"scored_positions": len(outs), "failures": len(bad), "jumps": len(fam.jumps or []),
            "dominated": dominated, "effective_rank": eff_rank, "rank_bound": rank_bound}
    problems = [f"{k}: re-derived {v}, the claim says {ev[k]!r:.30}" for k, v in want.items() if ev[k] != v]
    for k, v in (("max_error", worst), ("min_contribution", least), ("lemma4_bound", bound)):
        if (None if ev[k] is None else num(ev[k], k)) != v:
            problems.append(f"{k}: re-derived {None if v is None else q_text(v)}, the claim says "
                            f"{ev[k]!r:.40}")
    if verdict == "proved":
        if bad or ev["counterexample"] is not None:
            problems.append(f"{len(bad)} inputs fail (or a counterexample is attached): not proved")
        if least < 0 or dominated != want["jumps"] or eff_rank < rank_bound:
            problems.append("Thm 8's conclusions do not hold on this head (a contribution < 0, an "
                            "undominated jump or the rank below the bound)")
    elif verdict == "refuted":
        problems += _record(ev["counterexample"], bad, outs, fam, n)
    else:
        problems.append("a head on a family is decided exactly: the verdict must be proved or refuted")
    return problems


def _record(rec: Any, bad: list[int], outs: list, fam: Any, n: int) -> list[str]:
    if not bad:
        return ["refuted, but no input fails"]
    i = bad[0]
    N, D, t = outs[i]
    want = {"input": i, "position": n - 1, "sequence": fam.inputs[i], "numerator": q_text(N),
            "denominator": q_text(D), "t_hat": q_text(N / D) if D > 0 else None, "target": t}
    return [] if rec == want else [f"the counterexample is not the record of the first failing input {i}"]


def _chains(fam: Any, words_obj: Any, eff: list[list[Fraction]], row: dict[int, int],
            eps: Fraction) -> tuple[int, dict[tuple[int, int], Fraction]]:
    """(jumps the effective kernel dominates, Lambda of each ordered word pair)."""
    if not isinstance(words_obj, list) or len(words_obj) < 2 or not fam.jumps:
        raise Fails("Thm 8's bound needs at least two code words and the family's jumps")
    words = [bits(w, "word") for w in words_obj]
    tok = {tuple(t): i for i, t in enumerate(fam.tokens)}
    n, L = fam.n, fam.n - 1
    seqs = {tuple(s) for s in fam.inputs}
    c = {k: i for i, k in enumerate(JUMP_COLUMNS)}
    by_pair: dict[tuple[int, int], list[tuple[int, int, int, int, Fraction]]] = {}
    dominated = 0
    for jump in fam.jumps:
        S, U, step, x, y, z, t, u = (jump[c[k]] for k in JUMP_COLUMNS[:8])
        if not (0 <= S < len(words) and 0 <= U < len(words)) \
                or not all(0 <= v < len(fam.tokens) for v in (x, y, z)):
            raise Fails("a jump indexes words or tokens out of range")
        if fam.ip[x][y] != t or fam.ip[x][z] != u or not t < u <= fam.ip[x][x]:
            raise Fails("a jump's overlaps are not t = <x,y> < u = <x,z> <= <x,x>")
        need = [[y] * L + [x], [z] * L + [x]] + [[z] * l + [y] + [z] * (L - 1 - l) + [x] for l in range(L)]
        named = [fam.inputs[jump[c[k]]] if 0 <= jump[c[k]] < len(fam.inputs) else None
                 for k in ("input_y", "input_z", "input_m")]
        if any(tuple(s) not in seqs for s in need) or named != need[:3]:
            raise Fails("a jump's inputs Y, Z, M_l are not all in the family (or its columns point "
                        "elsewhere)")
        d = u - t
        if d < 2 * eps * (n - 1) / (n - 2):
            raise Fails("a jump's gap is below Lemma 3's threshold")
        f = (n - 2) * (d - 2 * eps) / (2 * eps)
        if x not in row:
            raise Fails("a jump's query has no query features")
        dominated += eff[row[x]][y] > f * eff[row[x]][z]
        by_pair.setdefault((S, U), []).append((step, x, y, z, f))
    lam = {}
    for S in range(len(words)):
        comp_s = tok.get(tuple(1 - b for b in words[S]))
        for U in range(len(words)):
            if S == U:
                continue
            ch = sorted(by_pair.get((S, U), []))
            ok = ch and [s for s, *_ in ch] == list(range(len(ch))) \
                and all(fam.tokens[x] == words[S] for _, x, *_ in ch) and ch[0][2] == comp_s \
                and ch[-1][3] == tok.get(tuple(1 - b for b in words[U])) \
                and all(a[3] == b[2] for a, b in zip(ch, ch[1:]))
            if not ok:
                raise Fails(f"no chain from x_(S^c) to x_(U^c) for the word pair ({S}, {U})")
            lam[S, U] = math.prod((f for *_, f in ch), start=Fraction(1))
    return dominated, lam
