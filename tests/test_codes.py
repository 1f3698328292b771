import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.core import codes
from certify.core.errors import InputError


def test_paper51_code_distance_distribution():
    w = codes.paper51_code()
    assert w.shape == (15, 24) and set(w.sum(axis=1).tolist()) == {12}
    D = codes.directed_distances(w)
    off = D[~np.eye(15, dtype=bool)]
    assert sorted(set(off.tolist())) == [6, 12]
    assert int((off == 12).sum()) == 2 and int((off == 6).sum()) == 208


def test_paley_hadamard_is_hadamard():
    H = codes.paley_hadamard(23)
    assert np.array_equal(H @ H.T, 24 * np.eye(24, dtype=np.int64))
    assert (H[0] == 1).all() and (H[:, 0] == 1).all()


def test_deterministic():
    assert np.array_equal(codes.greedy_packing(12, 6, 3), codes.greedy_packing(12, 6, 3))
    assert np.array_equal(codes.paper51_code(), codes.paper51_code())


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.integers(2, 11).flatmap(lambda M: st.tuples(
    st.just(M), st.integers(1, M - 1), st.integers(1, 4))))
def test_every_greedy_code_meets_its_distance(params):
    M, h, delta = params
    w = codes.greedy_packing(M, h, delta)
    codes.verify_code(w, h=h, delta=delta)
    # greedy is maximal: no further h-subset can be added
    import itertools
    S = {tuple(np.flatnonzero(r)) for r in w}
    for c in itertools.combinations(range(M), h):
        if c in S:
            continue
        cs = set(c)
        assert any(len(cs - set(np.flatnonzero(r))) < delta for r in w)


def test_greedy_known_size():
    # lexicographic greedy of 2-subsets of [8] at distance 2 is a perfect matching: 4 words
    assert codes.greedy_packing(8, 2, 2).shape == (4, 8)
    assert codes.greedy_packing(16, 8, 4).shape[0] == 30


def test_verify_rejects_violations():
    with pytest.raises(InputError, match="distance"):
        codes.verify_code([[1, 1, 0, 0], [1, 0, 1, 0]], h=2, delta=2)
    with pytest.raises(InputError, match="weight"):
        codes.verify_code([[1, 1, 0, 0], [1, 0, 0, 0]], h=2, delta=1)
    with pytest.raises(InputError):
        codes.greedy_packing(4, 5, 1)


def test_prop10_parameters_exact():
    # s = floor(m / log2 m): m = 32 -> 32/5 = 6.4 -> 6; m = 64 -> 64/6 = 10.67 -> 10
    assert codes.prop10_parameters(32) == (6, 24, 12)
    assert codes.prop10_parameters(64) == (10, 52, 26)
    with pytest.raises(InputError):
        codes.prop10_parameters(31)
