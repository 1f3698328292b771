"""Producer and checker agree by construction: whatever ``certify rank`` emits,
``certify verify`` accepts -- all-zero, 1 x 1, rank-deficient, huge and tiny entries."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certify.checkers import verify
from certify.core.kernel import Provenance, from_features, from_matrix
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank

_ENTRY = st.sampled_from([0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -7.25, 1e-300, -2e-300, 5e-324,
                          1e300, -3e300, 1.0000000000000002, 123456789.0])


@st.composite
def matrices(draw):
    n1, n2 = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    k = draw(st.integers(0, min(n1, n2)))
    if k == 0 or draw(st.booleans()):
        return np.array(draw(st.lists(st.lists(_ENTRY, min_size=n2, max_size=n2),
                                      min_size=n1, max_size=n1)), dtype=np.float64)
    a = np.array(draw(st.lists(st.lists(st.integers(-3, 3), min_size=k, max_size=k),
                               min_size=n1, max_size=n1)), dtype=np.float64)
    b = np.array(draw(st.lists(st.lists(st.integers(-3, 3), min_size=n2, max_size=n2),
                               min_size=k, max_size=k)), dtype=np.float64)
    return a @ b                                   # rank <= k, planted


def _agree(cert) -> None:
    cert.self_check()                              # raises if the checker rejects a claim
    r = verify.verify_certificate(cert.to_json())
    assert r.holds, [c.problems for c in r.claims]
    # a kernel built in memory is bound by the hash of the data the certificate embeds,
    # which the checker re-derives: nothing is left to assume
    assert r.open_assumptions == () and r.exit_code() == 0


def _exact_rank(A: np.ndarray) -> int:
    import flint
    return flint.fmpq_mat([[flint.fmpq(*Fraction(float(v)).as_integer_ratio()) for v in row]
                           for row in A.tolist()]).rank()


@settings(derandomize=True, max_examples=60, deadline=None)
@given(matrices())
@example(np.zeros((2, 2)))
@example(np.zeros((1, 1)))
@example(np.array([[7.0]]))
@example(np.array([[1e-300, 2e-300], [5e300, 1e300]]))
@example(np.array([[1.0, 2.0], [2.0, 4.0]]))
def test_matrix_certificates_always_verify(A):
    rep = certify_rank(from_matrix(A, Provenance("memory", None, "memory", "float64")),
                       RankOptions(eps=Fraction(1, 100)))
    assert rep.rank_lower == rep.rank_upper == _exact_rank(A)
    _agree(rep.certificate)


@settings(derandomize=True, max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(0, 3), st.integers(0, 2 ** 16))
@example(1, 0, 0)
def test_factor_certificates_always_verify(r, zero_cols, seed):
    rng = np.random.default_rng(seed)
    q = rng.integers(-2, 3, size=(8, r)).astype(np.float64)
    k = rng.integers(0, 3, size=(8, r)).astype(np.float64)
    q[:, :min(zero_cols, r)] = 0.0
    kernel = from_features(q, k, Provenance("memory", None, "memory", "float64"),
                           token_set="cube:3", tokens=((np.arange(8)[:, None] >> np.arange(3)) & 1).astype(np.uint8))
    rep = certify_rank(kernel, RankOptions(eps=Fraction(1, 10)))
    assert rep.rank_lower == rep.rank_upper == int(np.linalg.matrix_rank(q @ k.T))
    _agree(rep.certificate)
