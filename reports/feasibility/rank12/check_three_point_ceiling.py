"""Exact checker (fractions only): a weighted three-point relaxation is feasible at R = 4.0249 > 4.

Method (a) of the second push: a Bachoc-Vallentin-type three-point bound for the weighted
15-point configurations of Theorem D (check_delsarte.py). Normalize sum w_i = 1 and write
    D2 = sum w_i^2,  D3 = sum w_i^3,  sigma^2 = D2 - 1/15 = sum (w_i - 1/15)^2,
    nu  = sum_{i != j} w_i w_j   delta_{c_ij}     (pairs),
    nu' = sum_{i != j} w_i^2 w_j delta_{c_ij}     (triples with one repeated index),
    tau = sum_{i, j, k distinct} w_i w_j w_k delta_{(c_ij, c_ik, c_jk)}.
The objective is R = nu((c)_-) / D2 (Theorem D needs R < 4 for every configuration to reach
t >= 1/4). The relaxation asks, with exactly 15 positive weights:
  (T1) D2 + nu(1) = 1, nu >= 0, Q_k = D2 + nu(P_k) >= 0 for all k and Q_2 = 0 (isotropy);
  (T2) nu' >= 0, nu'(1) = D2 - D3, D3 >= D2^2, |D3 - 1/225 - sigma^2/5| <= sigma^3
       (sum w^3 = 1/225 + sigma^2/5 + sum d_i^3 with d_i = w_i - 1/15, |sum d^3| <= sigma^3);
  (T3) coupling of nu' to nu through the weight spread: (1/15 - sigma) nu <= nu' <= (1/15 + sigma) nu
       pointwise (|w_i - 1/15| <= sigma) and sum_c |nu'(c) - nu(c)/15| <= sqrt(D2) sigma
       (Cauchy-Schwarz on sum_i w_i |w_i - 1/15|);
  (T4) tau >= 0 on the Gram domain, its marginals nu - 2 nu', and every three-point positivity
       condition: sum over all triples = D3 at (1,1,1) + nu' at (1,c,c), (c,1,c), (c,c,1) + tau,
       whose matrices int S_k d(mu x mu x mu) are positive semidefinite for every measure mu.
CLAIM (checked here): the icosahedron's 12 vertices with mass 1/12 each (mu), D2 = 67/1000,
D3 = 1/225 + sigma^2/5, nu = mu x mu minus D2 at c = 1, nu' = (1/144 - D3)/3 at c = 1 and
proportional to nu elsewhere, and tau = mu^{x3} minus the diagonal parts satisfy (T1)-(T4)
exactly, with R = (1 + sqrt 5)/(12 D2) = 4.02496 > 4. (T1) and (T4) hold because mu is a
measure (Q_1 = ... = Q_5 = 0: a 5-design; tau is what remains of mu^{x3}, checked >= 0 here);
(T2), (T3), tau >= 0 and R > 4 are checked in rationals (R > 4 by squaring).
The point is stored in three_point_ceiling.json with the claim R >= 4.02496 (the value README.md
states; exact R = 4.0249601...); the checker asserts that the point reaches the claim, that the
claim is the stated one and that it exceeds 4 (exit 1 otherwise).
So this three-point relaxation (T1)-(T4) cannot prove rank 12 infeasible; this says nothing
about per-atom three-point formulations (variables per atom or per cluster), which it does not cover: the weight-spread couplings
are too loose near D2 = 1/15 (at D2 = 1/15 exactly they force nu' = nu/15, and then tau(1,1,1)
< 0 for this mu: a cluster of 5/4 points has (5/4)(1/4)(-3/4) < 0 distinct triples). A
three-point proof would need a finer coupling than (T2)-(T3), e.g. variables per cluster.

Usage: python3 check_three_point_ceiling.py [three_point_ceiling.json]     (exit 0: checked; 1: failed)
"""
import json
import sys
import time
from fractions import Fraction as F
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from qsqrt5 import Q5  # noqa: E402

