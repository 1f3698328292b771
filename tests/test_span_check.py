"""The checker's column-span check modulo word-size primes
(:func:`certify.checkers.kernel.span.span_mod_primes`, counted by
:func:`certify.checkers.rank.span.column_span`): planted counterexamples that a
wrong count of primes or a wrong step would pass, and the compiled steps against a
numpy reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certify.checkers.kernel import span as ks
from certify.checkers.rank.span import column_span

pytestmark = pytest.mark.skipif(ks._K is None, reason="the checker's compiled span steps are not built")


def _planted(n1, n2, r, bits, seed):
    rng = np.random.default_rng(seed)
    U = rng.integers(-(1 << bits), 1 << bits, (n1, r))
    V = rng.integers(-(1 << bits), 1 << bits, (r, n2))
    A = U @ V
    # a nonsingular minor: the pivots of U's and V's leading blocks are generic
    R, C = list(range(r)), list(range(r))
    return A, R, C


@pytest.mark.parametrize("n1,n2,r,bits,seed", [(120, 150, 12, 3, 0), (90, 80, 30, 5, 1), (70, 70, 1, 20, 2),
                                               (60, 75, 6, 12, 3)])
def test_planted_rank_is_proved_and_one_entry_off_by_one_is_refuted(n1, n2, r, bits, seed):
    A, R, C = _planted(n1, n2, r, bits, seed)
    st: dict = {}
    assert column_span(A, R, C, stats=st) is True
    assert st["bound"] == "denominator"              # the witness's own sizes counted the primes
    rng = np.random.default_rng(seed + 10)
    for i, j in [(int(rng.integers(r, n1)), int(rng.integers(r, n2))), (0, n2 - 1), (n1 - 1, r - 1 + 1)]:
        bad = A.copy()
        bad[i, j] += 1                                # rank r + 1, in a row of R or outside
        assert column_span(bad, R, C) is False, (i, j)


def test_the_denominator_halves_the_primes_of_a_product_of_random_factors():
    A, R, C = _planted(200, 200, 40, 3, 4)
    st: dict = {}
    assert column_span(A, R, C, stats=st) is True
    D, d, _ = ks.minor_denominators(A, R, C, 8)
    assert D % d == 0 and d.bit_length() < 0.6 * D.bit_length()
    had = (math.isqrt(ks.bound_sq(A, R, C)) + 1).bit_length()
    assert st["bits"] < 0.65 * had


def test_a_wrong_denominator_fails_step_4_and_hadamard_decides(monkeypatch):
    """d = 1 makes d M^-1 N[R, :] non-integral: its CRT lift is large, step 4 fails
    (None), and the count from Hadamard's bound decides both ways."""
    A, R, C = _planted(80, 90, 10, 3, 5)
    D, d, y = ks.minor_denominators(A, R, C, 8)
    assert abs(d) > 1
    top, _, s = ks.span_limits(len(C), int(np.abs(A).max()))
    primes, P, p = [], 1, top
    while P.bit_length() <= 400:
        if D % p and ks.is_prime(p):
            primes.append(p)
            P *= p
        p -= 1
    assert ks.span_mod_primes(A, R, C, primes, d) is True
    assert ks.span_mod_primes(A, R, C, primes, 1) is None           # not integral: not small
    assert ks.span_mod_primes(A, R, C, primes, 0) is None           # d = 0 is no witness
    assert ks.span_mod_primes(A, R, C, primes[:1], d) is None       # P < 2^s |d|
    assert ks.span_mod_primes(A, R, C, primes[:2], None) is None    # P^2 below Hadamard's bound
    assert ks.span_mod_primes(A, R, C, primes + primes[:1], d) is None   # a prime twice
    assert ks.span_mod_primes(A, R, C, [primes[0] + 1] + primes[1:], d) is None   # not a prime
    real = ks.minor_denominators
    monkeypatch.setattr("certify.checkers.rank.span.minor_denominators",
                        lambda *a: (lambda D, d, y: (D, 1, y))(*real(*a)))
    st: dict = {}
    assert column_span(A, R, C, stats=st) is True and st["bound"] == "hadamard"
    bad = A.copy()
    bad[-1, -1] -= 1
    assert column_span(bad, R, C) is False


