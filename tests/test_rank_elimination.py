"""The canonical minor by blocked elimination of the rows in order, the rows left
tested by random combinations (solvers/exact/elimination.py), and the span check's
bound from the witness's actual sizes (solvers/exact/span.py): the checker's
canonical minor exactly, a bound that holds for every bordered minor, fewer primes
where it is sharper."""

import flint
import numpy as np
import pytest

from solvers.exact import IntMatrix, minor_mod_p
from solvers.exact import modkernel as mk
from solvers.exact.elimination import canonical_minor, echelon_mod, elimination_prime, nonsingular_mod
from solvers.exact.span import bordered_minor_bound_sq, schur_bound_sq, span_check_multimodular

PATHS = [True, False] if mk.available() else [False]


@pytest.mark.parametrize("compiled", PATHS)
def test_blocked_echelon_and_canonical_minor_agree_with_the_full_elimination(compiled):
    """Rank-deficient matrices with zero, repeated and dependent columns, entries small
    (the rows left tested by exact combinations) and large (by combinations mod p), in blocks smaller than the
    rank: the minor is the checker's canonical pivot minor of rref(N mod p)."""
    rng = np.random.default_rng(3)
    for trial in range(14):
        n1, n2 = int(rng.integers(3, 90)), int(rng.integers(3, 90))
        r = int(rng.integers(0, min(n1, n2) + 1))
        bits = (2, 12, 22)[trial % 3]
        N = rng.integers(-(1 << bits), 1 << bits, (n1, r)) @ rng.integers(-(1 << bits), 1 << bits, (r, n2))
        if n2 > 4:
            N[:, 1] = 0
            N[:, 4] = N[:, 2]
        p = elimination_prime(max(n1, n2), rng)
        got = canonical_minor(N, p, np.random.default_rng(trial), Nf=N.astype(np.float64), block=8,
                              compiled=compiled)
        want = minor_mod_p(IntMatrix(N), p)
        assert got == want
        _, piv = echelon_mod([N[a:a + 5].astype(np.float64) for a in range(0, n1, 5)], n2, p,
                             compiled=compiled)
        assert sorted(piv) == want[2] and len(piv) == want[0]
        if got[0]:
            assert nonsingular_mod(N[np.ix_(got[1], got[2])], p, compiled=compiled)
    assert not nonsingular_mod(np.array([[1, 2], [3, 6]]), 7, compiled=compiled)


@pytest.mark.parametrize("compiled", PATHS)
def test_canonical_minor_on_rows_whose_dependencies_come_late(compiled):
    """Rows that repeat or combine rows far before them, zero blocks, a rank reached
    only at the last row, more rows than columns and the reverse: the rows are
    eliminated in order and the rest tested at once, and the minor is still the full
    elimination's pivot minor (rows and columns)."""
    rng = np.random.default_rng(8)
    for trial in range(12):
        n1, n2, r = int(rng.integers(20, 120)), int(rng.integers(20, 120)), int(rng.integers(1, 16))
        B = rng.integers(-9, 10, (r, n2))
        C = np.zeros((n1, r), dtype=np.int64)
        late = rng.permutation(n1)[:r]                    # where each new direction first appears
        late[-1] = n1 - 1 if trial % 3 == 0 else late[-1]  # sometimes only at the last row
        for j, i in enumerate(sorted(late)):
            C[i, j] = 1
            C[i + 1:, j] = rng.integers(-2, 3, n1 - i - 1) * (rng.random(n1 - i - 1) < 0.3)
        N = C @ B
        if trial % 4 == 1:
            N = N.T.copy()
        p = elimination_prime(max(N.shape), rng)
        got = canonical_minor(N, p, np.random.default_rng(trial), Nf=N.astype(np.float64), block=8,
                              compiled=compiled)
        assert got == minor_mod_p(IntMatrix(N), p), trial


def test_the_elimination_prime_keeps_every_product_exact():
    rng = np.random.default_rng(4)
    for n in (1, 2, 100, 2048, 1 << 20):
        p = elimination_prime(n, rng)
        h = (p - 1) // 2
        assert flint.fmpz(p).is_prime() and 5 <= p < 1 << 26 and n * h * h + h <= mk.FLOAT_LIMIT
        assert n * (p - 1) ** 2 < 1 << 53                  # the checker's canonical-minor test by products


