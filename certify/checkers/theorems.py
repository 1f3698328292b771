"""Independent re-check of ``theorem`` claims: a paper theorem on a concrete object.

Imports only the standard library, :mod:`certify.checkers.common`, the kernel and the kinds' declarations
(:data:`certify.checkers.kinds.THEOREMS`: the parameters of each theorem and
the evidence form it takes). Every object must have exactly the declared keys.

**Thm 1 and Thm 6 (first part): a construction decided on every input of the
cube** (evidence form ``cube``). Parameters ``m``, ``n``, ``eps`` (``0 < eps <=
1/2``) and, for Thm 1, ``tau``. The head is rebuilt from them: Thm 1's dense
softmin head (``s_ij = -tau <x_i, x_j>``, ``v(x) = x``, readout ``<x_i, y_i>``:
weights ``e^(-tau <x_i, x_j>)``, values ``<x_i, x_j>``); Thm 6's rank-1 head
(``alpha = 1``, ``v(z) = z``, readout ``2 <x_i, a_i> - |x_i|_1``: values
``2 <x_i, x_j> - |x_i|_1``). The claim is that at every position of every
sequence of length ``1..n`` over ``{0,1}^m`` the output is within ``eps`` of
the Min-IP target (strictly). Both heads are normalized and position-free: the
output at position ``i`` is a sum over the sequence divided by a sum over it,
so it depends only on the query ``x_i`` and the multiset of the other tokens,
as does the target ``min_j <x_i, x_j>``; every (sequence, position) is one
*class* ``(N, x, others)`` (``others`` a nondecreasing tuple of ``N - 1`` token
indices) and every class is one. The checker evaluates every class (classes
with the same overlaps once), in canonical order: ``N`` ascending, then the
query's cube index (token ``i`` has coordinate ``k`` = bit ``k`` of ``i``),
then ``others`` lexicographically. With ``tau = log(q)`` (``e^-tau = 1/q``) or
``tau = 0``, and for Thm 6, every number is a Fraction and each class is
decided exactly; with a rational ``tau > 0`` the weights are arb balls
(:class:`certify.checkers.kernel.replay.Numbers`), and ``|t_hat - t| < eps`` is
decided only when the whole ball agrees, at 64 bits of working precision,
doubled until decided (up to 4096 bits; a class still undecided then is
counted as undecided, never as correct).

Evidence: ``sequences`` (``sum_N 2^(mN)``), ``positions`` (``sum_N N 2^(mN)``),
``classes`` (``sum_N 2^m binom(2^m + N - 2, N - 1)``), ``failures`` (classes
decided wrong), ``max_error`` (the exact largest error when every number is
exact, else null), ``counterexample`` (null, or the first failing class as
``{"query": bits, "others": [bits...]}``; every class before it decided).
``proved`` iff every class is decided correct; ``refuted`` iff some class is
decided wrong (the counterexample is the first); ``unknown`` iff none is
wrong and some is undecided.

**Thm 8: a head with position-dependent key maps on a family with positions**
(evidence form ``positional``). The family (re-validated, targets re-derived)
has exact length ``n >= 3`` and every input scored at its final position only
(the causal final query); sources are positions ``0..n-2``. The head (its
canonical hash is ``head_sha256``): ``query_tokens`` (Q token indices),
``phi_q`` (Q x r), ``phi_k`` (K x n r: row ``z`` is ``phiK_0(z), ..,
phiK_(n-1)(z)``, one block of r per position), ``g`` (Q x n K: row ``x`` is
``g_0(x, .), .., g_(n-1)(x, .)``), exact rationals. ``alpha_j(x, z) = <phiQ(x),
phiK_j(z)>``; an input ``(z_0..z_(n-1))`` with query ``x = z_(n-1)`` outputs
``sum_j alpha_j(x, z_j) g_j(x, z_j) / sum_j alpha_j(x, z_j)``. Re-derived:

* ``scored_positions``, ``failures``, ``max_error`` and the first failing
  input (``counterexample``, an output record replayed), exactly;
* ``min_contribution``: the least ``alpha_j(x, z)`` over positions, query
  tokens and tokens (Thm 8's class: every contribution ``>= 0``);
* every jump ``(x, y, z, t, u)`` of the family checked against it (overlaps,
  ``t = <x,y> < u = <x,z> <= <x,x>``), its inputs present and scored: ``Y =
  (y^L, x)``, ``Z = (z^L, x)`` and, for every source position ``l``, ``M_l``
  (``y`` at ``l``, ``z`` at the other sources, ``x`` last), ``L = n - 1`` (the
  inputs of Thm 8's proof; the jump's ``input_m`` is ``M_0``), its gap at least
  Lemma 3's threshold ``2 eps (n-1)/(n-2)``; ``jumps`` counts them and
  ``dominated`` those where the effective kernel ``A = sum_(j < L) alpha_j``
  satisfies Lemma 3's domination ``A(x,y) > (n-2)(d-2eps)/(2eps) A(x,z)``
  (what Thm 8's proof derives for every head correct on the family);
* the chain of every ordered pair ``(S, U)`` of the family's code words: its
  jumps, in step order, from ``y_0 = x_(S^c)`` to ``z_last = x_(U^c)`` with query
  ``x_S``, each step's ``z`` the next step's ``y``; ``Lambda_SU`` is the product
  of its Lemma 3 factors, so ``B[S,U] = A(x_S, x_(U^c)) < B[S,S] / Lambda_SU``;
  Lemma 4 (strict) gives ``rank A >= rank B > t^2 / (t + sum Lambda^-2) =
  lemma4_bound`` (``t`` words; :func:`certify.checkers.kernel.attention.chain_ranks`),
  and ``rank_bound`` is the least rank it allows: Thm 8's lower bound for every
  head in its class correct on the family;
* ``effective_rank``: the exact rank over Q of ``A`` on (query tokens x all
  tokens): a pivot minor nonzero modulo a prime (lower bound) whose columns
  span every column exactly (upper bound).

``proved``: no input fails, and then Thm 8's conclusions must hold on the head
(every contribution ``>= 0``, every jump dominated, ``effective_rank >=
rank_bound``); ``refuted``: the first failing input replayed; ``unknown`` is
inconsistent (decided exactly).
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations_with_replacement
from typing import Any, Iterator

from certify.checkers.common import (
    JUMP_COLUMNS,
    Bad,
    canonical_sha256,
    family,
    guarded,
    integer,
    q_str,
    rational,
    rational_matrix,
)
from certify.checkers.kernel import attention, fmpz_matrix, product
from certify.checkers.kernel.modular import minor_nonzero_mod_p, pivot_minor_mod_p
from certify.checkers.kernel.products import column_span_rational
from certify.checkers.kernel.replay import Numbers, Undecided, working_precision
from certify.checkers.kinds import BY_NAME, THEOREM_FORM

_KIND = BY_NAME["theorem"]
#: the most classes the cube check evaluates (a larger claim fails: too large to decide here)
MAX_CLASSES = 1 << 17
#: working precisions of the balls, in bits (doubled until every class is decided)
PRECISIONS = (64, 128, 256, 512, 1024, 2048, 4096)
#: primes of the exact rank of the effective kernel (a pivot minor modulo one, spanning over Q)
_PRIMES = ((1 << 61) - 1, (1 << 31) - 1, 1_000_000_007)
_HALF = Fraction(1, 2)


def check(claim: dict, cert: dict | None = None) -> list[str]:
    """Problems with a ``theorem`` claim; ``[]`` when its verdict is re-derived."""
    if not isinstance(claim, dict) or claim.get("kind") != "theorem":
        return [f"not a theorem claim (kind {claim.get('kind') if isinstance(claim, dict) else None!r})"]
    return guarded(_check)(claim)


def _check(claim: dict) -> list[str]:
    params, ev = claim.get("parameters"), claim.get("evidence")
    if not isinstance(params, dict) or not isinstance(ev, dict):
        raise Bad("parameters and evidence must be objects")
    name = params.get("theorem")
    if name not in THEOREM_FORM:
        return [f"unknown theorem {name!r:.20}"]
    _KIND.params(name).check_keys(params, "parameters")
    _KIND.form(THEOREM_FORM[name]).check_keys(ev, "evidence")
    eps = rational(params["eps"], "eps")
    if not 0 < eps <= _HALF:
        raise Bad(f"eps must lie in (0, 1/2], got {q_str(eps)}")
    if name == "thm8":
        return _check_positional(claim, eps)
    return _check_cube(claim, name, eps)


# ---------------------------------------------------------------- Thm 1, Thm 6: the cube

def bits(i: int, m: int) -> str:
    """Cube token ``i`` as a bit string (coordinate ``k`` = bit ``k`` of ``i``)."""
    return "".join(str((i >> k) & 1) for k in range(m))


def counts(m: int, n: int) -> tuple[int, int, int]:
    """``(sequences, positions, classes)`` of lengths ``1..n`` over ``{0,1}^m``."""
    K = 1 << m
    return (sum(K ** N for N in range(1, n + 1)), sum(N * K ** N for N in range(1, n + 1)),
            sum(K * math.comb(K + N - 2, N - 1) for N in range(1, n + 1)))


def classes(m: int, n: int) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Every class ``(x, others)`` in canonical order (module docstring)."""
    for N in range(1, n + 1):
        for x in range(1 << m):
            for others in combinations_with_replacement(range(1 << m), N - 1):
                yield x, others


