"""Independent checker for ``exact_rank``, ``eps_rank``, ``code_rank`` and ``nonnegative``.

Imports only the standard library, numpy and python-flint
(:mod:`certify.checkers.common`). ``check(claim, cert)`` returns the problems
found; ``[]`` means the verdict was re-derived exactly from the evidence. Every
evidence object must have exactly the keys listed here (a missing or an
unexpected key is a problem). Float diagnostics (prime attempts, counts of
float-decided products) live in the claim's ``info`` and are never read.

Features (factor form)
----------------------
``features_sha256`` = ``{phi_q, phi_k, dtype, layout}``: sha256 of ``PhiQ`` and
``PhiK`` (``(K, r)`` row-major little-endian bytes of ``dtype``). The features
themselves come from one of

* ``features`` = ``{phi_q, phi_q_exponent, phi_k, phi_k_exponent}`` (integer
  rows; ``PhiQ = phi_q 2^phi_q_exponent``): the checker rebuilds the arrays in
  ``dtype`` (each value must be representable), recomputes both hashes and
  ``num_tokens = K``, ``r``, and every summary below;
* ``features_claim`` = index of another claim of the same certificate whose
  ``features`` are used (their hashes must be this claim's);
* ``trusted`` = the exact list of fields documented below for the claim kind:
  the features are too large to embed, so these summaries are taken from the
  producer *as stated* (identified by ``features_sha256``) and not re-derived.
  :func:`trusted` lists them and ``certify.verify`` prints them as trusted.

exact_rank, factor form (``form = "factor"``)
  ``num_tokens, r``, features (above; ``trusted = ["gram_q", "gram_k",
  "num_tokens"]``), ``gram_q, gram_q_exponent, gram_k, gram_k_exponent``
  (``PhiQ^T PhiQ = gram_q 2^e``, recomputed from the features), ``prime,
  minor_rows, minor_cols``: a minor of the core ``gram_q gram_k`` nonsingular
  mod ``prime`` (lower bound); ``null_basis`` (r x k integer columns, ``[]``
  when k = 0) with ``core X = 0`` and ``null_prime, null_minor_rows,
  null_minor_cols``: a k x k minor of X nonsingular mod ``null_prime``, so
  ``rank <= r - k``; ``upper_witness`` (``null_space`` / ``trivial``);
  ``rank_lower, rank_upper``. Identity: ``rank(A B^T) = rank(A^T A B^T B)``.
exact_rank, matrix form (``form = "matrix"``)
  ``shape``, ``scale`` (``{"kind": "dyadic", "exponent": e}``: the kernel is
  ``matrix 2^e``; ``{"kind": "row_denominators", "row_den": [...]}``: row i is
  ``matrix[i] / row_den[i]``), ``matrix`` (integer rows; embedded, or pass
  ``matrix=`` to :func:`check`), ``matrix_sha256`` (of the scale and the rows,
  see :func:`matrix_sha256`), ``prime, minor_rows, minor_cols``,
  ``upper_witness`` (``trivial``: ``min(shape)``; ``column_span``: every column
  in the span of the minor's columns, checked by solving exactly), ``rank_lower,
  rank_upper``.
  Parameters of both forms: ``token_set`` (``cube:M`` fixes ``K = 2^M``),
  ``shape`` (``[K, K]`` in factor form), ``form``, ``dtype`` (the features'),
  ``source`` (a label) / ``source_sha256`` (null for a kernel built in memory,
  else one of the certificate's ``inputs`` hashes, which ``certify.verify``
  compares with the file when present), ``adapter`` (a label).
eps_rank, factor form
  the Gram fields and features as above, ``eps`` (= ``parameters.eps``), ``k``
  (sign changes of ``charpoly(core 2^e - eps^2 I)``, Descartes, exact for the
  real-rooted core), ``exact`` (true: the count is the eps-rank), and
  ``sigma_sq_enclosures``: ``[lo, hi]`` per eigenvalue of ``A^T A``, largest
  first; each is checked by exact root counting (``lambda_i`` lies in it) and
  must be at most ``2^-20`` of the largest value wide.
eps_rank, matrix form
  ``shape, scale, matrix, matrix_sha256, eps, k, exact`` and ``method``:
  ``gram`` (count on ``A^T A`` or ``A A^T``; ``exact`` true) or ``projection``
  (``witness_y, witness_y_exponent``: ``H - eps^2 b I > 0`` exactly with
  ``H = (A Y)^T (A Y)``, ``b = ||Y^T Y||_inf``; ``exact`` false).
code_rank
  ``words`` (0/1 strings of one length and weight), ``query_features,
  query_exponent`` (rows ``phiQ(x_S)``), ``key_features, key_exponent`` (rows
  ``phiK(x_(U^c))``); ``features_sha256`` and features as above: on a
  ``cube:M`` token set the rows are compared with the kernel's rows at the
  words' tokens (else ``trusted = ["query_features", "key_features"]``, with
  ``features_sha256`` optional: a lone claim on a large token set); matrix
  form: ``B`` (p/q) and ``trusted = ["B"]``. Re-derived: ``t, kept,
  frobenius_sq, bound, rank_lower = ceil(bound), min_lambda`` (Lemma 4,
  ``rank >= t^2 / (t + sum_{S != U} (B_SU / B_SS)^2)``). Never refuted.
  Parameters ``code`` (a label), ``num_words, M, token_set``.
nonnegative
  factor form: ``form, features_sha256``, features, ``method``:
  ``features_nonnegative`` (``min_phi_q, min_phi_k`` re-derived; trusted
  ``["min_phi_q", "min_phi_k"]``), ``all_products`` (``num_checked = K^2``;
  every product ``PhiQ PhiK^T`` recomputed; trusted ``["all_products"]``),
  ``counterexample`` (``pair``, ``phi_q_row, phi_q_exponent, phi_k_row,
  phi_k_exponent`` = the features of the pair, ``value`` < 0 recomputed;
  trusted ``["phi_q_row", "phi_k_row"]``), ``none`` (unknown only).
  Matrix form: ``method = "entries"``, ``shape, scale, matrix, matrix_sha256,
  argmin`` (first index of the minimum entry), ``min_sign``.
"""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from certify.checkers.common import (Bad, boolean, fmpz_mat, guarded, int_matrix, integer, keys,
                                     q_str, rational, rational_matrix, same_rational, bits)

