/* Correctly rounded elementary functions and fixed-order dot products for the
 * canonical extraction (models/canonical/arith.py).
 *
 * WHAT IS COMPUTED
 * ----------------
 * Each function value is the exact real value rounded to the nearest double
 * (ties to even), the definition python-flint's arb path of arith.py computes.
 * Here a double-double approximation y = yh + yl with a PROVEN error bound
 * |v - y| <= E0 is computed, then Ziv's rounding test decides: if every point
 * of [y - E0, y + E0] rounds to the same double, that double is the answer;
 * otherwise the element is reported undecided and arith.py computes it with
 * arb (the same definition, so the same bits). Inputs outside the proven
 * domains (NaN, infinities, a few subnormal inputs) are undecided as well:
 * arb then gives today's value or today's error, by construction.
 *
 * linear(x, W, b) and rowsum(x) perform, entry by entry, exactly the IEEE
 * double operations of the loops they replace,
 *     acc = x[0] * W[0]; acc = acc + x[j] * W[j] (j = 1 .. m-1); acc + b,
 * vectorized across outputs and tokens, never across the reduction index;
 * blocking over tokens and outputs only reorders independent entries. So does
 * prenorm (the pre-norms of maps.py, one pass per row).
 *
 * exp (map) and softmax run, in the x86-64-v3 variant, a branch-free pass first
 * (exp_pass, softmax_row_fast: the same operations on the common path, selects
 * by bit masks, so that the compiler vectorises the loop) and the
 * element-by-element loop (the plain twin) for every element or row the pass
 * does not decide; map and softmax take plain=1 to run the twin alone (tests).
 *
 * PORTABILITY
 * -----------
 * Compiled with -ffp-contract=off -fno-fast-math: every + - * / is the IEEE
 * operation written, never fused or reassociated. fma() is used explicitly
 * only inside two_prod, where it is exact (C99 requires fma to be correctly
 * rounded; an FMA instruction or glibc's software fma give the same bits).
 * Each entry point sets the floating-point environment to round-to-nearest
 * with subnormals enabled (x86 MXCSR = 0x1F80: no FTZ/DAZ; aarch64 FPCR.FZ
 * cleared) and restores the caller's afterwards, so a process that enabled
 * flush-to-zero (e.g. torch.set_flush_denormal) gets the same bits. No libm
 * transcendental function is called. The results therefore do not depend on
 * the CPU: SSE2, AVX2 and AVX-512 variants of a loop compute the same
 * operations per element (the tests compare every variant this CPU runs),
 * and the elementwise results are correctly rounded, hence unique.
 *
 * NOTATION AND BUILDING BLOCKS (u = 2^-53, all in round-to-nearest)
 * -----------------------------------------------------------------
 * RN(a op b) = (a op b)(1 + d), |d| <= u, for results in the normal range;
 * every quantity below lies in [2^-800, 2^800] in magnitude or is exact,
 * except where noted, and the slack term 2^-100 |yh| (|yh| >= 2^-800) of the
 * rounding test absorbs any further absolute error below 2^-901 (subnormal
 * intermediates).
 * A double-double (DD) x = xh + xl is normalized: |xl| <= u |xh|.
 *   two_sum(a, b), fast_two_sum(a, b) (|a| >= |b|), two_prod(a, b) (fma):
 *       exact: s + e = a + b, p + e = a * b.
 *   dd_add (Joldes, Muller, Popescu, ACM TOMS 44(2), 2017, Alg. 6,
 *       AccurateDWPlusDW): relative error <= 3u^2 + 13u^3 < 3.01 u^2.
 *   dd_mul_d (DD times double): c = two_prod(xh, y), t = RN(xl y),
 *       (zh, zl) = fast_two_sum(ch, RN(cl + t)). Errors: |t - xl y| <= u^2|xh y|,
 *       |RN(cl + t) - (cl + t)| <= u (u + u^2 (1+u)) |xh y|; total < 3.03 u^2 |xy|.
 *   dd_mul (DD times DD): p = two_prod(xh, yh), t1 = RN(xh yl), t2 = RN(xl yh),
 *       s = RN(RN(pl + t1) + t2), fast_two_sum(ph, s); dropped xl yl <= u^2|xy|;
 *       |t1 - xh yl|, |t2 - xl yh| <= u^2 |xy|; the two additions err by
 *       <= u (2u + 3u)|xy| each at most 3u^2 |xy|. Total < 10 u^2 (relative).
 *   dd_div (DD / DD, b > 0): q1 = RN(ah/bh); (p, e) = two_prod(q1, bh);
 *       r = RN(RN(RN((ah - p) - e) + al) - RN(q1 bl)); q2 = RN(r / bh);
 *       fast_two_sum(q1, q2). ah - p is exact (Sterbenz: p = ah (1 + d)^2).
 *       The exact remainder R = a - q1 b satisfies |R| <= 5.01 u |ah|; the three
 *       roundings and RN(q1 bl) add at most 13.06 u^2 |ah|; then
 *       |q2 - R/b| <= 13.06 u^2 |ah/bh| + |R||bl|/(|bh||b|) + u |r/bh|
 *                  <= 23.1 u^2 |ah/bh| (1 + 4u), and |a/b| >= |ah/bh| (1-u)/(1+u):
 *       relative error < 24 u^2.
 *
 * ZIV'S ROUNDING TEST (finish)
 * ----------------------------
 * Given v = 2^k (yh + yl + d), |d| <= E0 (E0 a computed bound, true error at
 * most E0 (1 + 2^-40)), with E = RN(2 E0 + 2^-100 |yh|) and lo = RN(yh + RN(yl - E)),
 * hi = RN(yh + RN(yl + E)): RN(yl + E) >= yl + E - u(|yl| + E), so
 * RN(yl + E) - yl >= E (1 - u) - u|yl| >= E0 (1 + 2^-40) >= |d| since u|yl| <= 2^-105|yh|;
 * symmetrically for yl - E. Rounding is monotone, hence
 * lo <= RN(yh + yl + d) <= hi, and lo == hi is the correctly rounded value of
 * v / 2^k. Scaling by 2^k commutes with rounding whenever the result lies in
 * the normal range (the rounding interval of 2^k lo contains 2^k times that
 * of lo; overflow rounds to inf exactly when RN would), which holds when
 * exponent(yh) + k >= -1021. Below, the value is rounded to the subnormal grid
 * directly: a = ah + al = v 2^(k + 1074) in units of 2^-1074, n the integer
 * nearest to ah corrected by rint(ah - n + al), and n is the answer when
 * |ah - n + al| plus the scaled error stays below 1/2 with margin (doubles
 * below 2^-1021 are exactly the multiples of 2^-1074). A zero result takes
 * the sign of v, as the arb path gives it (a negative value that underflows
 * is -0.0); an exact zero input gives +0.0 (arb's zero has no sign).
 *
 * EXP CORE (exp_core), for |xh| <= 1000, |xl| <= 2^-52 |xh|
 * ----------------------------------------------------------
 * C = ln2/1024 = C1 + C2 + C3 (+ below u|C3|): C1, C2 of 32 significant bits,
 * |C - C1| <= 2^-43, |C3| <= 2^-76 (checked when the tables are built).
 * k = rint(RN(xh * INV)), INV = RN(1024/ln2): |k| < 2^21 and
 * |xh - k C| <= (1/2 + 2^-30) C. The products k C1, k C2 are exact (<= 53
 * bits). s = xh - k C1 is exact: if k = 0, s = xh; otherwise |xh| >= 2^-12, so
 * xh is a multiple of 2^-64, as is k C1 (C1 is a multiple of 2^-42), and
 * |s| <= 0.5001 C + 2^-22 < 2^-11, so s fits in 53 bits. Then
 * (rh, rl) = two_sum(s, -k C2) exactly; w = RN(xl - RN(k C3)) and
 * (r1, r2) = two_sum(rh, RN(rl + w)). The reduced argument r = r1 + r2 differs
 * from the exact xh + xl - k C by at most 2^-93.9 (2^-105.5 when xl = 0), and
 * |r1| <= rho = 2^-11.52.
 * exp(r) - 1 = r + r^2/2 + r^2 Q1(r) + (terms of degree >= 7), where
 * Q1(r) = r/6 + r^2/24 + r^3/120 + r^4/720; truncation <= rho^7/7! e^rho < 2^-92.9.
 * Computed: (sh, sl) = two_prod(r1, r1); Q1 in double by Horner (error
 * <= 8u Sum|c_i||r1|^i <= 2^-64.1); T3 = RN(sh Q1) (error <= 2^-86.9 including
 * Q1's); p = fast_two_sum(two_sum(r1, sh/2) + ((r2 + sl/2) + r1 r2) + T3) (sums
 * err <= 2^-88.5; replacing r by r1 inside Q1 costs <= (rho^2/2) u rho < 2^-88.5).
 * So |p - (exp(r) - 1)| <= 2^-86.05 (relative to |r| when k = 0 and xl = 0:
 * every term is at least linear in r; the dominant T3 error is 1.51 u r1^3,
 * so |p - expm1(r)| <= 2^-74.8 |expm1(r)|).
 * exp(x) = 2^q T_j (1 + p), k = 1024 q + j, T_j = 2^(j/1024) as a DD table
 * (error <= 2^-106 T_j, built with arb); the product is assembled with one
 * two_prod and two_sum (error <= 2^-102.8). Total relative error
 * < 2^-85.8 <= EXP_REL = 2^-85; y = T_j (1 + p) lies in [0.9996, 2.0014].
 *
 * TAYLOR TABLES (softplus, tanh, Phi, Mills ratio)
 * -----------------------------------------------------
 * Nodes a0 = first + i/16; |h| = |a - a0| <= 1/32 + 2^-40 = H (checked); per
 * node the coefficients c_n (DD, stored with error d_n), their count N, and
 * eps, a bound on the relative error of the DD Horner evaluation:
 *     eps = (rem + gamma_2N(3.1 u^2) Sum_n |c_n| H^n + Sum_n d_n H^n) / fmin,
 * rem the Lagrange remainder bound (arb: the Taylor coefficient of order N+1
 * over the whole ball a0 +- H, or the Mills ratio's closed-form derivative
 * bound), fmin a lower bound of |f| on the interval, gamma_k(e) = k e/(1 - k e)
 * (Horner with 2N operations of relative error <= 3.1 u^2, Higham Sec. 5.1).
 * The tables and eps are computed in models/canonical/crtables.py with arb.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <fenv.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "double expressions must be evaluated in double precision (SSE2), not x87 extended precision"
#endif

/* Each loop is compiled twice on x86-64 (baseline SSE2 with fma() from libm, and
 * x86-64-v3 with the FMA instruction) and once elsewhere; the variant is picked
 * at run time (or by the caller, for the tests). The helpers are always inlined,
 * so that each variant compiles them for its own instruction set. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define X86_DISPATCH 1
#define TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#else
#define X86_DISPATCH 0
#endif
#define INLINE inline __attribute__((always_inline))

/* ------------------------------------------------------------------ floating-point environment */

