"""Independent checker for ``exact_rank``, ``eps_rank``, ``code_rank`` and ``nonnegative``.

Imports only the standard library, numpy and python-flint. ``check(claim,
cert)`` returns the problems found; ``[]`` means the verdict was re-derived
exactly from the evidence. For large inputs the evidence carries exact
summaries (Gram matrices of the feature matrices, identified by sha256) rather
than the features; the checker then re-derives the verdict from the summaries,
and re-derives the summaries themselves when the features are embedded.

Evidence fields
---------------
exact_rank, factor form (``form = "factor"``):
  ``gram_q, gram_q_exponent, gram_k, gram_k_exponent`` -- ``PhiQ^T PhiQ =
  gram_q 2^e`` (ints); ``features_sha256``; optional ``features`` {``phi_q``,
  ``phi_q_exponent``, ``phi_k``, ``phi_k_exponent``} (then the Grams are
  recomputed); ``prime, minor_rows, minor_cols`` -- a minor of the core
  ``gram_q gram_k`` nonsingular mod ``prime`` (lower bound); ``null_basis``
  (r x k ints, columns) with ``core X = 0`` and ``null_prime,
  null_minor_rows, null_minor_cols`` -- a k x k minor of X nonsingular mod
  ``null_prime`` (independence), so ``rank <= r - k``; ``rank_lower,
  rank_upper``. Identity used: over Q, ``rank(A B^T) = rank(A^T A B^T B)``.
exact_rank, matrix form (``form = "matrix"``):
  ``shape``, ``scale``, ``matrix_sha256``, ``matrix`` (ints; embedded when
  small, else pass ``matrix=`` to :func:`check`), ``prime, minor_rows,
  minor_cols``, ``upper_witness`` (``trivial``: ``min(shape)``;
  ``column_span``: every column in the span of the minor's columns, checked by
  solving ``N[R,C] Y = N[R,notC]`` exactly and multiplying: ``[-Y; I]`` is a
  null-space basis with an identity block), ``rank_lower, rank_upper``.
eps_rank, factor form: the Gram fields, ``eps`` (p/q), ``k``: the Grams are
  checked PSD exactly and ``k`` = sign changes of ``charpoly(core 2^e -
  eps^2 I)`` (Descartes, exact for the real-rooted core).
eps_rank, matrix form: ``matrix`` (embedded), ``scale``, ``eps``, ``k`` and
  ``method`` ``gram`` (count on ``A^T A`` or ``A A^T``) or ``projection``
  (``witness_y``, ``witness_y_exponent``: ``H - eps^2 b I > 0`` exactly, with
  ``H = (A Y)^T (A Y)`` and ``b = ||Y^T Y||_inf``).
code_rank: ``words`` (0/1 strings); ``query_features/query_exponent`` (rows
  phiQ(x_S)) and ``key_features/key_exponent`` (rows phiK(x_(U^c))), or ``B``
  (p/q); ``t, kept, frobenius_sq, bound, rank_lower``: Lemma 4,
  ``rank >= ceil(t^2 / (t + sum_{S != U} (B_SU / B_SS)^2))``.
nonnegative: ``method`` ``features_nonnegative`` (``min_phi_q, min_phi_k``
  >= 0), ``all_products`` (count of pairs), ``counterexample`` (``phi_q_row``,
  ``phi_k_row`` with exponents and ``value`` < 0, recomputed), or ``entries``
  (matrix form; ``matrix`` embedded: the minimum entry is recomputed).
"""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction
from typing import Any, Mapping

import numpy as np

KINDS = ("exact_rank", "eps_rank", "code_rank", "nonnegative")


def _q(s: Any) -> Fraction:
    if isinstance(s, bool) or isinstance(s, float):
        raise ValueError(f"not exact: {s!r}")
    if isinstance(s, int):
        return Fraction(s)
    num, _, den = str(s).partition("/")
    return Fraction(int(num), int(den)) if den else Fraction(int(num))


def _fmpz(rows):
    import flint
    rows = [[int(v) for v in r] for r in rows]
    n1 = len(rows)
    n2 = len(rows[0]) if n1 else 0
    if any(len(r) != n2 for r in rows):
        raise ValueError("ragged matrix in evidence")
    return flint.fmpz_mat(n1, n2, [v for r in rows for v in r])


def _nmod_det(rows, p: int, R, C) -> int:
    import flint
    sub = [[int(rows[i][j]) % p for j in C] for i in R]
    if not sub:
        return 1
    return int(flint.nmod_mat(sub, p).det())


def _minor_nonzero(F, p: int, R, C) -> bool:
    """det F[R, C] != 0 mod p for a flint fmpz_mat F."""
    import flint
    if len(R) != len(C) or len(set(R)) != len(R) or len(set(C)) != len(C):
        return False
    if not R:
        return True
    if not flint.fmpz(p).is_prime():
        return False
    sub = flint.nmod_mat(len(R), len(C), [int(F[i, j]) % p for i in R for j in C], p)
    return int(sub.det()) != 0


