"""The trusted kernel of the checker: the primitive exact checks the claim kinds
reduce to, each with its mathematical statement in its docstring.

It imports the standard library, numpy and python-flint only, and nothing of
the project outside itself (an import-linter contract). A reviewer reads it
first (``README.md`` beside this file): what is trusted, and what each
primitive proves; the rest of ``certify.checkers`` routes evidence to these
functions and compares their answers with what a claim says.
"""

from certify.checkers.kernel.box import box_minimum
from certify.checkers.kernel.hashing import canonical_sha256
from certify.checkers.kernel.modular import det_nonzero_mod_p, minor_nonzero_mod_p, pivot_minor_mod_p
from certify.checkers.kernel.products import product_identity, product_min
from certify.checkers.kernel.psd import is_positive_definite, is_psd

__all__ = ["box_minimum", "canonical_sha256", "det_nonzero_mod_p", "minor_nonzero_mod_p",
           "pivot_minor_mod_p", "is_psd",
           "is_positive_definite", "product_identity", "product_min"]
