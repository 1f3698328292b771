from fractions import Fraction

import numpy as np
import pytest
from flint import fmpq, fmpq_mat

from certify.core.bounds import perron_discriminant as discriminant
from certify.core.bounds import perron_max_excluded_rank as max_excluded_rank
from certify.core.families import chain_family, paper51_family
from certify.feasibility.chain_bounds import chain_bound
from certify.feasibility.model import Features, build_problem, exact_check
from certify.feasibility.witness_search import smooth_search


@pytest.fixture(scope="module")
def small():
    w = np.zeros((3, 12), dtype=np.uint8)
    w[0, 0:6] = 1
    w[1, 6:12] = 1
    w[2, [0, 1, 2, 6, 7, 8]] = 1
    return chain_family(w, n=3, g=3, name="small-3")


@pytest.mark.parametrize("feats", [f if f is Features.REAL else pytest.param(f, marks=pytest.mark.slow)
                                   for f in Features])     # the other class with --runslow (2 CPU s)
def test_smooth_search_solves_small_family_exactly(small, feats):
    problem = build_problem(small)
    res = smooth_search(problem, 3, feats, time_limit=30, seed=0)
    assert res.witness is not None and res.check.ok
    again = exact_check(problem, res.witness)          # independent re-evaluation
    assert again.ok and again.margin == res.check.margin > 0
    if feats is Features.NONNEGATIVE:
        assert all(v >= 0 for row in res.witness.phi_q.values() for v in row)
        assert all(v >= 0 for row in res.witness.phi_k.values() for v in row)
    # a planted error: one value moved by a whole unit breaks the witness
    (x, z), v = next(iter(sorted(res.witness.g.items())))
    bad = dict(res.witness.g)
    bad[x, z] = v + 100
    from dataclasses import replace
    assert not exact_check(problem, replace(res.witness, g=bad)).ok


def test_perron_bound_by_hand_on_paper():
    # t = 15 chain queries, rho = 1/4:
    # Delta(r) = 225 (2 + (r-1)/4)^2 - 4 r (225 - 15 (r-1) 3/4)
    assert discriminant(15, Fraction(1, 4), 11) == Fraction(-1575, 4)      # 4556.25 - 4950
    assert discriminant(15, Fraction(1, 4), 12) == Fraction(3465, 16)      # 5076.5625 - 4860
    assert max_excluded_rank(15, Fraction(1, 4)) == 11
    b = chain_bound(paper51_family())
    assert (len(b.queries), b.rho, b.perron_rank) == (15, Fraction(1, 4), 11)
    assert b.lemma4_rank == 8 and b.max_infeasible_rank == 11          # Lemma 4 alone: 8


def test_perron_bound_never_excludes_a_real_matrix():
    # C = I + w A(K_{5,5,5}): diagonal 1, off-diagonal in {0, w}, w = 1/5 < 1/4,
    # rank 13 (eigenvalue 1 - 5w = 0 twice). The bound must not exclude 13.
    part = np.repeat(np.arange(3), 5)
    w = Fraction(1, 5)
    C = [[Fraction(1) if i == j else (w if part[i] != part[j] else Fraction(0))
          for j in range(15)] for i in range(15)]
    assert fmpq_mat(15, 15, [fmpq(v.numerator, v.denominator) for row in C for v in row]).rank() == 13
    assert not discriminant(15, Fraction(1, 4), 13) < 0
    assert max_excluded_rank(15, Fraction(1, 4)) < 13
    # the identity (rank t) is never excluded, for any rho < 1
    for t in (2, 3, 7, 15):
        for rho in (Fraction(0), Fraction(1, 4), Fraction(9, 10)):
            assert not discriminant(t, rho, t) < 0


def test_perron_bound_on_small_family(small):
    b = chain_bound(small)
    # t = 3, rho = 1/2: Delta(2) = 9 (5/2)^2 - 8 (9 - 3/2) = -15/4 < 0; Delta(3) >= 0
    assert discriminant(3, Fraction(1, 2), 2) == Fraction(-15, 4)
    assert b.perron_rank == 2 and b.max_infeasible_rank == 2


def test_the_solver_does_not_import_the_feasibility_model():
    """Layers: solvers/ sit below certify/; the attention binding lives in certify.witness_search."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, solvers.structured_search; "
                          "print(sorted(m for m in sys.modules if m.startswith('certify')))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