typedef struct {
    unsigned int csr;
    int round;
    unsigned long long fpcr;
} fpenv_t;

static void fp_enter(fpenv_t *s)
{
#if defined(__SSE2__)
    s->csr = _mm_getcsr();
    _mm_setcsr(0x1F80); /* exceptions masked, round to nearest, no flush-to-zero, no denormals-are-zero */
#endif
#if defined(__aarch64__) && defined(__GNUC__)
    s->fpcr = __builtin_aarch64_get_fpcr64();
    __builtin_aarch64_set_fpcr64(s->fpcr & ~((1ULL << 24) | (3ULL << 22))); /* FZ off, round to nearest */
#endif
    s->round = fegetround();
    if (s->round != FE_TONEAREST)
        fesetround(FE_TONEAREST);
}

static void fp_leave(fpenv_t *s)
{
    if (s->round != FE_TONEAREST)
        fesetround(s->round);
#if defined(__aarch64__) && defined(__GNUC__)
    __builtin_aarch64_set_fpcr64(s->fpcr);
#endif
#if defined(__SSE2__)
    _mm_setcsr(s->csr);
#endif
}

/* ------------------------------------------------------------------ double-double arithmetic */

typedef struct {
    double h, l;
} dd;

static INLINE dd two_sum(double a, double b)
{
    double s = a + b;
    double bb = s - a;
    double e = (a - (s - bb)) + (b - bb);
    return (dd){s, e};
}

static INLINE dd fast_two_sum(double a, double b)
{
    double s = a + b;
    double e = b - (s - a);
    return (dd){s, e};
}

static INLINE dd two_prod(double a, double b)
{
    double p = a * b;
    return (dd){p, __builtin_fma(a, b, -p)};
}

static INLINE dd dd_add(dd x, dd y)
{
    dd s = two_sum(x.h, y.h);
    dd t = two_sum(x.l, y.l);
    double c = s.l + t.h;
    dd v = fast_two_sum(s.h, c);
    double w = t.l + v.l;
    return fast_two_sum(v.h, w);
}

static INLINE dd dd_mul_d(dd x, double y)
{
    dd c = two_prod(x.h, y);
    double t = x.l * y;
    return fast_two_sum(c.h, c.l + t);
}

static INLINE dd dd_mul(dd x, dd y)
{
    dd p = two_prod(x.h, y.h);
    double t1 = x.h * y.l;
    double t2 = x.l * y.h;
    double s = (p.l + t1) + t2;
    return fast_two_sum(p.h, s);
}

static INLINE dd dd_div(dd a, dd b)
{
    double q1 = a.h / b.h;
    dd p = two_prod(q1, b.h);
    double r = (((a.h - p.h) - p.l) + a.l) - q1 * b.l;
    double q2 = r / b.h;
    return fast_two_sum(q1, q2);
}

/* ------------------------------------------------------------------ exact helpers */

static INLINE int expo(double x) /* the exponent of a normal double */
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return (int)((u >> 52) & 0x7ff) - 1023;
}

