/* Compiled kernels of the exact rank (solvers/exact/modkernel.py wraps them, with
 * numpy and python-flint fallbacks doing the same operations): residues modulo a
 * word-size prime p held as float64, so that the large products run in BLAS.
 *
 * Arithmetic. Every value is an integer stored in a double. For a prime 5 <= p < 2^26 a
 * product of two balanced residues (|a|, |b| <= (p-1)/2) is below 2^50, so
 * t = c - a b is exact; red(t) = t - q p with q = round(t * (1/p)) (the 1.5 * 2^52
 * rounding constant: |t / p| < 2^51) is exact (q p and t - q p are integers below
 * 2^53) and lies within [-3p/2, 3p/2]; one conditional step makes it balanced
 * (|red(t)| <= (p-1)/2). Compiled with -ffp-contract=off -fno-fast-math: the
 * operations are exactly these, in this order.
 *
 * reduce_balanced(X, OUT, p): OUT = X mod p, balanced (X: float64, int64 or int32,
 *   |X| <= 2^53 - 2^27; OUT float64 of X's shape, may be X itself when float64).
 * inverse_mod(M, p) -> bool: M (r x r float64, integer-valued, |M| <= 2^53 - 2^27)
 *   replaced by its inverse mod p, balanced; False (M reduced, garbage) when singular.
 * rref_mod(V, p) -> list: V (b x n float64, integer-valued) replaced by its reduced
 *   row echelon form mod p, balanced, nonzero rows first; returns the pivot columns.
 * residue_nonzero(T, N, row0, col0, p) -> bool: T is a C-contiguous (rows, cols)
 *   float64 tile of integer-valued products, N a C-contiguous (n1, n2) float64 or
 *   int32 matrix (int32 halves the memory traffic; its conversion to double is
 *   exact); the tile of N at (row0, col0) of T's shape is compared: True when some
 *   entry of T - N is not divisible by p. Per entry: d = t - n (exact: |d| <= 2^53 -
 *   2^27 by the caller's choice of p), q = round(d / p) as above, and d is a multiple
 *   of p iff q p == d (when d = k p the float error of d * (1/p) is below 2/p < 1/2,
 *   so q = k; otherwise q p is some other multiple of p).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MULTIVERSION
#endif

#define MAGIC 6755399441055744.0 /* 1.5 * 2^52 */
#define LIMIT 9007199120523264.0 /* 2^53 - 2^27 */

/* ------------------------------------------------------------------ scalar helpers */

static inline double red(double t, double p, double inv, double h)
{
    double q = (t * inv + MAGIC) - MAGIC;
    double y = t - q * p;
    y += (y < -h) ? p : 0.0;
    y -= (y > h) ? p : 0.0;
    return y;
}

/* the inverse of a (balanced, nonzero mod p) modulo p, balanced */
static double inv_mod_scalar(double a, double p)
{
    int64_t m = (int64_t)p, x = (int64_t)a % m;
    if (x < 0)
        x += m;
    int64_t r0 = m, r1 = x, s0 = 0, s1 = 1;
    while (r1) {
        int64_t q = r0 / r1, t = r0 - q * r1;
        r0 = r1;
        r1 = t;
        t = s0 - q * s1;
        s0 = s1;
        s1 = t;
    }
    /* r0 == 1 since p is prime and x != 0; s0 * x = 1 mod m */
    s0 %= m;
    if (s0 < 0)
        s0 += m;
    if (s0 > (m - 1) / 2)
        s0 -= m;
    return (double)s0;
}

/* ------------------------------------------------------------------ vector loops */

MULTIVERSION
static void row_axpy(double *restrict a, const double *restrict b, double f, Py_ssize_t n, double p,
                     double inv, double h)
{
    /* a = red(a - f b) */
    for (Py_ssize_t j = 0; j < n; j++) {
        double t = a[j] - f * b[j];
        double q = (t * inv + MAGIC) - MAGIC;
        double y = t - q * p;
        y += (y < -h) ? p : 0.0;
        y -= (y > h) ? p : 0.0;
        a[j] = y;
    }
}

MULTIVERSION
static void row_scale(double *restrict a, double f, Py_ssize_t n, double p, double inv, double h)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        double t = a[j] * f;
        double q = (t * inv + MAGIC) - MAGIC;
        double y = t - q * p;
        y += (y < -h) ? p : 0.0;
        y -= (y > h) ? p : 0.0;
        a[j] = y;
    }
}

