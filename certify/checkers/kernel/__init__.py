"""The trusted kernel of the checker: the primitive exact checks the claim kinds reduce to, each with its
mathematical statement in its docstring; standard library, numpy and python-flint only, nothing of the
project outside itself (an import-linter contract). A reviewer reads it first (``README.md`` beside this
file); the rest of ``certify.checkers`` routes evidence to these functions and compares their answers."""

from certify.checkers.kernel.hashing import array_sha256, canonical_sha256, rows_sha256
from certify.checkers.kernel.matrices import fmpz_matrix, gram_matrix, is_prime, product, scaled_matrix
from certify.checkers.kernel.modular import det_nonzero_mod_p, minor_nonzero_mod_p, pivot_minor_mod_p
from certify.checkers.kernel.products import box_minimum, column_span_rational, product_identity, product_min
from certify.checkers.kernel.psd import is_positive_definite, is_psd

__all__ = ["array_sha256", "box_minimum", "canonical_sha256", "column_span_rational", "det_nonzero_mod_p",
           "fmpz_matrix", "gram_matrix", "is_positive_definite", "is_prime", "is_psd", "minor_nonzero_mod_p",
           "pivot_minor_mod_p", "product", "product_identity", "product_min", "rows_sha256", "scaled_matrix"]
