/* Fused passes of the one-layer certified enumeration (certify/transcript/onelayer.py).
 *
 * Each function performs, entry by entry and in the same order, the IEEE double
 * operations of the numpy code it replaces (OneLayer._index, the fast case of
 * OneLayer._output, and the tail of OneLayer.batch), so its results are the
 * same bits; the rigour is that of the ball arithmetic written out in
 * certify/transcript/enumerate.py and onelayer.py. Compiled with
 * -ffp-contract=off (no fused multiply-add: every product and sum is rounded
 * as in numpy), never with -ffast-math. The constants are computed by the
 * caller in Python, as the numpy code computes them.
 *
 * index(t, rt, k, val, rval, unc, top, step, lo, c6, c4, c2, clo, infl, eta, fast)
 *     t, rt, k, val, rval: float64 (nb, B, r); unc: uint8 (B,), or-ed in place.
 * output(nd, rd, cg, cgr, upd, rupd, infl, eta, u, dveta) -> bool
 *     nd, rd: float64 (dv + 1, B, q); cg, cgr: float64 (dv,); upd, rupd: (B, q).
 *     True (nothing written) when a denominator is not certainly nonzero: the
 *     caller then runs the general numpy code for the batch.
 * tail(dm, dr, cy, cry, kap_hi, kap_lo, good, wrong, unc, c_ry, c_dr, c_good, four_u) -> emax
 *     dm, dr: float64 (B, q); cy, cry: (q,); kap_hi: (q1,); kap_lo: (B, q - q1);
 *     good, wrong, unc: uint8 (B,).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define MULTIVERSION
#endif

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
    int fmt_ok = fmt == 'd' ? (f[0] == 'd' && f[1] == 0) : ((f[0] == '?' || f[0] == 'B' || f[0] == 'b') && f[1] == 0);
    if (!fmt_ok || x->b.itemsize != item || x->b.len != size * item) {
        PyErr_Format(PyExc_ValueError, "_ballkernel: a buffer has the wrong type or size (want %zd of '%c')",
                     size, fmt);
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

/* ------------------------------------------------------------------ index */

MULTIVERSION
static void index_loop(const double *t, const double *rt, double *k, double *val, double *rval,
                       unsigned char *unc, Py_ssize_t nb, Py_ssize_t B, Py_ssize_t r, double top,
                       double step, double lo, double c6, double c4, double c2, double clo,
                       double infl, double eta, int fast)
{
    for (Py_ssize_t blk = 0; blk < nb; blk++) {
        for (Py_ssize_t b = 0; b < B; b++) {
            Py_ssize_t o = (blk * B + b) * r;
            int u = 0;
            for (Py_ssize_t a = 0; a < r; a++) {
                double ti = t[o + a], ri = rt[o + a];
                double j = rint(ti);
                j = j < 1.0 ? 1.0 : j;
                j = j > top ? top : j;
                double d = fabs(ti - j);
                u |= (d <= ri) | !isfinite(ti) | !isfinite(ri);
                double kf = floor(ti);
                kf = kf < 0.0 ? 0.0 : kf;
                kf = kf > top ? top : kf;
                if (!isfinite(kf))
                    kf = 0.0;
                k[o + a] = kf;
                if (fast) {
                    val[o + a] = kf;
                    rval[o + a] = kf * c6 + eta;
                } else {
                    double v = kf * step;
                    double rv = v * c4;
                    v = v + lo;
                    double av = fabs(v) * c2;
                    rv = rv + av;
                    rv = rv + clo;
                    rv = rv * infl;
                    rv = rv + eta;
                    val[o + a] = v;
                    rval[o + a] = rv;
                }
            }
            unc[b] |= (unsigned char)u;
        }
    }
}

static PyObject *py_index(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    Py_ssize_t nb, B, r;
    double top, step, lo, c6, c4, c2, clo, infl, eta;
    int fast;
    if (!PyArg_ParseTuple(args, "OOOOOOnnndddddddddp", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &nb, &B,
                          &r, &top, &step, &lo, &c6, &c4, &c2, &clo, &infl, &eta, &fast))
        return NULL;
    buf_t x[6] = {{0}};
    Py_ssize_t n = nb * B * r;
    PyObject *res = NULL;
    if (get(o[0], &x[0], 'd', n, 0) || get(o[1], &x[1], 'd', n, 0) || get(o[2], &x[2], 'd', n, 1) ||
        get(o[3], &x[3], 'd', n, 1) || get(o[4], &x[4], 'd', n, 1) || get(o[5], &x[5], 'B', B, 1))
        goto done;
    index_loop(x[0].b.buf, x[1].b.buf, x[2].b.buf, x[3].b.buf, x[4].b.buf, x[5].b.buf, nb, B, r, top, step,
               lo, c6, c4, c2, clo, infl, eta, fast);
    res = Py_None;
    Py_INCREF(res);
done:
    release(x, 6);
    return res;
}

/* ------------------------------------------------------------------ output */