MULTIVERSION
static int reduce_f64(const double *x, double *out, Py_ssize_t n, double p, double inv,
                      double h)
{
    int bad = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        double t = x[j];
        bad |= !(t <= LIMIT && t >= -LIMIT);
        double q = (t * inv + MAGIC) - MAGIC;
        double y = t - q * p;
        y += (y < -h) ? p : 0.0;
        y -= (y > h) ? p : 0.0;
        out[j] = y;
    }
    return bad;
}

MULTIVERSION
static int reduce_i64(const int64_t *restrict x, double *restrict out, Py_ssize_t n, double p, double inv,
                      double h)
{
    int bad = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t v = x[j];
        bad |= (v > (int64_t)LIMIT) | (v < -(int64_t)LIMIT);
        double t = (double)v;
        double q = (t * inv + MAGIC) - MAGIC;
        double y = t - q * p;
        y += (y < -h) ? p : 0.0;
        y -= (y > h) ? p : 0.0;
        out[j] = y;
    }
    return bad;
}

MULTIVERSION
static void reduce_i32(const int32_t *restrict x, double *restrict out, Py_ssize_t n, double p, double inv,
                       double h)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        double t = (double)x[j];
        double q = (t * inv + MAGIC) - MAGIC;
        double y = t - q * p;
        y += (y < -h) ? p : 0.0;
        y -= (y > h) ? p : 0.0;
        out[j] = y;
    }
}

#define TILE_NONZERO(NAME, TYPE)                                                            \
    MULTIVERSION                                                                            \
    static int NAME(const double *t, const TYPE *n, Py_ssize_t rows, Py_ssize_t cols,       \
                    Py_ssize_t ld, double p, double inv)                                    \
    {                                                                                       \
        for (Py_ssize_t i = 0; i < rows; i++) {                                             \
            const double *ti = t + i * cols;                                                \
            const TYPE *ni = n + i * ld;                                                    \
            int bad = 0;                                                                    \
            for (Py_ssize_t j = 0; j < cols; j++) {                                         \
                double d = ti[j] - (double)ni[j];                                           \
                double q = (d * inv + MAGIC) - MAGIC;                                       \
                bad |= (q * p != d);                                                        \
            }                                                                               \
            if (bad)                                                                        \
                return 1;                                                                   \
        }                                                                                   \
        return 0;                                                                           \
    }

TILE_NONZERO(tile_nonzero_f64, double)
TILE_NONZERO(tile_nonzero_i32, int32_t)

/* ------------------------------------------------------------------ argument checks */

static int prime_arg(double p)
{
    if (!(p >= 5.0 && p < 67108864.0) || p != (double)(int64_t)p) {
        PyErr_SetString(PyExc_ValueError, "the modulus must be a prime in [5, 2^26)");
        return 0;
    }
    return 1;
}

static int is_f64(Py_buffer *b) { return b->itemsize == 8 && b->format && b->format[0] == 'd' && !b->format[1]; }

static int is_int(Py_buffer *b, Py_ssize_t size)
{
    return b->itemsize == size && b->format && !b->format[1] &&
           (b->format[0] == 'i' || b->format[0] == 'l' || b->format[0] == 'q');
}

static int get_writable_matrix(PyObject *o, Py_buffer *b, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND | PyBUF_WRITABLE) < 0)
        return 0;
    if (b->ndim != 2 || !is_f64(b)) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous 2-d float64 array", what);
        PyBuffer_Release(b);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ reduce_balanced */

static PyObject *reduce_balanced(PyObject *self, PyObject *args)
{
    PyObject *xo, *oo;
    double p;
    if (!PyArg_ParseTuple(args, "OOd", &xo, &oo, &p) || !prime_arg(p))
        return NULL;
    Py_buffer xb, ob;
    if (PyObject_GetBuffer(xo, &xb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0)
        return NULL;
    if (PyObject_GetBuffer(oo, &ob, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&xb);
        return NULL;
    }
    PyObject *res = NULL;
    Py_ssize_t n = xb.itemsize ? xb.len / xb.itemsize : 0;
    if (!is_f64(&ob) || ob.len / 8 != n || !(is_f64(&xb) || is_int(&xb, 8) || is_int(&xb, 4))) {
        PyErr_SetString(PyExc_TypeError,
                        "reduce_balanced needs a float64, int64 or int32 array and a float64 output of its size");
        goto done;
    }
    double inv = 1.0 / p, h = (p - 1.0) / 2.0;
    int bad = 0;
    if (is_f64(&xb))
        bad = reduce_f64((const double *)xb.buf, (double *)ob.buf, n, p, inv, h);
    else if (xb.itemsize == 8)
        bad = reduce_i64((const int64_t *)xb.buf, (double *)ob.buf, n, p, inv, h);
    else
        reduce_i32((const int32_t *)xb.buf, (double *)ob.buf, n, p, inv, h);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "reduce_balanced: an entry beyond 2^53 - 2^27");
        goto done;
    }
    res = Py_None;
    Py_INCREF(res);
