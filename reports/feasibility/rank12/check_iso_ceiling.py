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
isotropic position with R(w, u) >= 3.9865219, the value the file claims ("claim":
{"kind": "summed", "R_at_least": ...}, which must equal the value README.md states; exact
R = 3.98652199903...). So R_max >= 3.9865219, and no argument confined to that relaxation can
prove more than t >= 1/R(w, u) = 0.25084522... That is all this file certifies. Whether the
relaxation reaches 1/4 (R_max < 4) is NOT certified: the configuration came from about 1,900
local maximizations of R (SLSQP, random starts), the best found, so numerically
R_max ~ 3.9865 < 4, between Theorem D's LP value 15 (1 + sqrt 5)/12 = 4.04508 and
1/0.2551557 = 3.91918 (the full 15-row problem, whose row equations the relaxation drops).

The same for the trace identity row by row: a core also gives, for each row,
|z_i|^2 = -sum_j C_ij <z_i, z_j> <= t sum_{j != i} (<z_i, z_j>)_-, i.e. w_i <= t sum_j w_j (c_ij)_-
(weights tied to rows). With tau = min_i sum_{j != i} w_j (c_ij)_- / w_i, an isotropic
configuration satisfies all these at t = 1/tau. iso_rows_ceiling.json (from
`propose_iso_ceiling.py --rows`) claims tau >= 3.9770610 (exact tau = 3.97706108...), so
arguments using only isotropic position and the row inequalities prove at most t >= 1/tau =
0.25144195... (`--rows` returns 1/tau).

Each file's claim is asserted: a configuration that does not reach it (a valid isotropic
configuration with a smaller R, say) fails with exit 1, as does a claim that differs from the
stated value.

Usage: python3 check_iso_ceiling.py [FILE] [--rows]     (exit 0: checked; 1: failed)
"""
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
FORMAT = "certify-attention/research/isotropic-ceiling/2"
# the values README.md and brackets.md state: R_max >= 3.9865219 (summed), tau_max >= 3.9770610 (rows)
STATED = {"summed": Fraction(39865219, 10**7), "rows": Fraction(39770610, 10**7)}


def require(cond, msg):
    """An explicit check (not `assert`: it must hold under python -O too)."""
    if not cond:
        raise AssertionError(msg)


def frac(s):
    p, r = s.split("/") if "/" in s else (s, "1")
    return Fraction(int(p), int(r))


def main(path=None, rows=False):
    t0 = time.time()
    default = "iso_rows_ceiling.json" if rows else "iso_ceiling.json"
    d = json.loads(Path(path or HERE / default).read_text())
    require(d.get("format") == FORMAT, f"format is not {FORMAT}")
    u = [[frac(c) for c in v] for v in d["u"]]
    w = [frac(x) for x in d["w"]]
    n = len(u)
    require(n == len(w) and 3 <= n <= 15 and all(len(v) == 3 for v in u), "shape: at most 15 points in R^3")
    require(all(sum(c * c for c in v) == 1 for v in u), "u_i not exactly unit")
    require(all(x > 0 for x in w), "weights must be positive")
    s = sum(w) / 3
    for a in range(3):
        for b in range(3):
            m = sum(w[i] * u[i][a] * u[i][b] for i in range(n))
            require(m == (s if a == b else 0), f"not isotropic at ({a}, {b})")
    row = [Fraction(0)] * n                     # row[i] = sum_{j != i} w_j (c_ij)_-
    for i in range(n):
        for j in range(n):
            if i != j:
                c = sum(x * y for x, y in zip(u[i], u[j]))
                if c < 0:
                    row[i] -= w[j] * c
    R = sum(w[i] * row[i] for i in range(n)) / sum(x * x for x in w)
    tau = min(row[i] / w[i] for i in range(n))
    require(tau <= R, "least row ratio above the summed ratio")
    claim = d["claim"]
    kind = claim["kind"]
    require(kind in STATED, f"unknown claim kind {kind!r}")
    value = frac(claim["tau_at_least" if kind == "rows" else "R_at_least"])
    require(value == STATED[kind], f"the file claims {value}, the stated value is {STATED[kind]}")
    reached = tau if kind == "rows" else R
    require(reached >= value, f"{'tau' if kind == 'rows' else 'R'} = {float(reached):.7f} does not reach "
                              f"the claimed {float(value):.7f}")
    ceiling = 1 / tau if rows else 1 / R
    print(f"OK: {n} rational unit vectors in exact weighted isotropic position; summed "
          f"R = {float(R):.7f} (relaxation feasible at t = {float(1 / R):.7f}), least row ratio "
          f"tau = {float(tau):.7f} (row-wise relaxation feasible at t = {float(1 / tau):.7f}); claim "
          f"{'tau' if kind == 'rows' else 'R'} >= {value} = {float(value):.7f} holds, so no argument "
          f"confined to the {'row-wise ' if kind == 'rows' else ''}relaxation proves more than "
          f"t >= {float(1 / reached):.8f}  ({time.time() - t0:.2f} s)")
    return ceiling


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--rows"]
    try:
        main(*args, rows="--rows" in sys.argv[1:])
    except (AssertionError, KeyError, ValueError, ZeroDivisionError) as e:
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise SystemExit(1) from None