FORMAT = "certify-attention/research/three-point-ceiling/1"
STATED = F(402496, 100000)                 # R >= 4.02496, as README.md states
if not __debug__:
    raise SystemExit("this checker's checks are assert statements: run it without python -O")


def main(path=None):
    t0 = time.time()
    d = json.loads(Path(path or HERE / "three_point_ceiling.json").read_text())
    assert d.get("format") == FORMAT, f"format is not {FORMAT}"
    assert d.get("mu") == "icosahedron-mass-1/12", "mu must be the icosahedron with mass 1/12 per vertex"
    d2 = F(d["D2"])
    claim = F(d["claim"]["R_at_least"])
    assert claim == STATED and claim > 4, f"the file claims R >= {claim}, the stated value is {STATED}"
    # icosahedron: ordered pairs of vertices by inner product 1, -1, 1/sqrt 5, -1/sqrt 5
    counts = [12, 12, 60, 60]
    m = F(1, 12)
    sig2 = d2 - F(1, 15)
    assert sig2 > 0, "D2 must exceed 1/15"
    d3 = F(1, 225) + sig2 / 5
    nu = [cnt * m * m for cnt in counts]
    nu[0] -= d2
    trip = [cnt * m ** 3 for cnt in counts]                  # mu^{x3} at (1, c, c)
    # (T1)
    assert all(v >= 0 for v in nu) and d2 + sum(nu) == 1, "(T1): nu negative or mass not 1"
    # (T2)
    assert d3 >= d2 * d2, "(T2): D3 < D2^2"
    nup = [(trip[0] - d3) / 3]
    lam = ((d2 - d3) - nup[0]) / sum(nu[1:])
    nup += [lam * v for v in nu[1:]]
    assert all(v >= 0 for v in nup) and sum(nup) == d2 - d3, "(T2): nu' negative or nu'(1) wrong"
    # (T3) band: |nu'(c)/nu(c) - 1/15| <= sigma; total variation <= sqrt(D2) sigma (squared)
    for a, b in zip(nup, nu):
        assert (a / b - F(1, 15)) ** 2 <= sig2, "nu' outside the weight band"
    tv = sum(abs(a - b / 15) for a, b in zip(nup, nu))
    assert tv * tv <= d2 * sig2, "total-variation coupling violated"
    # (T4) tau = mu^{x3} - D3 delta_(1,1,1) - nu' at the three patterns: nonnegative where it changes
    assert trip[0] - d3 - 3 * nup[0] >= 0, "(T4): tau(1,1,1) < 0"
    assert all(trip[k] - nup[k] >= 0 for k in (1, 2, 3)), "(T4): tau < 0 at (1, c, c)"
    # R = nu((c)_-)/D2 = (1/12 + (5/12)/sqrt 5)/D2 = (1 + sqrt 5)/(12 D2) > 4  <=>  sqrt 5 > 48 D2 - 1
    # R = (1 + sqrt 5)/(12 D2) >= claim  <=>  (1 - 12 D2 claim) + sqrt 5 >= 0, sign decided exactly
    R = Q5(1, 1) / (12 * d2)
    assert (R - claim).sign() >= 0, f"R = {float(R):.6f} does not reach the claimed {float(claim)}"
    x = 48 * d2 - 1
    assert x < 0 or x * x < 5, "R <= 4"
    print(f"OK: a weighted three-point relaxation (T1)-(T4) is feasible at D2 = {d2}: "
          f"R = (1 + sqrt 5)/(12 D2) = {float(R):.6f} >= {float(claim)} > 4 exactly "
          f"(so (T1)-(T4) cannot reach t >= 1/4)  ({time.time() - t0:.3f} s)")
    return R


if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except (AssertionError, KeyError, ValueError, ZeroDivisionError) as e:
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise SystemExit(1) from None
