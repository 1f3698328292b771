/* The checker kernel's compiled steps of the column-span check modulo word-size primes
 * (certify/checkers/kernel/span.py, span_mod_primes; tests/test_span_check.py compares
 * each with a numpy reference). Written apart from the producer's
 * solvers/exact/_modkernel.c: the checker imports nothing of the producers.
 *
 * Arithmetic. Every value is an integer held in a double, |x| <= LIMIT = 2^53 - 2^27,
 * and p is a prime with 5 <= p < 2^26. red(t) = t - q p with q = round(t / p) computed
 * as (t * (1/p) + 1.5 * 2^52) - 1.5 * 2^52 (|t / p| < 2^51): q is off the true quotient
 * by less than 1, q p and t - q p are integers below 2^53, hence exact, and one
 * conditional step of p makes the result balanced, |red(t)| <= (p - 1) / 2. A product
 * of two balanced residues is below 2^50, exact. Compiled with -ffp-contract=off
 * -fno-fast-math: the operations are exactly these, in this order.
 *
 * reduce(X, p) -> X: X (float64, C-contiguous) replaced by its balanced residues;
 *   raises when an entry is beyond LIMIT.
 * inverse(M, p) -> bool: M (r x r float64) replaced by its inverse mod p (balanced) by
 *   Gauss-Jordan with row interchanges; False when M is singular mod p.
 * rref(V, p) -> list: V (b x n float64) replaced by its reduced row echelon form mod p
 *   (balanced; rows interchanged, a pivot scaled to 1 and cleared from every other row,
 *   column by column); the pivot columns in order.
 * crt_add(Y, F, w, p): for every entry, F += red(w y) / p (the quotient correctly
 *   rounded) and F -= round(F): F stays in [-1/2, 1/2]; every |y| and |w| must be at
 *   most (p - 1) / 2 (raises otherwise). Each step adds at most 2^-53 of rounding
 *   error to F (the sum |F + t| <= 1 is rounded once, the subtraction of an integer
 *   from a value within 1 of it is exact).
 * nonzero(T, N, row0, col0, p) -> bool: T a C-contiguous (rows, cols) float64 tile,
 *   N a C-contiguous float64 or int32 matrix; True when some t - n (n the entry of N
 *   at (row0 + i, col0 + j)) is not divisible by p. d = t - n is exact (the caller
 *   keeps |t| + |n| <= LIMIT); d = k p gives q = k (the error of d * (1/p) is below
 *   2^-25 for |k| < 2^27), and any other d gives q p != d (q p is exact: |q p| <=
 *   |d| + p < 2^53); a difference beyond LIMIT raises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAGIC 6755399441055744.0 /* 1.5 * 2^52 */
#define LIMIT 9007199120523264.0 /* 2^53 - 2^27 */

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MULTIVERSION
#endif

static inline double red(double t, double p, double inv, double h)
{
    double q = (t * inv + MAGIC) - MAGIC;
    double y = t - q * p;
    y += (y < -h) ? p : 0.0;
    y -= (y > h) ? p : 0.0;
    return y;
}

static int prime_ok(double p)
{
    if (!(p >= 5.0 && p < 67108864.0) || p != (double)(int64_t)p) {
        PyErr_SetString(PyExc_ValueError, "the modulus must be a prime in [5, 2^26)");
        return 0;
    }
    return 1;
}

static int is_f64(const Py_buffer *b) { return b->itemsize == 8 && b->format && !strcmp(b->format, "d"); }

static int is_i32(const Py_buffer *b)
{
    return b->itemsize == 4 && b->format && !b->format[1] && (b->format[0] == 'i' || b->format[0] == 'l');
}

/* a C-contiguous float64 array (any shape), writable when asked */
static int f64_array(PyObject *o, Py_buffer *b, int writable, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0)
        return 0;
    if (!is_f64(b)) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous float64 array", what);
        PyBuffer_Release(b);
        return 0;
    }
    return 1;
}

