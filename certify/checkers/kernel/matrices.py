"""Exact matrices from a certificate's integers (python-flint ``fmpz_mat`` and ``fmpq_mat``, arbitrary
precision), their products, and primality (python-flint's ``fmpz.is_prime``: BPSW, deterministic below
2^64, the sizes used here)."""

from __future__ import annotations

from typing import Any


def fmpz_matrix(rows: Any, ncols: int | None = None) -> Any:
    """The python-flint integer matrix of integer rows (an empty list keeps ``ncols`` columns; an
    ``fmpz_mat`` is returned as it is)."""
    import flint
    if isinstance(rows, flint.fmpz_mat):
        return rows
    if getattr(rows, "ndim", 0) == 2 and rows.dtype.kind in "iu":                  # an integer numpy array
        return flint.fmpz_mat(rows.shape[0], rows.shape[1], rows.ravel().tolist())
    rows = [list(r) for r in rows]
    width = len(rows[0]) if rows else (ncols or 0)
    return flint.fmpz_mat(len(rows), width, [int(v) for r in rows for v in r])


def scaled_matrix(rows: Any, scale: Any) -> Any:
    """The exact rational matrix of integer rows and a ``scale``:
    ``{"kind": "row_denominators", "row_den": [...]}`` divides row ``i`` by ``row_den[i]``;
    otherwise ``{"exponent": e}`` multiplies every entry by ``2^e``."""
    import flint
    A = flint.fmpq_mat(fmpz_matrix(rows))
    if scale["kind"] == "row_denominators":
        for i, d in enumerate(scale["row_den"]):
            for j in range(A.ncols()):
                A[i, j] = A[i, j] / int(d)
    else:
        A = A * flint.fmpq(2) ** int(scale["exponent"])
    return A


def product(A: Any, B: Any) -> Any:
    """``A B`` exactly (python-flint matrices, integer or rational)."""
    return A * B


def gram_matrix(A: Any) -> Any:
    """``A^T A`` when ``A`` has at most as many columns as rows, else ``A A^T`` (the same
    nonzero eigenvalues)."""
    return A.transpose() * A if A.ncols() <= A.nrows() else A * A.transpose()


def is_prime(p: int) -> bool:
    """``p`` is a prime (an int >= 2; bool is not an int here)."""
    import flint
    return isinstance(p, int) and not isinstance(p, bool) and p >= 2 and bool(flint.fmpz(p).is_prime())
