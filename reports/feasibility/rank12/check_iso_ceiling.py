"""Exact checker (fractions only): the ceiling of Theorem D's relaxation at n = 15.

Theorem D (check_delsarte.py) uses, of a core with nullity 3, only this: the kernel rows
z_i = w_i u_i (w_i > 0, |u_i| = 1, at most 15 of them) are in weighted isotropic position,
    sum_i w_i u_i u_i^T = (sum_i w_i / 3) I,
and satisfy the summed trace inequality sum_i w_i^2 <= t sum_{i != j} w_i w_j (c_ij)_-,
c_ij = <u_i, u_j>. So every argument that uses only these two properties (the Delsarte LP of
any degree, a three-point SDP on the same configuration, a branch-and-bound over it) proves at
most t >= 1/R_max, where
    R(w, u) = sum_{i != j} w_i w_j (c_ij)_- / sum_i w_i^2
and R_max is its maximum over weighted isotropic configurations of 15 points.

CLAIM (checked here exactly): iso_ceiling.json holds 15 rational unit vectors u_i (rational
points of the sphere: sum of squares exactly 1) and rational weights w_i > 0 in exact weighted
isotropic position with R(w, u) = R_0 = 3.98652... So R_max >= R_0 and no argument confined to
that relaxation can prove more than t >= 1/R_0 = 0.2508452... The needed 1/4 is below this
ceiling (R_0 < 4), so the relaxation is not refuted: it may still suffice, but with a margin
of at most 0.34 % in t, against 1.1 % of Theorem D's LP. The configuration came from about
1,900 local maximizations of R (SLSQP, random starts); numerically it is the best found, i.e.
R_max ~ 3.9865 (1/R_max ~ 0.25085), between Theorem D's LP value 15 (1 + sqrt 5)/12 = 4.04508
and 1/0.2551557 = 3.91918 (the full 15-row problem, whose row equations the relaxation drops).

The same for the trace identity row by row: a core also gives, for each row,
|z_i|^2 = -sum_j C_ij <z_i, z_j> <= t sum_{j != i} (<z_i, z_j>)_-, i.e. w_i <= t sum_j w_j (c_ij)_-
(weights tied to rows). With tau = min_i sum_{j != i} w_j (c_ij)_- / w_i, an isotropic
configuration satisfies all these at t = 1/tau. iso_rows_ceiling.json (from
`propose_iso_ceiling.py --rows`) has tau = 3.9770611..., so arguments using only isotropic
position and the row inequalities prove at most t >= 0.2514420 (`--rows` returns 1/tau).

Usage: python3 check_iso_ceiling.py [FILE] [--rows]
"""
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent


def frac(s):
    p, r = s.split("/") if "/" in s else (s, "1")
    return Fraction(int(p), int(r))


def main(path=None, rows=False):
    t0 = time.time()
    default = "iso_rows_ceiling.json" if rows else "iso_ceiling.json"
    d = json.loads(Path(path or HERE / default).read_text())
    u = [[frac(c) for c in v] for v in d["u"]]
    w = [frac(x) for x in d["w"]]
    n = len(u)
    assert n == len(w) and 3 <= n <= 15 and all(len(v) == 3 for v in u)
    assert all(sum(c * c for c in v) == 1 for v in u), "u_i not exactly unit"
    assert all(x > 0 for x in w), "weights must be positive"
    s = sum(w) / 3
    for a in range(3):
        for b in range(3):
            m = sum(w[i] * u[i][a] * u[i][b] for i in range(n))
            assert m == (s if a == b else 0), f"not isotropic at ({a}, {b})"
    row = [Fraction(0)] * n                     # row[i] = sum_{j != i} w_j (c_ij)_-
    for i in range(n):
        for j in range(n):
            if i != j:
                c = sum(x * y for x, y in zip(u[i], u[j]))
                if c < 0:
                    row[i] -= w[j] * c
    R = sum(w[i] * row[i] for i in range(n)) / sum(x * x for x in w)
    tau = min(row[i] / w[i] for i in range(n))
    assert tau <= R
    ceiling = 1 / tau if rows else 1 / R
    print(f"OK: {n} rational unit vectors in exact weighted isotropic position; summed "
          f"R = {float(R):.7f} (relaxation feasible at t = {float(1 / R):.7f}), least row ratio "
          f"tau = {float(tau):.7f} (row-wise relaxation feasible at t = {float(1 / tau):.7f}); "
          f"ceiling{' (rows)' if rows else ''} {float(ceiling):.7f} > 1/4: {ceiling > Fraction(1, 4)}"
          f"  ({time.time() - t0:.2f} s)")
    return ceiling


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--rows"]
    main(*args, rows="--rows" in sys.argv[1:])
