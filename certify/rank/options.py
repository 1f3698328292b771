"""What a ``certify rank`` run asks for (:class:`RankOptions`), and the sizes
above which data is summarized rather than embedded.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from certify.checkers.verify import TRUSTED_MIN_ENTRIES

#: entries of a matrix / feature pair embedded in a certificate: the checker's
#: threshold (below it, verify refuses trusted summaries), not a user setting
DEFAULT_EMBED_LIMIT = TRUSTED_MIN_ENTRIES


SPECTRAL_EXACT_LIMIT = 160          # matrix form: exact charpoly of A^T A up to this side


SIGNED_PRODUCT_LIMIT = 1 << 26      # signed factor kernels: K^2 products checked exactly


@dataclass(frozen=True)
class RankOptions:
    seed: int = 0
    max_primes: int = 4
    eps: Fraction | None = None
    code: np.ndarray | None = None          # (W, M) 0/1 words
    code_name: str | None = None
    require_nonnegative: bool = False
    embed_limit: int = DEFAULT_EMBED_LIMIT
    batch_size: int = 1 << 14
    enclosures: bool = True
    #: where the float pencil bounds give no enclosures (ill-conditioned Grams), compute them from the
    #: exact characteristic polynomial (True) or publish none (False: a checkpoint's heads, where that
    #: polynomial per head would be most of the run; the count is certified either way)
    enclosure_fallback: bool = True
    enclosure_prec: int = 64
    progress: bool = False                  # a bar over the token pass (stderr)
    #: matrix form's upper bound: "exact" (the span check), "freivalds" (the
    #: Fiat-Shamir test, error <= 2^-error_log2, named in the claim), or "auto"
    #: (the one predicted cheaper, solvers.exact.upper_cost; a tie goes to exact)
    upper_bound: str = "auto"
    error_log2: int = 128
    #: the numerical rank's tolerance (None: numpy's default, when the claim is made: see
    #: certify.rank.numerical.wanted); numerical_only: that claim alone, no exact rank
    tol: Fraction | None = None
    numerical_only: bool = False
