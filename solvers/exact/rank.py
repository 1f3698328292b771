"""The two-sided exact rank over Q (:func:`exact_rank` of a matrix,
:func:`core_rank` of a factor form's Gram core) and its result
(:class:`ExactRank`): a modular lower bound with a nonsingular-minor witness
and an exact upper-bound witness (a column-span check or a null-space basis);
``proved`` only when the two meet.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from certify.core.verdict import Verdict
from solvers.exact.draws import Draws
from solvers.exact.elimination import canonical_minor, elimination_prime, rows_left_test
from solvers.exact.integers import IntMatrix, _obj, _zero, compact, int_max_abs
from solvers.exact.modular import minor_mod_p, random_prime, span_check
from solvers.exact.span import bordered_minor_bound_sq, prime_limit, span_check_multimodular

#: ``upper="auto"`` runs the exact span check when its work ``n1 n2 r k`` (``k``
#: primes, counted from the Hadamard bound the checker uses) is at most this many
#: multiply-adds, else the Freivalds test: about half a minute of one core for the
#: checker's span check that ``certify rank`` shares (n = 2048, rank 256, 12-bit
#: factors is 2^38.4)
EXACT_WORK_BUDGET = 1 << 38

UPPER_MODES = ("auto", "exact", "freivalds")

#: ``(V, rows, cols, challenge, vector_bits, vectors, num_primes) -> (passed, primes)``: a
#: Freivalds test used instead of :func:`freivalds_span_test` with this module's plan
FreivaldsTest = Callable[[np.ndarray, list, list, bytes, int, int, int], tuple[bool, list[int]]]

#: ``(V, p, r, more) -> (rows, cols) | None``: the first ``r`` rows of ``V`` outside the span mod
#: ``p`` of the rows before them and the pivot columns of those rows, the elimination asking
#: ``more`` (:func:`solvers.exact.elimination.rows_left_test`) whether to go on after a block
#: that adds no row; used instead of :func:`canonical_minor` (None: not applicable)
MinorSearch = Callable[[np.ndarray, int, int, Callable], "tuple[list[int], list[int]] | None"]


def span_work(V: np.ndarray, rows: Sequence[int], cols: Sequence[int]) -> int:
    """Multiply-adds of the exact span check: ``n1 n2 r`` per prime, primes of
    ``prime_limit`` bits until their product exceeds the bordered-minor bound."""
    r = len(cols)
    top = prime_limit(r, int_max_abs(V))
    if top < 1 << 12:
        return 1 << 62
    bound_bits = (math.isqrt(bordered_minor_bound_sq(V, rows, cols)) + 1).bit_length()
    return V.shape[0] * V.shape[1] * r * -(-bound_bits // (top.bit_length() - 1))


def exact_rank_fast(N: IntMatrix, *, seed: int = 0, bits: int = 60, upper: str = "exact",
                    challenge: Callable[[int, list, list], bytes] | None = None,
                    error_log2: int = 128,
                    exact_span: Callable[[np.ndarray, list, list], bool | None] | None = None,
                    freivalds_test: FreivaldsTest | None = None,
                    minor: MinorSearch | None = None,
                    bound_sq: Callable[[np.ndarray, list, list], int] | None = None) -> ExactRank | None:
    """Two-sided exact rank for int64 matrices: the canonical minor mod a small
    prime by eliminating the rows in order, block by block, the rows left tested
    at once by random combinations (:func:`solvers.exact.elimination.canonical_minor`,
    or ``minor``: a few matrix products at every rank, no float rank estimate),
    nonsingular mod p (lower bound), and the
    multimodular span check (upper bound, :mod:`solvers.exact.span`). None when
    a step does not verify (the caller falls back to the full modular
    elimination). ``timings`` holds each step's seconds; ``details`` the span
    check's bound bits and prime count.

    ``upper="freivalds"`` (or ``"auto"`` above :data:`EXACT_WORK_BUDGET`) tests the
    upper bound by :func:`solvers.exact.freivalds.freivalds_span_test` instead,
    its randomness read from ``challenge(p, rows, cols)``: error ``<= 2^-error_log2``
    (``upper_witness = "freivalds"``, ``freivalds`` holds its parameters).
    ``exact_span(V, rows, cols)``, when given, is the exact upper-bound check used
    instead of :func:`span_check_multimodular` (True / False / None: not applicable);
    ``freivalds_test``, when given, runs the Freivalds test with this module's plan
    (:data:`FreivaldsTest`); ``minor`` (:data:`MinorSearch`) finds the minor instead of
    :func:`canonical_minor`, and ``bound_sq(V, rows, cols)`` gives the plan's
    bordered-minor bound (``certify rank`` passes the checker's, kept per process)."""
    t0 = time.perf_counter()
    timings: dict = {}
    if N.values.dtype == object or N.max_bits() > 51 or min(N.shape) == 0:
        return None
    rng = Draws(seed)
    A = N.values.astype(np.float64)                      # exact: |N| < 2^51
    n1, n2 = A.shape
    p = elimination_prime(max(n1, n2), rng)
    found = None if minor is None else minor(N.values, p, min(n1, n2), rows_left_test(N.values, A, p, rng))
    rk, rows, cols = (len(found[1]), *found) if found is not None else canonical_minor(N.values, p, rng, Nf=A)
    timings["modular"] = time.perf_counter() - t0
    t = time.perf_counter()
    stats: dict = {}
    mode = upper
    if mode == "auto" and 0 < rk < min(n1, n2):
        mode = "exact" if span_work(N.values, rows, cols) <= EXACT_WORK_BUDGET else "freivalds"
    if mode == "freivalds" and 0 < rk < min(n1, n2) and challenge is not None:
        from solvers.exact.freivalds import FreivaldsResult, freivalds_span_test, plan
        if freivalds_test is None:
            fr = freivalds_span_test(N.values, rows, cols, challenge(p, rows, cols), k=error_log2, Vf=A)
        else:
            pl = plan(N.values, rows, cols, error_log2, bound_sq)
            got = freivalds_test(N.values, list(rows), list(cols), challenge(p, rows, cols), pl.vector_bits,
                                 pl.vectors, pl.num_primes)
            fr = FreivaldsResult(got[0], pl, tuple(got[1]))
        timings["upper_freivalds"] = time.perf_counter() - t
        if fr is not None:
            if not fr.passed:            # a nonzero residue: rank N > rk, exactly; the caller falls back
                return None
            res = _result((p, rk, rows, cols), rk, "freivalds", (PrimeAttempt(p, rk),), timings, t0)
            return replace(res, freivalds={"vector_bits": fr.plan.vector_bits, "vectors": fr.plan.vectors,
                                           "primes": list(fr.primes)},
                           details={"freivalds_L": fr.plan.L, "freivalds_error_log2":
                                    round(-math.log2(fr.plan.error), 2)})
    ok: bool | None
    if rk == min(n1, n2):
        ok = True
    elif rk == 0:
        ok = not N.values.any()
    elif exact_span is not None:
        ok = exact_span(N.values, list(rows), list(cols))
        ok = span_check_multimodular(N, rows, cols, Nf=A, stats=stats) if ok is None else ok
    else:
        ok = span_check_multimodular(N, rows, cols, Nf=A, stats=stats)
    timings["span_check"] = time.perf_counter() - t
    if not ok:
        return None
    res = _result((p, rk, rows, cols), rk, "trivial" if rk == min(n1, n2) else "column_span",
                  (PrimeAttempt(p, rk),), timings, t0)
    return replace(res, details={f"span_{key}": v for key, v in stats.items()})


@dataclass(frozen=True)
class PrimeAttempt:
    prime: int
    rank_mod_p: int


@dataclass(frozen=True)
class ExactRank:
    """Two-sided exact rank. ``verdict`` is proved iff ``lower == upper``."""

    lower: int
    upper: int
    verdict: Verdict
    prime: int | None                  # prime of the recorded minor
    minor_rows: tuple[int, ...]
    minor_cols: tuple[int, ...]
    upper_witness: str                 # "trivial" | "column_span" | "null_space" | "none"
    attempts: tuple[PrimeAttempt, ...]
    reason: str | None = None
    null_basis: tuple[tuple[int, ...], ...] | None = None     # factor form: core null vectors (columns)
    null_minor_rows: tuple[int, ...] = ()
    null_minor_cols: tuple[int, ...] = ()
    null_prime: int | None = None
    timings: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)        # diagnostics (span check: bound bits, primes)
    freivalds: dict | None = None      # upper_witness "freivalds": vector_bits, vectors, primes