static INLINE double pow2i(int e) /* 2^e for -1022 <= e <= 1023 */
{
    uint64_t u = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* y 2^k, exact whenever the result is normal (intermediates then are too) */
static INLINE double scale2(double y, int k)
{
    while (k > 1000) {
        y *= 0x1p1000;
        k -= 1000;
    }
    while (k < -1000) {
        y *= 0x1p-1000;
        k += 1000;
    }
    return y * pow2i(k);
}

/* the nearest integer (ties to even) of |v| < 2^52 or an integer-valued v */
static INLINE double rint52(double v)
{
    double t = v < 0 ? -0x1p52 : 0x1p52;
    if (fabs(v) >= 0x1p52)
        return v;
    return (v + t) - t;
}

#define RELPAD (1.0 + 0x1p-40)
#define U2 0x1p-106 /* u^2 */
#define EXP_REL 0x1p-85
#define EXPM1_SMALL_REL 0x1p-74
#define HMAX (0.03125 + 0x1p-40)

/* Ziv's test and the final scaling (see the header): 1 and *out when decided */
static INLINE int finish(int k, double yh, double yl, double E0, double *out)
{
    double ay = fabs(yh);
    if (!(ay >= 0x1p-800 && ay <= 0x1p800) || !(E0 >= 0.0 && E0 <= ay * 0x1p-40))
        return 0;
    double E = 2.0 * E0 + ay * 0x1p-100;
    int er = expo(yh) + k;
    if (er >= -1021) {
        double lo = yh + (yl - E), hi = yh + (yl + E);
        if (lo != hi)
            return 0;
        *out = scale2(lo, k);
        return 1;
    }
    if (er < -1140) { /* |v| < 2^-1139: rounds to a zero */
        *out = copysign(0.0, yh);
        return 1;
    }
    int S = k + 1074; /* in units of 2^-1074: |ah| < 2^53 */
    double ah = scale2(yh, S), al = scale2(yl, S), Ea = scale2(E, S);
    double n = rint52(ah);
    double f = ah - n;             /* exact, |f| <= 1/2 */
    double c = rint52(f + al);     /* -1, 0 or 1: al may carry the value past n +- 1/2 */
    n += c;                        /* exact: integers below 2^53 */
    double g = (f - c) + al;       /* f - c exact */
    double D = Ea + fabs(g) * 0x1p-52 + 0x1p-1000;
    if (!(fabs(g) + D <= 0.5 - 0x1p-20))
        return 0;
    double res = n * 0x1p-1074; /* exact */
    *out = res == 0.0 ? copysign(0.0, yh) : res;
    return 1;
}

/* ------------------------------------------------------------------ tables (set by crtables.py) */

enum { T_EXP = 0, T_SOFTPLUS = 1, T_TANH = 2, T_PHI = 3, T_MILLS = 4, NTAB = 5 };
static PyObject *tab_obj[NTAB];
static const double *tab[NTAB];
static Py_ssize_t tab_len[NTAB];

/* T_EXP layout: [INV, C1, C2, C3, ISQ2PI_h, ISQ2PI_l, 0, 0, then 1024 x (hi, lo) of 2^(j/1024)] */
#define EXP_HDR 8

typedef struct {
    int q, kz;
    double h, l;
    dd p;
} expr_t;

static INLINE void exp_core(double xh, double xl, expr_t *e)
{
    const double *T = tab[T_EXP];
    const double INV = T[0], C1 = T[1], C2 = T[2], C3 = T[3];
    double kf = rint52(xh * INV);
    double s = xh - kf * C1;
    double t = kf * C2;
    dd r = two_sum(s, -t);
    double w = xl - kf * C3;
    dd rr = two_sum(r.h, r.l + w);
    double r1 = rr.h, r2 = rr.l;
    dd sq = two_prod(r1, r1);
    double Q1 = r1 * (1.0 / 6 + r1 * (1.0 / 24 + r1 * (1.0 / 120 + r1 * (1.0 / 720))));
    double T3 = sq.h * Q1;
    dd a = two_sum(r1, 0.5 * sq.h);
    double tail = ((r2 + 0.5 * sq.l) + r1 * r2) + T3;
    dd p = fast_two_sum(a.h, a.l + tail);
    long long k = (long long)kf;
    int j = (int)(k & 1023);
    e->q = (int)((k - j) / 1024);
    e->kz = (k == 0);
    double Th = T[EXP_HDR + 2 * j], Tl = T[EXP_HDR + 2 * j + 1];
    dd m = two_prod(Th, p.h);
    dd b = two_sum(Th, m.h);
    double rest = b.l + (m.l + (Th * p.l + (Tl + Tl * p.h)));
    dd y = fast_two_sum(b.h, rest);
    e->h = y.h;
    e->l = y.l;
    e->p = p;
}

/* Taylor tables: [first, nnodes, stride, nmax] then per node [N, eps, c0h, c0l, c1h, c1l, ...] */
static INLINE int taylor(int which, double a, dd *val, double *eps)
{
    const double *T = tab[which];
    double first = T[0];
    Py_ssize_t nn = (Py_ssize_t)T[1], stride = (Py_ssize_t)T[2];
    double fi = rint52((a - first) * 16.0);
    if (!(fi >= 0.0 && fi < (double)nn))
        return 0;
    Py_ssize_t i = (Py_ssize_t)fi;
    double a0 = first + fi * 0.0625; /* exact: multiples of 1/16 below 2^10 */
    double h = a - a0;               /* exact (see the header) */
    if (!(fabs(h) <= HMAX))
        return 0;
    const double *node = T + 4 + i * stride;
    int N = (int)node[0];
    const double *c = node + 2;
    dd acc = {c[2 * N], c[2 * N + 1]};
    for (int n = N - 1; n >= 0; n--) {
        acc = dd_mul_d(acc, h);
        acc = dd_add(acc, (dd){c[2 * n], c[2 * n + 1]});
    }
    *val = acc;
    *eps = node[1];
    return 1;
}

/* ------------------------------------------------------------------ the functions */

/* Each returns 0 (decided: *out set), 1 (approximation a: value 2^q (h + l),
 * absolute error <= e (1 + 2^-40) in the unscaled domain) or -1 (undecided). */
typedef struct {
    int q;
    double h, l, e;
} apx_t;

static INLINE int set_apx(apx_t *a, int q, dd v, double rel)
{
    a->q = q;
    a->h = v.h;
    a->l = v.l;
    a->e = rel * fabs(v.h) * RELPAD;
    return 1;
}

static INLINE int f_exp(double x, double *out, apx_t *a)
{
    if (!(fabs(x) <= DBL_MAX))
        return -1;
    if (x > 709.79) { /* exp(709.79) > 2^1024 */
        *out = INFINITY;
        return 0;
    }
    if (x < -745.2) { /* exp(-745.2) < 2^-1075: rounds to +0 */
        *out = 0.0;
        return 0;
    }
    if (fabs(x) < 0x1p-60) { /* 1 - 2^-54 < exp(x) < 1 + 2^-53: rounds to 1 */
        *out = 1.0;
        return 0;
    }
    expr_t e;
    exp_core(x, 0.0, &e);
    return set_apx(a, e.q, (dd){e.h, e.l}, EXP_REL);
}

static INLINE int f_expm1(double x, double *out, apx_t *a)
{
    if (!(fabs(x) <= DBL_MAX))
        return -1;
    if (x == 0.0) { /* +0 for both zeros, as arb's unsigned zero */
        *out = 0.0;
        return 0;
    }
    if (fabs(x) < 0x1p-54) { /* |expm1(x) - x| < 2^-55 |x|, and < 2^-1075 for subnormal x */
        *out = x;
        return 0;
    }
    if (x > 709.79) {
        *out = INFINITY;
        return 0;
    }
    if (x < -40.0) { /* -1 < expm1(x) < -1 + 2^-57: rounds to -1 */
        *out = -1.0;
        return 0;
    }
    expr_t e;
    exp_core(x, 0.0, &e);
    if (e.kz)
        return set_apx(a, 0, e.p, EXPM1_SMALL_REL);
    if (e.q <= 60) { /* 2^-59 <= e^x <= 2^62 */
        double Y = scale2(e.h, e.q), Yl = scale2(e.l, e.q);
        dd d = two_sum(Y, -1.0);
        dd v = fast_two_sum(d.h, d.l + Yl); /* |d.h| >= 2^-12 */
        a->q = 0;
        a->h = v.h;
        a->l = v.l;
        a->e = (EXP_REL * Y + 0x1p-103 * (Y + fabs(v.h))) * RELPAD;
        return 1;
    }
    double c = e.q <= 1000 ? pow2i(-e.q) : 0.0; /* 2^q (y - 2^-q) */
    dd d = two_sum(e.h, -c);
    dd v = fast_two_sum(d.h, d.l + e.l);
    a->q = e.q;
    a->h = v.h;
    a->l = v.l;
    a->e = (EXP_REL * e.h + 0x1p-103 * e.h + (e.q > 1000 ? 0x1p-1000 : 0.0)) * RELPAD;
    return 1;
}

static INLINE int f_sigmoid(double x, double *out, apx_t *a)
{
    if (!(fabs(x) <= DBL_MAX))
        return -1;
    if (x >= 38.0) { /* 1 - sigma(x) < e^-38 < 2^-54: rounds to 1 */
        *out = 1.0;
        return 0;
    }
    if (x < -746.0) { /* sigma(x) < e^x < 2^-1076 */
        *out = 0.0;
        return 0;
    }
    expr_t e;
    if (x >= 0.0) { /* 1 / (1 + e^-x); the relative error of e^-x enters damped by t/(1+t) <= 1/2 */
        exp_core(-x, 0.0, &e);
        double t = scale2(e.h, e.q), tl = scale2(e.l, e.q); /* q >= -56: exact */
        dd den = two_sum(1.0, t);
        den = fast_two_sum(den.h, den.l + tl);
        return set_apx(a, 0, dd_div((dd){1.0, 0.0}, den), EXP_REL + 0x1p-100);
    }
    exp_core(x, 0.0, &e); /* e^x / (1 + e^x) */
    dd den = {1.0, 0.0};
    double extra = 0.0;
    if (e.q >= -600) {
        double t = scale2(e.h, e.q), tl = scale2(e.l, e.q);
        den = two_sum(1.0, t);
        den = fast_two_sum(den.h, den.l + tl);
    } else {
        extra = 0x1p-598; /* 1 <= 1 + e^x <= 1 + 2^(q+2), q < -600 */
    }
    return set_apx(a, e.q, dd_div((dd){e.h, e.l}, den), 2 * EXP_REL + 0x1p-100 + extra);
}

static INLINE int f_tanh(double x, double *out, apx_t *a)
{
    if (!(fabs(x) <= DBL_MAX))
        return -1;
    if (x == 0.0) {
        *out = 0.0;
        return 0;
    }
    double ax = fabs(x);
    if (ax < 0x1p-30) { /* |tanh x - x| <= |x|^3/3 < 2^-61 |x| */
        *out = x;
        return 0;
    }
    if (ax >= 19.1) { /* 1 - tanh|x| = 2/(e^2|x| + 1) < 2^-54: rounds to +-1 */
        *out = copysign(1.0, x);
        return 0;
    }
    if (ax <= 0.40625) { /* tabulated (relative bound also at the node 0) */
        dd T;
        double eps;
        if (!taylor(T_TANH, ax, &T, &eps))
            return -1;
        if (x < 0) {
            T.h = -T.h;
            T.l = -T.l;
        }
        return set_apx(a, 0, T, eps);
    }
    /* (1 - t)/(1 + t), t = e^-2|x| <= e^-0.8125: t's error enters damped by
       t/(1-t) <= 0.8 and t/(1+t) <= 0.31 */
    expr_t e;
    exp_core(-2.0 * ax, 0.0, &e);
    double t = scale2(e.h, e.q), tl = scale2(e.l, e.q); /* q >= -56 */
    dd num = two_sum(1.0, -t);
    num = fast_two_sum(num.h, num.l - tl);
    dd den = two_sum(1.0, t);
    den = fast_two_sum(den.h, den.l + tl);
    dd v = dd_div(num, den);
    if (x < 0) {
        v.h = -v.h;
        v.l = -v.l;
    }
    return set_apx(a, 0, v, 1.2 * EXP_REL + 0x1p-100);
}

static INLINE int f_softplus(double x, double *out, apx_t *a)
{
    if (!(fabs(x) <= DBL_MAX))
        return -1;
    if (x >= 40.0) { /* 0 < softplus(x) - x < e^-40 < ulp(x)/2 */
        *out = x;
        return 0;
    }
    if (x < -746.0) { /* softplus(x) < e^x < 2^-1076 */
        *out = 0.0;
        return 0;
    }
    double ax = fabs(x);
    if (ax <= 11.125) { /* g(a) = softplus(-a) tabulated; softplus(x) = x + g(x) for x > 0 */
        dd g;
        double eps;
        if (!taylor(T_SOFTPLUS, ax, &g, &eps))
            return -1;
        if (x <= 0.0)
            return set_apx(a, 0, g, eps);
        return set_apx(a, 0, dd_add((dd){x, 0.0}, g), eps + 3.1 * U2);
    }
    /* log1p(t) = t F(t), t = e^-|x| < 2^-16.05, F(t) = 1 - t/2 + t^2 G(t),
       G = 1/3 - t/4 + t^2/5 - t^3/6 + t^4/7 (truncation < 2^-115); F's error < 2^-82 */
    expr_t e;
    exp_core(-ax, 0.0, &e);
    double tt = 0.0, ttl = 0.0;
    if (e.q >= -1000) {
        tt = scale2(e.h, e.q);
        ttl = scale2(e.l, e.q);
    }
    double G = 1.0 / 3 - tt * (0.25 - tt * (0.2 - tt * (1.0 / 6 - tt * (1.0 / 7))));
    dd f1 = two_sum(1.0, -0.5 * tt);
    double fl = (f1.l - 0.5 * ttl) + (tt * tt) * G;
    dd F = fast_two_sum(f1.h, fl);
    dd L = dd_mul((dd){e.h, e.l}, F);
    double rel = EXP_REL + 0x1p-82 + 10 * U2;
    if (x < 0.0)
        return set_apx(a, e.q, L, rel);
    double Lh = 0.0, Ll = 0.0;
    if (e.q >= -900) {
        Lh = scale2(L.h, e.q);
        Ll = scale2(L.l, e.q);
    }
    dd v = dd_add((dd){x, 0.0}, (dd){Lh, Ll});
    a->q = 0;
    a->h = v.h;
    a->l = v.l;
    a->e = (rel * Lh + 3.1 * U2 * fabs(v.h) + 0x1p-900) * RELPAD;
    return 1;
}

static INLINE int f_gelu(double x, double *out, apx_t *a)
{
    if (!(fabs(x) <= DBL_MAX))
        return -1;
    if (x == 0.0) {
        *out = 0.0;
        return 0;
    }
    if (x >= 9.0) { /* 0 < x - gelu(x) = x Q(x), Q(9) < 2^-62 */
        *out = x;
        return 0;
    }
    if (x <= -39.0) { /* |gelu(x)| <= phi(x) < 2^-1097: rounds to -0 */
        *out = -0.0;
        return 0;
    }
    double ax = fabs(x);
    if (ax < 0x1p-60) { /* gelu(x) = x/2 (1 + d), |d| < 2^-60: x/2 when it is a normal double */
        if (ax < 0x1p-1020)
            return -1;
        *out = 0.5 * x;
        return 0;
    }
    dd P;
    double eps;
    if (x >= -8.0) { /* x Phi(x), Phi tabulated on [-8, 9] */
        if (!taylor(T_PHI, x, &P, &eps))
            return -1;
        return set_apx(a, 0, dd_mul_d(P, x), eps + 3.1 * U2);
    }
    /* x Q(a), a = -x in (8, 39): Q(a) = phi(a) R(a), R the Mills ratio (tabulated),
       phi(a) = e^(-a^2/2) / sqrt(2 pi) with a^2 exact as a DD */
    if (!taylor(T_MILLS, ax, &P, &eps))
        return -1;
    dd sq = two_prod(ax, ax);
    expr_t e;
    exp_core(-0.5 * sq.h, -0.5 * sq.l, &e);
    const double *T = tab[T_EXP];
    dd ph = dd_mul((dd){e.h, e.l}, (dd){T[4], T[5]});
    dd Q = dd_mul(ph, P);
    return set_apx(a, e.q, dd_mul_d(Q, x), EXP_REL + eps + 24 * U2 + 0x1p-105);
}

enum { F_EXP = 0, F_EXPM1 = 1, F_SOFTPLUS = 2, F_SIGMOID = 3, F_TANH = 4, F_GELU = 5, NFUN = 6 };
static const int fun_tables[NFUN][3] = {{T_EXP, -1, -1}, {T_EXP, -1, -1}, {T_EXP, T_SOFTPLUS, -1},
                                        {T_EXP, -1, -1}, {T_EXP, T_TANH, -1}, {T_EXP, T_PHI, T_MILLS}};

static INLINE int eval(int f, double x, double *out, apx_t *a)
{
    switch (f) {
    case F_EXP: return f_exp(x, out, a);
    case F_EXPM1: return f_expm1(x, out, a);
    case F_SOFTPLUS: return f_softplus(x, out, a);
    case F_SIGMOID: return f_sigmoid(x, out, a);
    case F_TANH: return f_tanh(x, out, a);
    default: return f_gelu(x, out, a);
    }
}

static INLINE Py_ssize_t map_body(int f, const double *x, double *out, unsigned char *undecided, Py_ssize_t n)
{
    Py_ssize_t bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        apx_t a;
        double o = 0.0;
        int c = eval(f, x[i], &o, &a);
        int ok = c == 0 || (c == 1 && finish(a.q, a.h, a.l, a.e, &o));
        out[i] = ok ? o : 0.0;
        undecided[i] = !ok;
        bad += !ok;
    }
    return bad;
}