def test_a_schur_complement_divisible_by_the_first_primes_is_still_caught(monkeypatch):
    """Small primes (a patched top of 2^13) so that a product of several fits an
    entry: the Schur complement entry is that product, each of those primes alone
    sees 0; the count (from the entry sizes, s) takes more primes than it has."""
    monkeypatch.setattr(ks, "span_limits", lambda r, m, f=ks.span_limits: ((1 << 13) - 1, *f(r, m)[1:]))
    monkeypatch.setattr("certify.checkers.rank.span.span_limits", ks.span_limits)
    for k in (1, 2, 3):
        primes, p = [], (1 << 13) - 1
        while len(primes) < k:
            if ks.is_prime(p):
                primes.append(p)
            p -= 1
        beta = math.prod(primes)
        A = np.array([[1, 2, 3], [2, 5, 7], [3, 7, 10]], dtype=np.int64)       # rank 2: row 3 = row 1 + row 2
        A[2, 2] += beta
        st: dict = {}
        assert column_span(A, [0, 1], [0, 1], stats=st) is False, k
        assert st["primes"] > k and st["prime_bits"] == 13
        A[2, 2] -= beta
        assert column_span(A, [0, 1], [0, 1]) is True


def test_the_compiled_steps_match_a_numpy_reference():
    rng = np.random.default_rng(6)
    p = 67108859                                                    # a prime below 2^26
    h = (p - 1) // 2
    X = rng.integers(-(1 << 52), 1 << 52, 5000).astype(np.float64)
    want = np.array([((int(v) + h) % p) - h for v in X])
    assert np.array_equal(ks._K.reduce(X.copy(), float(p)), want)
    with pytest.raises(ValueError):
        ks._K.reduce(np.array([2.0 ** 53]), float(p))
    M = rng.integers(-1000, 1000, (30, 30)).astype(np.float64)
    W = M.copy()
    assert ks._K.inverse(W, float(p))
    Mi = np.array([[int(v) for v in row] for row in W], dtype=object)
    assert all(v == (i == j) for i, row in enumerate((M.astype(np.int64).astype(object) @ Mi) % p)
               for j, v in enumerate(row))
    S = np.ones((3, 3)) * 7.0
    assert not ks._K.inverse(S, float(p))                           # singular
    Y = rng.integers(-h, h + 1, (4, 6)).astype(np.float64)
    F = np.zeros_like(Y)
    for w in (5, -h, h):
        ks._K.crt_add(Y, F, float(w), float(p))
    ref = np.array([[math.remainder(sum(((w * int(y) + h) % p - h) / p for w in (5, -h, h)), 1.0) for y in row]
                    for row in Y])
    assert np.abs(F - ref).max() < 1e-15
    with pytest.raises(ValueError):
        ks._K.crt_add(Y * 3, F, 1.0, float(p))                       # not balanced residues
    N = rng.integers(-100, 100, (5, 7)).astype(np.int32)
    T = N[1:3, 2:6].astype(np.float64) + p * 3.0
    assert not ks._K.nonzero(T, N, 1, 2, float(p))
    T[1, 3] += 1.0
    assert ks._K.nonzero(T, N, 1, 2, float(p))
    assert ks._K.nonzero(T, N.astype(np.float64), 1, 2, float(p))
    with pytest.raises(ValueError):
        ks._K.nonzero(T, N, 4, 2, float(p))                          # the tile leaves N


