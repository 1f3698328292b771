"""``certify rank --upper-bound auto`` (solvers/exact/upper_cost.py): it predicts the
CPU seconds of the exact span check and of the Freivalds test from counts of their
work (never from a clock: the choice does not depend on the load) and takes the
cheaper (a tie goes to the exact check); the claim says which and why."""

import numpy as np
import pytest

from certify.core.kernel import Provenance, from_matrix
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank
from solvers.exact import upper_cost
from solvers.exact.upper_cost import UpperCosts


def _planted(n, r, seed, bits=3):
    rng = np.random.default_rng(seed)
    return rng.integers(-(1 << bits), 1 << bits, (n, r)) @ rng.integers(-(1 << bits), 1 << bits, (r, n))


def _auto(A):
    kernel = from_matrix(A.astype(np.float64), Provenance("memory", None, "memory", "float64"))
    cert = certify_rank(kernel, RankOptions()).certificate.to_json()
    return cert, cert["claims"][0]


def _command(A, tmp_path, capsys):
    """``certify rank M.npy --out C.json`` (the default mode) and ``certify verify C.json``:
    the claim, and verify's exit code."""
    import json

    from certify.cli import main
    src, out = tmp_path / "m.npy", tmp_path / "c.json"
    np.save(src, A.astype(np.float64))
    assert main(["rank", str(src), "--out", str(out), "--no-progress"]) == 0
    code = main(["verify", str(out)])
    capsys.readouterr()
    return json.loads(out.read_text())["claims"][0], code


def test_large_n_and_rank_choose_freivalds_and_verify(tmp_path, capsys):
    """n = 512, r = 256: the span check needs ~56 primes of n^2 r work, the Freivalds
    test 7 vectors and 3 primes (measured 0.67 vs 0.04 CPU s)."""
    c, code = _command(_planted(512, 256, 0), tmp_path, capsys)
    auto = c["info"]["upper_auto"]
    assert auto["choice"] == "freivalds" and auto["freivalds_s"] * 5 < auto["exact_s"]
    assert c["evidence"]["upper_witness"] == "freivalds"
    assert c["parameters"]["upper_bound"] == "freivalds" and c["parameters"]["error_log2"] == 128
    assert c["evidence"]["rank_lower"] == c["evidence"]["rank_upper"] == 256
    assert "--upper-bound auto chose freivalds (the cheaper)" in c["method"]
    assert code == 0


def test_small_n_and_rank_choose_the_exact_check_and_verify(tmp_path, capsys):
    c, code = _command(_planted(64, 4, 1), tmp_path, capsys)
    auto = c["info"]["upper_auto"]
    assert auto["choice"] == "exact" and auto["exact_s"] < auto["freivalds_s"]
    assert c["evidence"]["upper_witness"] == "column_span" and "upper_bound" not in c["parameters"]
    assert c["evidence"]["rank_lower"] == c["evidence"]["rank_upper"] == 4
    assert "--upper-bound auto chose exact (the cheaper)" in c["method"]
    assert code == 0


def test_n512_r64_takes_the_freivalds_test():
    """n = 512, r = 64 (factors in [-8, 8)): 13 primes of span check against 7 vectors
    and 3 primes (measured 0.027 vs 0.007 CPU s)."""
    _, c = _auto(_planted(512, 64, 2))
    auto = c["info"]["upper_auto"]
    assert auto["choice"] == "freivalds" and auto["freivalds_s"] * 2 < auto["exact_s"]
    assert c["evidence"]["upper_witness"] == "freivalds"


@pytest.mark.parametrize("exact,freivalds,choice", [(1.0, 0.5, "freivalds"), (0.04, 0.001, "freivalds"),
                                                    (0.2, 0.2, "exact"), (0.001, 2.0, "exact"),
                                                    (float("inf"), 9.0, "freivalds")])
def test_choice_rule(exact, freivalds, choice):
    assert UpperCosts(exact, freivalds).choice == choice


def test_predictions_grow_with_the_work_and_read_no_clock():
    """Counts, not clocks: the exact prediction grows like n^2 r k, Freivalds' like n^2 t,
    and the same input gives the same prediction."""
    from solvers.exact.elimination import canonical_minor, elimination_prime
    out = {}
    for n, r in ((256, 16), (256, 128), (1024, 128)):
        V = _planted(n, r, 3)
        rng = np.random.default_rng(0)
        _, R, C = canonical_minor(V, elimination_prime(n, rng), rng)
        out[n, r] = upper_cost.predict(V, list(R), list(C))
        assert upper_cost.predict(V, list(R), list(C)) == out[n, r]
    assert out[256, 16].exact_s < out[256, 128].exact_s < out[1024, 128].exact_s
    assert out[256, 128].freivalds_s < out[1024, 128].freivalds_s
