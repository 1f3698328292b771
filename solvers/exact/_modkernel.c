/* The fused reduction of the multimodular span check (solvers/exact/span.py):
 * one pass over a tile of T = N_C,p Y_p (float64, integer-valued, computed by
 * BLAS) that tells whether T - N is divisible by the prime p everywhere.
 *
 * Per entry: d = t - n (exact: |d| <= 2^52 by the caller's choice of p),
 * q = round(d / p) by the float64 product with 1/p and the 1.5 * 2^52 rounding
 * constant (|d / p| < 2^30 here, so q is the nearest integer of fl(d * (1/p))),
 * and d is a multiple of p iff q * p == d (q * p is an integer below 2^53, so
 * it is exact). The float error of fl(d * (1/p)) is below 2/p < 1/2 when
 * d = k p, so q = k then; otherwise q * p is some other multiple of p.
 * Compiled with -ffp-contract=off: the operations are exactly these.
 *
 * residue_nonzero(T, N, row0, col0, p) -> bool: T is a C-contiguous (rows, cols)
 * float64 buffer, N a C-contiguous (n1, n2) float64 or int32 buffer (int32 halves
 * the memory traffic; its conversion to double is exact); the tile of N at
 * (row0, col0) of T's shape is compared. True when some entry is not divisible.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MULTIVERSION
#endif

#define TILE_NONZERO(NAME, TYPE)                                                            \
    MULTIVERSION                                                                            \
    static int NAME(const double *t, const TYPE *n, Py_ssize_t rows, Py_ssize_t cols,       \
                    Py_ssize_t ld, double p, double inv)                                    \
    {                                                                                       \
        const double magic = 6755399441055744.0; /* 1.5 * 2^52 */                           \
        for (Py_ssize_t i = 0; i < rows; i++) {                                             \
            const double *ti = t + i * cols;                                                \
            const TYPE *ni = n + i * ld;                                                    \
            int bad = 0;                                                                    \
            for (Py_ssize_t j = 0; j < cols; j++) {                                         \
                double d = ti[j] - (double)ni[j];                                           \
                double q = (d * inv + magic) - magic;                                       \
                bad |= (q * p != d);                                                        \
            }                                                                               \
            if (bad)                                                                        \
                return 1;                                                                   \
        }                                                                                   \
        return 0;                                                                           \
    }

TILE_NONZERO(tile_nonzero_f64, double)
TILE_NONZERO(tile_nonzero_i32, int)

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
    int n_is_int = nb.format && nb.itemsize == 4 && (nb.format[0] == 'i' || nb.format[0] == 'l') &&
                   nb.format[1] == 0 && sizeof(int) == 4;
    int n_is_f64 = nb.format && nb.itemsize == 8 && nb.format[0] == 'd' && nb.format[1] == 0;
    if (tb.ndim != 2 || nb.ndim != 2 || tb.itemsize != 8 || !tb.format || tb.format[0] != 'd' ||
        tb.format[1] != 0 || !(n_is_int || n_is_f64)) {
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
    int bad = n_is_f64 ? tile_nonzero_f64((const double *)tb.buf, (const double *)nb.buf + off, rows,
                                          cols, nb.shape[1], p, 1.0 / p)
                       : tile_nonzero_i32((const double *)tb.buf, (const int *)nb.buf + off, rows,
                                          cols, nb.shape[1], p, 1.0 / p);
    res = PyBool_FromLong(bad);
done:
    PyBuffer_Release(&tb);
    PyBuffer_Release(&nb);
    return res;
}

static PyMethodDef methods[] = {
    {"residue_nonzero", residue_nonzero, METH_VARARGS,
     "residue_nonzero(T, N, row0, col0, p): some entry of T - N[tile] is not divisible by p"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_modkernel",
                                    "Fused modular reduction of the span check.", -1, methods};

PyMODINIT_FUNC PyInit__modkernel(void) { return PyModule_Create(&module); }
