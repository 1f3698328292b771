import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.core.cube import (
    all_tokens,
    enumerate_sequences,
    min_ip_targets,
    strict_success,
    targets_from_indices,
    token_index,
)
from certify.core.errors import InputError


def brute_targets(seq):
    return [min(sum(a * b for a, b in zip(x, y)) for y in seq) for x in seq]


@settings(derandomize=True, max_examples=200)
@given(st.integers(1, 6).flatmap(lambda m: st.lists(
    st.lists(st.integers(0, 1), min_size=m, max_size=m), min_size=1, max_size=6)))
def test_targets_equal_brute_force(seq):
    X = np.array(seq, dtype=np.uint8)
    assert min_ip_targets(X).tolist() == brute_targets(seq)
    assert min_ip_targets(X[None])[0].tolist() == brute_targets(seq)


def test_targets_include_self_term_and_repeats():
    # a lone token's target is its own weight; repeats do not change the minimum
    x = [1, 1, 1]
    assert min_ip_targets(np.array([x])).tolist() == [3]
    assert min_ip_targets(np.array([x, x, [1, 0, 0]])).tolist() == [1, 1, 1]


def test_targets_from_indices_matches_dense():
    toks = all_tokens(3)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 8, size=(50, 4))
    assert np.array_equal(targets_from_indices(toks, idx), min_ip_targets(toks[idx]))


def test_cube_order_is_little_endian_and_invertible():
    T = all_tokens(4)
    assert T.shape == (16, 4)
    assert T[1].tolist() == [1, 0, 0, 0] and T[8].tolist() == [0, 0, 0, 1]
    assert np.array_equal(token_index(T), np.arange(16))


def test_enumeration_counts_every_sequence_once():
    seen = [b for b in enumerate_sequences(2, 3)]
    total = sum(b.shape[0] for b in seen)
    assert total == 4 + 16 + 64
    length3 = np.concatenate([b for b in seen if b.shape[1] == 3])
    keys = {tuple(token_index(s)) for s in length3}
    assert keys == set(itertools.product(range(4), repeat=3))


def test_strict_criterion_is_strict_in_exact_arithmetic():
    pred = np.array([Fraction(1, 2), Fraction(49, 100), Fraction(3, 2)], dtype=object)
    ok = strict_success(pred, np.array([0, 0, 1]), Fraction(1, 2))
    assert ok.tolist() == [False, True, False]
    assert strict_success(np.array([0.4999]), np.array([0]), 0.5).tolist() == [True]


@pytest.mark.parametrize("m", [0, -1, 2.5])
def test_bad_dimension(m):
    with pytest.raises(InputError):
        all_tokens(m)