MULTIVERSION
static int reduce_all(double *x, Py_ssize_t n, double p)
{
    double inv = 1.0 / p, h = (p - 1.0) / 2.0;
    int bad = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        double t = x[j];
        bad |= !(t <= LIMIT && t >= -LIMIT);
        x[j] = red(t, p, inv, h);
    }
    return bad;
}

static PyObject *reduce(PyObject *self, PyObject *args)
{
    PyObject *xo;
    double p;
    Py_buffer xb;
    if (!PyArg_ParseTuple(args, "Od", &xo, &p) || !prime_ok(p) || !f64_array(xo, &xb, 1, "reduce: X"))
        return NULL;
    int bad = reduce_all((double *)xb.buf, xb.len / 8, p);
    PyBuffer_Release(&xb);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "reduce: an entry beyond 2^53 - 2^27");
        return NULL;
    }
    Py_INCREF(xo);
    return xo;
}

/* a = red(a - f b) and a = red(f a) on rows of n (a and b do not overlap) */
MULTIVERSION
static void axpy_row(double *restrict a, const double *restrict b, double f, Py_ssize_t n, double p)
{
    double inv = 1.0 / p, h = (p - 1.0) / 2.0;
    for (Py_ssize_t j = 0; j < n; j++)
        a[j] = red(a[j] - f * b[j], p, inv, h);
}

MULTIVERSION
static void scale_row(double *restrict a, double f, Py_ssize_t n, double p)
{
    double inv = 1.0 / p, h = (p - 1.0) / 2.0;
    for (Py_ssize_t j = 0; j < n; j++)
        a[j] = red(a[j] * f, p, inv, h);
}

/* the inverse of a (nonzero mod p) modulo p, balanced: extended Euclid on int64 */
static double inv_scalar(double a, double p)
{
    int64_t m = (int64_t)p, x = (int64_t)a % m, r0 = m, r1, s0 = 0, s1 = 1;
    if (x < 0)
        x += m;
    r1 = x;
    while (r1) {
        int64_t q = r0 / r1, t = r0 - q * r1;
        r0 = r1;
        r1 = t;
        t = s0 - q * s1;
        s0 = s1;
        s1 = t;
    }
    s0 %= m;
    if (s0 < 0)
        s0 += m;
    return (double)(s0 > (m - 1) / 2 ? s0 - m : s0);
}