done:
    PyBuffer_Release(&xb);
    PyBuffer_Release(&ob);
    return res;
}

/* ------------------------------------------------------------------ inverse_mod */

static PyObject *inverse_mod(PyObject *self, PyObject *args)
{
    PyObject *mo;
    double p;
    if (!PyArg_ParseTuple(args, "Od", &mo, &p) || !prime_arg(p))
        return NULL;
    Py_buffer mb;
    if (!get_writable_matrix(mo, &mb, "inverse_mod: M"))
        return NULL;
    Py_ssize_t r = mb.shape[0];
    if (mb.shape[1] != r) {
        PyBuffer_Release(&mb);
        PyErr_SetString(PyExc_ValueError, "inverse_mod needs a square matrix");
        return NULL;
    }
    double *a = (double *)mb.buf, inv = 1.0 / p, h = (p - 1.0) / 2.0;
    Py_ssize_t *perm = PyMem_Malloc(sizeof(Py_ssize_t) * (r ? r : 1));
    double *tmp = PyMem_Malloc(sizeof(double) * (r ? r : 1));
    if (!perm || !tmp) {
        PyMem_Free(perm);
        PyMem_Free(tmp);
        PyBuffer_Release(&mb);
        return PyErr_NoMemory();
    }
    int ok = 1;
    if (reduce_f64(a, a, r * r, p, inv, h)) {
        PyErr_SetString(PyExc_ValueError, "inverse_mod: an entry beyond 2^53 - 2^27");
        ok = -1;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < r && ok == 1; k++) {
        /* Gauss-Jordan in place with row interchanges; the inverse's columns are
           interchanged back at the end */
        Py_ssize_t piv = k;
        while (piv < r && a[piv * r + k] == 0.0)
            piv++;
        if (piv == r) {
            ok = 0;
            break;
        }
        perm[k] = piv;
        if (piv != k) {
            memcpy(tmp, a + piv * r, sizeof(double) * r);
            memcpy(a + piv * r, a + k * r, sizeof(double) * r);
            memcpy(a + k * r, tmp, sizeof(double) * r);
        }
        double *ak = a + k * r;
        double s = inv_mod_scalar(ak[k], p);
        ak[k] = 1.0;
        row_scale(ak, s, r, p, inv, h);
        for (Py_ssize_t i = 0; i < r; i++) {
            if (i == k)
                continue;
            double *ai = a + i * r;
            double f = ai[k];
            if (f == 0.0)
                continue;
            ai[k] = 0.0;
            row_axpy(ai, ak, f, r, p, inv, h);
        }
    }
    if (ok == 1) {
        for (Py_ssize_t k = r - 1; k >= 0; k--) {
            Py_ssize_t c = perm[k];
            if (c == k)
                continue;
            for (Py_ssize_t i = 0; i < r; i++) {
                double t = a[i * r + k];
                a[i * r + k] = a[i * r + c];
                a[i * r + c] = t;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(perm);
    PyMem_Free(tmp);
    PyBuffer_Release(&mb);
    if (ok < 0)
        return NULL;
    return PyBool_FromLong(ok);
}

/* ------------------------------------------------------------------ rref_mod */

static PyObject *rref_mod(PyObject *self, PyObject *args)
{
    PyObject *vo;
    double p;
    if (!PyArg_ParseTuple(args, "Od", &vo, &p) || !prime_arg(p))
        return NULL;
    Py_buffer vb;
    if (!get_writable_matrix(vo, &vb, "rref_mod: V"))
        return NULL;
    Py_ssize_t b = vb.shape[0], n = vb.shape[1];
    double *v = (double *)vb.buf, inv = 1.0 / p, h = (p - 1.0) / 2.0;
    if (reduce_f64(v, v, b * n, p, inv, h)) {
        PyBuffer_Release(&vb);
        PyErr_SetString(PyExc_ValueError, "rref_mod: an entry beyond 2^53 - 2^27");
        return NULL;
    }
    Py_ssize_t *piv = PyMem_Malloc(sizeof(Py_ssize_t) * (b ? b : 1));
    double *tmp = PyMem_Malloc(sizeof(double) * (n ? n : 1));
    if (!piv || !tmp) {
        PyMem_Free(piv);
        PyMem_Free(tmp);
        PyBuffer_Release(&vb);
        return PyErr_NoMemory();
    }
    Py_ssize_t k = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n && k < b; j++) {
        Py_ssize_t i0 = k;
        while (i0 < b && v[i0 * n + j] == 0.0)
            i0++;
        if (i0 == b)
            continue;
        if (i0 != k) {      /* rows >= k are zero before column j: swap from j on */
            memcpy(tmp, v + i0 * n + j, sizeof(double) * (n - j));
            memcpy(v + i0 * n + j, v + k * n + j, sizeof(double) * (n - j));
            memcpy(v + k * n + j, tmp, sizeof(double) * (n - j));
        }
        double *vk = v + k * n;
        double s = inv_mod_scalar(vk[j], p);
        row_scale(vk + j, s, n - j, p, inv, h);
        vk[j] = 1.0;
        for (Py_ssize_t i = 0; i < b; i++) {
            if (i == k)
                continue;
            double *vi = v + i * n;
            double f = vi[j];
            if (f == 0.0)
                continue;
            row_axpy(vi + j, vk + j, f, n - j, p, inv, h);
            vi[j] = 0.0;
        }
        piv[k++] = j;
    }
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(k);
    for (Py_ssize_t i = 0; out && i < k; i++) {
        PyObject *x = PyLong_FromSsize_t(piv[i]);
        if (!x) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, x);
    }
    PyMem_Free(piv);
    PyMem_Free(tmp);
    PyBuffer_Release(&vb);
    return out;
}

/* ------------------------------------------------------------------ residue_nonzero */

static PyObject *residue_nonzero(PyObject *self, PyObject *args)
{
    PyObject *to, *no;
    Py_ssize_t row0, col0;
    double p;
    if (!PyArg_ParseTuple(args, "OOnnd", &to, &no, &row0, &col0, &p))
        return NULL;
    Py_buffer tb, nb;
    if (PyObject_GetBuffer(to, &tb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0)
        return NULL;
    if (PyObject_GetBuffer(no, &nb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) {
        PyBuffer_Release(&tb);
        return NULL;
    }
    PyObject *res = NULL;
    int n_is_int = is_int(&nb, 4);
    int n_is_f64 = is_f64(&nb);
    if (tb.ndim != 2 || nb.ndim != 2 || !is_f64(&tb) || !(n_is_int || n_is_f64)) {
        PyErr_SetString(PyExc_TypeError,
                        "residue_nonzero needs a 2-d float64 tile and a 2-d float64 or int32 matrix");
        goto done;
    }
    Py_ssize_t rows = tb.shape[0], cols = tb.shape[1];
    if (row0 < 0 || col0 < 0 || row0 + rows > nb.shape[0] || col0 + cols > nb.shape[1] || !(p > 2.0)) {
        PyErr_SetString(PyExc_ValueError, "residue_nonzero: tile outside the matrix, or p <= 2");
        goto done;
    }
    Py_ssize_t off = row0 * nb.shape[1] + col0;
    int bad;
    Py_BEGIN_ALLOW_THREADS
    bad = n_is_f64 ? tile_nonzero_f64((const double *)tb.buf, (const double *)nb.buf + off, rows, cols,
                                      nb.shape[1], p, 1.0 / p)
                   : tile_nonzero_i32((const double *)tb.buf, (const int32_t *)nb.buf + off, rows, cols,
                                      nb.shape[1], p, 1.0 / p);
    Py_END_ALLOW_THREADS
    res = PyBool_FromLong(bad);
done:
    PyBuffer_Release(&tb);
    PyBuffer_Release(&nb);
    return res;
}

static PyMethodDef methods[] = {
    {"reduce_balanced", reduce_balanced, METH_VARARGS,
     "reduce_balanced(X, OUT, p): OUT = X mod p, balanced residues (float64)"},
    {"inverse_mod", inverse_mod, METH_VARARGS,
     "inverse_mod(M, p) -> bool: M replaced by its inverse mod p (balanced); False when singular"},
    {"rref_mod", rref_mod, METH_VARARGS,
     "rref_mod(V, p) -> pivots: V replaced by its reduced row echelon form mod p (balanced)"},
    {"residue_nonzero", residue_nonzero, METH_VARARGS,
     "residue_nonzero(T, N, row0, col0, p): some entry of T - N[tile] is not divisible by p"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_modkernel",
                                    "Modular kernels of the exact rank (float64 residues).", -1, methods};

PyMODINIT_FUNC PyInit__modkernel(void) { return PyModule_Create(&module); }
