"""Exact checker (fractions only): the summed-trace (Ky Fan) relaxation cannot reach 1/4.

The summed argument: if (I + C) Y = 0, Y^T Y = I_3 and 0 <= C <= t, then
3 = -tr(Y^T C Y) = -sum_{i != j} C_ij P_ij <= t * F(P),  F(P) = sum_{i != j} (P_ij)_-,  P = Y Y^T.
It proves t > 1/4 only if F(P) < 12 for every rank-3 orthogonal projector P on R^15. The file
sum_barrier.json holds a graph B on 15 vertices and a rational 15 x 3 matrix Y with
-tr((Y^T Y)^{-1} Y^T B Y) > 12, i.e. F(P) >= -<B, P> > 12 for the projector P onto col(Y): the
summed relaxation is feasible at t = 1/4. The file claims -<B, P> >= 12.0502 ("claim"), the
value README.md states (its exact value is 12.050286...): so the summed relaxation in the
orthonormal basis proves at most t >= 3/12.0502 = 0.248958; a configuration that does not reach
the claim, or a claim other than the stated one, fails (exit 1).

Usage: python3 check_sum_barrier.py [sum_barrier.json]     (exit 0: checked; 1: failed)
"""
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
FORMAT = "certify-attention/research/sum-barrier/2"
STATED = Fraction(120502, 10000)           # -<B, P> >= 12.0502, as README.md states
if not __debug__:
    raise SystemExit("this checker's checks are assert statements: run it without python -O")


def frac(s):
    p, r = s.split("/")
    return Fraction(int(p), int(r))


def inv3(M):
    a, b, c = M[0]
    d, e, f = M[1]
    g, h, i = M[2]
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    assert det != 0
    adj = [[e * i - f * h, c * h - b * i, b * f - c * e],
           [f * g - d * i, a * i - c * g, c * d - a * f],
           [d * h - e * g, b * g - a * h, a * e - b * d]]
    return [[x / det for x in row] for row in adj]


def main(path=None):
    t0 = time.time()
    d = json.loads(Path(path or HERE / "sum_barrier.json").read_text())
    assert d.get("format") == FORMAT, f"format is not {FORMAT}"
    claim = frac(d["claim"]["value_at_least"])
    assert claim == STATED and claim > 12, f"the file claims {claim}, the stated value is {STATED}"
    B = d["B"]
    Y = [[frac(v) for v in row] for row in d["Y"]]
    n = len(B)
    assert n == 15 and all(B[i][i] == 0 and all(B[i][j] in (0, 1) and B[i][j] == B[j][i]
                                                 for j in range(n)) for i in range(n))
    G = [[sum(Y[k][a] * Y[k][b] for k in range(n)) for b in range(3)] for a in range(3)]
    H = [[sum(Y[i][a] * B[i][j] * Y[j][b] for i in range(n) for j in range(n)) for b in range(3)]
         for a in range(3)]
    Gi = inv3(G)
    value = -sum(Gi[a][b] * H[b][a] for a in range(3) for b in range(3))
    assert value >= claim, f"-<B, P> = {float(value):.6f} does not reach the claimed {float(claim)}"
    print(f"OK: graph with {sum(map(sum, B)) // 2} edges, -<B, P> = {float(value):.6f} >= {float(claim)} "
          f"> 12 exactly (the summed relaxation is feasible at t = {float(3 / claim):.6f} < 1/4)"
          f"  ({time.time() - t0:.2f} s)")
    return value


if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except (AssertionError, KeyError, ValueError, ZeroDivisionError) as e:
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise SystemExit(1) from None