static PyObject *inverse(PyObject *self, PyObject *args)
{
    PyObject *mo;
    double p;
    Py_buffer mb;
    if (!PyArg_ParseTuple(args, "Od", &mo, &p) || !prime_ok(p) || !f64_array(mo, &mb, 1, "inverse: M"))
        return NULL;
    if (mb.ndim != 2 || mb.shape[0] != mb.shape[1]) {
        PyBuffer_Release(&mb);
        PyErr_SetString(PyExc_ValueError, "inverse needs a square matrix");
        return NULL;
    }
    Py_ssize_t r = mb.shape[0];
    double *a = (double *)mb.buf;
    if (reduce_all(a, r * r, p)) {
        PyBuffer_Release(&mb);
        PyErr_SetString(PyExc_ValueError, "inverse: an entry beyond 2^53 - 2^27");
        return NULL;
    }
    Py_ssize_t *perm = PyMem_Malloc(sizeof(Py_ssize_t) * (r ? r : 1));
    double *tmp = PyMem_Malloc(sizeof(double) * (r ? r : 1));
    if (!perm || !tmp) {
        PyMem_Free(perm);
        PyMem_Free(tmp);
        PyBuffer_Release(&mb);
        return PyErr_NoMemory();
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    /* Gauss-Jordan in place: after step k, column k of the inverse sits in column k;
       row interchanges are undone as column interchanges at the end */
    for (Py_ssize_t k = 0; k < r && ok; k++) {
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
        double *ak = a + k * r, s = inv_scalar(ak[k], p);
        ak[k] = 1.0;
        scale_row(ak, s, r, p);
        for (Py_ssize_t i = 0; i < r; i++) {
            double *ai = a + i * r, f = ai[k];
            if (i == k || f == 0.0)
                continue;
            ai[k] = 0.0;
            axpy_row(ai, ak, f, r, p);
        }
    }
    for (Py_ssize_t k = r - 1; ok && k >= 0; k--) {
        Py_ssize_t c = perm[k];
        for (Py_ssize_t i = 0; c != k && i < r; i++) {
            double t = a[i * r + k];
            a[i * r + k] = a[i * r + c];
            a[i * r + c] = t;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(perm);
    PyMem_Free(tmp);
    PyBuffer_Release(&mb);
    return PyBool_FromLong(ok);
}

static PyObject *rref(PyObject *self, PyObject *args)
{
    PyObject *vo, *out = NULL;
    double p;
    Py_buffer vb;
    if (!PyArg_ParseTuple(args, "Od", &vo, &p) || !prime_ok(p) || !f64_array(vo, &vb, 1, "rref: V"))
        return NULL;
    if (vb.ndim != 2) {
        PyBuffer_Release(&vb);
        PyErr_SetString(PyExc_ValueError, "rref needs a matrix");
        return NULL;
    }
    Py_ssize_t b = vb.shape[0], n = vb.shape[1], k = 0;
    double *v = (double *)vb.buf;
    if (reduce_all(v, b * n, p)) {
        PyBuffer_Release(&vb);
        PyErr_SetString(PyExc_ValueError, "rref: an entry beyond 2^53 - 2^27");
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
    Py_BEGIN_ALLOW_THREADS
    /* before column j, rows k.. are zero: the pivot row and the updates start at column j */
    for (Py_ssize_t j = 0; j < n && k < b; j++) {
        Py_ssize_t i0 = k;
        while (i0 < b && v[i0 * n + j] == 0.0)
            i0++;
        if (i0 == b)
            continue;
        if (i0 != k) {
            memcpy(tmp, v + i0 * n + j, sizeof(double) * (n - j));
            memcpy(v + i0 * n + j, v + k * n + j, sizeof(double) * (n - j));
            memcpy(v + k * n + j, tmp, sizeof(double) * (n - j));
        }
        double *vk = v + k * n + j;
        scale_row(vk, inv_scalar(vk[0], p), n - j, p);                 /* vk[0] = 1 */
        for (Py_ssize_t i = 0; i < b; i++) {
            double *vi = v + i * n + j, f = vi[0];
            if (i != k && f != 0.0)
                axpy_row(vi, vk, f, n - j, p);                           /* vi[0] = 0 */
        }
        piv[k++] = j;
    }
    Py_END_ALLOW_THREADS
    out = PyList_New(k);
    for (Py_ssize_t i = 0; out && i < k; i++) {
        PyObject *x = PyLong_FromSsize_t(piv[i]);
        if (!x)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, x);
    }
    PyMem_Free(piv);
    PyMem_Free(tmp);
    PyBuffer_Release(&vb);
    return out;
}

static PyObject *crt_add(PyObject *self, PyObject *args)
{
    PyObject *yo, *fo;
    double w, p;
    Py_buffer yb, fb;
    if (!PyArg_ParseTuple(args, "OOdd", &yo, &fo, &w, &p) || !prime_ok(p) ||
        !f64_array(yo, &yb, 0, "crt_add: Y"))
        return NULL;
    if (!f64_array(fo, &fb, 1, "crt_add: F")) {
        PyBuffer_Release(&yb);
        return NULL;
    }
    double inv = 1.0 / p, h = (p - 1.0) / 2.0;
    int bad = !(w <= h && w >= -h) || fb.len != yb.len;
    const double *y = (const double *)yb.buf;
    double *f = (double *)fb.buf;
    for (Py_ssize_t j = 0; !bad && j < yb.len / 8; j++) {
        bad |= !(y[j] <= h && y[j] >= -h);
        double g = f[j] + red(w * y[j], p, inv, h) / p;
        f[j] = g - ((g + MAGIC) - MAGIC);
    }
    PyBuffer_Release(&yb);
    PyBuffer_Release(&fb);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "crt_add: a factor is not a balanced residue (or sizes differ)");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* per row of a tile: bad |= some t - n not divisible by p; range |= some |t - n| > LIMIT */
#define TILE(NAME, TYPE)                                                                          \
    MULTIVERSION                                                                                  \
    static void NAME(const double *t, const TYPE *n, Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t ld, \
                     double p, int *bad, int *range)                                              \
    {                                                                                             \
        double inv = 1.0 / p;                                                                     \
        for (Py_ssize_t i = 0; i < rows && !*bad && !*range; i++) {                               \
            int b = 0, g = 0;                                                                     \
            for (Py_ssize_t j = 0; j < cols; j++) {                                               \
                double d = t[i * cols + j] - (double)n[i * ld + j];                               \
                double q = (d * inv + MAGIC) - MAGIC;                                             \
                b |= (q * p != d);                                                                \
                g |= !(d <= LIMIT && d >= -LIMIT);                                                \
            }                                                                                     \
            *bad |= b;                                                                            \
            *range |= g;                                                                          \
        }                                                                                         \
    }

TILE(tile_f64, double)
TILE(tile_i32, int32_t)

static PyObject *nonzero(PyObject *self, PyObject *args)
{
    PyObject *to, *no;
    Py_ssize_t row0, col0;
    double p;
    Py_buffer tb, nb;
    if (!PyArg_ParseTuple(args, "OOnnd", &to, &no, &row0, &col0, &p) || !prime_ok(p) ||
        !f64_array(to, &tb, 0, "nonzero: T"))
        return NULL;
    if (PyObject_GetBuffer(no, &nb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) {
        PyBuffer_Release(&tb);
        return NULL;
    }
    PyObject *res = NULL;
    if (tb.ndim != 2 || nb.ndim != 2 || !(is_f64(&nb) || is_i32(&nb)) || row0 < 0 || col0 < 0 ||
        row0 + tb.shape[0] > nb.shape[0] || col0 + tb.shape[1] > nb.shape[1]) {
        PyErr_SetString(PyExc_ValueError, "nonzero: T must be a 2-d tile inside N (float64 or int32)");
        goto done;
    }
    Py_ssize_t rows = tb.shape[0], cols = tb.shape[1], ld = nb.shape[1];
    int bad = 0, range = 0;
    const double *t = (const double *)tb.buf;
    Py_ssize_t first = row0 * ld + col0; /* N's entry at the tile's (0, 0) */
    if (is_f64(&nb))
        tile_f64(t, (const double *)nb.buf + first, rows, cols, ld, p, &bad, &range);
    else
        tile_i32(t, (const int32_t *)nb.buf + first, rows, cols, ld, p, &bad, &range);
    if (range)
        PyErr_SetString(PyExc_ValueError, "nonzero: a difference beyond 2^53 - 2^27");
    else
        res = PyBool_FromLong(bad);
done:
    PyBuffer_Release(&tb);
    PyBuffer_Release(&nb);
    return res;
}

static PyMethodDef methods[] = {
    {"reduce", reduce, METH_VARARGS, "reduce(X, p) -> X: X replaced by its balanced residues mod p"},
    {"inverse", inverse, METH_VARARGS,
     "inverse(M, p) -> bool: M replaced by its inverse mod p; False if singular"},
    {"rref", rref, METH_VARARGS, "rref(V, p) -> pivots: V replaced by its reduced row echelon form mod p"},
    {"crt_add", crt_add, METH_VARARGS, "crt_add(Y, F, w, p): F += red(w Y) / p, reduced to [-1/2, 1/2]"},
    {"nonzero", nonzero, METH_VARARGS, "nonzero(T, N, row0, col0, p): some T - N[tile] not divisible by p"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_spankernel",
                                    "The checker's compiled steps of the column-span check.", -1, methods};

PyMODINIT_FUNC PyInit__spankernel(void) { return PyModule_Create(&module); }
