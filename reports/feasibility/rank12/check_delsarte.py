"""Exact checker (fractions only): certified lower bound t* >= 1/B on the uniform ratio for nullity 3.

THEOREM. Let C be a real n x n matrix, n <= 15, zero diagonal, 0 <= C_ij <= t, and suppose
I + C has nullity >= 3. Then t >= 1/B, where B = 15 a_0 - g(1) for ANY polynomial
g = sum_k a_k P_k (P_k Legendre polynomials) with
   (i) a_0 >= 0, a_1 <= 0, a_k <= 0 for k >= 3 (a_2 arbitrary), and
  (ii) g(c) >= max(0, -c) for all c in [-1, 1].
The certificate in delsarte_certificate.json is the LP optimum itself, in exact Q(sqrt 5)
arithmetic (qsqrt5.py; signs decided exactly): g = a_0 - c/2 + a_2 P_2(c) + a_4 P_4(c) with
    a_0 = (1 + sqrt 5)/12, a_1 = -1/2, a_2 = (10 + sqrt 5)/42, a_3 = 0, a_4 = (5 - 3 sqrt 5)/28.
Since a_1 = -1/2 and a_3 = 0, g(c) - max(0, -c) = E(|c|) with E(x) = a_0 + a_2 P_2(x) + a_4 P_4(x) - x/2,
so (ii) <=> E >= 0 on [0, 1]. The file gives the factorization E(x) = k (x - r)^2 (x - 1)(x - s)
(k = 35 a_4/8 = (25 - 15 sqrt 5)/32 < 0, r = 1/sqrt 5, s = -1 - 2/sqrt 5 <= 0); the checker expands
it and compares coefficients exactly, and then E >= 0 on [0, 1] because (x - r)^2 >= 0,
x - 1 <= 0, x - s >= 0 there and k < 0. So B = 15 a_0 - g(1) = 15 (1 + sqrt 5)/12 exactly and
    t >= 1/B = (sqrt 5 - 1)/5 = 0.24721359...   (for n = 15: < 1/4),
the value the file claims (checked equal, and equal to the value the README states). No
polynomial does better (check_equality_case.py part (1)), so this is the LP's exact value. With
n = 12 rows the same g gives t >= 1/(12 a_0 - g(1)) = (sqrt 5 - 1)/4 (checked), which the 12-row
icosahedral core attains (check_equality_case.py part (2)): t*(12, 3) = (sqrt 5 - 1)/4.

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

Usage: python3 check_delsarte.py [delsarte_certificate.json]     (exit 0: checked; 1: failed)
"""
import json
import sys
import time
from fractions import Fraction as F
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from qsqrt5 import Q5, parse  # noqa: E402

FORMAT = "certify-attention/research/delsarte-nullity3/2"
STATED = Q5(F(-1, 5), F(1, 5))          # (sqrt 5 - 1)/5: the value README.md and brackets.md state


def require(cond, msg):
    """An explicit check (not `assert`: it must hold under python -O too)."""
    if not cond:
        raise AssertionError(msg)


def poly_E(a0, a2, a4):
    """Monomial coefficients (x^0..x^4) of a0 + a2 (3x^2-1)/2 + a4 (35x^4 - 30x^2 + 3)/8 - x/2."""
    return [a0 - a2 * F(1, 2) + a4 * F(3, 8), Q5(F(-1, 2)), a2 * F(3, 2) - a4 * F(30, 8), Q5(0),
            a4 * F(35, 8)]


def poly_mul(p, q):
    out = [Q5(0)] * (len(p) + len(q) - 1)
    for i, x in enumerate(p):
        for j, y in enumerate(q):
            out[i + j] = out[i + j] + x * y
    return out


def main(path=None):
    t0 = time.time()
    d = json.loads(Path(path or HERE / "delsarte_certificate.json").read_text())
    require(d.get("format") == FORMAT, f"format is not {FORMAT}")
    require(d.get("n_max") == 15, "n_max must be 15")
    a0, a1, a2, a3, a4 = (parse(d[k]) for k in ("a0", "a1", "a2", "a3", "a4"))
    # (i) sign conditions, and the shape that makes g(c) - (c)_- = E(|c|)
    require(a1 == Q5(F(-1, 2)) and a3 == Q5(0), "a1 must be -1/2 and a3 must be 0")
    require(a0.sign() >= 0 and a4.sign() <= 0, "sign conditions a0 >= 0, a4 <= 0 fail")
    # (ii) E >= 0 on [0, 1] from the factorization E = k (x - r)^2 (x - 1)(x - s)
    fac = d["E_factor"]
    k, r, s = parse(fac["k"]), parse(fac["r"]), parse(fac["s"])
    prod = [k]
    for root in (r, r, Q5(1), s):
        prod = poly_mul(prod, [-root, Q5(1)])
    E = poly_E(a0, a2, a4)
    require(prod == E, "E(x) is not k (x - r)^2 (x - 1)(x - s)")
    require((k.sign() < 0 and s.sign() <= 0) or (k.sign() > 0 and (s - 1).sign() >= 0) or k.sign() == 0,
            "the factorization does not give E >= 0 on [0, 1]")
    g1 = a0 + a1 + a2 + a3 + a4
    B = 15 * a0 - g1
    require(B.sign() > 0, "B must be positive")
    tb = 1 / B
    claim = parse(d["claim"]["t_at_least"])
    require(claim == STATED, f"the file claims {claim}, the stated value is (sqrt 5 - 1)/5")
    require((tb - claim).sign() >= 0, f"the certificate gives t >= {float(tb):.10f}, below its claim")
    require((tb - F(1, 4)).sign() < 0, "1/B >= 1/4 would contradict check_equality_case.py")
    # the same g with n = 12 rows (Cauchy-Schwarz over 12): t*(12, 3) >= 1/(12 a0 - g(1)) =
    # (sqrt 5 - 1)/4, which the 12-row icosahedral core of check_equality_case.py attains
    t12 = 1 / (12 * a0 - g1)
    require(t12 == Q5(F(-1, 4), F(1, 4)), "the n = 12 bound is not (sqrt 5 - 1)/4")
    print(f"OK: g >= (c)_- on [-1,1] (E = k (x - 1/sqrt 5)^2 (x - 1)(x - s), k < 0, s <= 0, exact in "
          f"Q(sqrt 5)), sign conditions hold; B = 15 a0 - g(1) = 15 (1 + sqrt 5)/12 = {float(B):.8f}; "
          f"every C with nullity(I+C) >= 3 (n <= 15) has max ratio >= 1/B = (sqrt 5 - 1)/5 = "
          f"{float(tb):.8f} exactly (< 1/4); with n = 12 rows, >= (sqrt 5 - 1)/4  ({time.time() - t0:.3f} s)")
    return tb


if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except (AssertionError, KeyError, ValueError, ZeroDivisionError) as e:
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise SystemExit(1) from None