def weights(name: str, tau: str | None) -> tuple[Fraction | None, Fraction | None]:
    """``(c, None)``: every weight ``c^o`` is rational (Thm 6: ``c = 1``); ``(None, tau)``: the weights
    ``e^(-tau o)`` are decided with balls."""
    if name == "thm6":
        return Fraction(1), None
    assert tau is not None
    if tau.startswith("log("):
        q = rational(tau[4:-1], "tau's log argument")
        if q < 1:
            raise Bad(f"tau = log(q) needs q >= 1 (tau >= 0), got q = {q_str(q)}")
        return 1 / q, None
    t = rational(tau, "tau")
    if t < 0:
        raise Bad(f"tau must be >= 0, got {q_str(t)}")
    return (Fraction(1), None) if t == 0 else (None, t)


def _sums(name: str, c: Fraction | None, tau: Fraction | None, w: int, others: tuple[int, ...],
          ops: Numbers) -> tuple[Any, Any, int]:
    """``(N, D, t)`` of a class whose query has weight ``w`` and overlaps ``others`` with the other
    tokens (the self term has overlap ``w``): the head's sums and the Min-IP target."""
    ov = (w,) + others
    t = min(ov)
    if name == "thm6":
        alpha, g = [Fraction(1)] * len(ov), [2 * o - w for o in ov]
    elif c is not None:                     # weights c^(o - t) (the common factor c^t cancels)
        alpha, g = [c ** (o - t) for o in ov], list(ov)
    else:
        assert tau is not None
        alpha, g = [ops.f(ops.num(-tau * (o - t))) for o in ov], list(ov)
    N, D = attention.output(alpha, g, range(len(ov)))
    return N, D, t