KINDS = ("exact_rank", "eps_rank", "code_rank", "nonnegative")
LAYOUT = "row-major little-endian (K, r)"
ENCLOSURE_WIDTH_LOG2 = 20

_FEATURE_SOURCES = ("features", "features_claim", "trusted")
#: evidence keys that may accompany the features: the size of trusted summaries
_FEATURE_OPTIONAL = _FEATURE_SOURCES + ("trusted_entries",)
_GRAM = ("num_tokens", "r", "features_sha256", "gram_q", "gram_q_exponent", "gram_k",
         "gram_k_exponent")
_TRUSTED = {("exact_rank", "factor"): ["gram_q", "gram_k", "num_tokens"],
            ("eps_rank", "factor"): ["gram_q", "gram_k", "num_tokens"],
            ("code_rank", "factor"): ["query_features", "key_features"],
            ("code_rank", "matrix"): ["B"],
            ("nonnegative", "features_nonnegative"): ["min_phi_q", "min_phi_k"],
            ("nonnegative", "all_products"): ["all_products"],
            ("nonnegative", "counterexample"): ["phi_q_row", "phi_k_row"]}


# ---------------------------------------------------------------- helpers

def _minor_nonzero(F, p: Any, R: list[int], C: list[int]) -> bool:
    """det F[R, C] != 0 mod p (p a prime) for a flint fmpz_mat F."""
    import flint
    if len(R) != len(C) or len(set(R)) != len(R) or len(set(C)) != len(C):
        return False
    if not R:
        return True
    p = integer(p, "prime", 2)
    if not flint.fmpz(p).is_prime():
        return False
    if any(not 0 <= i < F.nrows() for i in R) or any(not 0 <= j < F.ncols() for j in C):
        return False
    sub = flint.nmod_mat(len(R), len(C), [int(F[i, j]) % p for i in R for j in C], p)
    return int(sub.det()) != 0


def _pivot_minor(F, p: int) -> tuple[list[int], list[int]]:
    """The canonical minor mod p: the pivot columns of rref(F mod p), then the
    pivot columns of rref(F[:, cols]^T mod p) as rows (the producer's choice)."""
    import flint

    def pivots(A) -> list[int]:
        R, rk = A.rref()
        out, j = [], 0
        for i in range(rk):
            while int(R[i, j]) == 0:
                j += 1
            out.append(j)
            j += 1
        return out

    n1, n2 = F.nrows(), F.ncols()
    if not n1 or not n2:
        return [], []
    cols = pivots(flint.nmod_mat(n1, n2, [int(F[i, j]) % p for i in range(n1) for j in range(n2)], p))
    if not cols:
        return [], []
    sub = flint.nmod_mat(len(cols), n1, [int(F[i, j]) % p for j in cols for i in range(n1)], p)
    return pivots(sub), cols


def _check_minor(F, prime: Any, R: list[int], C: list[int], what: str) -> int:
    """The rank F is proved to have at least: ``len(R)`` when ``(R, C)`` is the
    canonical minor of F mod ``prime`` and nonsingular there (else a problem)."""
    if not R and not C:
        return 0
    if prime is None or not _minor_nonzero(F, prime, R, C):
        raise Bad(f"the recorded {what} is singular mod p (or p is not prime)")
    if _pivot_minor(F, prime) != (R, C):
        raise Bad(f"the recorded {what} is not the pivot minor mod p")
    return len(R)


def _indices(v: Any, what: str) -> list[int]:
    if not isinstance(v, list):
        raise Bad(f"{what} must be a list of indices")
    return [integer(i, what, 0) for i in v]


def _shift_equal(G1, e1: int, G2, e2: int) -> bool:
    """G1 2^e1 == G2 2^e2 for flint integer matrices."""
    if e1 >= e2:
        return G1 * (1 << (e1 - e2)) == G2
    return G1 == G2 * (1 << (e2 - e1))


