"""What every rank claim's evidence shares, checked: minors modulo a prime,
the embedded or referenced features and their hashes, the parameters that
bind a claim to its source, Gram matrices, integer matrices and their scale.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any, Iterable, Mapping

import numpy as np

from certify.checkers import scratch
from certify.checkers.common import Bad, int_matrix, integer
from certify.checkers.fields import (
    EMBEDDED_FEATURES,
    FEATURE_HASHES,
    FEATURE_SOURCES,
    KERNEL_PARAMS_OPTIONAL,
    SCALES,
    Shape,
)
from certify.checkers.kernel import (
    fmpz_matrix,
    minor_nonzero_mod_p,
    pivot_minor_mod_p,
    product_identity,
    rows_sha256,
)
from certify.checkers.kinds import BY_NAME, trusted_table

KINDS = ("exact_rank", "eps_rank", "numerical_rank", "code_rank", "nonnegative")


#: the layout the features' hashes are taken over (declared: certify.checkers.fields)
LAYOUT = FEATURE_HASHES.fields["layout"].schema["const"]


ENCLOSURE_WIDTH_LOG2 = 20


#: where a factor-form claim's features come from: exactly one of these (declared)
_FEATURE_SOURCES = tuple(FEATURE_SOURCES)


#: (kind, form or method) -> the fields that may be trusted, from the kinds' declarations
_TRUSTED = trusted_table()


def _check_minor(F: Any, prime: Any, R: list[int], C: list[int], what: str) -> int:
    """The rank F is proved to have at least: ``len(R)`` when ``(R, C)`` is the
    canonical minor of F mod ``prime`` and nonsingular there (else a problem)."""
    if not R and not C:
        return 0
    if prime is None or not minor_nonzero_mod_p(F, prime, R, C):
        raise Bad(f"the recorded {what} is singular mod p (or p is not prime)")
    if pivot_minor_mod_p(F, prime) != (R, C):
        raise Bad(f"the recorded {what} is not the pivot minor mod p")
    return len(R)


def _indices(v: Any, what: str) -> list[int]:
    if not isinstance(v, list):
        raise Bad(f"{what} must be a list of indices")
    return [integer(i, what, 0) for i in v]


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
        v64 = np.array(flat, dtype=np.float64)                 # exact: |v| < 2^53
        a = np.ldexp(v64, exponent)
        # scaling back gives v exactly iff a = v 2^exponent exactly (no overflow, no
        # rounding below the normal range); then out is exact iff it converts back to a
        with np.errstate(over="ignore"):
            out = a.astype(dt)
        exact = np.array_equal(np.ldexp(a, -exponent), v64) and np.array_equal(out.astype(np.float64), a)
    else:
        # v = m 2^t with m odd (t trailing zeros): v 2^exponent is a float64 only if |m| < 2^53, and
        # then it is the exact ldexp(m, t + exponent) unless that over- or underflows (checked back)
        obj = np.array(flat, dtype=object)
        t = np.frompyfunc(lambda v: (v & -v).bit_length() - 1 if v else 0, 1, 1)(obj)
        m = obj >> t
        if all(abs(v) < (1 << 53) for v in m.tolist()):
            try:
                m64, shift = m.astype(np.float64), t.astype(np.int64) + exponent
                with np.errstate(over="ignore"):
                    a = np.ldexp(m64, shift)
                    out = a.astype(dt)
                exact = np.array_equal(np.ldexp(a, -shift), m64) and np.array_equal(out.astype(np.float64), a)
            except (OverflowError, ValueError, TypeError):
                exact = False
        else:
            exact = False
    if not exact:
        raise Bad(f"embedded features are not representable in {dtype}")
    return out.reshape(len(rows), -1)


def _sha(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()).hexdigest()


class _Features:
    """The kernel's features, or None when the claim declares them trusted."""

    def __init__(self, ev: Mapping[str, Any], cert: Mapping[str, Any], kind: str, key: str) -> None:
        fs = FEATURE_HASHES.check_keys(ev["features_sha256"], "features_sha256")
        if fs["layout"] != LAYOUT:
            raise Bad(f"features_sha256.layout must be {LAYOUT!r}")
        present = [k for k in _FEATURE_SOURCES if k in ev]
        if len(present) != 1:
            raise Bad(f"evidence needs exactly one of {list(_FEATURE_SOURCES)}, has {present}")
        self.dtype = fs["dtype"]
        self.trusted: list[str] = []
        self._q: list[list[int]] | None = None
        self._k: list[list[int]] | None = None
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
        EMBEDDED_FEATURES.check_keys(feats, "features")
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
        self._q, self.eq, self._k, self.ek = q, eq, k, ek

    @property
    def have(self) -> bool:
        return self._q is not None and self._k is not None

    @property
    def phi_q(self) -> list[list[int]]:
        """The embedded PhiQ rows (only when :attr:`have`; trusted features have none)."""
        if self._q is None:
            raise Bad("the features are trusted, not embedded")
        return self._q

    @property
    def phi_k(self) -> list[list[int]]:
        """The embedded PhiK rows (only when :attr:`have`)."""
        if self._k is None:
            raise Bad("the features are trusted, not embedded")
        return self._k

    def value(self, which: str, i: int, j: int) -> Fraction:
        rows, e = (self.phi_q, self.eq) if which == "q" else (self.phi_k, self.ek)
        return Fraction(rows[i][j]) * Fraction(2) ** e


#: an exact_rank claim's parameters (declared in certify.checkers.kinds)
_EXACT_PARAMS = BY_NAME["exact_rank"].params()
#: the parameters exact_rank adds as optional to a kernel's: those of a matrix-form claim
#: whose upper bound is the Freivalds test (present exactly then)
FREIVALDS_PARAMS = tuple(k for k in _EXACT_PARAMS.optional if k not in KERNEL_PARAMS_OPTIONAL)