def _decide_keys(name: str, c: Fraction | None, tau: Fraction | None, eps: Fraction,
                 keys: set[tuple[int, tuple[int, ...]]]) -> dict[tuple, tuple[str, Fraction | None]]:
    """key ``(w, overlaps)`` -> ``("ok" | "fails" | "undecided", exact error or None)``."""
    out: dict[tuple, tuple[str, Fraction | None]] = {}
    if c is not None:
        ops = Numbers("identity")
        for w, ov in keys:
            N, D, t = _sums(name, c, None, w, ov, ops)
            out[w, ov] = ("ok" if attention.within(N, D, t, eps) else "fails", attention.error(N, D, t))
        return out
    ops, pending = Numbers("exp"), set(keys)
    for prec in PRECISIONS:
        with working_precision(prec):
            for w, ov in sorted(pending):
                N, D, t = _sums(name, None, tau, w, ov, ops)
                x = N / D - t
                try:
                    bad = ops.at_least(x, eps) or ops.at_least(-x, eps)
                except Undecided:
                    continue
                out[w, ov] = ("fails" if bad else "ok", None)
                pending.discard((w, ov))
        if not pending:
            break
    out.update({k: ("undecided", None) for k in pending})
    return out


def _check_cube(claim: dict, name: str, eps: Fraction) -> list[str]:
    p, ev, verdict = claim["parameters"], claim["evidence"], claim.get("verdict")
    m, n = integer(p["m"], "parameters.m", 1), integer(p["n"], "parameters.n", 1)
    seqs, poss, ncls = counts(m, n)
    if ncls > MAX_CLASSES:
        raise Bad(f"{ncls} classes at m = {m}, n = {n}: above the checker's limit of {MAX_CLASSES}")
    c, tau = weights(name, p.get("tau"))
    pop = [bin(i).count("1") for i in range(1 << m)]
    key = lambda x, others: (pop[x], tuple(sorted(pop[x & z] for z in others)))
    status = _decide_keys(name, c, tau, eps, {key(x, o) for x, o in classes(m, n)})
    failures, undecided, first, before = 0, 0, None, False
    for x, others in classes(m, n):
        s = status[key(x, others)][0]
        if s == "fails":
            failures += 1
            if first is None:
                first, before = (x, others), undecided > 0
        elif s == "undecided":
            undecided += 1
    exact = [e for s, e in status.values()]
    max_err = max(exact) if c is not None and all(e is not None for e in exact) else None  # type: ignore
    probs = [f"{k} is {want}, not {ev[k]!r:.40}" for k, want in
             (("sequences", seqs), ("positions", poss), ("classes", ncls), ("failures", failures))
             if ev[k] != want]
    stated = None if ev["max_error"] is None else rational(ev["max_error"], "max_error")
    if stated != max_err:
        probs.append(f"max_error is {None if max_err is None else q_str(max_err)}, "
                     f"not {ev['max_error']!r:.40}")
    want_cx = None if first is None else {"query": bits(first[0], m),
                                          "others": [bits(z, m) for z in first[1]]}
    if ev["counterexample"] is not None:
        _KIND.part("counterexample:cube").check_keys(ev["counterexample"], "counterexample")
    if ev["counterexample"] != want_cx:
        probs.append(f"the counterexample must be the first failing class {want_cx}, not "
                     f"{ev['counterexample']!r:.120}")
    if first is not None and before:
        probs.append("a class before the first failing one is undecided: no first failing class is known")
    want = "refuted" if failures else ("unknown" if undecided else "proved")
    if verdict != want:
        probs.append(f"verdict {verdict!r} but {failures} classes fail and {undecided} are undecided "
                     f"(of {ncls}): the verdict is {want}")
    return probs


