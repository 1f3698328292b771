"""Checker of the Freivalds upper bound of a matrix-form ``exact_rank`` claim
(``parameters.upper_bound = "freivalds"``, ``evidence.upper_witness =
"freivalds"``): numpy, hashlib and python-flint only, written apart from the
producer's :mod:`solvers.exact.freivalds`; every number is re-derived here.

What is checked. ``M = A[R, C]`` (``r x r``, nonsingular: the lower bound's
minor), ``B_ij = det A[R + {i}, C + {j}]``, all zero iff ``rank A = r``;
``|B_ij| <= H`` (the bordered-minor Hadamard bound of
:func:`certify.checkers.rank.span.bound_sq`).

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
3. The test: ``Y = A X`` exactly over Z; for each prime ``q``, ``W = M^-1 Y[R]
   mod q`` and ``A[:, C] W = Y mod q``.
4. The plan is the deterministic one: ``s = 52 - bits(max|A|) - bits(n2)``
   (at most 20; 16 when that is below 8), ``t = ceil((error_log2 + 1) / s)``,
   ``m`` the least with ``e^m <= 2^-(error_log2 + 1)``; and the error
   ``2^-(s t) + e^m <= 2^-error_log2`` exactly (Fractions), with
   ``e = floor(L / 61) / (P - floor(L_D / 61))``, ``2^L > n2 (2^s - 1) H``,
   ``2^L_D > |det M|`` (Hadamard), ``P`` the lower bound on the number of primes
   in ``[2^61, 2^62)`` from ``x / ln x < pi(x) < 1.25506 x / ln x``.

Why the error is at most that (``rank A > r``, so ``B != 0``): a nonzero row
``b`` of ``B`` has ``b . x = 0`` for at most one value of one coordinate of
``x`` given the others, so ``Pr[B X = 0] <= 2^-(s t)``; otherwise an entry
``v != 0`` of ``B X`` has ``|v| < 2^L``, at most ``floor(L / 61)`` prime factors
in ``[2^61, 2^62)``, and the test modulo ``q`` (``q`` not dividing
``det M``) misses it only when ``q | v``: each uniform prime misses with
probability ``<= e``. Probabilities are over the hash, modelled as a random
oracle (Fiat-Shamir): a producer cannot pick the vectors or primes, and every
change of the claim draws new ones.

Against a producer who retries. Each change of a hashed field is a fresh draw,
so an author who makes ``2^g`` attempts on a false claim succeeds with
probability at most ``2^(g - error_log2)`` (a union bound). Hence the fixed
floor :data:`FLOOR` = 128: ``verify`` accepts a Freivalds bound at exit 0 only
with ``error_log2 >= 128``; below it the claim holds only under the named
assumption ``randomized:freivalds-error-2^-k`` (exit 4), whatever the producer
asked for (:func:`assumptions`).
"""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction
from typing import Any

import numpy as np

from certify.checkers.common import Bad, integer, keys
from certify.checkers.kernel import canonical_sha256, det_nonzero_mod_p

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


def primes_lower() -> Fraction:
    """At least this many primes in ``[2^61, 2^62)``: ``pi(2^62) - pi(2^61) >
    2^62 / ln(2^62) - 1.25506 2^61 / ln(2^61)``, with ``0.693147 < ln 2 < 0.693148``."""
    return (Fraction(1 << _QB) / (_QB * Fraction(693148, 10 ** 6))
            - Fraction(125506, 10 ** 5) * (1 << (_QB - 1)) / ((_QB - 1) * Fraction(693147, 10 ** 6)))


