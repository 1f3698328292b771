"""Checker of the Freivalds upper bound of a matrix-form ``exact_rank`` claim
(``parameters.upper_bound = "freivalds"``, ``evidence.upper_witness =
"freivalds"``), written apart from the producer's :mod:`solvers.exact.freivalds`;
every number is re-derived, by the kernel's test
(:mod:`certify.checkers.kernel.freivalds`, which states the randomness, the plan
and the error bound).

What is checked. ``M = A[R, C]`` (``r x r``, nonsingular: the lower bound's
minor), ``B_ij = det A[R + {i}, C + {j}]``, all zero iff ``rank A = r``;
``|B_ij| <= H`` (the bordered-minor Hadamard bound of
:func:`certify.checkers.kernel.span.bound_sq`).

1. The challenge: sha256 of the canonical JSON of ``{"domain":
   "certify-attention/freivalds-rank/2", "parameters": the claim's parameters,
   "evidence": its evidence without ``freivalds`` and ``matrix``}`` must be
   ``evidence.freivalds.challenge``: every field the producer chooses (the
   matrix through its hash, the minor, its prime, ``error_log2``, the source and
   token set) is hashed, so the randomness is drawn after all of them are fixed.
2. The randomness, from the challenge: ``X`` (``n2 x t``, entries
   ``< 2^s``) = SHAKE-256(challenge + "/vectors") as little-endian uint32, ``t``
   rows of ``n2`` entries each, masked to ``s`` bits, transposed; the primes:
   the candidates ``2^61 + (w mod 2^61)`` (``w`` = first 8 bytes, little-endian,
   of SHAKE-256(challenge + "/primes/" + i as 8 little-endian bytes), i = 0, 1,
   ...) that are prime and at which ``M`` is invertible; the first ``m`` must be
   ``evidence.freivalds.primes``.
3. The plan is the deterministic one: ``s = 52 - bits(max|A|) - bits(n2)``
   (at most 20; 16 when that is below 8), ``t = ceil((error_log2 + 1) / s)``,
   ``m`` the least with ``e^m <= 2^-(error_log2 + 1)``; and the error
   ``2^-(s t) + e^m <= 2^-error_log2`` exactly (Fractions), with
   ``e = floor(L / 61) / (P - floor(L_D / 61))``, ``2^L > n2 (2^s - 1) H``,
   ``2^L_D > |det M|`` (Hadamard), ``P`` the lower bound on the number of primes
   in ``[2^61, 2^62)`` from ``x / ln x < pi(x) < 1.25506 x / ln x``.
4. The test and its error bound: the kernel's
   (:mod:`certify.checkers.kernel.freivalds`, whose docstring proves the bound).

Against a producer who retries. Each change of a hashed field is a fresh draw,
so an author who makes ``2^g`` attempts on a false claim succeeds with
probability at most ``2^(g - error_log2)`` (a union bound). Hence the fixed
floor :data:`FLOOR` = 128: ``verify`` accepts a Freivalds bound at exit 0 only
with ``error_log2 >= 128``; below it the claim holds only under the named
assumption ``randomized:freivalds-error-2^-k`` (exit 4), whatever the producer
asked for (:func:`assumptions`).

Shared with the producer. :func:`shared_test` (the primes and the kernel's test
for given inputs) is computed once within one certificate's check
(:mod:`certify.checkers.scratch`): ``certify rank`` takes it as its own Freivalds test
and its check before writing (``Certificate.self_check``), run in the same scratch,
finds it; ``certify verify`` starts a new scratch for every certificate.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from fractions import Fraction
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from certify.checkers import scratch
from certify.checkers.common import Bad, int_max_abs, integer
from certify.checkers.kernel import canonical_sha256, det_nonzero_mod_p, freivalds, is_prime
from certify.checkers.kernel.span import sq_norms
from certify.checkers.kinds import BY_NAME

DOMAIN = "certify-attention/freivalds-rank/2"
#: the least error_log2 that verifies without an assumption (module docstring)
FLOOR = 128
#: evidence not hashed into the challenge: the test's own output, and the matrix,
#: which enters through its hash (checked against the embedded or re-read matrix)
_UNHASHED = ("freivalds", "matrix")
_QB = 62
_MAX_TRIES = 1 << 16


def challenge(claim: Any) -> str:
    """The Fiat-Shamir challenge of a claim (module docstring, step 1)."""
    ev = {k: v for k, v in claim["evidence"].items() if k not in _UNHASHED}
    return canonical_sha256({"domain": DOMAIN, "parameters": claim["parameters"], "evidence": ev})


def assumptions(claim: Any) -> list[str]:
    """The assumption a Freivalds bound below the floor holds under (none at or above)."""
    k = (claim.get("parameters") or {}).get("error_log2")
    if isinstance(k, int) and not isinstance(k, bool) and k < FLOOR:
        return [f"randomized:freivalds-error-2^-{k}"]
    return []


def vectors(ch: bytes, n2: int, t: int, s: int) -> np.ndarray:
    """The ``n2 x t`` vectors ``X`` the challenge draws (the kernel's docstring)."""
    raw = hashlib.shake_256(ch + b"/vectors").digest(4 * n2 * t)
    words = np.frombuffer(raw, dtype="<u4").astype(np.int64).reshape(t, n2)
    return (words % (1 << s)).T.copy()                                   # (n2, t)


def candidates(ch: bytes) -> Iterator[int]:
    """The primes the challenge draws, in order (module docstring, step 2)."""
    for i in range(_MAX_TRIES):
        d = hashlib.shake_256(ch + b"/primes/" + i.to_bytes(8, "little")).digest(8)
        q = (1 << (_QB - 1)) + int.from_bytes(d, "little") % (1 << (_QB - 1))
        if is_prime(q):
            yield q


def primes(ch: bytes, MZ: Any, m: int) -> list[int]:
    """The first ``m`` primes the challenge draws at which ``MZ`` is invertible."""
    out = list(itertools.islice((q for q in candidates(ch) if det_nonzero_mod_p(MZ, q)), m))
    if len(out) < m:
        raise Bad("no prime found for the Freivalds check")
    return out


def plan(A: np.ndarray, R: list[int], C: list[int], s: int, t: int, k: int,
         bound_sq: Callable[[np.ndarray, list[int], list[int]], int]) -> tuple[tuple[int, int, int], bool]:
    """``((s, t, m), holds)``: the deterministic plan for error ``2^-k`` on ``A`` with the
    minor ``(R, C)`` at vector bits ``s`` and ``t`` vectors as given, and whether
    ``error(s, t, m, L, L_D) <= 2^-k`` holds for those ``s``, ``t`` (the kernel's docstring).
    ``bound_sq(A, R, C)`` is the square of the bordered-minor bound."""
    n2 = A.shape[1]
    want_s = 52 - max(int_max_abs(A), 1).bit_length() - n2.bit_length()
    want_s = min(want_s, 20) if want_s >= 8 else 16
    H = math.isqrt(bound_sq(A, R, C)) + 1
    L = (n2 * ((1 << s) - 1) * H).bit_length()
    LD = (math.isqrt(math.prod(sq_norms(A[np.ix_(R, C)]))) + 1).bit_length()     # Hadamard: |det M| < 2^LD
    m = 1
    while freivalds.error(s, t, m, L, LD) - Fraction(1, 1 << (s * t)) > Fraction(1, 1 << (k + 1)):
        m += 1
    return (want_s, -(-(k + 1) // want_s), m), freivalds.error(s, t, m, L, LD) <= Fraction(1, 1 << k)


def check(claim: Mapping[str, Any], A: np.ndarray, R: list[int], C: list[int],
          bound_sq: Callable[[np.ndarray, list[int], list[int]], int], digest: str | None = None) -> list[str]:
    """Problems with the Freivalds upper bound ``rank A <= len(C)`` of an int64
    matrix ``A`` whose minor ``A[R, C]`` was checked nonsingular (module docstring);
    ``bound_sq(A, R, C)`` is the square of the bordered-minor bound
    (:func:`certify.checkers.kernel.span.bound_sq`); ``digest``: ``A``'s ``matrix_sha256``
    as re-derived by the caller (:func:`shared_test`'s key)."""
    p, ev = claim["parameters"], claim["evidence"]
    if p.get("upper_bound") != "freivalds":
        raise Bad("a freivalds upper witness needs parameters.upper_bound = 'freivalds'")
    k = integer(p.get("error_log2"), "parameters.error_log2", 1)
    fr = BY_NAME["exact_rank"].part("freivalds").check_keys(ev.get("freivalds"), "freivalds")
    ch = challenge(claim)
    if fr["challenge"] != ch:
        raise Bad("freivalds.challenge is not the sha256 of the claim's content")
    s = integer(fr["vector_bits"], "freivalds.vector_bits", 1)
    t = integer(fr["vectors"], "freivalds.vectors", 1)
    if s > 32 or t > 4096 or not isinstance(fr["primes"], list) or not 1 <= len(fr["primes"]) <= 64:
        raise Bad("freivalds: vector_bits <= 32, vectors <= 4096, 1..64 primes")
    n1, n2 = A.shape
    if int_max_abs(A) >= 1 << 62:
        raise Bad("matrix entries too large for the Freivalds check")
    r = len(C)
    if not 0 < r < min(n1, n2):
        raise Bad("a Freivalds witness needs 0 < rank < min(shape)")
    (want_s, want_t, m), holds = plan(A, R, C, s, t, k, bound_sq)
    if (s, t, len(fr["primes"])) != (want_s, want_t, m):
        raise Bad(f"freivalds: vector_bits, vectors and the number of primes must be "
                  f"{want_s}, {want_t}, {m} (the deterministic plan)")
    if not holds:
        raise Bad(f"freivalds: 2^-(s t) + e^m exceeds 2^-{k} for these parameters")
    passed, qs = shared_test(A, R, C, bytes.fromhex(ch), s, t, m, digest=digest)
    if qs != fr["primes"]:
        raise Bad("freivalds.primes are not the ones the challenge draws")
    if not passed:
        return ["Freivalds check fails: a residue of the Schur complement is nonzero, rank > "
                f"{r} (exactly)"]
    return []


def shared_test(A: np.ndarray, R: list[int], C: list[int], ch: bytes, s: int, t: int,
                m: int, *, digest: str | None = None) -> tuple[bool, list[int]]:
    """``(passed, primes)``: the first ``m`` primes the challenge ``ch`` draws at which
    ``A[R, C]`` is invertible, and the kernel's test with the vectors it draws (``s``
    bits, ``t`` of them), computed once within one certificate's check
    (:mod:`certify.checkers.scratch`) for the same complete content of ``A`` (its dtype,
    shape and ``digest``, the caller's ``matrix_sha256`` of this very array, else the
    sha256 of its bytes), ``R``, ``C``, ``ch``, ``s``, ``t`` and ``m``."""
    A = np.ascontiguousarray(A, dtype="<i8")
    content = (A.dtype.str, tuple(int(n) for n in A.shape), digest) if digest is not None \
        else scratch.array_key(A)
    key = ("freivalds", content, tuple(int(i) for i in R), tuple(int(j) for j in C), ch.hex(), s, t, m)

    def run() -> tuple[bool, list[int]]:
        passed, qs = freivalds.test(A, R, C, vectors(ch, A.shape[1], t, s), candidates(ch), m)
        if len(qs) < m:
            raise Bad("no prime found for the Freivalds check")
        return passed, qs
    return scratch.remember(key, run)