# ---------------------------------------------------------------- Thm 8: positional keys

def _scaled(M: list[list[Fraction]]) -> tuple[list[list[int]], int]:
    """Integer rows and a positive denominator with ``M = rows / den``."""
    den = math.lcm(1, *(v.denominator for row in M for v in row))
    return [[int(v * den) for v in row] for row in M], den


class _Positional:
    """The family and the positional head, with every ``alpha_j`` as integers over one denominator."""

    def __init__(self, p: dict, ev: dict) -> None:
        self.fam = fam = family(ev["family"], p)
        self.n, K = fam.n, len(fam.tokens)
        if self.n < 3 or p["n"] != self.n:
            raise Bad(f"parameters.n must be the family's length n >= 3 (it is {self.n})")
        final = [0] * (self.n - 1) + [1]
        if any([int(v) for v in row] != final for row in fam.scored):
            raise Bad("every input of a family with positions is scored at its final position only")
        head = _KIND.part("head").check_keys(ev["head"], "head")
        if canonical_sha256(head) != p["head_sha256"]:
            raise Bad("parameters.head_sha256 is not the hash of the evidence's head")
        qt = head["query_tokens"]
        if not isinstance(qt, list) or not qt:
            raise Bad("the head has no query tokens")
        self.rows: dict[int, int] = {}
        for i, t in enumerate(qt):
            t = integer(t, "query token", 0)
            if t >= K or t in self.rows:
                raise Bad(f"query token {t} out of range or repeated")
            self.rows[t] = i
        phi_q = rational_matrix(head["phi_q"], "phi_q", (len(qt), None))
        self.r = r = len(phi_q[0]) if phi_q and phi_q[0] else 0
        if r < 1 or p["rank"] != r:
            raise Bad(f"parameters.rank must be the feature dimension {r}")
        Aq, dq = _scaled(phi_q)
        Ak, dk = _scaled(rational_matrix(head["phi_k"], "phi_k", (K, self.n * r)))
        G, self.g_den = _scaled(rational_matrix(head["g"], "g", (len(qt), self.n * K)))
        self.alpha_den = dq * dk
        # A[j][row][z] = alpha_j(query row, z) * alpha_den
        Fq = fmpz_matrix(Aq)
        self.A = [[[int(v) for v in row] for row in
                   product(Fq, fmpz_matrix([a[j * r:(j + 1) * r] for a in Ak]).transpose()).tolist()]
                  for j in range(self.n)]
        self.G = [[row[j * K:(j + 1) * K] for row in G] for j in range(self.n)]

    def output(self, i: int) -> tuple[int, int, int]:
        """``(N, D, t)`` at input ``i``'s final position: ``t_hat = N / (g_den D)``."""
        seq = self.fam.inputs[i]
        x = seq[-1]
        if x not in self.rows:
            raise Bad(f"input {i} queries token {x}, which has no query features")
        row = self.rows[x]
        a = [self.A[j][row][z] for j, z in enumerate(seq)]
        return (sum(v * self.G[j][row][z] for j, (v, z) in enumerate(zip(a, seq))), sum(a),
                self.fam.targets[i][-1])

    def effective(self) -> list[list[int]]:
        """``A = sum_(j < n-1) alpha_j`` over the source positions (times ``alpha_den``), Q x K."""
        L = self.n - 1
        return [[sum(self.A[j][row][z] for j in range(L)) for z in range(len(self.fam.tokens))]
                for row in range(len(self.rows))]