def _gram_from_features(rows) -> Any:
    F = _fmpz(rows)
    return F.transpose() * F


def _shift_equal(G1, e1: int, G2, e2: int) -> bool:
    """G1 2^e1 == G2 2^e2 for flint integer matrices."""
    if e1 >= e2:
        return G1 * (1 << (e1 - e2)) == G2
    return G1 == G2 * (1 << (e2 - e1))


def _check_grams(ev: Mapping[str, Any], problems: list[str]):
    GQ, GK = _fmpz(ev["gram_q"]), _fmpz(ev["gram_k"])
    eq, ek = int(ev["gram_q_exponent"]), int(ev["gram_k_exponent"])
    r = int(ev["r"])
    if GQ.nrows() != r or GQ.ncols() != r or GK.nrows() != r or GK.ncols() != r:
        problems.append("Gram matrices are not r x r")
    if GQ != GQ.transpose() or GK != GK.transpose():
        problems.append("Gram matrices are not symmetric")
    feats = ev.get("features")
    if feats:
        gq = _gram_from_features(feats["phi_q"])
        gk = _gram_from_features(feats["phi_k"])
        if not _shift_equal(gq, 2 * int(feats["phi_q_exponent"]), GQ, eq):
            problems.append("gram_q differs from the embedded PhiQ")
        if not _shift_equal(gk, 2 * int(feats["phi_k_exponent"]), GK, ek):
            problems.append("gram_k differs from the embedded PhiK")
    return GQ, GK, eq, ek


def _is_psd(G) -> bool:
    import flint
    n = G.nrows()
    a = [[flint.fmpq(int(G[i, j])) for j in range(n)] for i in range(n)]
    for k in range(n):
        piv = a[k][k]
        if piv < 0:
            return False
        if piv == 0:
            if any(a[k][j] != 0 for j in range(k + 1, n)):
                return False
            continue
        for i in range(k + 1, n):
            if a[i][k] != 0:
                f = a[i][k] / piv
                for j in range(k + 1, n):
                    if a[k][j] != 0:
                        a[i][j] -= f * a[k][j]
    return True


def _sign_changes(coeffs) -> int:
    s = [1 if c > 0 else -1 for c in coeffs if c != 0]
    return sum(1 for a, b in zip(s, s[1:]) if a != b)


def _count_above(core, c: Fraction) -> int:
    import flint
    M = flint.fmpq_mat(core)
    cq = flint.fmpq(c.numerator, c.denominator)
    for i in range(M.nrows()):
        M[i, i] = M[i, i] - cq
    return _sign_changes(M.charpoly().coeffs())


def _matrix_sha256(rows) -> str:
    flat = [int(v) for r in rows for v in r]
    if all(-(1 << 62) <= v < (1 << 62) for v in flat):
        a = np.array(flat, dtype="<i8")
        return "int64:" + hashlib.sha256(a.tobytes()).hexdigest()
    return "json:" + hashlib.sha256(json.dumps([[int(v) for v in r] for r in rows],
                                               separators=(",", ":")).encode()).hexdigest()


def _get_matrix(ev, matrix, problems):
    rows = ev.get("matrix") if matrix is None else [[int(v) for v in r] for r in np.asarray(matrix).tolist()]
    if rows is None:
        problems.append("matrix not embedded (pass matrix= to re-check)")
        return None
    if _matrix_sha256(rows) != ev.get("matrix_sha256"):
        problems.append("matrix does not match matrix_sha256")
    if [len(rows), len(rows[0]) if rows else 0] != list(ev.get("shape", [])):
        problems.append("matrix shape does not match")
    return rows


# ---------------------------------------------------------------- claims

def _verdict_from_bounds(claim, lower: int, upper: int, problems: list[str]) -> None:
    ev = claim["evidence"]
    if int(ev.get("rank_lower", -1)) != lower:
        problems.append(f"rank_lower {ev.get('rank_lower')} but the minor proves {lower}")
    if int(ev.get("rank_upper", -1)) != upper:
        problems.append(f"rank_upper {ev.get('rank_upper')} but the witness proves {upper}")
    expect = "proved" if lower == upper else "unknown"
    if lower > upper:
        problems.append(f"inconsistent bounds {lower} > {upper}")
    if claim["verdict"] != expect and not (claim["verdict"] == "unknown" and expect == "proved"):
        problems.append(f"verdict {claim['verdict']} but the evidence gives {expect}")


