"""Canonical feature extraction: the same bits on every machine.

The features a certificate binds are defined by this package, not by torch:
from the weights (exact dyadic rationals, decoded from their stored bytes) to
``float64`` feature matrices through operations whose results IEEE 754 and
the correctly rounded functions below fix bit for bit, whatever the CPU, its
instruction set, the BLAS, the thread count or the torch build.

What a result depends on, and why each is portable:

* ``+ - * /`` and ``sqrt`` on ``float64`` numpy arrays, elementwise (one ufunc
  call per operation). IEEE 754 requires each to be correctly rounded
  (round to nearest, ties to even), and numpy's scalar, SSE, AVX2 and AVX-512
  loops all are; separate ufunc calls cannot be contracted into an FMA.
* ``max``/``min``/comparisons/``where``, negation, concatenation, indexing:
  exact.
* Reductions (a dot product, a row sum) are defined as loops over the
  reduction index, each step one rounded product and one rounded add, so the
  order is fixed (left to right); the compiled kernel (``_crkernel.c``,
  built with ``-ffp-contract=off``) performs the same operations per entry,
  vectorized across outputs and tokens only. ``np.sum``, ``mean``, ``var``,
  ``einsum``, ``@``, ``np.dot`` and ``linalg.norm`` are never used, since
  their order (pairwise blocks, SIMD lanes, BLAS kernels, threads) depends on
  the machine.
* ``exp``, ``expm1``, ``log1p(exp)``, sigmoid, ``tanh``, gelu, softmax and
  irrational constants (``d^-1/4``, ``r^-1/2``): the exact value correctly
  rounded. The definition is python-flint's ``arb`` ball arithmetic
  (:mod:`.arith`): the ball's two endpoints are rounded to the nearest double
  with Python's exact integer division, and the precision is doubled until
  both round to the same double. The compiled kernel gets the same double
  faster: a double-double value with a proven error bound, kept only when its
  whole error interval rounds to one double (Ziv's test), arb otherwise.
  numpy's own ``np.exp`` / ``np.tanh`` (SVML / AVX-512 variants) and libm are
  never used.
* Half-precision weights (bf16, fp16) are decoded by hand from their bits
  (:func:`.arith.decode`); every such value is a float32 and a float64.

Tokens are 0/1 vectors or embedding rows (exact). :mod:`.maps` holds every
supported feature map and pre-norm in these terms.
"""

#: the version of the canonical definition; a certificate names it
CANONICAL = "canonical/1"