def _dyadic_array(rows: list[list[int]], exponent: int, dtype: str) -> np.ndarray:
    """The array ``rows 2^exponent`` in ``dtype``; every value must be exact there."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        if exponent < 0 and any(v % (1 << -exponent) for r in rows for v in r):
            raise Bad(f"features are not integers although the dtype is {dtype}")
        vals = [[v << exponent if exponent >= 0 else v >> -exponent for v in r] for r in rows]
        try:
            return np.array(vals, dtype=dt).reshape(len(rows), -1)
        except OverflowError:
            raise Bad(f"features do not fit {dtype}") from None
    if dt.kind != "f":
        raise Bad(f"unsupported feature dtype {dtype!r}")
    flat = [v for r in rows for v in r]
    if all(abs(v) < (1 << 53) for v in flat):
        a = np.ldexp(np.array(flat, dtype=np.float64), exponent)
    else:
        a = np.array([float(Fraction(v) * Fraction(2) ** exponent) for v in flat], dtype=np.float64)
    out = a.astype(dt)
    back = [Fraction(float(x)) for x in out.tolist()]
    if any(b != Fraction(v) * Fraction(2) ** exponent for b, v in zip(back, flat)):
        raise Bad(f"embedded features are not representable in {dtype}")
    return out.reshape(len(rows), -1)


def _sha(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()).hexdigest()


class _Features:
    """The kernel's features, or None when the claim declares them trusted."""

    def __init__(self, ev: Mapping[str, Any], cert: Mapping[str, Any], kind: str, key: str) -> None:
        fs = keys(ev["features_sha256"], "features_sha256", ("phi_q", "phi_k", "dtype", "layout"))
        if fs["layout"] != LAYOUT:
            raise Bad(f"features_sha256.layout must be {LAYOUT!r}")
        present = [k for k in _FEATURE_SOURCES if k in ev]
        if len(present) != 1:
            raise Bad(f"evidence needs exactly one of {list(_FEATURE_SOURCES)}, has {present}")
        self.dtype = fs["dtype"]
        self.trusted: list[str] = []
        self.phi_q = self.phi_k = None
        if present[0] == "trusted":
            want = _TRUSTED.get((kind, key))
            if want is None or ev["trusted"] != want:
                raise Bad(f"trusted must be exactly {want} for {kind} ({key})")
            self.trusted = list(want)
            return
        if present[0] == "features":
            feats = ev["features"]
        else:
            idx = integer(ev["features_claim"], "features_claim", 0)
            claims = cert.get("claims", [])
            if idx >= len(claims) or not isinstance(claims[idx], dict) \
                    or not isinstance(claims[idx].get("evidence"), dict) \
                    or "features" not in claims[idx]["evidence"]:
                raise Bad(f"features_claim {idx} is not a claim with embedded features")
            feats = claims[idx]["evidence"]["features"]
        keys(feats, "features", ("phi_q", "phi_q_exponent", "phi_k", "phi_k_exponent"))
        q = int_matrix(feats["phi_q"], "features.phi_q")
        k = int_matrix(feats["phi_k"], "features.phi_k", (len(q), len(q[0]) if q else None))
        eq = integer(feats["phi_q_exponent"], "features.phi_q_exponent")
        ek = integer(feats["phi_k_exponent"], "features.phi_k_exponent")
        if not q or not q[0]:
            raise Bad("embedded features are empty")
        if _sha(_dyadic_array(q, eq, self.dtype)) != fs["phi_q"]:
            raise Bad("features_sha256.phi_q is not the hash of the embedded PhiQ")
        if _sha(_dyadic_array(k, ek, self.dtype)) != fs["phi_k"]:
            raise Bad("features_sha256.phi_k is not the hash of the embedded PhiK")
        self.phi_q, self.eq, self.phi_k, self.ek = q, eq, k, ek

    @property
    def have(self) -> bool:
        return self.phi_q is not None

    def value(self, which: str, i: int, j: int) -> Fraction:
        rows, e = (self.phi_q, self.eq) if which == "q" else (self.phi_k, self.ek)
        return Fraction(rows[i][j]) * Fraction(2) ** e


#: what a claim about a kernel may name besides its own parameters (bound by verify)
SOURCE_KEYS = ("token_set", "source", "source_sha256", "adapter")


def _check_params(claim, cert, form: str, num_tokens: int | None, dtype: str | None) -> None:
    p = keys(claim["parameters"], "parameters",
             ("token_set", "shape", "form", "source", "source_sha256", "adapter", "dtype"))
    if p["form"] != form:
        raise Bad(f"parameters.form {p['form']!r} is not the evidence's form {form!r}")
    shape = _indices(p["shape"], "parameters.shape")
    ts = p["token_set"]
    if not isinstance(ts, str) or not isinstance(p["adapter"], str) or not isinstance(p["source"], str):
        raise Bad("parameters token_set, source and adapter must be strings")
    if form == "factor":
        if num_tokens is not None and shape != [num_tokens, num_tokens]:
            raise Bad(f"parameters.shape {shape} is not [K, K] for K = {num_tokens}")
        if dtype is not None and p["dtype"] != dtype:
            raise Bad(f"parameters.dtype {p['dtype']!r} is not the features' dtype {dtype!r}")
    else:
        ev_shape = claim["evidence"]["shape"]
        if shape != ev_shape:
            raise Bad(f"parameters.shape {shape} is not the matrix shape {ev_shape}")
    if ts.startswith("cube:"):
        M = int(ts[5:]) if ts[5:].isdigit() else -1
        if M < 0 or len(shape) != 2 or (form == "factor" and shape[0] != 1 << M):
            raise Bad(f"token set {ts} does not have {shape[:1]} tokens")
    sha = p["source_sha256"]
    if sha is not None:
        if not isinstance(sha, str) or sha not in (cert.get("inputs") or {}).values():
            raise Bad("parameters.source_sha256 is not among the certificate's input hashes")


# ---------------------------------------------------------------- Grams and matrices