def check_exact_rank(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    problems: list[str] = []
    if ev.get("form") == "factor":
        GQ, GK, _, _ = _check_grams(ev, problems)
        core = GQ * GK
        r = core.nrows()
        R, C = [int(i) for i in ev["minor_rows"]], [int(j) for j in ev["minor_cols"]]
        if not _minor_nonzero(core, int(ev["prime"]), R, C):
            problems.append("the recorded minor of the core is singular mod p")
            lower = 0
        else:
            lower = len(R)
        X = ev.get("null_basis") or []
        upper = r
        if X:
            Xm = _fmpz(X)
            k = Xm.ncols()
            import flint
            if Xm.nrows() != r or core * Xm != flint.fmpz_mat(r, k):
                problems.append("null_basis does not satisfy core X = 0")
            elif not _minor_nonzero(Xm, int(ev["null_prime"] or 0), [int(i) for i in ev["null_minor_rows"]],
                                    [int(j) for j in ev["null_minor_cols"]]) or len(ev["null_minor_rows"]) != k:
                problems.append("null_basis independence minor is singular mod p")
            else:
                upper = r - k
        _verdict_from_bounds(claim, lower, upper, problems)
        return problems
    if ev.get("form") != "matrix":
        return [f"unknown form {ev.get('form')!r}"]
    rows = _get_matrix(ev, matrix, problems)
    if rows is None:
        return problems
    F = _fmpz(rows)
    R, C = [int(i) for i in ev["minor_rows"]], [int(j) for j in ev["minor_cols"]]
    lower = len(R) if _minor_nonzero(F, int(ev["prime"]), R, C) else 0
    if lower == 0 and R:
        problems.append("the recorded minor is singular mod p")
    n1, n2 = F.nrows(), F.ncols()
    upper = min(n1, n2)
    if ev.get("upper_witness") == "column_span" and lower:
        other = [j for j in range(n2) if j not in set(C)]
        import flint
        M = flint.fmpz_mat([[F[i, j] for j in C] for i in R])
        FC = flint.fmpz_mat([[F[i, j] for j in C] for i in range(n1)])
        ok = True
        for s in range(0, len(other), 256):                 # blocks keep the big Y entries in memory bounds
            blk = other[s:s + 256]
            Yn, den = M.solve(flint.fmpz_mat([[F[i, j] for j in blk] for i in R])).numer_denom()
            if FC * Yn != flint.fmpz_mat([[F[i, j] for j in blk] for i in range(n1)]) * den:
                ok = False
                break
        if ok:
            upper = len(C)
        else:
            problems.append("column-span witness fails: a column lies outside the span")
    _verdict_from_bounds(claim, lower, upper, problems)
    return problems


def _rational_matrix(rows, scale):
    import flint
    A = flint.fmpq_mat(_fmpz(rows))
    if scale.get("kind") == "row_denominators":
        for i, d in enumerate(scale["row_den"]):
            for j in range(A.ncols()):
                A[i, j] = A[i, j] / int(d)
    else:
        e = int(scale.get("exponent", 0))
        A = A * (flint.fmpq(2) ** e if e >= 0 else flint.fmpq(1, 2 ** -e))
    return A


def check_eps_rank(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    problems: list[str] = []
    eps = _q(ev["eps"])
    k = int(ev["k"])
    if ev.get("form") == "factor":
        GQ, GK, eq, ek = _check_grams(ev, problems)
        if not (_is_psd(GQ) and _is_psd(GK)):
            return problems + ["Gram matrices are not PSD: the real-rooted count does not apply"]
        got = _count_above(GQ * GK, eps * eps / Fraction(2) ** (eq + ek))
        if got != k:
            problems.append(f"charpoly sign changes give {got} singular values > eps, evidence says {k}")
    elif ev.get("method") == "gram":
        rows = _get_matrix(ev, matrix, problems)
        if rows is None:
            return problems
        A = _rational_matrix(rows, ev["scale"])
        G = A.transpose() * A if A.ncols() <= A.nrows() else A * A.transpose()
        got = _count_above(G, eps * eps)
        if got != k:
            problems.append(f"Gram count gives {got}, evidence says {k}")
    elif ev.get("method") == "projection":
        rows = _get_matrix(ev, matrix, problems)
        if rows is None or "witness_y" not in ev:
            return problems + ([] if rows is None else ["projection witness not embedded"])
        if ev["scale"].get("kind") != "dyadic":
            return problems + ["projection needs a dyadic matrix"]
        Y = _fmpz(ev["witness_y"])
        if Y.ncols() != k:
            return problems + ["witness has the wrong number of columns"]
        W = _fmpz(rows) * Y
        H = W.transpose() * W
        YtY = Y.transpose() * Y
        b = max(sum(abs(int(YtY[i, j])) for j in range(k)) for i in range(k))
        c = eps * eps * b / Fraction(2) ** (2 * int(ev["scale"]["exponent"]))
        Hs = H * c.denominator
        for i in range(k):
            Hs[i, i] = Hs[i, i] - c.numerator
        if not _positive_definite(Hs):
            problems.append("projection check fails: H - eps^2 b I is not positive definite")
    else:
        return [f"unknown eps_rank evidence (form {ev.get('form')!r}, method {ev.get('method')!r})"]
    if claim["verdict"] != "proved" and not problems:
        problems.append("the evidence proves the claim but its verdict is not proved")
    return problems


def _positive_definite(H) -> bool:
    n = H.nrows()
    if H != H.transpose():
        return False
    import flint                     # Sylvester: every leading principal minor > 0
    P, L, D, U = H.fflu()
    ident = flint.fmpz_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)])
    return P == ident and all(U[i, i] > 0 for i in range(n))


