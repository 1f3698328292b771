"""Checker of the matrix-form ``exact_rank`` claim on a large integer matrix held
as an int64 numpy array (a source file re-read with numpy): it reads the
evidence and routes it to the column-span check below, the kernel's Freivalds
test and canonical minor (:mod:`certify.checkers.kernel.span`,
:mod:`certify.checkers.kernel.freivalds`).

Column span (:func:`column_span`): the kernel's check modulo word-size primes
(:func:`certify.checkers.kernel.span.span_mod_primes`, its proof there), with the
primes counted from the witness's actual sizes: ``d`` the least common denominator
of ``M^-1 N[R, :] G`` for a few random columns ``G`` (exact; it makes ``d M^-1 N[R, :]``
integral with high probability, and has about half the bits of ``det M`` for a
product of two random factors), ``log2 max|X|`` estimated as ``log2 |d|`` plus the
float solution's size plus 16 bits of margin. Nothing here is trusted: a poor guess
fails the kernel's step 4, and then the primes are counted from Hadamard's bound
on the bordered minors (the proof without step 4).

The minor (:func:`pivot_rows_shared`): the kernel's elimination of the rows in order
(:func:`certify.checkers.kernel.span.pivot_rows`) must find exactly the recorded rows
and columns; that proves ``A[R, C]`` nonsingular mod p (the lower bound), and once the
upper bound holds (``rank_p A <= rank_Q A <= r``) that the minor is the canonical one.
Without the compiled steps, or for a prime too large for exact float products,
python-flint decides both (:func:`certify.checkers.kernel.minor_nonzero_mod_p`,
:func:`certify.checkers.kernel.pivot_minor_mod_p`).

Shared with the producer. The span check, the elimination and the bordered-minor
bound are kept within one certificate's check (:mod:`certify.checkers.scratch`, keyed
by the matrix's complete content), so ``certify rank``, which takes them as its upper
bound, its minor and its Freivalds plan, and its own check before writing compute each
once in one scratch; ``certify verify`` starts a new scratch for every certificate.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from certify.checkers import scratch
from certify.checkers.common import int_max_abs
from certify.checkers.kernel.hashing import array_sha256
from certify.checkers.kernel.matrices import fmpz_matrix, is_prime
from certify.checkers.kernel.modular import minor_nonzero_mod_p, pivot_minor_mod_p
from certify.checkers.kernel.span import (
    bound_sq,
    minor_denominators,
    pivot_rows,
    span_limits,
    span_mod_primes,
)

__all__ = ["array_sha256", "bound_sq_shared", "check_matrix_rank_array", "column_span", "column_span_shared",
           "pivot_rows_shared"]


def column_span(A: np.ndarray, R: list[int], C: list[int], *, stats: dict | None = None) -> bool | None:
    """True iff every column of the int64 matrix ``A`` lies in the span of ``A[:, C]``
    (``A[R, C]`` nonsingular; module docstring); False proves a column outside it.
    None when this method does not decide (entries beyond 2^51, ``A[R, C]`` singular,
    or the kernel's steps not built)."""
    r = len(C)
    if r == 0:
        return not A.any()
    max_abs = int_max_abs(A)
    if max_abs > 1 << 51 or len(R) != r:
        return None
    if r == A.shape[1]:
        return True
    top, raw, s = span_limits(r, max_abs)
    guess = s <= 44                       # 2^-s well above the float sum's error (step 4)
    D, d, y = minor_denominators(A, R, C, 8 if guess else 0)
    if D == 0 or top < 1 << 12:
        return None
    attempts: list[tuple[int | None, int]] = []
    if guess and math.isfinite(y) and y > 0:
        attempts.append((d, max(d.bit_length() + max(0, math.ceil(math.log2(y))) + 16, d.bit_length()) + s + 1))
    attempts.append((None, 0))                                            # Hadamard's count, below
    for dd, bits in attempts:
        bits = bits or (math.isqrt(bound_sq(A, R, C)) + 1).bit_length()
        primes, P, p = [], 1, top
        while P.bit_length() <= bits:
            if p < 1 << 12:
                return None
            if D % p and is_prime(p):
                primes.append(p)
                P *= p
            p -= 2 if p % 2 else 1
        if stats is not None:
            stats.update({"primes": len(primes), "prime_bits": primes[0].bit_length(), "bits": bits,
                          "bound": "denominator" if dd else "hadamard", "operands": "raw" if raw else "balanced"})
        ok = span_mod_primes(A, R, C, primes, dd)
        if ok is not None:
            return ok
    return None


def _content(A: np.ndarray, digest: str | None) -> tuple:
    """The complete content of ``A`` as a scratch key: its dtype and shape, and ``digest``
    (the caller's ``matrix_sha256`` of this very array, :func:`array_sha256`, which binds
    dtype, shape, scale and bytes) or else the sha256 of its bytes
    (:func:`certify.checkers.scratch.array_key`)."""
    return (A.dtype.str, tuple(int(n) for n in A.shape), digest) if digest is not None else scratch.array_key(A)


def column_span_shared(A: np.ndarray, R: list[int], C: list[int], *, digest: str | None = None) -> bool | None:
    """:func:`column_span`, computed once within one certificate's check
    (:mod:`certify.checkers.scratch`) for the same complete content, ``R`` and ``C``: a
    producer that takes this exact check as its upper bound (``certify.rank.exact``) and its
    own check before writing (``Certificate.self_check``) share one scratch and one
    computation; ``certify verify`` starts a new scratch for every certificate."""
    A = np.ascontiguousarray(A, dtype="<i8")
    key = ("column_span", _content(A, digest), tuple(int(i) for i in R), tuple(int(j) for j in C))
    return scratch.remember(key, lambda: column_span(A, R, C))


def bound_sq_shared(A: np.ndarray, R: list[int], C: list[int], *, digest: str) -> int:
    """The kernel's :func:`certify.checkers.kernel.span.bound_sq`, kept within one check by
    complete content (as in :func:`column_span_shared`), ``R`` and ``C``: ``certify rank``'s
    Freivalds plan and its own check before writing use one."""
    key = ("bound_sq", _content(A, digest), tuple(int(i) for i in R), tuple(int(j) for j in C))
    return scratch.remember(key, lambda: bound_sq(A, R, C))


def pivot_rows_shared(A: np.ndarray, p: int, r: int, *, digest: str | None = None,
                      more: Callable[[int, Callable], bool] | None = None) -> tuple[list[int], list[int]] | None:
    """The kernel's :func:`certify.checkers.kernel.span.pivot_rows`, kept within one check by
    the complete content of ``A`` (as in :func:`column_span_shared`), ``p`` and the number of
    rows found. The first ``k`` rows outside the span of those before them and their pivot
    columns do not depend on where the elimination stopped after them, so a result with
    ``k`` rows is the answer for ``r = k`` whatever ``r`` and ``more`` produced it:
    ``certify rank`` finds its minor by this elimination (``r`` the smaller dimension,
    ``more`` its test of the rows left), and its own check before writing asks for the
    recorded rank and finds it."""
    content = _content(A, digest)
    s = scratch.current()
    if s is not None and (hit := s.lookup(("pivot_rows", content, int(p), int(r)))) is not None:
        return hit
    found = pivot_rows(A, p, r, more)
    if found is not None and s is not None:
        s.put(("pivot_rows", content, int(p), len(found[0])), found)
    return found


def check_matrix_rank_array(claim: Mapping[str, Any], cert: Mapping[str, Any],
                            A: np.ndarray) -> list[str] | None:
    """The matrix-form ``exact_rank`` check on an int64 array (keys already
    checked by the caller). None when this path does not decide (the witness is
    not a column span of full use here): the caller runs the general check."""
    from certify.checkers.common import Bad, integer
    from certify.checkers.rank.evidence import (
        _check_params,
        _indices,
        _scale,
        _verdict_from_bounds,
    )

    ev = claim["evidence"]
    if A.dtype != np.int64 or int_max_abs(A) >= 1 << 62:     # exact bounds: the kernel's steps never see -2^63
        return None
    A = np.ascontiguousarray(A)              # a Fortran-order file holds the same matrix: rows in place
    shape = _indices(ev["shape"], "shape")
    if len(shape) != 2 or list(A.shape) != shape:
        raise Bad("matrix shape does not match")
    _scale(ev["scale"], shape[0])
    if (digest := array_sha256(A, ev["scale"])) != ev["matrix_sha256"]:
        raise Bad("matrix_sha256 is not the hash of the scale and the matrix")
    _check_params(claim, cert, "matrix", None, None)
    R, C = _indices(ev["minor_rows"], "minor_rows"), _indices(ev["minor_cols"], "minor_cols")
    n1, n2 = A.shape
    witness = ev["upper_witness"]
    if not R or len(R) != len(C) or witness not in ("column_span", "trivial", "freivalds") \
            or (witness == "trivial" and len(R) != min(n1, n2)):
        return None
    p = integer(ev["prime"], "prime", 2)
    if any(not 0 <= i < n1 for i in R) or any(not 0 <= j < n2 for j in C) or len(set(R)) < len(R) \
            or len(set(C)) < len(C) or not is_prime(p):
        raise Bad("the recorded minor is singular mod p (or p is not prime)")
    # the first |R| rows outside the span of those before them, and their pivot columns: the lower
    # bound when they are (R, C) (A[R, C] nonsingular mod p); without the compiled steps or for a
    # large p, python-flint's elimination decides both below
    pivots = pivot_rows_shared(A, p, len(R), digest=digest)
    F = None if pivots is not None else fmpz_matrix(A.tolist())
    if pivots is not None and pivots != (R, C) or F is not None and not minor_nonzero_mod_p(F, p, R, C):
        M = fmpz_matrix(A[np.ix_(R, C)].tolist())                  # which of the two: the reason given
        raise Bad("the recorded minor is not the pivot minor mod p"
                  if minor_nonzero_mod_p(M, p, range(len(R)), range(len(C))) else "the recorded minor is singular mod p")
    if witness == "freivalds":                   # the upper bound with error <= 2^-error_log2
        from certify.checkers.rank.freivalds import check as check_freivalds
        found = check_freivalds(claim, A, R, C, lambda *a: bound_sq_shared(*a, digest=digest), digest)
        if found:
            return found
    if witness == "column_span":
        ok = column_span_shared(A, R, C, digest=digest)
        if ok is None:
            return None
        if not ok:
            return ["column-span witness fails: a column lies outside the span"]
    # rank_Q A = |R| is now proved (span, or |R| = min(shape); Freivalds: up to its error), so
    # rank_p A = |R|: the rows found are a basis of the row space mod p, (R, C) its canonical minor
    if F is not None and pivot_minor_mod_p(F, p) != (R, C):
        raise Bad("the recorded minor is not the pivot minor mod p")
    return _verdict_from_bounds(claim, len(R), len(R))
