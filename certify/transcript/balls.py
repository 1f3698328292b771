"""The constants of the certified float64 ball arithmetic (shared by
:mod:`certify.transcript.enumerate` and :mod:`certify.transcript.onelayer`, where
the bounds are written out): unit roundoff ``U``, the radius inflation ``INFL``
covering the rounding of a radius computed from a few hundred nonnegative
terms, the underflow slack ``ETA`` and ``gamma_n`` of an ``n``-term dot product.
"""

U = 2.0 ** -53
INFL = 1.0 + 2.0 ** -40
ETA = 2.0 ** -1000


def _gamma(n: int) -> float:
    """``gamma_n = (n + 2) u / (1 - (n + 2) u)`` (Higham, Thm 3.5, plus the rounding of
    ``|A| |B|`` itself)."""
    return (n + 2) * U / (1 - (n + 2) * U)
