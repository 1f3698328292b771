"""Exact rank over Q and the exact integer arithmetic under it.

* :mod:`.integers` -- integer matrices; floats and rationals converted losslessly;
* :mod:`.modular` -- ranks and minors modulo primes (lower bounds), the exact
  span check by python-flint (upper bounds);
* :mod:`.modkernel` -- residues modulo word-size primes as float64 (reduction,
  inverse, echelon form; ``_modkernel.c`` compiled, numpy/flint otherwise);
* :mod:`.elimination` -- the canonical minor mod p of a large int64 matrix by
  blocked elimination of its rows in order (a few BLAS products at every rank);
* :mod:`.span` -- the float64 multimodular span check of large int64 matrices
  (bordered-minor bounds, per-prime set-up compiled, fused test per tile);
* :mod:`.freivalds` -- the span check as a Freivalds test whose vectors and
  primes come from a challenge (Fiat-Shamir), error <= 2^-k, O(n^2 t);
* :mod:`.gram` -- exact Gram matrices of huge factors, in batches;
* :mod:`.rank` -- the two-sided rank (:func:`exact_rank`, :func:`core_rank`)
  and its result type.

Factor form. Over Q (an ordered field), ``rank(A B^T) = rank(A^T A B^T B)``:
``A^T A x = 0`` implies ``|A x|^2 = 0``, so ``ker(A^T A) = ker(A)``; the ``r x r``
core is then handled exactly. A verdict is ``proved`` only when the two bounds
meet.

This package namespace re-exports the public names of its modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from solvers.exact.elimination import canonical_minor
    from solvers.exact.gram import GramAccumulator, batch_gram, exact_products, normalize_pow2
    from solvers.exact.integers import (
                                        IntMatrix,
                                        as_int_lists,
                                        compact,
                                        dyadic,
                                        dyadic_to_fraction,
                                        fmpz_matrix,
                                        iter_int,
                                        nmod_matrix,
                                        rational_rows,
    )
    from solvers.exact.modular import minor_mod_p, random_prime, span_check
    from solvers.exact.rank import ExactRank, PrimeAttempt, core_rank, exact_rank, exact_rank_fast
    from solvers.exact.span import span_check_multimodular

#: public name -> the module that defines it; a module is loaded when one of its names is first
#: read (a matrix's rank never loads the Gram machinery of factor form)
_WHERE = {
    "canonical_minor": "elimination",
    **dict.fromkeys(("GramAccumulator", "batch_gram", "exact_products", "normalize_pow2"), "gram"),
    **dict.fromkeys(("IntMatrix", "as_int_lists", "compact", "dyadic", "dyadic_to_fraction", "fmpz_matrix",
                     "iter_int", "nmod_matrix", "rational_rows"), "integers"),
    **dict.fromkeys(("minor_mod_p", "random_prime", "span_check"), "modular"),
    **dict.fromkeys(("ExactRank", "PrimeAttempt", "core_rank", "exact_rank", "exact_rank_fast"), "rank"),
    "span_check_multimodular": "span",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'solvers.exact' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"solvers.exact.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})

__all__ = [
    "ExactRank", "GramAccumulator", "IntMatrix", "PrimeAttempt", "as_int_lists", "batch_gram",
    "canonical_minor", "compact", "core_rank", "dyadic", "dyadic_to_fraction", "exact_products",
    "exact_rank", "exact_rank_fast", "fmpz_matrix", "iter_int", "minor_mod_p", "nmod_matrix",
    "normalize_pow2", "random_prime", "rational_rows", "span_check", "span_check_multimodular",
]