def _check_grams(ev, cert, kind: str):
    """Parsed Grams (GQ, GK, eq, ek, features)."""
    r = integer(ev["r"], "r", 1)
    K = integer(ev["num_tokens"], "num_tokens", 1)
    GQ = fmpz_mat(int_matrix(ev["gram_q"], "gram_q", (r, r)))
    GK = fmpz_mat(int_matrix(ev["gram_k"], "gram_k", (r, r)))
    eq, ek = integer(ev["gram_q_exponent"], "gram_q_exponent"), integer(ev["gram_k_exponent"], "gram_k_exponent")
    F = _Features(ev, cert, kind, "factor")
    if F.have:
        if len(F.phi_q) != K or len(F.phi_q[0]) != r:
            raise Bad(f"the embedded features are {len(F.phi_q)} x {len(F.phi_q[0])}, "
                      f"not num_tokens x r = {K} x {r}")
        for rows, e, G, eg, nm in ((F.phi_q, F.eq, GQ, eq, "gram_q"), (F.phi_k, F.ek, GK, ek, "gram_k")):
            A = fmpz_mat(rows)
            if not _shift_equal(A.transpose() * A, 2 * e, G, eg):
                raise Bad(f"{nm} 2^exponent is not the Gram matrix of the embedded features")
    if GQ != GQ.transpose() or GK != GK.transpose():
        raise Bad("Gram matrices are not symmetric")
    return GQ, GK, eq, ek, F