def error(s: int, t: int, m: int, L: int, LD: int) -> Fraction:
    e = Fraction(L // (_QB - 1)) / (primes_lower() - LD // (_QB - 1))
    return Fraction(1, 1 << (s * t)) + e ** m


def vectors(ch: bytes, n2: int, t: int, s: int) -> np.ndarray:
    raw = hashlib.shake_256(ch + b"/vectors").digest(4 * n2 * t)
    words = np.frombuffer(raw, dtype="<u4").astype(np.int64).reshape(t, n2)
    return (words % (1 << s)).T.copy()                                   # (n2, t)


def primes(ch: bytes, MZ, m: int) -> list[int]:
    import flint
    out = []
    for i in range(_MAX_TRIES):
        d = hashlib.shake_256(ch + b"/primes/" + i.to_bytes(8, "little")).digest(8)
        q = (1 << (_QB - 1)) + int.from_bytes(d, "little") % (1 << (_QB - 1))
        if flint.fmpz(q).is_prime() and det_nonzero_mod_p(MZ, q):
            out.append(q)
            if len(out) == m:
                return out
    raise Bad("no prime found for the Freivalds check")


def product(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``A X`` over Z (Python ints) for int64 ``A`` and nonnegative int64 ``X``:
    both split into digits small enough that each float64 product is exact
    (``k 2^a 2^b <= 2^52`` for inner dimension ``k``)."""
    k = A.shape[1]
    room = 52 - max(k, 1).bit_length()
    abits = int(np.abs(A).max(initial=0)).bit_length()
    xbits = int(X.max(initial=0)).bit_length()
    if abits + xbits <= room:                                            # one exact product
        return (A.astype(np.float64) @ X.astype(np.float64)).astype(np.int64).astype(object)
    b = min(xbits, max(room - abits, room // 2))
    a = room - b
    xs, x, sx = [], X.copy(), 0
    while True:
        xs.append(((x % (1 << b)).astype(np.float64), sx))
        x = x // (1 << b)
        sx += b
        if not x.any():
            break
    out = np.zeros((A.shape[0], X.shape[1]), dtype=object)
    sign = np.where(A < 0, -1, 1)
    mag, sa = np.abs(A), 0
    while True:
        Pa = ((mag % (1 << a)) * sign).astype(np.float64)
        for Px, sb in xs:
            out += (Pa @ Px).astype(np.int64).astype(object) * (1 << (sa + sb))
        mag = mag // (1 << a)
        sa += a
        if not mag.any():
            return out


def check(claim: dict, A: np.ndarray, R: list[int], C: list[int], bound_sq) -> list[str]:
    """Problems with the Freivalds upper bound ``rank A <= len(C)`` of an int64
    matrix ``A`` whose minor ``A[R, C]`` was checked nonsingular (module docstring);
    ``bound_sq(A, R, C)`` is the square of the bordered-minor bound
    (:func:`certify.checkers.rank.span.bound_sq`)."""
    import flint

    p, ev = claim["parameters"], claim["evidence"]
    if p.get("upper_bound") != "freivalds":
        raise Bad("a freivalds upper witness needs parameters.upper_bound = 'freivalds'")
    k = integer(p.get("error_log2"), "parameters.error_log2", 1)
    fr = keys(ev.get("freivalds"), "freivalds", ("challenge", "vector_bits", "vectors", "primes"))
    ch = challenge(claim)
    if fr["challenge"] != ch:
        raise Bad("freivalds.challenge is not the sha256 of the claim's content")
    s = integer(fr["vector_bits"], "freivalds.vector_bits", 1)
    t = integer(fr["vectors"], "freivalds.vectors", 1)
    if s > 32 or t > 4096 or not isinstance(fr["primes"], list) or not 1 <= len(fr["primes"]) <= 64:
        raise Bad("freivalds: vector_bits <= 32, vectors <= 4096, 1..64 primes")
    n1, n2 = A.shape
    if int(np.abs(A).max(initial=0)) >= 1 << 62:
        raise Bad("matrix entries too large for the Freivalds check")
    r = len(C)
    if not 0 < r < min(n1, n2):
        raise Bad("a Freivalds witness needs 0 < rank < min(shape)")
    want_s = 52 - max(int(np.abs(A).max()), 1).bit_length() - n2.bit_length()
    want_s = min(want_s, 20) if want_s >= 8 else 16
    H = math.isqrt(bound_sq(A, R, C)) + 1
    L = (n2 * ((1 << s) - 1) * H).bit_length()
    Mo = A[np.ix_(R, C)].astype(object)
    LD = (math.isqrt(math.prod(int(v) for v in (Mo * Mo).sum(1).tolist())) + 1).bit_length()
    m = 1
    while error(s, t, m, L, LD) - Fraction(1, 1 << (s * t)) > Fraction(1, 1 << (k + 1)):
        m += 1
    if (s, t, len(fr["primes"])) != (want_s, -(-(k + 1) // want_s), m):
        raise Bad(f"freivalds: vector_bits, vectors and the number of primes must be "
                  f"{want_s}, {-(-(k + 1) // want_s)}, {m} (the deterministic plan)")
    if error(s, t, m, L, LD) > Fraction(1, 1 << k):
        raise Bad(f"freivalds: 2^-(s t) + e^m exceeds 2^-{k} for these parameters")
    MZ = flint.fmpz_mat([[int(v) for v in row] for row in A[np.ix_(R, C)].tolist()])
    chb = bytes.fromhex(ch)
    qs = primes(chb, MZ, len(fr["primes"]))
    if qs != fr["primes"]:
        raise Bad("freivalds.primes are not the ones the challenge draws")
    Y = product(A, vectors(chb, n2, t, s))                             # (n1, t) over Z
    AC = np.ascontiguousarray(A[:, C])
    for q in qs:
        Yq = flint.nmod_mat([[int(v) % q for v in row] for row in Y[R].tolist()], q)
        W = flint.nmod_mat(MZ, q).solve(Yq)                             # M W = Y[R] mod q
        Wi = np.array([[int(W[i, j]) for j in range(t)] for i in range(r)], dtype=np.int64)
        if any(int(v) % q for v in (product(AC, Wi) - Y).ravel().tolist()):
            return ["Freivalds check fails: a residue of the Schur complement is nonzero, rank > "
                    f"{r} (exactly)"]
    return []