def _exact_rank(F: list[list[int]]) -> int:
    """The rank over Q of an integer matrix: a pivot minor nonzero modulo a prime (``>=``) whose
    columns span every column over Q (``<=``)."""
    M = fmpz_matrix(F)
    for p in _PRIMES:
        R, C = pivot_minor_mod_p(M, p)
        if minor_nonzero_mod_p(M, p, R, C) and column_span_rational(M, R, C):
            return len(C)
    raise Bad("the effective kernel's rank is not decided by the checker's primes")


def _jumps(s: _Positional, eps: Fraction) -> tuple[int, dict[tuple[int, int], Fraction]]:
    """``(dominated jumps, Lambda per ordered word pair)`` after every jump is checked against the
    family (module docstring)."""
    fam, n = s.fam, s.n
    if fam.jumps is None or not fam.words or len(fam.words) < 2:
        raise Bad("Thm 8's bound needs the family's code words (at least two) and their jumps")
    c = {name: k for k, name in enumerate(JUMP_COLUMNS)}
    present = {tuple(row) for row in fam.inputs}
    tok = {tuple(t): i for i, t in enumerate(fam.tokens)}
    comp = [tok.get(tuple(1 - b for b in w)) for w in fam.words]
    A = s.effective()
    chains: dict[tuple[int, int], list[tuple[int, int, int, int, Fraction]]] = {}
    dominated, L = 0, n - 1
    for j, row in enumerate(fam.jumps):
        S, U, step, x, y, z, t, u = (row[c[k]] for k in ("word_s", "word_u", "step", "x", "y", "z", "t", "u"))
        K = len(fam.tokens)
        W = len(fam.words)
        if not all(0 <= v < K for v in (x, y, z)) or not (0 <= S < W and 0 <= U < W):
            raise Bad(f"jump {j} indexes tokens or words out of range")
        if (fam.ip[x][y], fam.ip[x][z]) != (t, u) or not t < u <= fam.ip[x][x]:
            raise Bad(f"jump {j}: need t = <x,y> < u = <x,z> <= <x,x> as stated ({t}, {u})")
        want = {"input_y": [y] * L + [x], "input_z": [z] * L + [x], "input_m": [y] + [z] * (L - 1) + [x]}
        for col, seq in want.items():
            i = row[c[col]]
            if not (isinstance(i, int) and 0 <= i < len(fam.inputs) and fam.inputs[i] == seq):
                raise Bad(f"jump {j}: {col} is not the input {seq}")
        for l in range(1, L):
            if tuple([z] * l + [y] + [z] * (L - 1 - l) + [x]) not in present:
                raise Bad(f"jump {j}: the family lacks the input with y at source position {l}")
        threshold, f = attention.lemma3(n, eps, u - t)
        if u - t < threshold:
            raise Bad(f"jump {j}: its gap {u - t} is below Lemma 3's threshold {q_str(threshold)}")
        if x not in s.rows:
            raise Bad(f"jump {j}: query token {x} has no query features")
        dominated += A[s.rows[x]][y] > f * A[s.rows[x]][z]
        chains.setdefault((S, U), []).append((step, x, y, z, f))
    lam = {}
    for S in range(len(fam.words)):
        for U in range(len(fam.words)):
            if S == U:
                continue
            ch = sorted(chains.get((S, U), []))
            if [st for st, *_ in ch] != list(range(len(ch))) or not ch:
                raise Bad(f"words {S} -> {U}: no chain of steps 0..k-1 among the jumps")
            if any(tuple(fam.tokens[x]) != tuple(fam.words[S]) for _, x, *_ in ch) \
                    or ch[0][2] != comp[S] or ch[-1][3] != comp[U] \
                    or any(a[3] != b[2] for a, b in zip(ch, ch[1:])):
                raise Bad(f"words {S} -> {U}: the jumps are no chain from x_(S^c) to x_(U^c) with query x_S")
            lam[S, U] = math.prod((f for *_, f in ch), start=Fraction(1))
    return dominated, lam