def test_compiled_rref_is_python_flints():
    """_spankernel.rref: the reduced row echelon form mod p (balanced) and its pivot columns,
    as python-flint computes them, for wide, tall, rank-deficient and zero matrices."""
    import flint
    rng = np.random.default_rng(7)
    for trial in range(40):
        b, n = int(rng.integers(1, 30)), int(rng.integers(1, 60))
        r = int(rng.integers(0, min(b, n) + 1))
        p = (1048573, 67108859, 7, 1000003)[trial % 4]
        V = (rng.integers(-50, 50, (b, r)) @ rng.integers(-50, 50, (r, n))).astype(np.float64)
        if trial % 5 == 0:
            V[:, 0] = 0.0
        W = V.copy()
        piv = ks._K.rref(W, float(p))
        R, rank = flint.nmod_mat([[int(x) % p for x in row] for row in V.tolist()], p).rref()
        want = np.array([[int(R[i, j]) for j in range(n)] for i in range(b)], dtype=np.int64)
        assert len(piv) == rank and all(want[i, j] == (i == k) for k, j in enumerate(piv) for i in range(b))
        assert np.array_equal(np.mod(W.astype(np.int64), p), want) and np.abs(W).max(initial=0) <= (p - 1) // 2
    with pytest.raises(ValueError):
        ks._K.rref(np.zeros((2, 2)), 4.0)                                # not a prime in [5, 2^26)
    with pytest.raises(ValueError):
        ks._K.rref(np.array([[2.0 ** 60]]), 7.0)                         # an entry beyond 2^53 - 2^27


def test_the_producers_own_check_counts_from_the_denominator_and_falls_back(monkeypatch):
    """solvers.exact.span (the producer's code): the same count from the denominator,
    a Schur complement equal to the first prime it uses is caught, a wrong guess
    falls back to the bound's count."""
    from solvers.exact import span as ps
    from solvers.exact.integers import IntMatrix
    A, R, C = _planted(150, 160, 40, 3, 8)
    st: dict = {}
    assert ps.span_check_multimodular(IntMatrix(A), R, C, stats=st) is True
    assert st["denominator"] and st["primes"] < 0.7 * (st["hadamard_bits"] / st["prime_bits"])
    r, p1, top = len(C), 1 << 25, 0
    for _ in range(3):                                             # the first prime for the changed matrix
        m = max(int(np.abs(A).max()), abs(int(A[-1, -1]) + p1))
        top = max(ps.prime_limit(r, m), ps.raw_prime_limit(r, m))
        p1 = next(p for p in range(top, 0, -1) if ks.is_prime(p))
    bad = A.copy()
    bad[-1, -1] += p1                                              # 0 mod p1, not over Q
    assert max(ps.prime_limit(r, int(np.abs(bad).max())), ps.raw_prime_limit(r, int(np.abs(bad).max()))) == top
    for compiled in (True, False):
        assert ps.span_check_multimodular(IntMatrix(bad), R, C, stats=st, compiled=compiled) is False
    monkeypatch.setattr(ps, "denominator_guess", lambda *a: (1, 1.0))
    assert ps.span_check_multimodular(IntMatrix(A), R, C, stats=st) is True and not st["denominator"]
    bad[-1, -1] -= p1 - 1
    assert ps.span_check_multimodular(IntMatrix(bad), R, C) is False


def test_the_shared_freivalds_test_runs_once_per_check_and_refutes_an_extra_rank():
    """certify rank takes the checker's Freivalds test (primes and test) as its own:
    computed once for the same inputs within one scratch (the producer's run and its own
    check), the plan the producer's; one entry off by one fails it."""
    from certify.checkers import scratch
    from certify.checkers.rank import freivalds as cf
    from solvers.exact import exact_rank
    from solvers.exact.integers import IntMatrix
    A, R, C = _planted(70, 80, 6, 3, 9)
    calls = []

    def counted(*a):
        calls.append(a[3])
        return cf.shared_test(*a)

    with scratch.session() as s:
        res = exact_rank(IntMatrix(A), upper="freivalds", challenge=lambda p, r, c: bytes(32),
                         freivalds_test=counted)
        assert (res.lower, res.upper, res.upper_witness) == (6, 6, "freivalds")
        key_count = len(s)
        again = cf.shared_test(A, list(res.minor_rows), list(res.minor_cols), bytes(32),
                               res.freivalds["vector_bits"], res.freivalds["vectors"], len(res.freivalds["primes"]))
        assert again == (True, list(res.freivalds["primes"])) and len(s) == key_count and len(calls) == 1
        bad = A.copy()
        bad[-1, -1] += 1                                          # rank 7: the rank-6 minor's test fails
        got = cf.shared_test(bad, list(res.minor_rows), list(res.minor_cols), bytes(32),
                             res.freivalds["vector_bits"], res.freivalds["vectors"], len(res.freivalds["primes"]))
        assert got[0] is False