/* exp's vectorisable pass (map of F_EXP): for -707 <= x <= 709 and |x| >= 2^-60,
 * f_exp's and finish's operations on their common path without branches (the
 * selects by bit masks, so that the x86-64-v3 variant vectorises the loop):
 * exp_core's steps as written there (xl = 0); k's parts in double: kf is an
 * integer, |kf| < 2^21, kq = kf / 1024 is exact, qf = floor(kq) is the nearest
 * integer of kq (by adding and subtracting 1.5 2^52) less one where that is
 * above kq, jf = kf - 1024 qf is exact and indexes the table. The value
 * 2^q (yh + yl) has 0.9996 <= yh < 2.0015 and -1020 <= q <= 1022, so
 * exponent(yh) + q >= -1021: finish's test is lo == hi and its scaling the one
 * exact product lo 2^q (2^q from its bits: the low bits of qf + 1023 + 2^52
 * shifted into the exponent field). Every other element, and every one whose
 * test fails, is marked in redo; map_fast_body recomputes those with map_body
 * (the plain twin), so each output and undecided flag is map_body's. */
static INLINE void exp_pass(const double *restrict x, double *restrict out, unsigned char *restrict redo,
                             Py_ssize_t n)
{
    const double *T = tab[T_EXP];
    const double INV = T[0], C1 = T[1], C2 = T[2], C3 = T[3];
    const double *restrict TT = T + EXP_HDR;
    for (Py_ssize_t i = 0; i < n; i++) {
        double xi = x[i];
        int in = (xi >= -707.0) & (xi <= 709.0) & (fabs(xi) >= 0x1p-60);
        uint64_t xb, mask = (uint64_t)0 - (uint64_t)in, hb; /* xh = in ? xi : 1.0, by bits (no branch) */
        memcpy(&xb, &xi, 8);
        hb = (xb & mask) | (0x3FF0000000000000ULL & ~mask);
        double xh;
        memcpy(&xh, &hb, 8);
        double v = xh * INV;
        uint64_t tb = 0x4330000000000000ULL | ((uint64_t)(v < 0) << 63); /* v < 0 ? -2^52 : 2^52 */
        double t52;
        memcpy(&t52, &tb, 8);
        double kf = (v + t52) - t52; /* rint52(v): |v| < 2^21 */
        double s = xh - kf * C1;
        double t = kf * C2;
        dd r = two_sum(s, -t);
        double w = 0.0 - kf * C3;
        dd rr = two_sum(r.h, r.l + w);
        double r1 = rr.h, r2 = rr.l;
        dd sq = two_prod(r1, r1);
        double Q1 = r1 * (1.0 / 6 + r1 * (1.0 / 24 + r1 * (1.0 / 120 + r1 * (1.0 / 720))));
        double T3 = sq.h * Q1;
        dd a = two_sum(r1, 0.5 * sq.h);
        double tail = ((r2 + 0.5 * sq.l) + r1 * r2) + T3;
        dd p = fast_two_sum(a.h, a.l + tail);
        double kq = kf * 0x1p-10;                           /* exact */
        double rq = (kq + 0x1.8p52) - 0x1.8p52;            /* the nearest integer to kq (|kq| < 2^11) */
        uint64_t cb = 0x3FF0000000000000ULL & ((uint64_t)0 - (uint64_t)(rq > kq));
        double corr;                                       /* rq > kq ? 1.0 : 0.0, by bits */
        memcpy(&corr, &cb, 8);
        double qf = rq - corr;                             /* floor(kq), exact */
        double jf = kf - qf * 1024.0;
        int j = (int)jf;
        double Th = TT[2 * j], Tl = TT[2 * j + 1];
        dd m = two_prod(Th, p.h);
        dd b = two_sum(Th, m.h);
        double rest = b.l + (m.l + (Th * p.l + (Tl + Tl * p.h)));
        dd y = fast_two_sum(b.h, rest);
        double ay = fabs(y.h);
        double E0 = EXP_REL * ay * RELPAD;
        double E = 2.0 * E0 + ay * 0x1p-100;
        double lo = y.h + (y.l - E), hi = y.h + (y.l + E);
        double qb = qf + (1023.0 + 0x1p52);
        uint64_t u;
        memcpy(&u, &qb, 8);
        u <<= 52;
        double p2;
        memcpy(&p2, &u, 8);
        int ok = in & (lo == hi);
        double val = lo * p2;
        uint64_t vb; /* ok ? val : +0.0, by bits */
        memcpy(&vb, &val, 8);
        vb &= (uint64_t)0 - (uint64_t)ok;
        double res;
        memcpy(&res, &vb, 8);
        out[i] = res;
        redo[i] = (unsigned char)(1 - ok);
    }
}

/* map_body's results, exp through exp_pass first */
static INLINE Py_ssize_t map_fast_body(int f, const double *x, double *out, unsigned char *und, Py_ssize_t n)
{
    if (f != F_EXP)
        return map_body(f, x, out, und, n);
    exp_pass(x, out, und, n);
    Py_ssize_t bad = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (und[i])
            bad += map_body(f, x + i, out + i, und + i, 1);
    return bad;
}