def _check_positional(claim: dict, eps: Fraction) -> list[str]:
    p, ev, verdict = claim["parameters"], claim["evidence"], claim.get("verdict")
    s = _Positional(p, ev)
    outs = [s.output(i) for i in range(len(s.fam.inputs))]
    failing = [i for i, (N, D, t) in enumerate(outs) if not attention.within(N, D, t, eps, s.g_den)]
    errs = [attention.error(N, D, t, s.g_den) for N, D, t in outs]
    max_err = None if any(e is None for e in errs) else max(e for e in errs if e is not None)
    least = Fraction(min(v for Aj in s.A for row in Aj for v in row), s.alpha_den)
    dominated, lam = _jumps(s, eps)
    ranks = attention.chain_ranks(len(s.fam.words or []), lam)
    rank_bound, eff = ranks["lemma4"] + 1, _exact_rank(s.effective())
    want = {"scored_positions": len(outs), "failures": len(failing), "jumps": len(s.fam.jumps or []),
            "dominated": dominated, "effective_rank": eff, "rank_bound": rank_bound}
    probs = [f"{k} is {v}, not {ev[k]!r:.40}" for k, v in want.items() if ev[k] != v]
    for k, v in (("max_error", max_err), ("min_contribution", least), ("lemma4_bound", ranks["bound"])):
        stated = None if ev[k] is None else rational(ev[k], k)
        if stated != v:
            probs.append(f"{k} is {None if v is None else q_str(v)}, not {ev[k]!r:.40}")
    if verdict == "proved":
        if failing:
            probs.append(f"not proved: input {failing[0]} fails (error {errs[failing[0]]})")
        if ev["counterexample"] is not None:
            probs.append("a proved claim carries a counterexample")
        if least < 0 or dominated != want["jumps"] or eff < rank_bound:
            probs.append(f"a head correct on the family contradicts Thm 8 (least contribution "
                         f"{q_str(least)}, {dominated} of {want['jumps']} jumps dominated, rank {eff} "
                         f"against the bound {rank_bound}): it is not in the theorem's class")
    elif verdict == "refuted":
        probs += _replay(s, ev["counterexample"], failing[0] if failing else None, outs)
    else:
        probs.append(f"verdict {verdict!r}: a head on a family is decided exactly by the evidence")
    return probs


def _replay(s: _Positional, rec: Any, first: int | None, outs: list[tuple[int, int, int]]) -> list[str]:
    """The counterexample must be the exact output record of the first failing input."""
    if first is None:
        return ["refuted, but no input fails"]
    if not isinstance(rec, dict):
        return ["a refuted claim needs the first failing input as its counterexample"]
    _KIND.part("counterexample:positional").check_keys(rec, "counterexample")
    N, D, t = outs[first]
    num, den = Fraction(N, s.alpha_den * s.g_den), Fraction(D, s.alpha_den)
    want = {"input": first, "position": s.n - 1, "sequence": s.fam.inputs[first], "numerator": q_str(num),
            "denominator": q_str(den), "t_hat": q_str(num / den) if den > 0 else None, "target": t}
    if rec != want:
        return [f"the counterexample must be the record of the first failing input {want}, not "
                f"{str(rec):.200}"]
    return []