def exact_rank(N: IntMatrix, *, seed: int = 0, max_primes: int = 4, bits: int = 60,
               fast_path: bool = True, upper: str = "exact",
               challenge: Callable[[int, list, list], bytes] | None = None,
               error_log2: int = 128,
               exact_span: Callable[[np.ndarray, list, list], bool | None] | None = None,
               freivalds_test: FreivaldsTest | None = None, minor: MinorSearch | None = None,
               bound_sq: Callable[[np.ndarray, list, list], int] | None = None) -> ExactRank:
    """Rank over Q of an integer matrix, two-sided (see the module docstring).

    Fast path first (:func:`exact_rank_fast`): the canonical minor mod a small
    prime by blocked elimination of the rows in order, and the multimodular span
    check; it returns only exact results and falls back to the path below when a
    step does not verify (a test of the rows left or a prime that falls short).

    Primes are drawn from :class:`solvers.exact.draws.Draws` ``(seed)``. A modular rank that
    falls short of the true rank (a prime dividing every maximal minor) is caught
    by the exact span check failing; another prime is then tried.

    ``upper``, ``challenge``, ``error_log2``, ``exact_span``: the upper bound's
    method on the fast path (:func:`exact_rank_fast`); the fallback below is
    always exact.
    """
    if upper not in UPPER_MODES:
        raise ValueError(f"upper must be one of {UPPER_MODES}")
    fast = exact_rank_fast(N, seed=seed, bits=bits, upper=upper, challenge=challenge,
                           error_log2=error_log2, exact_span=exact_span,
                           freivalds_test=freivalds_test, minor=minor, bound_sq=bound_sq) if fast_path else None
    if fast is not None:
        return fast
    t0 = time.perf_counter()
    rng = Draws(seed)
    n1, n2 = N.shape
    trivial = min(n1, n2)
    attempts: list[PrimeAttempt] = []
    best: tuple[int, int, list[int], list[int]] | None = None
    timings = {"modular": 0.0, "span_check": 0.0}
    for _ in range(max_primes):
        p = random_prime(rng, bits)
        t = time.perf_counter()
        rk, rows, cols = minor_mod_p(N, p)
        timings["modular"] += time.perf_counter() - t
        attempts.append(PrimeAttempt(p, rk))
        if best is not None and rk <= best[1]:
            continue
        best = (p, rk, rows, cols)
        if rk == trivial:
            return _result(best, trivial, "trivial", attempts, timings, t0)
        t = time.perf_counter()
        ok = span_check(N, rows, cols)
        timings["span_check"] += time.perf_counter() - t
        if ok:
            return _result(best, rk, "column_span", attempts, timings, t0)
    assert best is not None
    p, rk, rows, cols = best
    timings["total"] = time.perf_counter() - t0
    return ExactRank(lower=rk, upper=trivial, verdict=Verdict.UNKNOWN, prime=p,
                     minor_rows=tuple(rows), minor_cols=tuple(cols), upper_witness="trivial",
                     attempts=tuple(attempts), timings=timings,
                     reason=f"modular rank {rk} not matched by an exact witness after "
                            f"{len(attempts)} primes; rank in [{rk}, {trivial}]")