static INLINE void approx_body(int f, const double *x, double *q, double *h, double *l, double *e,
                               signed char *code, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        apx_t a = {0, 0.0, 0.0, 0.0};
        double o = 0.0;
        int c = eval(f, x[i], &o, &a);
        code[i] = (signed char)c;
        q[i] = c == 1 ? a.q : 0.0;
        h[i] = c == 1 ? a.h : o;
        l[i] = c == 1 ? a.l : 0.0;
        e[i] = c == 1 ? a.e : 0.0;
    }
}

/* ------------------------------------------------------------------ softmax */

/* each entry exp(x_i - m) / sum_j exp(x_j - m), m = max x: x_i - m exact as a DD
 * (two_sum); e_i = exp_core (relative error <= EXP_REL); S = sum of the e_i with
 * 2^k_i >= 2^-600 by dd_add, in four partial sums (entry i into partial i mod 4,
 * in order; then (P0 + P1) + (P2 + P3)), so that four dependency chains run side
 * by side: positive terms, each through at most ceil(n/4) + 1 inexact additions
 * (adding to a zero partial is exact) of relative error <= 3.01 u^2, hence
 * relative error <= (ceil(n/4) + 1) 3.01 u^2 (1 + 2^-50), which with q_i's 24 u^2
 * below stays within (n + 8) 3.1 u^2 for every n >= 1 (at most one inexact
 * addition for n <= 2, two for n <= 4), plus at most 2^-1000 for each e_i
 * dropped (S >= 1: the maximum contributes exp(0) = 1 exactly); q_i = e_i / S by
 * dd_div (24 u^2). Relative error of q_i
 * <= 2 EXP_REL + (n + 8) 3.1 u^2 + n 2^-1000. Entries with x_i - m < -800
 * (also when x_i - m overflows to -inf) are < 2^-1154 and round to +0. A row
 * with a NaN or an infinite maximum is undecided (arb raises on it). */
static INLINE int softmax_row(const double *x, double *out, Py_ssize_t n, int *kq, double *yh, double *yl)
{
    double m = x[0];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            return 0;
        if (x[i] > m)
            m = x[i];
    }
    if (!(fabs(m) <= DBL_MAX))
        return 0;
    dd P[4] = {{0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}};
    double dropped = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        dd d = two_sum(x[i], -m);
        if (!(d.h >= -800.0)) {
            kq[i] = INT32_MIN;
            dropped += 0x1p-1000; /* e_i < 2^-1154: a generous bound */
            continue;
        }
        expr_t e;
        exp_core(d.h, d.l, &e);
        kq[i] = e.q;
        yh[i] = e.h;
        yl[i] = e.l;
        if (e.q >= -600)
            P[i & 3] = dd_add(P[i & 3], (dd){scale2(e.h, e.q), scale2(e.l, e.q)});
        else
            dropped += pow2i(e.q + 2 < -1022 ? -1022 : e.q + 2);
    }
    dd S = dd_add(dd_add(P[0], P[1]), dd_add(P[2], P[3]));
    double rel = 2 * EXP_REL + ((double)n + 8.0) * 3.1 * U2 + dropped;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kq[i] == INT32_MIN) {
            out[i] = 0.0;
            continue;
        }
        dd qv = dd_div((dd){yh[i], yl[i]}, S);
        if (!finish(kq[i], qv.h, qv.l, rel * fabs(qv.h) * RELPAD, &out[i]))
            return 0;
    }
    return 1;
}

static INLINE Py_ssize_t softmax_body(const double *x, double *out, unsigned char *und, Py_ssize_t rows,
                                      Py_ssize_t cols, int *kq, double *yh, double *yl)
{
    Py_ssize_t bad = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        int ok = softmax_row(x + i * cols, out + i * cols, cols, kq, yh, yl);
        und[i] = !ok;
        bad += !ok;
    }
    return bad;
}

/* a ? b : c for doubles by bit masks: no branch, so the loops below stay vectorisable */
static INLINE double bsel(int a, double b, double c)
{
    uint64_t ub, uc, m = (uint64_t)0 - (uint64_t)(a != 0);
    memcpy(&ub, &b, 8);
    memcpy(&uc, &c, 8);
    ub = (ub & m) | (uc & ~m);
    double r;
    memcpy(&r, &ub, 8);
    return r;
}

/* 2^e for an integer-valued double -1022 <= e <= 1023, from its bits */
static INLINE double pow2d(double e)
{
    double b = e + (1023.0 + 0x1p52);
    uint64_t u;
    memcpy(&u, &b, 8);
    u <<= 52;
    double r;
    memcpy(&r, &u, 8);
    return r;
}

/* softmax_row's results when it decides the whole row on finish's normal-range
 * path, in three passes: (A, vectorisable) d = two_sum(x_i, -m) and exp_core's
 * steps on every entry (those with d.h < -800 computed at 0 and flagged), with
 * k's parts in double as in exp_pass; (S, scalar) the sum S and the dropped mass
 * exactly as softmax_row forms them, in the same order, so S and rel are its
 * bits; (B, vectorisable) q_i = dd_div(y_i, S) and finish's test where its
 * preconditions hold and exponent(q_i.h) + k_i >= -1021 (the value normal: the
 * scaling the one exact product lo 2^k_i). Returns 1 when every entry is decided
 * there (out set; flagged entries +0), else 0, and softmax_row (the plain twin)
 * then computes the row: a row it leaves undecided is undecided here too, since
 * each decided value is the one finish gives. qf, fl: scratch of n doubles. */
static INLINE int softmax_row_fast(const double *restrict x, double *restrict out, Py_ssize_t n,
                                   double *restrict yh, double *restrict yl, double *restrict qf,
                                   double *restrict fl)
{
    double m = x[0];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            return 0;
        if (x[i] > m)
            m = x[i];
    }
    if (!(fabs(m) <= DBL_MAX))
        return 0;
    const double *T = tab[T_EXP];
    const double INV = T[0], C1 = T[1], C2 = T[2], C3 = T[3];
    const double *restrict TT = T + EXP_HDR;
    for (Py_ssize_t i = 0; i < n; i++) { /* A */
        dd d = two_sum(x[i], -m);
        int small = !(d.h >= -800.0);
        double xh = bsel(small, 0.0, d.h), xl = bsel(small, 0.0, d.l);
        double v = xh * INV;
        double kf = (v + bsel(v < 0, -0x1p52, 0x1p52)) - bsel(v < 0, -0x1p52, 0x1p52);
        double s = xh - kf * C1;
        double t = kf * C2;
        dd r = two_sum(s, -t);
        double w = xl - kf * C3;
        dd rr = two_sum(r.h, r.l + w);
        double r1 = rr.h, r2 = rr.l;
        dd sq = two_prod(r1, r1);
        double Q1 = r1 * (1.0 / 6 + r1 * (1.0 / 24 + r1 * (1.0 / 120 + r1 * (1.0 / 720))));
        double T3 = sq.h * Q1;
        dd a = two_sum(r1, 0.5 * sq.h);
        double tail = ((r2 + 0.5 * sq.l) + r1 * r2) + T3;
        dd p = fast_two_sum(a.h, a.l + tail);
        double kq = kf * 0x1p-10;
        double rq = (kq + 0x1.8p52) - 0x1.8p52;
        double q = rq - bsel(rq > kq, 1.0, 0.0);
        int j = (int)(kf - q * 1024.0);
        double Th = TT[2 * j], Tl = TT[2 * j + 1];
        dd mm = two_prod(Th, p.h);
        dd b = two_sum(Th, mm.h);
        double rest = b.l + (mm.l + (Th * p.l + (Tl + Tl * p.h)));
        dd y = fast_two_sum(b.h, rest);
        yh[i] = y.h;
        yl[i] = y.l;
        qf[i] = q;
        fl[i] = bsel(small, 1.0, 0.0);
    }
    dd P[4] = {{0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}}; /* softmax_row's sum, the same operations */
    double dropped = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fl[i] != 0.0) {
            dropped += 0x1p-1000;
            continue;
        }
        int q = (int)qf[i];
        if (q >= -600)
            P[i & 3] = dd_add(P[i & 3], (dd){scale2(yh[i], q), scale2(yl[i], q)});
        else
            dropped += pow2i(q + 2 < -1022 ? -1022 : q + 2);
    }
    dd S = dd_add(dd_add(P[0], P[1]), dd_add(P[2], P[3]));
    double rel = 2 * EXP_REL + ((double)n + 8.0) * 3.1 * U2 + dropped;
    int all = 1;
    for (Py_ssize_t i = 0; i < n; i++) { /* B */
        dd qv = dd_div((dd){yh[i], yl[i]}, S);
        double ay = fabs(qv.h);
        double E0 = rel * ay * RELPAD;
        int pre = (ay >= 0x1p-800) & (ay <= 0x1p800) & (E0 >= 0.0) & (E0 <= ay * 0x1p-40);
        double E = 2.0 * E0 + ay * 0x1p-100;
        uint64_t hb;
        memcpy(&hb, &qv.h, 8);
        double fld, fb = 0x1p52; /* exponent(qv.h) + 1023, as a double */
        uint64_t eb = ((hb >> 52) & 0x7ff) | 0x4330000000000000ULL;
        memcpy(&fld, &eb, 8);
        double er = (fld - fb) - 1023.0 + qf[i]; /* exact small integers */
        double lo = qv.h + (qv.l - E), hi = qv.h + (qv.l + E);
        int norm = er >= -1021.0;
        double val = lo * pow2d(bsel(norm, qf[i], 0.0));
        int small = fl[i] != 0.0;
        all &= small | (pre & norm & (lo == hi));
        out[i] = bsel(small, 0.0, val);
    }
    return all;
}

