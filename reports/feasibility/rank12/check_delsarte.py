"""Exact checker (fractions only): certified lower bound t* >= 1/B on the uniform ratio for nullity 3.

THEOREM. Let C be a real n x n matrix, n <= 15, zero diagonal, 0 <= C_ij <= t, and suppose
I + C has nullity >= 3. Then t >= 1/B, where B = 15 a_0 - g(1) for ANY polynomial
g = sum_k a_k P_k (P_k Legendre polynomials) with
   (i) a_0 >= 0, a_1 <= 0, a_k <= 0 for k >= 3 (a_2 arbitrary), and
  (ii) g(c) >= max(0, -c) for all c in [-1, 1].
The certificate in delsarte_certificate.json has g = a_0 - c/2 + a_2 P_2(c) + a_4 P_4(c); then
g(c) - max(0,-c) = E(|c|) with E(x) = a_0 + a_2 P_2(x) + a_4 P_4(x) - x/2, so (ii) <=> E >= 0
on [0, 1], checked exactly by Bernstein-basis subdivision. The optimum of this LP is
B = 15 (1 + sqrt 5)/12 = 4.04508..., i.e. t* >= (sqrt 5 - 1)/5 = 0.247213... (for n = 15, < 1/4).

PROOF. Take Y (n x 3, rank 3) with (I + C) Y = 0. Drop the zero rows of Y (they contribute to no
sum below; at most 15 rows remain).
(1) Weighted isotropic position. f(L) = sum_i |L y_i| on SL(3) is continuous and coercive:
    |L y| >= s_max(L) |<v_1, y>| (v_1 a top right singular vector), and
    c_0 = min_{|v|=1} sum_i |<v, y_i>| > 0 because the y_i span R^3, so f(L) >= s_max(L) c_0, and
    s_max -> infinity whenever L leaves a compact subset of SL(3). So f has a minimizer L; there
    all z_i = L y_i != 0 and f is smooth; the derivative along L -> (I + eps X) L (tr X = 0) is
    sum_i z_i^T X z_i / |z_i| = <X, sum_i z_i z_i^T/|z_i|>, which vanishes for all traceless X, so
    sum_i w_i u_i u_i^T = s I with w_i = |z_i|, u_i = z_i/|z_i|, s = sum_i w_i / 3.
(2) Trace identity. Z = Y L^T satisfies C Z = -Z, so sum_i |z_i|^2 = -tr(Z^T C Z)
    = -sum_{i != j} C_ij <z_i, z_j> <= t sum_{i != j} <z_i, z_j>_-
    = t sum_{i != j} w_i w_j (c_ij)_-,  c_ij = <u_i, u_j> in [-1, 1].
(3) Delsarte. With Q_k = sum_{i,j} w_i w_j P_k(c_ij): Q_k >= 0 for every k (P_k(<x,y>) is a
    positive-definite kernel on the sphere S^2, addition theorem), Q_0 = (sum w)^2, and
    Q_2 = (3/2) ||sum_i w_i u_i u_i^T||_F^2 - (1/2)(sum w)^2 = (3/2)(3 s^2) - (1/2)(3 s)^2 = 0.
    Hence sum_{i != j} w_i w_j (c_ij)_- <= sum_{i != j} w_i w_j g(c_ij)
    = sum_k a_k Q_k - g(1) sum_i w_i^2 <= a_0 (sum w)^2 - g(1) sum w_i^2 <= (15 a_0 - g(1)) sum w_i^2
    (Cauchy-Schwarz with at most 15 rows, a_0 >= 0).
(4) Combining, sum w_i^2 <= t B sum w_i^2, so t >= 1/B.   QED
(The rank of the core of a head is at least rank(I + C) (brackets.md); so a head of rank 12 would
need a core with nullity 3, impossible when every ratio C_ij is < 1/B. This does NOT reach 1/4.)

Usage: python3 check_delsarte.py [delsarte_certificate.json]
"""
import json, sys, time
from pathlib import Path
from fractions import Fraction as F

HERE = Path(__file__).resolve().parent

def frac(s):
    p, r = s.split("/"); return F(int(p), int(r))

def poly_E(a0, a2, a4):
    # monomial coefficients (x^0..x^4) of a0 + a2 (3x^2-1)/2 + a4 (35x^4 - 30x^2 + 3)/8 - x/2
    return [a0 - a2 / 2 + 3 * a4 / 8, F(-1, 2), 3 * a2 / 2 - 30 * a4 / 8, F(0), 35 * a4 / 8]

def bernstein(p, lo, hi):
    """Bernstein coefficients of p (monomial coeffs) on [lo, hi], exact."""
    n = len(p) - 1
    # substitute x = lo + (hi-lo) y: q(y) coefficients
    from math import comb
    q = [F(0)] * (n + 1)
    for k, ck in enumerate(p):
        for j in range(k + 1):
            q[j] += ck * comb(k, j) * lo ** (k - j) * (hi - lo) ** j
    return [sum(F(comb(i, j), comb(n, j)) * q[j] for j in range(i + 1)) for i in range(n + 1)]

def nonneg_on(p, lo, hi, depth=0):
    b = bernstein(p, lo, hi)
    if min(b) >= 0:
        return 1
    if b[0] < 0 or b[-1] < 0 or depth > 40:
        return None
    mid = (lo + hi) / 2
    l = nonneg_on(p, lo, mid, depth + 1)
    r = nonneg_on(p, mid, hi, depth + 1) if l else None
    return (l + r) if (l and r) else None

def main(path=None):
    path = path or HERE / 'delsarte_certificate.json'
    t0 = time.time()
    d = json.loads(Path(path).read_text())
    a0, a1, a2, a3, a4 = (frac(d[k]) for k in ("a0", "a1", "a2", "a3", "a4"))
    assert a1 == F(-1, 2) and a3 == 0 and a4 <= 0 and a0 >= 0      # sign conditions (i)
    p = poly_E(a0, a2, a4)
    boxes = nonneg_on(p, F(0), F(1))
    assert boxes, "E >= 0 on [0,1] not verified"                    # condition (ii)
    g1 = a0 + a1 + a2 + a3 + a4
    B = 15 * a0 - g1
    tb = 1 / B
    print(f"OK: g >= (c)_- on [-1,1] ({boxes} Bernstein boxes), sign conditions hold; "
          f"B = 15 a0 - g(1) = {float(B):.8f}; every C with nullity(I+C) >= 3 (n <= 15) has max ratio "
          f">= 1/B = {tb} = {float(tb):.8f} (< 1/4: {tb < F(1, 4)})  ({time.time() - t0:.3f} s)")
    return tb

if __name__ == "__main__":
    main(*sys.argv[1:])