def _result(best: tuple[int, int, Sequence[int], Sequence[int]], upper: int, witness: str,
            attempts: Sequence[PrimeAttempt], timings: dict[str, float], t0: float) -> ExactRank:
    p, rk, rows, cols = best
    timings["total"] = time.perf_counter() - t0
    return ExactRank(lower=rk, upper=upper, verdict=Verdict.PROVED if rk == upper else Verdict.UNKNOWN,
                     prime=p, minor_rows=tuple(rows), minor_cols=tuple(cols),
                     upper_witness=witness, attempts=tuple(attempts), timings=timings,
                     reason=None if rk == upper else f"rank in [{rk}, {upper}]")


def core_rank(GQ: IntMatrix, GK: IntMatrix, *, seed: int = 0, max_primes: int = 4,
              bits: int = 60) -> ExactRank:
    """Exact rank of ``PhiQ PhiK^T`` from its Gram matrices: the rank of the
    ``r x r`` integer core ``GQ GK`` (same rank, see the module docstring).

    Lower bound: a minor of the core nonsingular mod p. Upper bound: an exact
    null-space basis ``X`` of the core (``core X = 0``) whose columns are
    independent (a minor of ``X`` nonsingular mod a prime): ``rank <= r - k``.
    """
    t0 = time.perf_counter()
    core = GQ.fmpz() * GK.fmpz()
    C = IntMatrix(compact(_obj(core)))
    r = C.shape[0]
    rng = Draws(seed)
    X, nullity = core.nullspace()
    basis = [[int(X[i, j]) for j in range(nullity)] for i in range(r)]   # (r, k)
    if nullity:
        B = IntMatrix(compact(np.array(basis, dtype=object)))
        if core * B.fmpz() != _zero(r, nullity):
            raise RuntimeError("internal error: null-space basis fails core X = 0")
    attempts, best, null_minor = [], None, None
    for _ in range(max_primes):
        p = random_prime(rng, bits)
        rk, rows, cols = minor_mod_p(C, p)
        attempts.append(PrimeAttempt(p, rk))
        if best is None or rk > best[1]:
            best = (p, rk, rows, cols)
        if nullity and null_minor is None:
            nk, nrows, ncols = minor_mod_p(B, p)
            if nk == nullity:
                null_minor = (p, nrows, ncols)
        if best[1] == r - nullity and (null_minor is not None or not nullity):
            break
    if best is None:
        raise ValueError("max_primes must be at least 1")
    p, rk, rows, cols = best
    upper = r - nullity if (null_minor is not None or not nullity) else r
    timings = {"total": time.perf_counter() - t0}
    verdict = Verdict.PROVED if rk == upper else Verdict.UNKNOWN
    return ExactRank(lower=rk, upper=upper, verdict=verdict, prime=p, minor_rows=tuple(rows),
                     minor_cols=tuple(cols), upper_witness="null_space" if nullity else "trivial",
                     attempts=tuple(attempts), timings=timings,
                     reason=None if verdict is Verdict.PROVED else f"rank in [{rk}, {upper}]",
                     null_basis=tuple(tuple(row) for row in basis) if nullity else None,
                     null_minor_rows=tuple(null_minor[1]) if null_minor else (),
                     null_minor_cols=tuple(null_minor[2]) if null_minor else (),
                     null_prime=null_minor[0] if null_minor else None)