static INLINE Py_ssize_t softmax_fast_body(const double *x, double *out, unsigned char *und, Py_ssize_t rows,
                                           Py_ssize_t cols, int *kq, double *yh, double *yl, double *wk)
{
    Py_ssize_t bad = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        int ok = softmax_row_fast(x + i * cols, out + i * cols, cols, yh, yl, wk, wk + cols) ||
                 softmax_row(x + i * cols, out + i * cols, cols, kq, yh, yl);
        und[i] = !ok;
        bad += !ok;
    }
    return bad;
}

/* the variants */
static Py_ssize_t map_generic(int f, const double *x, double *out, unsigned char *u, Py_ssize_t n, int plain)
{
    (void)plain; /* exp_pass pays only where it is vectorised (its fma is a libm call here) */
    return map_body(f, x, out, u, n);
}
static void approx_generic(int f, const double *x, double *q, double *h, double *l, double *e, signed char *c,
                           Py_ssize_t n)
{
    approx_body(f, x, q, h, l, e, c, n);
}
static Py_ssize_t softmax_generic(const double *x, double *out, unsigned char *u, Py_ssize_t rows, Py_ssize_t cols,
                                  int *kq, double *yh, double *yl)
{
    return softmax_body(x, out, u, rows, cols, kq, yh, yl);
}
#if X86_DISPATCH
TARGET_V3 static Py_ssize_t map_v3(int f, const double *x, double *out, unsigned char *u, Py_ssize_t n,
                                   int plain)
{
    return plain ? map_body(f, x, out, u, n) : map_fast_body(f, x, out, u, n);
}
TARGET_V3 static void approx_v3(int f, const double *x, double *q, double *h, double *l, double *e, signed char *c,
                                Py_ssize_t n)
{
    approx_body(f, x, q, h, l, e, c, n);
}
TARGET_V3 static Py_ssize_t softmax_v3(const double *x, double *out, unsigned char *u, Py_ssize_t rows,
                                       Py_ssize_t cols, int *kq, double *yh, double *yl, double *wk, int plain)
{
    return plain ? softmax_body(x, out, u, rows, cols, kq, yh, yl)
                 : softmax_fast_body(x, out, u, rows, cols, kq, yh, yl, wk);
}
#endif

/* 1 when this CPU runs the x86-64-v3 variant */
static int elementwise_best(void)
{
#if X86_DISPATCH
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe") && __builtin_cpu_supports("lzcnt") &&
           __builtin_cpu_supports("bmi");
#else
    return 0;
#endif
}

static int pick(int variant, int best, const char *who)
{
    if (variant < 0)
        return best;
    if (variant > best) {
        PyErr_Format(PyExc_ValueError, "_crkernel.%s: this CPU lacks the requested instruction set", who);
        return -1;
    }
    return variant;
}

/* ------------------------------------------------------------------ fixed-order sums */

static void rowsum_loop(const double *x, double *out, Py_ssize_t rows, Py_ssize_t d)
{
    Py_ssize_t i = 0;
    for (; i + 4 <= rows; i += 4) { /* four independent rows: each added left to right */
        const double *a = x + i * d, *b = a + d, *c = b + d, *e = c + d;
        double s0 = a[0], s1 = b[0], s2 = c[0], s3 = e[0];
        for (Py_ssize_t j = 1; j < d; j++) {
            s0 = s0 + a[j];
            s1 = s1 + b[j];
            s2 = s2 + c[j];
            s3 = s3 + e[j];
        }
        out[i] = s0;
        out[i + 1] = s1;
        out[i + 2] = s2;
        out[i + 3] = s3;
    }
    for (; i < rows; i++) {
        const double *a = x + i * d;
        double s = a[0];
        for (Py_ssize_t j = 1; j < d; j++)
            s = s + a[j];
        out[i] = s;
    }
}

/* prenorm: the pre-norms of models/canonical/maps.py in one pass over each row,
 * with the operations of their numpy definitions in the same order (S: a row
 * added left to right, s = t_0; s = s + t_j, as rowsum_loop):
 *   kind 0, rms_norm:   y = x / sqrt(S(x * x) / d + c), then y * w
 *   kind 1, layer_norm: xc = x - S(x) / d; y = xc / sqrt(S(xc * xc) / d + c), then y * w, then y + b
 *   kind 2, scale_norm: y = (x / max(sqrt(S(x * x)), 1e-5)) * c, max as np.maximum (a NaN norm stays)
 * each product, sum, quotient and square root the one IEEE operation (sqrt is
 * correctly rounded); w and b are optional (NULL). PRB rows at a time, so that
 * their sums run as independent chains; layer_norm keeps xc in out. */
#define PRB 4
static INLINE double np_max(double a, double b) /* np.maximum(a, b) for a non-NaN b */
{
    return (a >= b || a != a) ? a : b;
}

static void prenorm_loop(int kind, const double *x, const double *w, const double *b, double c, double *out,
                         Py_ssize_t rows, Py_ssize_t d)
{
    double dn = (double)d;
    for (Py_ssize_t i0 = 0; i0 < rows; i0 += PRB) {
        int nr = rows - i0 < PRB ? (int)(rows - i0) : PRB;
        const double *xr[PRB];
        double *yr[PRB], s[PRB], q[PRB];
        for (int k = 0; k < PRB; k++) { /* a short last block repeats its last row (not written) */
            Py_ssize_t i = i0 + (k < nr ? k : nr - 1);
            xr[k] = x + i * d;
            yr[k] = out + i * d;
        }
        const double *src[PRB];
        if (kind == 1) {
            for (int k = 0; k < PRB; k++)
                s[k] = xr[k][0];
            for (Py_ssize_t j = 1; j < d; j++)
                for (int k = 0; k < PRB; k++)
                    s[k] = s[k] + xr[k][j];
            for (int k = 0; k < nr; k++) {
                double mean = s[k] / dn;
                for (Py_ssize_t j = 0; j < d; j++)
                    yr[k][j] = xr[k][j] - mean;
            }
            for (int k = nr; k < PRB; k++)
                yr[k] = yr[nr - 1];
            for (int k = 0; k < PRB; k++)
                src[k] = yr[k];
        } else {
            for (int k = 0; k < PRB; k++)
                src[k] = xr[k];
        }
        for (int k = 0; k < PRB; k++)
            s[k] = src[k][0] * src[k][0];
        for (Py_ssize_t j = 1; j < d; j++)
            for (int k = 0; k < PRB; k++) {
                double t = src[k][j] * src[k][j];
                s[k] = s[k] + t;
            }
        for (int k = 0; k < nr; k++) {
            if (kind == 2) {
                q[k] = np_max(sqrt(s[k]), 1e-5);
            } else {
                double v = s[k] / dn;
                v = v + c;
                q[k] = sqrt(v);
            }
        }
        for (int k = 0; k < nr; k++) {
            const double *a = src[k];
            double *y = yr[k], den = q[k];
            if (kind == 2) {
                for (Py_ssize_t j = 0; j < d; j++) {
                    double t = a[j] / den;
                    y[j] = t * c;
                }
                continue;
            }
            for (Py_ssize_t j = 0; j < d; j++)
                y[j] = a[j] / den;
            if (w)
                for (Py_ssize_t j = 0; j < d; j++)
                    y[j] = y[j] * w[j];
            if (b)
                for (Py_ssize_t j = 0; j < d; j++)
                    y[j] = y[j] + b[j];
        }
    }
}

/* linear: out[n, c] = ((x[n,0] W[c,0] + x[n,1] W[c,1]) + ...) + b[c]. W is packed
 * into panels of PANEL = 16 output columns, Wp[panel][j][0..16) (zero-padded past
 * r), and each block of 48 tokens into tiles of NB tokens, Xp[tile][j][0..NB)
 * (rows past N repeat the last row and are not stored). A tile of NB tokens x 16
 * outputs keeps its accumulators in registers while j runs 0 .. m-1 in order. */