def check_code_rank(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    problems: list[str] = []
    words = ev["words"]
    if "B" in ev:
        B = [[_q(v) for v in row] for row in ev["B"]]
    else:
        P = _fmpz(ev["query_features"]) * _fmpz(ev["key_features"]).transpose()
        s = Fraction(2) ** (int(ev["query_exponent"]) + int(ev["key_exponent"]))
        B = [[Fraction(int(P[i, j])) * s for j in range(P.ncols())] for i in range(P.nrows())]
    if len(B) != len(words) or any(len(r) != len(words) for r in B):
        return ["B is not W x W for the W code words"]
    W = len(words)
    if len({len(w) for w in words}) != 1 or len({w.count("1") for w in words}) != 1:
        problems.append("the words are not of one length and one weight")
    kept = [i for i in range(W) if B[i][i] != 0]
    t = len(kept)
    frob = Fraction(t)
    for i in kept:
        for j in kept:
            if i != j:
                frob += (B[i][j] / B[i][i]) ** 2
    if t == 0:
        return problems + ([] if claim["verdict"] != "proved" else ["no nonzero diagonal"])
    bound = Fraction(t * t) / frob
    lower = math.ceil(bound)
    if int(ev["rank_lower"]) > lower:
        problems.append(f"claimed rank >= {ev['rank_lower']} but Lemma 4 gives {lower}")
    if _q(ev["bound"]) != bound or _q(ev["frobenius_sq"]) != frob or int(ev["t"]) != t:
        problems.append("bound, frobenius_sq or t differ from the recomputation")
    return problems


def check_nonnegative(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    problems: list[str] = []
    method = ev.get("method")
    verdict = claim["verdict"]
    if method == "features_nonnegative":
        if _q(ev["min_phi_q"]) < 0 or _q(ev["min_phi_k"]) < 0:
            problems.append("a feature minimum is negative")
        elif verdict != "proved":
            problems.append("nonnegative features prove the claim but the verdict is not proved")
    elif method == "all_products":
        if verdict != "proved":
            problems.append("all products checked but the verdict is not proved")
    elif method == "counterexample":
        q = [Fraction(int(v)) for v in ev["phi_q_row"]]
        k = [Fraction(int(v)) for v in ev["phi_k_row"]]
        val = sum((a * b for a, b in zip(q, k)), Fraction(0)) * Fraction(2) ** (
            int(ev["phi_q_exponent"]) + int(ev["phi_k_exponent"]))
        if val != _q(ev["value"]) or val >= 0:
            problems.append("the counterexample does not recompute to a negative value")
        if verdict != "refuted":
            problems.append("a counterexample refutes the claim but the verdict is not refuted")
    elif method == "entries":
        rows = _get_matrix(ev, matrix, problems)
        if rows is None:
            return problems
        mn = min(int(v) for r in rows for v in r)
        expect = "proved" if mn >= 0 else "refuted"
        if verdict != expect:
            problems.append(f"minimum entry sign gives {expect}, verdict is {verdict}")
    elif verdict == "proved":
        problems.append(f"no exact evidence for nonnegativity (method {method!r})")
    return problems


_CHECKS = {"exact_rank": check_exact_rank, "eps_rank": check_eps_rank,
           "code_rank": check_code_rank, "nonnegative": check_nonnegative}


def check(claim: Mapping[str, Any], cert: Mapping[str, Any] | None = None, *, matrix=None) -> list[str]:
    """Re-derive one claim's verdict from its evidence; ``matrix`` supplies the
    integer matrix of a matrix-form claim whose evidence does not embed it."""
    fn = _CHECKS.get(claim.get("kind"))
    if fn is None:
        return [f"certify.checkers.rank does not check kind {claim.get('kind')!r}"]
    try:
        return fn(claim, cert or {}, matrix)
    except (KeyError, ValueError, TypeError, ZeroDivisionError, IndexError) as exc:
        return [f"malformed {claim.get('kind')} evidence: {type(exc).__name__}: {exc}"]
