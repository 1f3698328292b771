"""The modular kernels of the exact rank (solvers/exact/modkernel.py and its C file):
exact residues, inverses and echelon forms mod p that a wrong implementation gets
wrong, the compiled path against the numpy/flint one."""

import flint
import numpy as np
import pytest

from solvers.exact import modkernel as mk

PATHS = [True, False] if mk.available() else [False]
PRIMES = [5, 7, 1048573, 16777213, 67108859]          # 67108859 < 2^26 is the largest the kernels take


def _balanced(v: int, p: int) -> int:
    return (v + (p - 1) // 2) % p - (p - 1) // 2


@pytest.mark.parametrize("compiled", PATHS)
@pytest.mark.parametrize("p", PRIMES)
def test_reduce_is_exact_up_to_the_float_limit(compiled, p):
    rng = np.random.default_rng(p)
    x = rng.integers(-mk.FLOAT_LIMIT, mk.FLOAT_LIMIT + 1, 20000)
    x[:4] = [mk.FLOAT_LIMIT, -mk.FLOAT_LIMIT, 0, (p - 1) // 2 + 1]
    want = np.array([_balanced(int(v), p) for v in x], dtype=np.float64)
    for a in (x, x.astype(np.float64)):
        assert np.array_equal(mk.reduce(a, p, compiled=compiled), want)
    small = rng.integers(-(1 << 31), 1 << 31, 1000).astype(np.int32)
    assert np.array_equal(mk.reduce(small, p, compiled=compiled),
                          np.array([_balanced(int(v), p) for v in small], dtype=np.float64))
    with pytest.raises(ValueError):
        mk.reduce(np.array([float(1 << 53)]), p, compiled=compiled)


@pytest.mark.parametrize("compiled", PATHS)
@pytest.mark.parametrize("p", PRIMES)
def test_inverse_mod_p_times_the_matrix_is_the_identity(compiled, p):
    rng = np.random.default_rng(1)
    for r in (1, 2, 7, 40):
        M = rng.integers(-(1 << 40), 1 << 40, (r, r))
        M[0, 0] = 0                                            # the first pivot needs a row swap
        Mi = mk.inverse(M.astype(np.float64), p, compiled=compiled)
        det = int(flint.fmpz_mat(r, r, M.ravel().tolist()).det())
        if det % p == 0:
            assert Mi is None
            continue
        assert np.abs(Mi).max() <= (p - 1) // 2
        prod = (Mi.astype(np.int64).astype(object) @ M.astype(object)) % p
        assert (prod == np.eye(r, dtype=np.int64)).all()
    S = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0 + p], [0.0, 1.0, 1.0]])     # rank 2 mod p
    assert mk.inverse(S, p, compiled=compiled) is None


@pytest.mark.parametrize("p", [5, 16777213])
def test_rref_mod_p_finds_the_planted_pivots(p):
    rng = np.random.default_rng(2)
    V = rng.integers(-9, 9, (6, 12)).astype(np.float64)
    V[:, 0] = 0                                                 # no pivot in column 0
    V[:, 3] = 2 * V[:, 1] - V[:, 2] + p * V[:, 5]               # column 3 depends on 1, 2 mod p
    V[4] = V[0] + V[1]                                          # rows 4, 5 dependent
    V[5] = 3 * V[2] - p * V[3]
    for compiled in PATHS:
        E, piv = mk.rref(V, p, compiled=compiled)
        assert len(piv) == 4 and piv[0] == 1 and 0 not in piv and 3 not in piv
        assert np.array_equal(E[:, piv], np.eye(4))
        # the same row space: the echelon rows reduce every row of V to zero
        W = V - V[:, piv] @ E
        assert not (np.array([[int(v) % p for v in row] for row in W.astype(np.int64)])).any()
    want = flint.nmod_mat(6, 12, [int(v) % p for v in V.astype(np.int64).ravel()], p).rref()[0]
    got, piv = mk.rref(V, p)
    assert [[int(x) % p for x in row] for row in got.astype(np.int64)] == \
        [[int(want[i, j]) for j in range(12)] for i in range(len(piv))]
