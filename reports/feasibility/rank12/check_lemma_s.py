"""Exact sanity check of Lemma S on the rank-12 core point (core_rank12_exact.json: ratios <= 0.255158) (fractions only).

Lemma S: if (I + C) Y = 0 with Y of rank 3 and C real, then S = (C + C^T)/2 satisfies
Y^T S Y = -Y^T Y (so S has at least 3 eigenvalues <= -1, Courant-Fischer).
Checked here: Y^T S Y = -Y^T Y exactly, and the inertia of S + I (exact LDL^T with symmetric
pivoting on the Gram-free matrix) has >= 3 nonpositive eigenvalues; for S/t with t = 127579/500000
this gives psi(15,3) >= 1/t = 3.91914... (the weighted-graph quantity of README.md).
Usage: python3 check_lemma_s.py [core_rank12_exact.json]
"""
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATED = Fraction(127579, 500000)          # the ratio README.md states for the core point
if not __debug__:
    raise SystemExit("this checker's checks are assert statements: run it without python -O")

def frac(s):
    p, r = s.split("/")
    return Fraction(int(p), int(r))

def inertia(M):
    """(n_neg, n_zero, n_pos) of a symmetric rational matrix, by Sylvester's law via exact
    congruence (Gaussian elimination with 2x2 handling when the diagonal vanishes)."""
    M = [row[:] for row in M]
    n = len(M)
    neg = zero = pos = 0
    idx = list(range(n))
    while idx:
        piv = next((i for i in idx if M[i][i] != 0), None)
        if piv is None:
            # all remaining diagonal entries 0: find an off-diagonal nonzero and use x_i + x_j
            pair = next(((i, j) for i in idx for j in idx if i < j and M[i][j] != 0), None)
            if pair is None:
                zero += len(idx)
                break
            i, j = pair
            for k in range(n):                      # row/col i += row/col j (a congruence)
                M[i][k] += M[j][k]
            for k in range(n):
                M[k][i] += M[k][j]
            continue
        p = M[piv][piv]
        if p > 0:
            pos += 1
        else:
            neg += 1
        rest = [i for i in idx if i != piv]
        for i in rest:
            f = M[i][piv] / p
            if f:
                for k in rest:
                    M[i][k] -= f * M[piv][k]
        idx = rest
    return neg, zero, pos

def main(path=None):
    path = path or HERE / 'core_rank12_exact.json'
    t0 = time.time()
    d = json.loads(Path(path).read_text())
    C = [[frac(v) for v in row] for row in d["C"]]
    Y = [[frac(v) for v in row] for row in d["Y"]]
    t = frac(d["t"])
    n = len(C)
    assert t == STATED, f"the file claims t = {t}, the stated value is {STATED}"
    # the point itself: zero diagonal, 0 <= C <= t (the special pairs <= t * special_factor),
    # and (I + C) Y = 0 with Y of rank 3, i.e. rank(I + C) <= 12
    sf = frac(d["special_factor"])
    special = {tuple(p) for p in d["special"]}
    assert all(C[i][i] == 0 for i in range(n))
    assert all(0 <= C[i][j] <= (t * sf if (i, j) in special else t) for i in range(n) for j in range(n))
    assert all(Y[i][r] + sum(C[i][j] * Y[j][r] for j in range(n)) == 0 for i in range(n) for r in range(3))
    assert any(Y[i][0] * (Y[j][1] * Y[k][2] - Y[j][2] * Y[k][1]) - Y[i][1] * (Y[j][0] * Y[k][2] - Y[j][2] * Y[k][0])
               + Y[i][2] * (Y[j][0] * Y[k][1] - Y[j][1] * Y[k][0]) != 0
               for i in range(n) for j in range(i + 1, n) for k in range(j + 1, n))   # rank Y = 3
    S = [[(C[i][j] + C[j][i]) / 2 for j in range(n)] for i in range(n)]
    for a in range(3):
        for b in range(3):
            ySy = sum(Y[i][a] * S[i][j] * Y[j][b] for i in range(n) for j in range(n))
            yy = sum(Y[i][a] * Y[i][b] for i in range(n))
            assert ySy == -yy
    neg, zero, pos = inertia([[S[i][j] + (1 if i == j else 0) for j in range(n)] for i in range(n)])
    assert neg + zero >= 3
    assert all(0 <= S[i][j] <= t for i in range(n) for j in range(n))
    print(f"OK: n = {n}, 0 <= C <= t, (I + C) Y = 0 with rank Y = 3; Y^T S Y = -Y^T Y exactly; inertia(S + I) = (neg {neg}, zero {zero}, pos {pos}); "
          f"0 <= S <= t = {float(t):.6f}, so lambda_3(S/t) <= -1/t = {float(-1 / t):.6f}  ({time.time() - t0:.2f} s)")

if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except (AssertionError, KeyError, ValueError, ZeroDivisionError) as e:
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise SystemExit(1) from None