#define NBLK 48
#define LINEAR_KERNEL(NAME, TARGET, VT, VW, NB)                                                        \
    TARGET static void NAME(const double *x, const double *Wp, const double *b, double *out,         \
                            double *Xp, Py_ssize_t N, Py_ssize_t m, Py_ssize_t r, Py_ssize_t npan)   \
    {                                                                                                \
        typedef double VT __attribute__((vector_size(8 * VW), aligned(8)));                          \
        enum { RV = 16 / VW, NT = NBLK / NB };                                                       \
        for (Py_ssize_t n0 = 0; n0 < N; n0 += NBLK) {                                                \
            Py_ssize_t n1 = n0 + NBLK < N ? n0 + NBLK : N;                                           \
            for (int t = 0; t < NT; t++)                                                             \
                for (int i = 0; i < NB; i++) {                                                       \
                    Py_ssize_t row = n0 + t * NB + i;                                                \
                    const double *src = x + (row < n1 ? row : n1 - 1) * m;                           \
                    double *dst = Xp + (Py_ssize_t)t * m * NB + i;                                   \
                    for (Py_ssize_t j = 0; j < m; j++)                                               \
                        dst[j * NB] = src[j];                                                        \
                }                                                                                    \
            for (Py_ssize_t p = 0; p < npan; p++) {                                                  \
                const double *P = Wp + p * m * 16;                                                   \
                Py_ssize_t c0 = p * 16, cw = r - c0 < 16 ? r - c0 : 16;                              \
                for (int t = 0; t < NT && n0 + t * NB < n1; t++) {                                   \
                    const double *X = Xp + (Py_ssize_t)t * m * NB;                                   \
                    VT acc[NB][RV];                                                                  \
                    VT w[RV];                                                                        \
                    for (int v = 0; v < RV; v++)                                                     \
                        w[v] = *(const VT *)(P + v * VW);                                            \
                    for (int i = 0; i < NB; i++) {                                                   \
                        double xb = X[i];                                                            \
                        for (int v = 0; v < RV; v++)                                                 \
                            acc[i][v] = xb * w[v];                                                   \
                    }                                                                                \
                    for (Py_ssize_t j = 1; j < m; j++) {                                             \
                        const double *Pj = P + j * 16, *Xj = X + j * NB;                             \
                        for (int v = 0; v < RV; v++)                                                 \
                            w[v] = *(const VT *)(Pj + v * VW);                                       \
                        for (int i = 0; i < NB; i++) {                                               \
                            double xb = Xj[i];                                                       \
                            for (int v = 0; v < RV; v++) {                                           \
                                VT prod = xb * w[v];                                                 \
                                acc[i][v] = acc[i][v] + prod;                                        \
                            }                                                                        \
                        }                                                                            \
                    }                                                                                \
                    Py_ssize_t nbase = n0 + t * NB;                                                  \
                    for (int i = 0; i < NB && nbase + i < n1; i++) {                                 \
                        double tmp[16];                                                              \
                        for (int v = 0; v < RV; v++)                                                 \
                            memcpy(tmp + v * VW, &acc[i][v], sizeof(VT));                            \
                        double *o = out + (nbase + i) * r + c0;                                      \
                        if (b)                                                                       \
                            for (Py_ssize_t c = 0; c < cw; c++)                                      \
                                o[c] = tmp[c] + b[c0 + c];                                           \
                        else                                                                         \
                            for (Py_ssize_t c = 0; c < cw; c++)                                      \
                                o[c] = tmp[c];                                                       \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
    }

LINEAR_KERNEL(linear_generic, , v2d, 2, 2)
#if X86_DISPATCH
LINEAR_KERNEL(linear_avx2, __attribute__((target("avx2"))), v4d, 4, 3)
LINEAR_KERNEL(linear_avx512, __attribute__((target("avx512f"))), v8d, 8, 12)
#endif
#define PANEL 16

static void pack_w(const double *W, double *Wp, Py_ssize_t r, Py_ssize_t m, Py_ssize_t npan)
{
    for (Py_ssize_t p = 0; p < npan; p++)
        for (Py_ssize_t c = 0; c < PANEL; c++) {
            Py_ssize_t col = p * PANEL + c;
            double *dst = Wp + p * m * PANEL + c;
            if (col < r) {
                const double *src = W + col * m;
                for (Py_ssize_t j = 0; j < m; j++)
                    dst[j * PANEL] = src[j];
            } else {
                for (Py_ssize_t j = 0; j < m; j++)
                    dst[j * PANEL] = 0.0;
            }
        }
}

/* ------------------------------------------------------------------ Python glue */

typedef struct {
    Py_buffer b;
    int ok;
} buf_t;

static int get(PyObject *o, buf_t *x, char fmt, Py_ssize_t size, int writable)
{
    x->ok = 0;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &x->b, flags) < 0)
        return -1;
    x->ok = 1;
    Py_ssize_t item = fmt == 'd' ? 8 : 1;
    const char *f = x->b.format ? x->b.format : "B";
    int fmt_ok = fmt == 'd' ? (f[0] == 'd' && f[1] == 0)
                            : ((f[0] == '?' || f[0] == 'B' || f[0] == 'b') && f[1] == 0);
    if (!fmt_ok || x->b.itemsize != item || (size >= 0 && x->b.len != size * item)) {
        PyErr_Format(PyExc_ValueError, "_crkernel: a buffer has the wrong type or size (want %zd of '%c')", size,
                     fmt);
        return -1;
    }
    return 0;
}

static void release(buf_t *xs, int n)
{
    for (int i = 0; i < n; i++)
        if (xs[i].ok)
            PyBuffer_Release(&xs[i].b);
}

static PyObject *py_set_table(PyObject *self, PyObject *args)
{
    int slot;
    PyObject *arr;
    if (!PyArg_ParseTuple(args, "iO", &slot, &arr))
        return NULL;
    if (slot < 0 || slot >= NTAB) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.set_table: no such table");
        return NULL;
    }
    buf_t t;
    if (get(arr, &t, 'd', -1, 0) < 0) {
        release(&t, 1);
        return NULL;
    }
    Py_ssize_t len = t.b.len / 8;
    const double *p = (const double *)t.b.buf;
    int good = slot == T_EXP ? len == EXP_HDR + 2048 : (len >= 4 && len == 4 + (Py_ssize_t)p[1] * (Py_ssize_t)p[2]);
    release(&t, 1);
    if (!good) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.set_table: malformed table");
        return NULL;
    }
    if (tab[slot]) /* set once: the tables are deterministic, and a running loop may read them */
        Py_RETURN_NONE;
    Py_INCREF(arr); /* the array keeps the memory alive */
    tab_obj[slot] = arr;
    tab[slot] = p;
    tab_len[slot] = len;
    Py_RETURN_NONE;
}

static int tables_ready(int f)
{
    for (int i = 0; i < 3; i++) {
        int s = fun_tables[f][i];
        if (s >= 0 && !tab[s]) {
            PyErr_SetString(PyExc_RuntimeError, "_crkernel: tables not set (models.canonical.crtables)");
            return 0;
        }
    }
    return 1;
}

/* map(f, x, out, undecided, variant[, plain]) -> number undecided; plain: map_body alone
 * (the twin of the fast passes, for the tests) */
static PyObject *py_map(PyObject *self, PyObject *args)
{
    int f, variant, plain = 0;
    PyObject *xo, *oo, *uo;
    if (!PyArg_ParseTuple(args, "iOOOi|p", &f, &xo, &oo, &uo, &variant, &plain))
        return NULL;
    if ((variant = pick(variant, elementwise_best(), "map")) < 0)
        return NULL;
    if (f < 0 || f >= NFUN) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.map: no such function");
        return NULL;
    }
    if (!tables_ready(f))
        return NULL;
    buf_t b[3] = {0};
    if (get(xo, &b[0], 'd', -1, 0) < 0) {
        release(b, 3);
        return NULL;
    }
    Py_ssize_t n = b[0].b.len / 8;
    if (get(oo, &b[1], 'd', n, 1) < 0 || get(uo, &b[2], 'B', n, 1) < 0) {
        release(b, 3);
        return NULL;
    }
    Py_ssize_t bad;
    fpenv_t env;
    Py_BEGIN_ALLOW_THREADS
    fp_enter(&env);
#if X86_DISPATCH
    if (variant == 1)
        bad = map_v3(f, (const double *)b[0].b.buf, (double *)b[1].b.buf, (unsigned char *)b[2].b.buf, n, plain);
    else
#endif
        bad = map_generic(f, (const double *)b[0].b.buf, (double *)b[1].b.buf, (unsigned char *)b[2].b.buf, n,
                          plain);
    fp_leave(&env);
    Py_END_ALLOW_THREADS
    release(b, 3);
    return PyLong_FromSsize_t(bad);
}

/* approx(f, x, q, h, l, e, code, variant): the approximation and its error bound, for the tests */
static PyObject *py_approx(PyObject *self, PyObject *args)
{
    int f, variant;
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "iOOOOOOi", &f, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &variant))
        return NULL;
    if ((variant = pick(variant, elementwise_best(), "approx")) < 0)
        return NULL;
    if (f < 0 || f >= NFUN) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.approx: no such function");
        return NULL;
    }
    if (!tables_ready(f))
        return NULL;
    buf_t b[6] = {0};
    if (get(o[0], &b[0], 'd', -1, 0) < 0) {
        release(b, 6);
        return NULL;
    }
    Py_ssize_t n = b[0].b.len / 8;
    for (int i = 1; i < 5; i++)
        if (get(o[i], &b[i], 'd', n, 1) < 0) {
            release(b, 6);
            return NULL;
        }
    if (get(o[5], &b[5], 'b', n, 1) < 0) {
        release(b, 6);
        return NULL;
    }
    fpenv_t env;
    fp_enter(&env);
#if X86_DISPATCH
    if (variant == 1)
        approx_v3(f, (const double *)b[0].b.buf, (double *)b[1].b.buf, (double *)b[2].b.buf, (double *)b[3].b.buf,
                  (double *)b[4].b.buf, (signed char *)b[5].b.buf, n);
    else
#endif
        approx_generic(f, (const double *)b[0].b.buf, (double *)b[1].b.buf, (double *)b[2].b.buf,
                       (double *)b[3].b.buf, (double *)b[4].b.buf, (signed char *)b[5].b.buf, n);
    fp_leave(&env);
    release(b, 6);
    Py_RETURN_NONE;
}

