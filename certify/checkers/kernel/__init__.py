"""The checker's trusted kernel: the primitive exact checks that claims reduce to.

Each module holds one primitive and states, in its docstring, the mathematical
fact it decides. The kernel imports only the standard library, numpy and
python-flint, never another module of the project (an import-linter contract in
``pyproject.toml`` keeps it so); the rest of the checker parses, binds and routes
evidence into these calls. See ``README.md`` beside this file.
"""
from certify.checkers.kernel.box import box_minimum
from certify.checkers.kernel.hashing import canonical_sha256
from certify.checkers.kernel.identity import (fmpz_mat, product_equals, product_is_zero,
                                             scaled_product_equals)
from certify.checkers.kernel.minor import minor_nonzero_mod_p, pivot_minor_mod_p
from certify.checkers.kernel.products import products_nonnegative
from certify.checkers.kernel.psd import is_positive_definite, is_psd
from certify.checkers.kernel.span_witness import columns_in_span

__all__ = ["box_minimum", "canonical_sha256", "columns_in_span", "fmpz_mat", "is_positive_definite",
           "is_psd", "minor_nonzero_mod_p", "pivot_minor_mod_p", "product_equals", "product_is_zero",
           "products_nonnegative", "scaled_product_equals"]