MULTIVERSION
static int output_loop(const double *nd, const double *rd, const double *cg, const double *cgr,
                       const double *g, double *upd, double *rupd, Py_ssize_t dv, Py_ssize_t B,
                       Py_ssize_t q, double infl, double eta, double uu, double dveta)
{
    const double *den = nd + dv * B * q, *rden = rd + dv * B * q;
    Py_ssize_t n = B * q;
    for (Py_ssize_t e = 0; e < n; e++)
        if (!(fabs(den[e]) > rden[e]))
            return 1;
    for (Py_ssize_t e = 0; e < n; e++) {
        double dn = den[e], rdn = rden[e];
        double adn = fabs(dn);
        double iw = adn - rdn;
        iw = iw * adn;
        iw = 1.0 / iw;
        double s = 0.0, rs = 0.0;
        for (Py_ssize_t j = 0; j < dv; j++) {
            double num = nd[j * n + e], rnum = rd[j * n + e];
            double ra = fabs(num);
            ra = ra * rdn;
            double rn = rnum * adn;
            ra = ra + rn;
            ra = ra * iw;
            double a = num / dn;
            double aa = fabs(a);
            double ua = aa * uu;
            ra = ra + ua;
            ra = ra * infl;
            ra = ra + eta;
            if (j == 0) {
                s = a * g[j];
                rs = aa * cg[j];
            } else {
                s = s + a * g[j];
                rs = rs + aa * cg[j];
            }
            ra = ra * cgr[j];
            rs = rs + ra;
        }
        rs = rs * infl;
        rs = rs + dveta;
        upd[e] = s;
        rupd[e] = rs;
    }
    return 0;
}

static PyObject *py_output(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    Py_ssize_t dv, B, q;
    double infl, eta, uu, dveta;
    if (!PyArg_ParseTuple(args, "OOOOOOOnnndddd", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &dv, &B,
                          &q, &infl, &eta, &uu, &dveta))
        return NULL;
    buf_t x[7] = {{0}};
    Py_ssize_t n = (dv + 1) * B * q;
    PyObject *res = NULL;
    if (get(o[0], &x[0], 'd', n, 0) || get(o[1], &x[1], 'd', n, 0) || get(o[2], &x[2], 'd', dv, 0) ||
        get(o[3], &x[3], 'd', dv, 0) || get(o[4], &x[4], 'd', dv, 0) || get(o[5], &x[5], 'd', B * q, 1) ||
        get(o[6], &x[6], 'd', B * q, 1))
        goto done;
    int slow = output_loop(x[0].b.buf, x[1].b.buf, x[2].b.buf, x[3].b.buf, x[4].b.buf, x[5].b.buf,
                           x[6].b.buf, dv, B, q, infl, eta, uu, dveta);
    res = PyBool_FromLong(slow);
done:
    release(x, 7);
    return res;
}

/* ------------------------------------------------------------------ tail */

MULTIVERSION
static double tail_loop(const double *dm, const double *dr, const double *cy, const double *cry,
                        const double *khi, const double *klo, unsigned char *good, unsigned char *wrong,
                        unsigned char *unc, Py_ssize_t B, Py_ssize_t q, Py_ssize_t q1, double c_ry,
                        double c_dr, double c_good, double four_u)
{
    double emax = 0.0;
    int nan = 0;
    for (Py_ssize_t b = 0; b < B; b++) {
        int gd = 1, wr = 0, nonfin = 0;
        for (Py_ssize_t i = 0; i < q; i++) {
            Py_ssize_t e = b * q + i;
            double y = dm[e] + cy[i];
            double ry = fabs(y) * c_ry;
            double drr = dr[e] * c_dr;
            ry = ry + drr;
            ry = ry + cry[i];
            double kap = i < q1 ? khi[i] : klo[b * (q - q1) + (i - q1)];
            double err = fabs(y - kap);
            double s = err + ry;
            gd &= s < c_good;
            double w = (err - ry) - four_u * (err + ry);
            wr |= w >= 0.5;
            nonfin |= !isfinite(y) | !isfinite(ry);
            if (err != err)
                nan = 1;
            else if (err > emax)
                emax = err;
        }
        if (!gd)
            unc[b] |= (unsigned char)(!wr | nonfin);
        good[b] = (unsigned char)gd;
        wrong[b] = (unsigned char)wr;
    }
    return nan ? INFINITY : emax;
}

static PyObject *py_tail(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    Py_ssize_t B, q, q1;
    double c_ry, c_dr, c_good, four_u;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOnnndddd", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &B, &q, &q1, &c_ry, &c_dr, &c_good, &four_u))
        return NULL;
    buf_t x[9] = {{0}};
    PyObject *res = NULL;
    if (get(o[0], &x[0], 'd', B * q, 0) || get(o[1], &x[1], 'd', B * q, 0) || get(o[2], &x[2], 'd', q, 0) ||
        get(o[3], &x[3], 'd', q, 0) || get(o[4], &x[4], 'd', q1, 0) || get(o[5], &x[5], 'd', B * (q - q1), 0) ||
        get(o[6], &x[6], 'B', B, 1) || get(o[7], &x[7], 'B', B, 1) || get(o[8], &x[8], 'B', B, 1))
        goto done;
    double emax = tail_loop(x[0].b.buf, x[1].b.buf, x[2].b.buf, x[3].b.buf, x[4].b.buf, x[5].b.buf,
                            x[6].b.buf, x[7].b.buf, x[8].b.buf, B, q, q1, c_ry, c_dr, c_good, four_u);
    res = PyFloat_FromDouble(emax);
done:
    release(x, 9);
    return res;
}

static PyMethodDef methods[] = {
    {"index", py_index, METH_VARARGS, "quantizer index and dequantized balls (OneLayer._index)"},
    {"output", py_output, METH_VARARGS, "head output balls, fast case (OneLayer._output)"},
    {"tail", py_tail, METH_VARARGS, "outputs, errors and row verdicts (OneLayer.batch)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ballkernel",
                                    "Fused passes of the one-layer certified enumeration.", -1, methods};

PyMODINIT_FUNC PyInit__ballkernel(void) { return PyModule_Create(&module); }