/* softmax(x, out, undecided_rows, rows, cols, variant[, plain]) -> number of undecided rows;
 * plain: softmax_row alone (the twin of softmax_row_fast, for the tests) */
static PyObject *py_softmax(PyObject *self, PyObject *args)
{
    PyObject *xo, *oo, *uo;
    Py_ssize_t rows, cols;
    int variant, plain = 0;
    if (!PyArg_ParseTuple(args, "OOOnni|p", &xo, &oo, &uo, &rows, &cols, &variant, &plain))
        return NULL;
    if ((variant = pick(variant, elementwise_best(), "softmax")) < 0)
        return NULL;
    if (!tables_ready(F_EXP))
        return NULL;
    if (rows < 0 || cols < 1) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.softmax: bad shape");
        return NULL;
    }
    buf_t b[3] = {0};
    if (get(xo, &b[0], 'd', rows * cols, 0) < 0 || get(oo, &b[1], 'd', rows * cols, 1) < 0 ||
        get(uo, &b[2], 'B', rows, 1) < 0) {
        release(b, 3);
        return NULL;
    }
    int *kq = PyMem_RawMalloc(sizeof(int) * cols);
    double *yh = PyMem_RawMalloc(sizeof(double) * cols), *yl = PyMem_RawMalloc(sizeof(double) * cols);
    double *wk = PyMem_RawMalloc(sizeof(double) * 2 * cols);
    if (!kq || !yh || !yl || !wk) {
        PyMem_RawFree(kq);
        PyMem_RawFree(yh);
        PyMem_RawFree(yl);
        PyMem_RawFree(wk);
        release(b, 3);
        return PyErr_NoMemory();
    }
    const double *x = b[0].b.buf;
    double *out = b[1].b.buf;
    unsigned char *und = b[2].b.buf;
    Py_ssize_t bad = 0;
    fpenv_t env;
    Py_BEGIN_ALLOW_THREADS
    fp_enter(&env);
#if X86_DISPATCH
    if (variant == 1)
        bad = softmax_v3(x, out, und, rows, cols, kq, yh, yl, wk, plain);
    else
#endif
        bad = softmax_generic(x, out, und, rows, cols, kq, yh, yl);
    fp_leave(&env);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(kq);
    PyMem_RawFree(yh);
    PyMem_RawFree(yl);
    PyMem_RawFree(wk);
    release(b, 3);
    return PyLong_FromSsize_t(bad);
}

/* rowsum(x, out, rows, d) */
static PyObject *py_rowsum(PyObject *self, PyObject *args)
{
    PyObject *xo, *oo;
    Py_ssize_t rows, d;
    if (!PyArg_ParseTuple(args, "OOnn", &xo, &oo, &rows, &d))
        return NULL;
    if (rows < 0 || d < 1) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.rowsum: bad shape");
        return NULL;
    }
    buf_t b[2] = {0};
    if (get(xo, &b[0], 'd', rows * d, 0) < 0 || get(oo, &b[1], 'd', rows, 1) < 0) {
        release(b, 2);
        return NULL;
    }
    fpenv_t env;
    Py_BEGIN_ALLOW_THREADS
    fp_enter(&env);
    rowsum_loop(b[0].b.buf, b[1].b.buf, rows, d);
    fp_leave(&env);
    Py_END_ALLOW_THREADS
    release(b, 2);
    Py_RETURN_NONE;
}

/* prenorm(kind, x, w or None, b or None, c, out, rows, d): see prenorm_loop */
static PyObject *py_prenorm(PyObject *self, PyObject *args)
{
    PyObject *xo, *wo, *bo, *oo;
    Py_ssize_t rows, d;
    int kind;
    double c;
    if (!PyArg_ParseTuple(args, "iOOOdOnn", &kind, &xo, &wo, &bo, &c, &oo, &rows, &d))
        return NULL;
    if (rows < 0 || d < 1 || kind < 0 || kind > 2 || (kind != 1 && bo != Py_None) ||
        (kind == 2 && wo != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.prenorm: bad kind or shape");
        return NULL;
    }
    buf_t bf[4] = {0};
    int hasw = wo != Py_None, hasb = bo != Py_None;
    if (get(xo, &bf[0], 'd', rows * d, 0) < 0 || (hasw && get(wo, &bf[1], 'd', d, 0) < 0) ||
        (hasb && get(bo, &bf[2], 'd', d, 0) < 0) || get(oo, &bf[3], 'd', rows * d, 1) < 0) {
        release(bf, 4);
        return NULL;
    }
    if (rows > 0 && bf[0].b.buf == bf[3].b.buf) {
        release(bf, 4);
        PyErr_SetString(PyExc_ValueError, "_crkernel.prenorm: out must not be x");
        return NULL;
    }
    fpenv_t env;
    Py_BEGIN_ALLOW_THREADS
    fp_enter(&env);
    prenorm_loop(kind, bf[0].b.buf, hasw ? bf[1].b.buf : NULL, hasb ? bf[2].b.buf : NULL, c, bf[3].b.buf, rows,
                 d);
    fp_leave(&env);
    Py_END_ALLOW_THREADS
    release(bf, 4);
    Py_RETURN_NONE;
}

static int linear_variant(void)
{
#if X86_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return 2;
    if (__builtin_cpu_supports("avx2"))
        return 1;
#endif
    return 0;
}

/* linear(x, W, b or None, out, N, m, r, variant): variant -1 picks the best for this CPU */
static PyObject *py_linear(PyObject *self, PyObject *args)
{
    PyObject *xo, *wo, *bo, *oo;
    Py_ssize_t N, m, r;
    int variant;
    if (!PyArg_ParseTuple(args, "OOOOnnni", &xo, &wo, &bo, &oo, &N, &m, &r, &variant))
        return NULL;
    if (N < 0 || m < 1 || r < 0) {
        PyErr_SetString(PyExc_ValueError, "_crkernel.linear: bad shape");
        return NULL;
    }
    if ((variant = pick(variant, linear_variant(), "linear")) < 0)
        return NULL;
    buf_t b[4] = {0};
    int hasb = bo != Py_None;
    if (get(xo, &b[0], 'd', N * m, 0) < 0 || get(wo, &b[1], 'd', r * m, 0) < 0 ||
        (hasb && get(bo, &b[2], 'd', r, 0) < 0) || get(oo, &b[3], 'd', N * r, 1) < 0) {
        release(b, 4);
        return NULL;
    }
    Py_ssize_t npan = (r + PANEL - 1) / PANEL;
    double *Wp = PyMem_RawMalloc(sizeof(double) * (size_t)(npan > 0 ? npan : 1) * (size_t)m * PANEL);
    double *Xp = PyMem_RawMalloc(sizeof(double) * (size_t)NBLK * (size_t)m);
    if (!Wp || !Xp) {
        PyMem_RawFree(Wp);
        PyMem_RawFree(Xp);
        release(b, 4);
        return PyErr_NoMemory();
    }
    const double *bias = hasb ? b[2].b.buf : NULL;
    fpenv_t env;
    Py_BEGIN_ALLOW_THREADS
    fp_enter(&env);
    pack_w(b[1].b.buf, Wp, r, m, npan);
#if X86_DISPATCH
    if (variant == 2)
        linear_avx512(b[0].b.buf, Wp, bias, b[3].b.buf, Xp, N, m, r, npan);
    else if (variant == 1)
        linear_avx2(b[0].b.buf, Wp, bias, b[3].b.buf, Xp, N, m, r, npan);
    else
#endif
        linear_generic(b[0].b.buf, Wp, bias, b[3].b.buf, Xp, N, m, r, npan);
    fp_leave(&env);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(Wp);
    PyMem_RawFree(Xp);
    release(b, 4);
    Py_RETURN_NONE;
}

static PyObject *py_variants(PyObject *self, PyObject *noargs)
{
    return Py_BuildValue("(ii)", elementwise_best(), linear_variant());
}

static PyMethodDef methods[] = {
    {"set_table", py_set_table, METH_VARARGS, "set_table(slot, float64 array): a table from crtables.py"},
    {"map", py_map, METH_VARARGS, "map(f, x, out, undecided, variant[, plain]) -> number of undecided entries"},
    {"approx", py_approx, METH_VARARGS, "approx(f, x, q, h, l, e, code, variant): approximations, error bounds"},
    {"softmax", py_softmax, METH_VARARGS, "softmax(x, out, undecided_rows, rows, cols, variant[, plain]) -> undecided rows"},
    {"rowsum", py_rowsum, METH_VARARGS, "rowsum(x, out, rows, d): each row added left to right"},
    {"prenorm", py_prenorm, METH_VARARGS,
     "prenorm(kind, x, w, b, c, out, rows, d): rms_norm (0), layer_norm (1), scale_norm (2) of maps.py"},
    {"linear", py_linear, METH_VARARGS, "linear(x, W, b, out, N, m, r, variant): fixed-order x W^T + b"},
    {"variants", py_variants, METH_NOARGS,
     "(elementwise, linear): this CPU's best variants (elementwise 0 SSE2, 1 x86-64-v3; linear 0 SSE2, 1 AVX2, 2 AVX-512)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_crkernel",
                                    "Correctly rounded functions and fixed-order sums (models/canonical/arith.py)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__crkernel(void) { return PyModule_Create(&module); }