def matrix_sha256(rows: list[list[int]], scale: Any) -> str:
    """sha256 of the exact kernel matrix: canonical JSON of ``scale``, a newline,
    then the rows as int64 little-endian bytes (``int64:`` prefix) when every
    entry fits, else their compact JSON (``json:``)."""
    head = (json.dumps(scale, sort_keys=True, separators=(",", ":")) + "\n").encode()
    flat = [v for r in rows for v in r]
    if all(-(1 << 63) <= v < (1 << 63) for v in flat):
        body = np.array(flat, dtype="<i8").tobytes()
        return "int64:" + hashlib.sha256(head + body).hexdigest()
    return "json:" + hashlib.sha256(head + json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def _scale(scale: Any, n1: int) -> Any:
    if not isinstance(scale, dict):
        raise Bad("scale must be an object")
    if scale.get("kind") == "dyadic":
        keys(scale, "scale", ("kind", "exponent"))
        integer(scale["exponent"], "scale.exponent")
    elif scale.get("kind") == "row_denominators":
        keys(scale, "scale", ("kind", "row_den"))
        if not isinstance(scale["row_den"], list) or len(scale["row_den"]) != n1 or \
                any(integer(d, "row_den", 1) < 1 for d in scale["row_den"]):
            raise Bad("scale.row_den must list one positive integer per row")
    else:
        raise Bad(f"unknown scale kind {scale.get('kind')!r}")
    return scale


def _get_matrix(ev, matrix) -> list[list[int]]:
    shape = _indices(ev["shape"], "shape")
    if len(shape) != 2:
        raise Bad("shape must be [rows, cols]")
    if matrix is not None:
        rows = [[int(v) for v in r] for r in np.asarray(matrix).tolist()]
    elif "matrix" in ev:
        rows = int_matrix(ev["matrix"], "matrix", tuple(shape))
    else:
        raise Bad("matrix not embedded (pass matrix= to re-check)")
    if [len(rows), len(rows[0]) if rows else 0] != shape:
        raise Bad("matrix shape does not match")
    _scale(ev["scale"], shape[0])
    if matrix_sha256(rows, ev["scale"]) != ev["matrix_sha256"]:
        raise Bad("matrix_sha256 is not the hash of the scale and the matrix")
    return rows


def _matrix_keys(ev, required, matrix) -> None:
    keys(ev, f"{ev.get('form')} evidence", required, () if matrix is not None else ("matrix",))
    if matrix is None and "matrix" not in ev:
        raise Bad("matrix not embedded (pass matrix= to re-check)")


def _rational_matrix(rows, scale):
    import flint
    A = flint.fmpq_mat(fmpz_mat(rows))
    if scale["kind"] == "row_denominators":
        for i, d in enumerate(scale["row_den"]):
            for j in range(A.ncols()):
                A[i, j] = A[i, j] / int(d)
    else:
        e = int(scale["exponent"])
        A = A * (flint.fmpq(2) ** e if e >= 0 else flint.fmpq(1, 2 ** -e))
    return A


# ---------------------------------------------------------------- verdicts

def _verdict_from_bounds(claim, lower: int, upper: int) -> list[str]:
    ev, problems = claim["evidence"], []
    if integer(ev["rank_lower"], "rank_lower") != lower:
        problems.append(f"rank_lower {ev['rank_lower']} but the minor proves {lower}")
    if integer(ev["rank_upper"], "rank_upper") != upper:
        problems.append(f"rank_upper {ev['rank_upper']} but the witness proves {upper}")
    if lower > upper:
        problems.append(f"inconsistent bounds {lower} > {upper}")
    expect = "proved" if lower == upper else "unknown"
    if claim["verdict"] != expect:
        problems.append(f"verdict {claim['verdict']} but the evidence gives {expect}")
    return problems


def check_exact_rank(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    if ev.get("form") == "factor":
        keys(ev, "factor evidence", ("form",) + _GRAM + (
            "prime", "minor_rows", "minor_cols", "null_basis", "null_prime", "null_minor_rows",
            "null_minor_cols", "upper_witness", "rank_lower", "rank_upper"), _FEATURE_OPTIONAL)
        GQ, GK, _, _, F = _check_grams(ev, cert, "exact_rank")
        _check_params(claim, cert, "factor", integer(ev["num_tokens"], "num_tokens"), F.dtype)
        core = GQ * GK
        r = core.nrows()
        R, C = _indices(ev["minor_rows"], "minor_rows"), _indices(ev["minor_cols"], "minor_cols")
        problems = []
        lower = _check_minor(core, ev["prime"], R, C, "minor of the core")
        X = int_matrix(ev["null_basis"], "null_basis")
        upper = r
        if X:
            import flint
            Xm = fmpz_mat(X)
            k = Xm.ncols()
            NR, NC = _indices(ev["null_minor_rows"], "null_minor_rows"), _indices(ev["null_minor_cols"], "null_minor_cols")
            if Xm.nrows() != r or core * Xm != flint.fmpz_mat(r, k):
                problems.append("null_basis does not satisfy core X = 0")
            elif _check_minor(Xm, ev["null_prime"], NR, NC, "null-basis minor") != k:
                problems.append("the null-basis minor does not have full column rank k")
            else:
                upper = r - k
            if ev["upper_witness"] != "null_space":
                problems.append("upper_witness must be null_space when a null basis is given")
        elif ev["upper_witness"] != "trivial" or ev["null_prime"] is not None \
                or ev["null_minor_rows"] != [] or ev["null_minor_cols"] != []:
            problems.append("without a null basis the upper witness is trivial with no null minor")
        return problems + _verdict_from_bounds(claim, lower, upper)
    if ev.get("form") != "matrix":
        return [f"unknown form {ev.get('form')!r}"]
    _matrix_keys(ev, ("form", "shape", "scale", "matrix_sha256", "prime", "minor_rows", "minor_cols",
                      "upper_witness", "rank_lower", "rank_upper"), matrix)
    rows = _get_matrix(ev, matrix)
    _check_params(claim, cert, "matrix", None, None)
    F = fmpz_mat(rows)
    R, C = _indices(ev["minor_rows"], "minor_rows"), _indices(ev["minor_cols"], "minor_cols")
    problems = []
    lower = _check_minor(F, ev["prime"], R, C, "minor")
    n1, n2 = F.nrows(), F.ncols()
    upper = min(n1, n2)
    if ev["upper_witness"] == "column_span":
        import flint
        if not C:                       # the span of no columns is {0}: every column is zero
            if any(F[i, j] != 0 for i in range(n1) for j in range(n2)):
                problems.append("an empty column-span witness, but the matrix is not zero")
            else:
                upper = 0
        elif not lower:
            problems.append("column-span witness without a nonsingular minor")
        else:
            other = [j for j in range(n2) if j not in set(C)]
            M = flint.fmpz_mat([[F[i, j] for j in C] for i in R])
            FC = flint.fmpz_mat([[F[i, j] for j in C] for i in range(n1)])
            ok = True
            for s in range(0, len(other), 256):          # blocks keep the big Y entries in memory bounds
                blk = other[s:s + 256]
                Yn, den = M.solve(flint.fmpz_mat([[F[i, j] for j in blk] for i in R])).numer_denom()
                if FC * Yn != flint.fmpz_mat([[F[i, j] for j in blk] for i in range(n1)]) * den:
                    ok = False
                    break
            if ok:
                upper = len(C)
            else:
                problems.append("column-span witness fails: a column lies outside the span")
    elif ev["upper_witness"] != "trivial":
        problems.append(f"unknown upper_witness {ev['upper_witness']!r}")
    return problems + _verdict_from_bounds(claim, lower, upper)


# ---------------------------------------------------------------- eps-rank

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


def _check_enclosures(core, scale_exp: int, enc: Any) -> None:
    """Every eigenvalue ``lambda_i`` (largest first, with multiplicity) of
    ``core 2^scale_exp`` lies in ``enc[i]``: ``#{lambda > hi_i} <= i`` and
    ``#{lambda >= lo_i} >= i + 1``, counted exactly by Descartes' rule on the
    real-rooted characteristic polynomial shifted to ``hi`` (and reflected at ``lo``)."""
    import flint
    r = core.nrows()
    if not isinstance(enc, list) or len(enc) != r:
        raise Bad(f"sigma_sq_enclosures must list {r} intervals")
    pairs = [(rational(e[0], "enclosure"), rational(e[1], "enclosure")) if isinstance(e, list)
             and len(e) == 2 else (_ for _ in ()).throw(Bad("an enclosure is not [lo, hi]"))
             for e in enc]
    s = Fraction(2) ** scale_exp
    poly = flint.fmpq_mat(core).charpoly()
    top = max((hi for _, hi in pairs), default=Fraction(0))
    width = max(top, Fraction(1)) / (1 << ENCLOSURE_WIDTH_LOG2)

    def fq(x: Fraction):
        return flint.fmpq(x.numerator, x.denominator)

    for i, (lo, hi) in enumerate(pairs):
        if not lo <= hi or hi - lo > width:
            raise Bad(f"enclosure {i} is empty or wider than 2^-{ENCLOSURE_WIDTH_LOG2} of the largest")
        above = _sign_changes(poly(flint.fmpq_poly([fq(hi / s), 1])).coeffs())       # roots > hi
        below = _sign_changes(poly(flint.fmpq_poly([fq(lo / s), -1])).coeffs())      # roots < lo
        if above > i or r - below < i + 1:
            raise Bad(f"sigma_sq_enclosures[{i}] does not contain the {i + 1}-th eigenvalue")


def check_eps_rank(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    keys(claim["parameters"], "parameters", ("eps",), SOURCE_KEYS)
    eps = rational(ev["eps"], "eps")
    if eps != rational(claim["parameters"]["eps"], "parameters.eps") or eps <= 0:
        raise Bad("evidence eps must equal parameters.eps and be > 0")
    k = integer(ev.get("k", 0), "k", 0)
    exact = boolean(ev.get("exact", False), "exact")
    problems: list[str] = []
    if ev.get("form") == "factor":
        keys(ev, "factor evidence", ("form",) + _GRAM + ("eps", "k", "exact", "sigma_sq_enclosures"),
             _FEATURE_OPTIONAL)
        GQ, GK, eq, ek, _ = _check_grams(ev, cert, "eps_rank")
        if not (_is_psd(GQ) and _is_psd(GK)):
            return ["Gram matrices are not PSD: the real-rooted count does not apply"]
        core = GQ * GK
        got = _count_above(core, eps * eps / Fraction(2) ** (eq + ek))
        if got != k:
            problems.append(f"charpoly sign changes give {got} singular values > eps, evidence says {k}")
        if not exact:
            problems.append("the charpoly count is exact: exact must be true")
        if ev["sigma_sq_enclosures"]:
            _check_enclosures(core, eq + ek, ev["sigma_sq_enclosures"])
    elif ev.get("form") == "matrix" and ev.get("method") == "gram":
        _matrix_keys(ev, ("form", "shape", "scale", "matrix_sha256", "eps", "k", "exact", "method"), matrix)
        A = _rational_matrix(_get_matrix(ev, matrix), ev["scale"])
        G = A.transpose() * A if A.ncols() <= A.nrows() else A * A.transpose()
        got = _count_above(G, eps * eps)
        if got != k:
            problems.append(f"Gram count gives {got}, evidence says {k}")
        if not exact:
            problems.append("the Gram count is exact: exact must be true")
    elif ev.get("form") == "matrix" and ev.get("method") == "projection":
        wit = ("witness_y", "witness_y_exponent") if k else ()
        _matrix_keys(ev, ("form", "shape", "scale", "matrix_sha256", "eps", "k", "exact", "method") + wit,
                     matrix)
        rows = _get_matrix(ev, matrix)
        if ev["scale"]["kind"] != "dyadic":
            return ["projection needs a dyadic matrix"]
        if exact:
            problems.append("a projection witness proves only k values > eps: exact must be false")
        if k:
            Y = fmpz_mat(int_matrix(ev["witness_y"], "witness_y", (len(rows[0]), k)))
            integer(ev["witness_y_exponent"], "witness_y_exponent")
            W = fmpz_mat(rows) * Y
            H = W.transpose() * W
            YtY = Y.transpose() * Y
            b = max(sum(abs(int(YtY[i, j])) for j in range(k)) for i in range(k))
            c = eps * eps * b / Fraction(2) ** (2 * int(ev["scale"]["exponent"]))
            Hs = H * c.denominator
            for i in range(k):
                Hs[i, i] = Hs[i, i] - c.numerator
            if not _positive_definite(Hs):
                if claim["verdict"] == "unknown":
                    return problems
                problems.append("projection check fails: H - eps^2 b I is not positive definite")
    elif ev.get("form") == "matrix" and ev.get("method") == "none":
        keys(ev, "matrix evidence", ("form", "shape", "scale", "matrix_sha256", "eps", "method", "k",
                                     "exact"), ("matrix",))
        if k != 0 or exact:
            return ["without a method nothing is counted: k must be 0 and exact false"]
        return [] if claim["verdict"] == "unknown" else ["without a method the verdict must be unknown"]
    else:
        return [f"unknown eps_rank evidence (form {ev.get('form')!r}, method {ev.get('method')!r})"]
    if claim["verdict"] != "proved" and not problems:
        problems.append(f"the evidence proves the claim but its verdict is {claim['verdict']}")
    return problems


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


def _positive_definite(H) -> bool:
    n = H.nrows()
    if H != H.transpose():
        return False
    import flint                     # Sylvester: every leading principal minor > 0
    P, L, D, U = H.fflu()
    ident = flint.fmpz_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)])
    return P == ident and all(U[i, i] > 0 for i in range(n))