def _check_params(claim: Mapping[str, Any], cert: Mapping[str, Any], form: str,
                 num_tokens: int | None, dtype: str | None) -> None:
    fast = claim.get("kind") == "exact_rank" and form == "matrix" \
        and claim["evidence"].get("upper_witness") == "freivalds"
    p = _EXACT_PARAMS.check_keys(claim["parameters"], "parameters", require=FREIVALDS_PARAMS if fast else (),
                                 forbid=() if fast else FREIVALDS_PARAMS)
    if "normalized" in p and p["normalized"] is not False:
        raise Bad("parameters.normalized is present only as false (a head without a denominator)")
    if fast and p["upper_bound"] != "freivalds":
        raise Bad("parameters.upper_bound must be 'freivalds'")
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


def _gram_matrix(rows: list[list[int]]) -> Any:
    """``fmpz_matrix(rows)`` (integer rows already parsed), converted once while neighbouring
    claims of one certificate's check use it (:func:`certify.checkers.scratch.recent`, keyed
    by the rows' content hash): the claims of one head (exact and eps rank) state the same
    Grams. A copy is returned."""
    F = scratch.recent(("gram_rows", scratch.content_key(rows)), lambda: fmpz_matrix(rows))
    return type(F)(F)


def _check_grams(ev: Mapping[str, Any], cert: Mapping[str, Any],
                 kind: str) -> tuple[Any, Any, int, int, _Features]:
    """Parsed Grams (GQ, GK, eq, ek, features)."""
    r = integer(ev["r"], "r", 1)
    K = integer(ev["num_tokens"], "num_tokens", 1)
    GQ = _gram_matrix(int_matrix(ev["gram_q"], "gram_q", (r, r)))
    GK = _gram_matrix(int_matrix(ev["gram_k"], "gram_k", (r, r)))
    eq, ek = integer(ev["gram_q_exponent"], "gram_q_exponent"), integer(ev["gram_k_exponent"], "gram_k_exponent")
    F = _Features(ev, cert, kind, "factor")
    if F.have:
        if len(F.phi_q) != K or len(F.phi_q[0]) != r:
            raise Bad(f"the embedded features are {len(F.phi_q)} x {len(F.phi_q[0])}, "
                      f"not num_tokens x r = {K} x {r}")
        for rows, e, G, eg, nm in ((F.phi_q, F.eq, GQ, eq, "gram_q"), (F.phi_k, F.ek, GK, ek, "gram_k")):
            A = fmpz_matrix(rows)                       # A^T A 2^(2e) == G 2^eg, over Z
            c, d = (1 << (2 * e - eg), 1) if 2 * e >= eg else (1, 1 << (eg - 2 * e))
            if not product_identity(A.transpose(), A, G, d, c):
                raise Bad(f"{nm} 2^exponent is not the Gram matrix of the embedded features")
    if GQ != GQ.transpose() or GK != GK.transpose():
        raise Bad("Gram matrices are not symmetric")
    return GQ, GK, eq, ek, F


def matrix_sha256(rows: list[list[int]], scale: Any) -> str:
    """sha256 of the exact kernel matrix, binding its encoding, scale, shape and entries
    (:func:`certify.checkers.kernel.hashing.rows_sha256`)."""
    return rows_sha256(rows, scale)


def _scale(scale: Any, n1: int) -> Any:
    if not isinstance(scale, dict):
        raise Bad("scale must be an object")
    kind = scale.get("kind")
    declared = SCALES.get(kind) if isinstance(kind, str) else None
    if declared is None:
        raise Bad(f"unknown scale kind {scale.get('kind')!r}")
    declared.check_keys(scale, "scale")
    if kind == "dyadic":
        integer(scale["exponent"], "scale.exponent")
    elif not isinstance(scale["row_den"], list) or len(scale["row_den"]) != n1 or \
            any(integer(d, "row_den", 1) < 1 for d in scale["row_den"]):
        raise Bad("scale.row_den must list one positive integer per row")
    return scale


def _get_matrix(ev: Mapping[str, Any], matrix: Any) -> list[list[int]]:
    shape = _indices(ev["shape"], "shape")
    if len(shape) != 2:
        raise Bad("shape must be [rows, cols]")
    if matrix is not None:
        rows = [[int(v) for v in r] for r in np.asarray(matrix).tolist()]
    elif "matrix" in ev:
        rows = int_matrix(ev["matrix"], "matrix", (shape[0], shape[1]))
    else:
        raise Bad("matrix not embedded (pass matrix= to re-check)")
    if [len(rows), len(rows[0]) if rows else 0] != shape:
        raise Bad("matrix shape does not match")
    _scale(ev["scale"], shape[0])
    if matrix_sha256(rows, ev["scale"]) != ev["matrix_sha256"]:
        raise Bad("matrix_sha256 is not the hash of the scale and the matrix")
    return rows


def _matrix_keys(ev: Mapping[str, Any], declared: Shape, matrix: Any, require: Iterable[str] = (),
                 forbid: Iterable[str] = ()) -> None:
    """The keys of a matrix-form evidence are those of its declaration (``require`` and
    ``forbid``: optional fields the claim makes required or forbidden); the matrix is
    embedded exactly when it is not passed (re-read from its source)."""
    declared.check_keys(ev, f"{ev.get('form')} evidence", require=require,
                        forbid=tuple(forbid) + (() if matrix is None else ("matrix",)))
    if matrix is None and "matrix" not in ev:
        raise Bad("matrix not embedded (pass matrix= to re-check)")


def _verdict_from_bounds(claim: Mapping[str, Any], lower: int, upper: int) -> list[str]:
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
