"""``exact_rank``, ``eps_rank``, ``numerical_rank``, ``nonnegative`` and ``code_rank``, re-derived from
the whole kernel matrix.

A kernel comes to these checks as exact data (:class:`Kernel`): its features
``PhiQ``, ``PhiK`` (the kernel is ``PhiQ PhiK^T``) or its matrix, as Fractions,
from a replayed extraction, a re-read source file or the evidence's embedded
integers, every time checked against the content hash the claim carries
(:mod:`certify.reference.claims` chooses and binds the data). Nothing of the
evidence's witnesses (minors, primes, null-space bases, Freivalds plans, float
enclosures of a congruence) is read: the quantity is computed, and the claim's
stated values must be it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping

from certify.reference.exact import (
    Fails,
    ceil,
    charpoly,
    check_size,
    degree,
    fmpq,
    fmpz,
    integer_form,
    num,
    q_text,
    rank,
    roots_above,
    roots_below,
    whole,
)


@dataclass(frozen=True)
class Kernel:
    """A kernel as exact data: ``phi_q``, ``phi_k`` (K x r, the kernel is their
    product) or ``matrix`` (n1 x n2). ``scale``: a matrix's stated scale, whose
    integer matrix the evidence hashes."""

    phi_q: list[list[Fraction]] | None = None
    phi_k: list[list[Fraction]] | None = None
    matrix: list[list[Fraction]] | None = None

    @property
    def rows(self) -> int:
        return len(self.phi_q if self.phi_q is not None else self.matrix or [])

    @property
    def cols(self) -> int:
        if self.phi_k is not None:
            return len(self.phi_k)
        return len(self.matrix[0]) if self.matrix else 0

    def integer_matrix(self) -> tuple[list[list[int]], Fraction]:
        """``(N, s)``: the whole kernel matrix is ``N s``, ``N`` integer (features
        multiplied out exactly with flint)."""
        check_size(self.rows, self.cols, "the kernel matrix")
        if self.matrix is not None:
            return integer_form(self.matrix)
        Nq, sq = integer_form(self.phi_q or [])
        Nk, sk = integer_form(self.phi_k or [])
        P = fmpz(Nq) * fmpz(Nk).transpose()
        return [[int(P[i, j]) for j in range(P.ncols())] for i in range(P.nrows())], sq * sk

    def eigen_polynomial(self) -> tuple[Any, Fraction, int]:
        """``(p, s2, n)``: the squared singular values of the kernel are ``s2`` times
        the roots of ``p`` (the characteristic polynomial of an exact Gram: the kernel's
        own ``N^T N`` or ``N N^T``, or, with fewer features than tokens, the product
        ``(Nq^T Nq)(Nk^T Nk)`` of the two feature Grams, which has the same nonzero
        eigenvalues); ``n`` is the number of eigenvalues the evidence lists (the
        feature width in factor form)."""
        if self.phi_q is not None and self.phi_k is not None:
            r = len(self.phi_q[0])
            Nq, sq = integer_form(self.phi_q)
            Nk, sk = integer_form(self.phi_k)
            if r < self.rows:
                A, B = fmpz(Nq), fmpz(Nk)
                core = (A.transpose() * A) * (B.transpose() * B)
                return charpoly(core), (sq * sk) ** 2, r
            N, s = self.integer_matrix()
            M = fmpz(N)
            return charpoly(M.transpose() * M), s * s, r
        N, s = integer_form(self.matrix or [])
        M = fmpz(N)
        G = M.transpose() * M if M.ncols() <= M.nrows() else M * M.transpose()
        return charpoly(G), s * s, min(M.nrows(), M.ncols())


# ---------------------------------------------------------------- matrix hashes

def matrix_sha256(rows: list[list[int]], scale: Any) -> str:
    """A matrix claim's content hash (certificate/3): a header line -- the canonical JSON
    of ``{"encoding", "scale", "shape"}`` and a newline -- then the integer rows as int64
    little-endian bytes, row-major (encoding ``int64``) when every entry fits, else their
    compact JSON (``json``); the hash is prefixed by the encoding. The shape is in the
    header: the same entries in another shape hash apart."""
    flat = [v for r in rows for v in r]
    enc = "int64" if all(-(1 << 63) <= v < (1 << 63) for v in flat) else "json"
    head = (json.dumps({"encoding": enc, "scale": scale, "shape": [len(rows), len(rows[0]) if rows else 0]},
                       sort_keys=True, separators=(",", ":")) + "\n").encode()
    if enc == "int64":
        body = b"".join(v.to_bytes(8, "little", signed=True) for v in flat)
    else:
        body = json.dumps(rows, separators=(",", ":")).encode()
    return enc + ":" + hashlib.sha256(head + body).hexdigest()


def scaled(rows: list[list[int]], scale: Any) -> list[list[Fraction]]:
    """The kernel matrix ``rows`` under the evidence's ``scale`` (dyadic ``2^e``, or
    one positive denominator per row)."""
    if not isinstance(scale, dict):
        raise Fails("evidence.scale must be an object")
    if scale.get("kind") == "dyadic" and set(scale) == {"kind", "exponent"}:
        e = whole(scale["exponent"], "scale.exponent")
        if e >= 0:
            return [[Fraction(v << e) for v in r] for r in rows]
        return [[Fraction(v, 1 << -e) for v in r] for r in rows]
    if scale.get("kind") == "row_denominators" and set(scale) == {"kind", "row_den"}:
        dens = scale["row_den"]
        if not isinstance(dens, list) or len(dens) != len(rows):
            raise Fails("scale.row_den must list one denominator per row")
        return [[Fraction(v, whole(d, "row_den", 1)) for v in r] for r, d in zip(rows, dens)]
    raise Fails(f"unknown scale {scale!r:.80}")


def unscaled(values: list[list[Fraction]], scale: Any) -> list[list[int]]:
    """The integer rows ``N`` with ``values = N`` under ``scale``, or Fails."""
    if not isinstance(scale, dict):
        raise Fails("evidence.scale must be an object")
    # N = value / 2^e (dyadic) or value * d (a row's denominator), in integers: the
    # numerator times what multiplies it, over the denominator times what divides it
    if scale.get("kind") == "dyadic":
        e = whole(scale.get("exponent"), "scale.exponent")
        factors = [(1 << -e, 1) if e < 0 else (1, 1 << e)] * len(values)
    elif scale.get("kind") == "row_denominators":
        dens = scale.get("row_den")
        if not isinstance(dens, list) or len(dens) != len(values):
            raise Fails("scale.row_den must list one denominator per row of the source")
        factors = [(whole(d, "row_den", 1), 1) for d in dens]
    else:
        raise Fails(f"unknown scale {scale!r:.80}")
    out = []
    for r, (mul, div) in zip(values, factors):
        row = []
        for x in r:
            q, rem = divmod(x.numerator * mul, x.denominator * div)
            if rem:
                raise Fails("the source's entries are not integers under the evidence's scale")
            row.append(q)
        out.append(row)
    return out


# ---------------------------------------------------------------- exact_rank

def exact_rank(claim: Mapping[str, Any], K: Kernel) -> list[str]:
    ev, verdict = claim["evidence"], claim["verdict"]
    N, _ = K.integer_matrix()
    true = rank(N)
    lo, hi = whole(ev.get("rank_lower"), "rank_lower", 0), whole(ev.get("rank_upper"), "rank_upper", 0)
    if verdict == "proved":
        if not lo == hi == true:
            return [f"the kernel's exact rank is {true}; the claim proves [{lo}, {hi}]"]
        return []
    if verdict == "unknown":
        if not lo <= true <= hi or lo == hi:
            return [f"the kernel's exact rank is {true}; an unknown claim must bracket it "
                    f"strictly, [{lo}, {hi}] does not"]
        return []
    return [f"an exact_rank claim is proved or unknown, not {verdict}"]


# ---------------------------------------------------------------- eps_rank

def _count_above(p: Any, s2: Fraction, c: Fraction) -> int:
    """Eigenvalues ``s2 x`` (x a root of ``p``) strictly above ``c``."""
    return roots_above(p, c / s2)


def eps_rank(claim: Mapping[str, Any], K: Kernel) -> list[str]:
    ev, p, verdict = claim["evidence"], claim["parameters"], claim["verdict"]
    eps = num(p.get("eps"), "parameters.eps")
    if num(ev.get("eps"), "evidence.eps") != eps or eps <= 0:
        return ["evidence.eps must be parameters.eps, and > 0"]
    k, exact = whole(ev.get("k"), "k", 0), ev.get("exact")
    if not isinstance(exact, bool):
        return ["evidence.exact must be a boolean"]
    if ev.get("method") == "none":
        if k or exact or verdict != "unknown":
            return ["without a method the claim is unknown with k = 0 and exact false"]
        return []
    poly, s2, n = K.eigen_polynomial()
    got = _count_above(poly, s2, eps * eps)
    problems = []
    if verdict != "proved":
        problems.append(f"the count is decided exactly here ({got}); the verdict must be proved, "
                        f"not {verdict}")
    if exact and got != k:
        problems.append(f"the kernel has {got} singular values > eps = {q_text(eps)}, the claim {k}")
    if not exact and not k <= got:
        problems.append(f"the kernel has {got} singular values > eps = {q_text(eps)}, fewer than "
                        f"the claimed {k}")
    if ev.get("form") == "matrix" and ev.get("method") == "gram" and not exact:
        problems.append("a Gram count is exact: exact must be true")
    if ev.get("form") == "matrix" and ev.get("method") == "projection" and exact:
        problems.append("a projection witness proves only a lower count: exact must be false")
    enc = ev.get("sigma_sq_enclosures")
    if enc:
        problems += _enclosures(poly, s2, n, enc)
    return problems


def _enclosures(poly: Any, s2: Fraction, n: int, enc: Any) -> list[str]:
    """``enc[i] = [lo, hi]`` holds the ``i``-th largest of the ``n`` squared singular
    values (zeros filling up to ``n``): at most ``i`` of them above ``hi`` and at
    least ``i + 1`` at or above ``lo``."""
    if not isinstance(enc, list) or len(enc) != n:
        return [f"sigma_sq_enclosures must list {n} intervals"]
    d = degree(poly)
    for i, e in enumerate(enc):
        if not isinstance(e, list) or len(e) != 2:
            return [f"sigma_sq_enclosures[{i}] is not [lo, hi]"]
        lo, hi = num(e[0], "enclosure"), num(e[1], "enclosure")
        above_hi = _count_above(poly, s2, hi) if hi >= 0 else n
        if lo > 0:
            at_least_lo = d - roots_below(poly, lo / s2)
        else:
            at_least_lo = n
        if not (lo <= hi and above_hi <= i and at_least_lo >= i + 1):
            return [f"sigma_sq_enclosures[{i}] = [{q_text(lo)}, {q_text(hi)}] does not hold the "
                    f"{i + 1}-th largest squared singular value"]
    return []


# ---------------------------------------------------------------- numerical_rank

def float64_sha256(rows: list[list[Fraction]]) -> str:
    """A numerical_rank claim's ``values_sha256``: a header line (the canonical JSON of
    ``{"encoding": "float64", "scale": null, "shape"}`` and a newline), then every value as a
    little-endian IEEE double, row-major; each value must be one exactly."""
    import struct
    flat = [v for r in rows for v in r]
    if any(Fraction(float(v)) != v for v in flat):
        raise Fails("a value of the matrix is not a float64")
    head = (json.dumps({"encoding": "float64", "scale": None, "shape": [len(rows), len(rows[0]) if rows else 0]},
                       sort_keys=True, separators=(",", ":")) + "\n").encode()
    body = struct.pack(f"<{len(flat)}d", *(float(v) for v in flat))
    return "float64:" + hashlib.sha256(head + body).hexdigest()


#: float64's machine epsilon, numpy's finfo(float64).eps
_EPS64 = Fraction(1, 1 << 52)


def numerical_rank(claim: Mapping[str, Any], K: Kernel) -> list[str]:
    """``k_lower`` singular values above ``tol_upper``, at most ``k_upper`` above ``tol_lower``,
    the tolerance's enclosure re-derived (numpy's default ``sigma_1 max(m, n) 2^-52`` from the
    stated ``sigma_max``, which must hold sigma_1, or the stated rational), every count exact on
    the characteristic polynomial of the Gram; proved exactly when the counts meet."""
    ev, p, verdict = claim["evidence"], claim["parameters"], claim["verdict"]
    m, n = K.rows, K.cols
    sig, tol = ev.get("sigma_max"), p.get("tol")
    poly, s2, _ = K.eigen_polynomial()
    problems = []
    if tol == "default":
        if not isinstance(sig, list) or len(sig) != 2:
            return ["the default tolerance needs sigma_max = [lo, hi]"]
        lo, hi = num(sig[0], "sigma_max[0]"), num(sig[1], "sigma_max[1]")
        if not 0 <= lo <= hi:
            return ["sigma_max must be [lo, hi] with 0 <= lo <= hi"]
        if roots_above(poly, hi * hi / s2) > 0 or (lo > 0 and degree(poly) - roots_below(poly, lo * lo / s2) < 1):
            problems.append(f"sigma_1 is not in sigma_max = [{q_text(lo)}, {q_text(hi)}]")
        t_lo, t_hi = lo * max(m, n) * _EPS64, hi * max(m, n) * _EPS64
    else:
        if sig is not None:
            return ["sigma_max is null exactly when the tolerance is stated"]
        t_lo = t_hi = num(tol, "parameters.tol")
        if t_lo <= 0:
            return ["a stated tolerance must be > 0"]
    if (num(ev.get("tol_lower"), "tol_lower"), num(ev.get("tol_upper"), "tol_upper")) != (t_lo, t_hi):
        problems.append("tol_lower, tol_upper are not the tolerance's enclosure")
    k_lo, k_hi = whole(ev.get("k_lower"), "k_lower", 0), whole(ev.get("k_upper"), "k_upper", 0)
    if not k_lo <= k_hi <= min(m, n):
        return problems + [f"need k_lower <= k_upper <= {min(m, n)}"]
    above_hi, above_lo = roots_above(poly, t_hi * t_hi / s2), roots_above(poly, t_lo * t_lo / s2)
    if k_lo > above_hi:
        problems.append(f"{above_hi} singular values exceed tol_upper, the claim says {k_lo}")
    if above_lo > k_hi:
        problems.append(f"{above_lo} singular values exceed tol_lower, the claim says at most {k_hi}")
    if verdict != ("proved" if k_lo == k_hi else "unknown"):
        problems.append(f"verdict {verdict}, but the counts {k_lo}, {k_hi} make it "
                        f"{'proved' if k_lo == k_hi else 'unknown'}")
    return problems


# ---------------------------------------------------------------- nonnegative

def nonnegative(claim: Mapping[str, Any], K: Kernel) -> list[str]:
    ev, verdict = claim["evidence"], claim["verdict"]
    method = ev.get("method")
    if method == "none":
        return [] if verdict == "unknown" else ["without a method the verdict must be unknown"]
    N, s = K.integer_matrix()
    neg = [(i, j) for i, r in enumerate(N) for j, v in enumerate(r) if v < 0]
    problems = []
    if verdict == "proved" and neg:
        i, j = neg[0]
        problems.append(f"alpha({i}, {j}) = {q_text(N[i][j] * s)} < 0: the kernel is not nonnegative "
                        f"({len(neg)} negative entries)")
    elif verdict == "refuted" and not neg:
        problems.append("every entry of the kernel is >= 0: nonnegativity is not refuted")
    elif verdict not in ("proved", "refuted"):
        problems.append(f"nonnegativity is decided exactly here; the verdict must not be {verdict}")
    if method == "entries":
        flat = [v for r in N for v in r]
        m = min(flat)
        first = flat.index(m)
        sign = (m > 0) - (m < 0)
        if ev.get("min_sign") != sign:
            problems.append(f"min_sign is {ev.get('min_sign')!r}, the least entry's sign is {sign}")
        if ev.get("argmin") != [first // len(N[0]), first % len(N[0])]:
            problems.append(f"argmin is {ev.get('argmin')!r:.40}, the first least entry is at "
                            f"{[first // len(N[0]), first % len(N[0])]}")
    elif method == "features_nonnegative":
        for side, rows in (("q", K.phi_q), ("k", K.phi_k)):
            if rows is None:
                raise Fails("features_nonnegative needs the features")
            least = min(x for r in rows for x in r)
            if num(ev.get(f"min_phi_{side}"), f"min_phi_{side}") != least:
                problems.append(f"min_phi_{side} is {ev.get(f'min_phi_{side}')!r:.40}, the least "
                                f"feature is {q_text(least)}")
    elif method == "all_products":
        if ev.get("num_checked") != K.rows * K.cols:
            problems.append(f"num_checked is {ev.get('num_checked')!r}, the kernel has "
                            f"{K.rows * K.cols} entries")
    elif method == "counterexample":
        pair = ev.get("pair")
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) for v in pair)
                and 0 <= pair[0] < K.rows and 0 <= pair[1] < K.cols):
            return problems + ["counterexample pair is not a pair of token indices"]
        i, j = pair
        if not N[i][j] < 0 or num(ev.get("value"), "value") != N[i][j] * s:
            problems.append(f"alpha{tuple(pair)} = {q_text(N[i][j] * s)}, the claim says "
                            f"{ev.get('value')!r:.40} < 0")
    elif method not in ("quadratic_kernel", "key_box"):
        problems.append(f"unknown nonnegativity method {method!r:.40}")
    return problems


# ---------------------------------------------------------------- code_rank

def _bits(s: Any, what: str) -> list[int]:
    if not isinstance(s, str) or not s or set(s) - {"0", "1"}:
        raise Fails(f"{what} must be a non-empty 0/1 string")
    return [int(c) for c in s]


def code_rank(claim: Mapping[str, Any], K: Kernel, tokens: list[list[int]] | None,
              cube_m: int | None) -> list[str]:
    """Lemma 4 on ``B[S,U] = alpha(x_S, x_(U^c))`` over the code's words, with the
    kernel's own values at those tokens: ``t`` nonzero diagonal entries ``kept``,
    ``C = B[kept,kept]`` row-normalized, ``F = t + sum_{i != j} C_ij^2``, ``rank >=
    t^2 / F`` (``t = tr C <= ||C||_* <= sqrt(rank) ||C||_F``)."""
    ev, p, verdict = claim["evidence"], claim["parameters"], claim["verdict"]
    if not isinstance(ev.get("words"), list) or not ev["words"]:
        raise Fails("evidence.words must list the code's words")
    words = [_bits(w, "code word") for w in ev["words"]]
    M = len(words[0])
    if any(len(w) != M for w in words) or len({sum(w) for w in words}) != 1:
        return ["the code's words are not of one length and one weight"]
    if p.get("num_words") != len(words) or p.get("M") != M:
        return [f"parameters num_words, M are not the code's {len(words)}, {M}"]
    comp = [[1 - b for b in w] for w in words]
    if cube_m is not None:
        if cube_m != M:
            return [f"the words have length {M}, the token set is cube:{cube_m}"]
        idx = lambda b: sum(v << i for i, v in enumerate(b))             # noqa: E731
        rows = [(idx(w), idx(c)) for w, c in zip(words, comp)]
    elif tokens is not None:
        where = {tuple(t): i for i, t in enumerate(tokens)}
        if any(tuple(w) not in where or tuple(c) not in where for w, c in zip(words, comp)):
            return ["some word x_S or complement x_(S^c) is not a token of the kernel"]
        rows = [(where[tuple(w)], where[tuple(c)]) for w, c in zip(words, comp)]
    else:
        return ["the kernel's tokens are not known here: B cannot be read off the kernel"]
    if K.phi_q is None or K.phi_k is None:
        Nm, s = K.integer_matrix()
        B = [[Nm[rows[a][0]][rows[b][1]] * s for b in range(len(words))] for a in range(len(words))]
    else:
        Fq = [K.phi_q[a] for a, _ in rows]
        Fk = [K.phi_k[b] for _, b in rows]
        B = [[sum((x * y for x, y in zip(u, v)), Fraction(0)) for v in Fk] for u in Fq]
        problems = _stated_rows(ev, Fq, Fk)
        if problems:
            return problems
    W = len(words)
    kept = [i for i in range(W) if B[i][i] != 0]
    t = len(kept)
    cs = [B[i][j] / B[i][i] for i in kept for j in kept if i != j and B[i][j] != 0]
    problems = []
    if ev.get("kept") != kept or ev.get("t") != t:
        problems.append(f"kept / t are not the nonzero diagonal {kept}")
    lam = min((1 / abs(c) for c in cs), default=None)
    stated_lam = ev.get("min_lambda")
    if (stated_lam is None) != (lam is None) or (lam is not None and num(stated_lam, "min_lambda") != lam):
        problems.append(f"min_lambda is {stated_lam!r:.40}, re-derived {lam}")
    if verdict == "refuted":
        return problems + ["a Lemma 4 lower bound is never refuted"]
    if t == 0:
        if verdict != "unknown" or (ev.get("frobenius_sq"), ev.get("bound"), ev.get("rank_lower")) != ("0", "0", 0):
            problems.append("with no nonzero diagonal entry the claim is unknown with bound 0")
        return problems
    frob = t + sum((c * c for c in cs), Fraction(0))
    bound = Fraction(t * t) / frob
    if num(ev.get("frobenius_sq"), "frobenius_sq") != frob:
        problems.append(f"frobenius_sq is {ev.get('frobenius_sq')!r:.40}, re-derived {q_text(frob)}")
    if num(ev.get("bound"), "bound") != bound:
        problems.append(f"bound is {ev.get('bound')!r:.40}, re-derived {q_text(bound)}")
    lower = whole(ev.get("rank_lower"), "rank_lower", 0)
    if lower != ceil(bound):
        problems.append(f"rank_lower is {lower}, Lemma 4 gives ceil({q_text(bound)}) = {ceil(bound)}")
    if verdict != "proved":
        problems.append(f"the bound is proved but the verdict is {verdict}")
    if not problems:                     # the lemma's conclusion, against the kernel's exact rank
        N, _ = K.integer_matrix()
        true = rank(N)
        if true < lower:
            problems.append(f"the kernel's exact rank {true} is below the claimed bound {lower}")
    return problems


def _stated_rows(ev: Mapping[str, Any], Fq: list[list[Fraction]], Fk: list[list[Fraction]]) -> list[str]:
    """The evidence's query and key feature rows are the kernel's at the words' tokens."""
    for name, exp, want in (("query_features", "query_exponent", Fq), ("key_features", "key_exponent", Fk)):
        rows = ev.get(name)
        e = whole(ev.get(exp), exp)
        if not isinstance(rows, list) or len(rows) != len(want) or any(
                not isinstance(r, list) or len(r) != len(w)
                or any(Fraction(whole(x, name)) * Fraction(2) ** e != y for x, y in zip(r, w))
                for r, w in zip(rows, want)):
            return [f"evidence.{name} are not the kernel's features at the code's tokens"]
    return []


def fq(rows: list[list[int]], e: int) -> list[list[Fraction]]:
    """Integer rows times ``2^e``, exactly."""
    f = Fraction(2) ** e
    return [[x * f for x in r] for r in rows]


__all__ = ["Kernel", "matrix_sha256", "scaled", "unscaled", "exact_rank", "eps_rank", "numerical_rank",
           "float64_sha256", "nonnegative",
           "code_rank", "fq", "fmpq"]