# ---------------------------------------------------------------- code rank

def _cube_index(bitrow: list[int]) -> int:
    return sum(b << k for k, b in enumerate(bitrow))


def check_code_rank(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    p = keys(claim["parameters"], "parameters", ("code", "num_words", "M", "token_set"), SOURCE_KEYS)
    lemma = ("words", "t", "kept", "frobenius_sq", "bound", "rank_lower", "min_lambda")
    if not isinstance(ev.get("words"), list) or not ev["words"]:
        raise Bad("words must be a non-empty list of bit strings")
    words = [bits(w, "code word") for w in ev["words"]]
    W, M = len(words), len(words[0])
    if any(len(w) != M for w in words) or len({sum(w) for w in words}) != 1:
        raise Bad("the words are not of one length and one weight")
    if (integer(p["num_words"], "num_words"), integer(p["M"], "M")) != (W, M):
        raise Bad(f"parameters num_words, M are not the code's {W}, {M}")
    if "B" in ev:
        keys(ev, "code_rank evidence", lemma + ("B", "trusted"), ("trusted_entries",))
        if ev["trusted"] != _TRUSTED["code_rank", "matrix"]:
            raise Bad(f"trusted must be exactly {_TRUSTED['code_rank', 'matrix']}")
        B = rational_matrix(ev["B"], "B", (W, W))
    else:
        rows = ("query_features", "query_exponent", "key_features", "key_exponent")
        if "trusted" in ev:     # features not at hand: their hash is optional
            keys(ev, "code_rank evidence", lemma + rows + ("trusted",),
                 ("features_sha256", "trusted_entries"))
            if ev["trusted"] != _TRUSTED["code_rank", "factor"]:
                raise Bad(f"trusted must be exactly {_TRUSTED['code_rank', 'factor']}")
        else:
            keys(ev, "code_rank evidence", lemma + rows + ("features_sha256",),
                 _FEATURE_SOURCES + ("tokens", "word_rows"))
        qf = int_matrix(ev["query_features"], "query_features", (W, None))
        kf = int_matrix(ev["key_features"], "key_features", (W, len(qf[0])))
        qe, ke = integer(ev["query_exponent"], "query_exponent"), integer(ev["key_exponent"], "key_exponent")
        F = _Features(ev, cert, "code_rank", "factor") if "trusted" not in ev else None
        if F is not None and F.have:
            ts = p["token_set"]
            if ("tokens" in ev) != ("word_rows" in ev):
                raise Bad("tokens and word_rows go together")
            if "tokens" in ev:          # the rows of x_S and x_(U^c) among the listed tokens
                toks = [bits(t, "token", M) for t in ev["tokens"]]
                if len(toks) != len(F.phi_q):
                    raise Bad(f"{len(toks)} tokens listed for {len(F.phi_q)} feature rows")
                located = int_matrix(ev["word_rows"], "word_rows", (W, 2))
                for i, (a, b) in enumerate(located):
                    if not (0 <= a < len(toks) and 0 <= b < len(toks)) or toks[a] != words[i] \
                            or toks[b] != [1 - v for v in words[i]]:
                        raise Bad(f"word_rows[{i}] are not the rows of x_S and x_(S^c)")
            elif ts != f"cube:{M}":
                raise Bad(f"feature rows are located on the token set cube:{M}, or by tokens and "
                          f"word_rows, not on {ts!r}")
            else:
                located = [[_cube_index(w), _cube_index([1 - b for b in w])] for w in words]
            for i, w in enumerate(words):
                xs, xc = located[i]
                for c in range(len(qf[0])):
                    if Fraction(qf[i][c]) * Fraction(2) ** qe != F.value("q", xs, c) or \
                            Fraction(kf[i][c]) * Fraction(2) ** ke != F.value("k", xc, c):
                        raise Bad(f"word {i}: query/key features are not the kernel's features "
                                  f"at x_S = {xs}, x_(U^c) = {xc}")
        P = fmpz_mat(qf) * fmpz_mat(kf).transpose()
        sc = Fraction(2) ** (qe + ke)
        B = [[Fraction(int(P[i, j])) * sc for j in range(W)] for i in range(W)]
    kept = [i for i in range(W) if B[i][i] != 0]
    t = len(kept)
    frob, lam = Fraction(t), None
    for i in kept:
        for j in kept:
            if i != j and B[i][j] != 0:
                c = B[i][j] / B[i][i]
                frob += c * c
                lam = 1 / abs(c) if lam is None or 1 / abs(c) < lam else lam
    problems = []
    if _indices(ev["kept"], "kept") != kept or integer(ev["t"], "t") != t:
        problems.append(f"kept / t differ from the nonzero diagonal {kept}")
    if (ev["min_lambda"] is None) != (lam is None) or (lam is not None and rational(ev["min_lambda"], "min_lambda") != lam):
        problems.append(f"min_lambda is {ev['min_lambda']!r:.40}, re-derived {lam}")
    if claim["verdict"] == "refuted":
        return problems + ["a Lemma 4 lower bound is never refuted"]
    if t == 0:
        if claim["verdict"] != "unknown":
            problems.append("no nonzero diagonal: the verdict must be unknown")
        if (ev["frobenius_sq"], ev["bound"], ev["rank_lower"]) != ("0", "0", 0):
            problems.append("with t = 0 the frobenius_sq, bound and rank_lower are 0")
        return problems
    bound = Fraction(t * t) / frob
    same_rational(ev["frobenius_sq"], frob, "frobenius_sq")
    same_rational(ev["bound"], bound, "bound")
    if integer(ev["rank_lower"], "rank_lower") != math.ceil(bound):
        problems.append(f"rank_lower is {ev['rank_lower']}, Lemma 4 gives ceil({bound}) = {math.ceil(bound)}")
    if claim["verdict"] != "proved":
        problems.append(f"the bound is proved but the verdict is {claim['verdict']}")
    return problems


# ---------------------------------------------------------------- nonnegativity

def check_nonnegative(claim, cert, matrix=None) -> list[str]:
    ev = claim["evidence"]
    keys(claim["parameters"], "parameters", (), SOURCE_KEYS)
    verdict, method = claim["verdict"], ev.get("method")
    if ev.get("form") == "matrix":
        if method != "entries":
            raise Bad(f"matrix form needs method 'entries', got {method!r}")
        _matrix_keys(ev, ("form", "method", "shape", "scale", "matrix_sha256", "argmin", "min_sign"), matrix)
        rows = _get_matrix(ev, matrix)
        flat = [v for r in rows for v in r]
        idx = flat.index(min(flat))
        sign = (flat[idx] > 0) - (flat[idx] < 0)
        problems = []
        if _indices(ev["argmin"], "argmin") != list(divmod(idx, len(rows[0]))):
            problems.append(f"argmin is not the first minimum entry {list(divmod(idx, len(rows[0])))}")
        if integer(ev["min_sign"], "min_sign") != sign:
            problems.append(f"min_sign is {ev['min_sign']}, the minimum entry's sign is {sign}")
        expect = "proved" if sign >= 0 else "refuted"
        if verdict != expect:
            problems.append(f"minimum entry sign gives {expect}, verdict is {verdict}")
        return problems
    if ev.get("form") != "factor":
        raise Bad(f"unknown form {ev.get('form')!r}")
    base = ("form", "features_sha256", "method")
    if method == "none":
        keys(ev, "nonnegative evidence", base)
        return [] if verdict == "unknown" else ["without evidence the verdict must be unknown"]
    fields = {"features_nonnegative": ("min_phi_q", "min_phi_k"), "all_products": ("num_checked",),
              "counterexample": ("pair", "value", "phi_q_row", "phi_q_exponent", "phi_k_row",
                                 "phi_k_exponent")}.get(method)
    if fields is None:
        raise Bad(f"unknown nonnegative method {method!r}")
    keys(ev, "nonnegative evidence", base + fields, _FEATURE_OPTIONAL)
    F = _Features(ev, cert, "nonnegative", method)
    problems = []
    if method == "features_nonnegative":
        mq, mk = rational(ev["min_phi_q"], "min_phi_q"), rational(ev["min_phi_k"], "min_phi_k")
        if F.have:
            rq = min(min(r) for r in F.phi_q) * Fraction(2) ** F.eq
            rk = min(min(r) for r in F.phi_k) * Fraction(2) ** F.ek
            if (mq, mk) != (rq, rk):
                problems.append(f"min_phi_q, min_phi_k are {q_str(mq)}, {q_str(mk)}; re-derived "
                                f"{q_str(rq)}, {q_str(rk)}")
        if mq < 0 or mk < 0:
            problems.append("a feature minimum is negative: the method does not apply")
        elif verdict != "proved":
            problems.append("nonnegative features prove the claim but the verdict is not proved")
        return problems
    if method == "all_products":
        n = integer(ev["num_checked"], "num_checked")
        if F.have:
            K = len(F.phi_q)
            if n != K * K:
                problems.append(f"num_checked is {n}, not K^2 = {K * K}")
            P = fmpz_mat(F.phi_q) * fmpz_mat(F.phi_k).transpose()
            if min(int(v) for v in P.entries()) < 0:
                problems.append("a product <phi_q(x), phi_k(z)> is negative")
        if verdict != "proved":
            problems.append("all products checked but the verdict is not proved")
        return problems
    i, j = _indices(ev["pair"], "pair")
    qr, kr = ev["phi_q_row"], ev["phi_k_row"]
    qrow = int_matrix([qr], "phi_q_row")[0]
    krow = int_matrix([kr], "phi_k_row", (1, len(qrow)))[0]
    qe, ke = integer(ev["phi_q_exponent"], "phi_q_exponent"), integer(ev["phi_k_exponent"], "phi_k_exponent")
    if F.have:
        if not (0 <= i < len(F.phi_q) and 0 <= j < len(F.phi_k)) or len(qrow) != len(F.phi_q[0]):
            raise Bad(f"pair {[i, j]} is not a pair of tokens of the kernel")
        if any(Fraction(v) * Fraction(2) ** qe != F.value("q", i, c) for c, v in enumerate(qrow)) or \
                any(Fraction(v) * Fraction(2) ** ke != F.value("k", j, c) for c, v in enumerate(krow)):
            problems.append(f"phi_q_row / phi_k_row are not the kernel's features of the pair {[i, j]}")
    val = sum((Fraction(a * b) for a, b in zip(qrow, krow)), Fraction(0)) * Fraction(2) ** (qe + ke)
    if val != rational(ev["value"], "value") or val >= 0:
        problems.append("the counterexample does not recompute to a negative value")
    if verdict != "refuted":
        problems.append("a counterexample refutes the claim but the verdict is not refuted")
    return problems


_CHECKS = {"exact_rank": check_exact_rank, "eps_rank": check_eps_rank,
           "code_rank": check_code_rank, "nonnegative": check_nonnegative}


def trusted(claim: Mapping[str, Any], cert: Mapping[str, Any] | None = None) -> list[str]:
    """The evidence fields this claim declares trusted (taken as stated, not re-derived)."""
    ev = claim.get("evidence")
    t = ev.get("trusted") if isinstance(ev, dict) else None
    if not isinstance(t, list):
        return []
    fs = ev.get("features_sha256")
    ident = f" (summaries of the features with sha256 {fs.get('phi_q', '?')[:16]}..., " \
            f"{fs.get('phi_k', '?')[:16]}..., not embedded)" if isinstance(fs, dict) else ""
    return [f"{name}{ident}" for name in t if isinstance(name, str)]


def check(claim: Mapping[str, Any], cert: Mapping[str, Any] | None = None, *, matrix=None) -> list[str]:
    """Re-derive one claim's verdict from its evidence; ``matrix`` supplies the
    integer matrix of a matrix-form claim whose evidence does not embed it."""
    fn = _CHECKS.get(claim.get("kind"))
    if fn is None:
        return [f"certify.checkers.rank does not check kind {claim.get('kind')!r}"]
    if not isinstance(claim.get("evidence"), dict) or not isinstance(claim.get("parameters"), dict):
        return ["parameters and evidence must be objects"]
    return guarded(fn)(claim, cert or {}, matrix)