def _all_bordered_minors_sq(V, R, C):
    worst = 0
    for i in range(V.shape[0]):
        for j in range(V.shape[1]):
            sub = [[int(V[a, c]) for c in list(C) + [j]] for a in list(R) + [i]]
            worst = max(worst, abs(int(flint.fmpz_mat(sub).det())))
    return worst * worst


def test_the_schur_bound_holds_for_every_bordered_minor():
    rng = np.random.default_rng(5)
    used = 0
    for trial in range(60):
        n1, n2 = int(rng.integers(5, 11)), int(rng.integers(5, 11))
        r = int(rng.integers(1, min(n1, n2)))
        V = rng.integers(-(1 << (2, 9, 30)[trial % 3]), 1 << (2, 9, 30)[trial % 3], (n1, n2))
        if trial % 4 == 0:
            V[:, 0] = 5 * V[:, 1] + 1                          # a badly conditioned minor
        R = sorted(rng.choice(n1, r, replace=False).tolist())
        C = sorted(rng.choice(n2, r, replace=False).tolist())
        D = int(flint.fmpz_mat([[int(V[i, j]) for j in C] for i in R]).det())
        if D == 0:
            continue
        b = schur_bound_sq(V, R, C, D)
        if b is not None:
            used += 1
            assert _all_bordered_minors_sq(V, R, C) <= b
    assert used >= 30


def test_the_schur_bound_needs_fewer_primes_on_a_random_product():
    rng = np.random.default_rng(6)
    n, r = 300, 40
    V = rng.integers(-8, 8, (n, r)) @ rng.integers(-8, 8, (r, n))
    N = IntMatrix(V)
    p = elimination_prime(n, rng)
    _, R, C = canonical_minor(V, p, rng, Nf=V.astype(np.float64))
    D = int(flint.fmpz_mat(r, r, V[np.ix_(R, C)].ravel().tolist()).det())
    had, sch = bordered_minor_bound_sq(V, R, C), schur_bound_sq(V, R, C, D)
    assert sch is not None and sch.bit_length() < 0.93 * had.bit_length()
    stats = {}
    assert span_check_multimodular(N, R, C, stats=stats) is True
    assert stats["bound_bits"] < stats["hadamard_bits"]
    bad = V.copy()
    i = next(i for i in range(n) if i not in R)
    bad[i, C[0]] += 1                                          # a column of C, a row outside R
    assert span_check_multimodular(IntMatrix(bad), R, C) is False
    for compiled in PATHS:
        assert span_check_multimodular(IntMatrix(bad), R, C, compiled=compiled) is False


@pytest.mark.parametrize("bits,want", [(3, "raw"), (12, "balanced")])
def test_small_entries_take_larger_primes_with_raw_operands(bits, want):
    """|N| < 2^12: N[:, C] and N[R, :] enter the products unreduced and the primes
    have 26 bits; 12-bit factors keep balanced residues. Either way a planted rank
    r + 1 (one entry off the minor) is refused, compiled and in numpy."""
    rng = np.random.default_rng(bits)
    n, r = 160, 40
    V = rng.integers(-(1 << bits), 1 << bits, (n, r)) @ rng.integers(-(1 << bits), 1 << bits, (r, n))
    p = elimination_prime(n, rng)
    _, R, C = canonical_minor(V, p, rng, Nf=V.astype(np.float64))
    for compiled in PATHS:
        stats = {}
        assert span_check_multimodular(IntMatrix(V), R, C, stats=stats, compiled=compiled) is True
        assert stats["operands"] == want
        assert stats["prime_bits"] == (26 if want == "raw" else 25)
        bad = V.copy()
        i = next(i for i in range(n) if i not in R)
        j = next(j for j in range(n) if j not in C)
        bad[i, j] -= 1
        assert span_check_multimodular(IntMatrix(bad), R, C, compiled=compiled, tile_rows=32, tile_cols=48) \
            is False
