"""Numeric and exact engines with no knowledge of attention: exact rank
(:mod:`.exact`), eigenvalue counts and enclosures (:mod:`.spectral`; verified
float congruences, :mod:`.congruence`), HiGHS LPs
(:mod:`.lp`), alternating factor LPs (:mod:`.factor`), cvxpy SDPs
(:mod:`.sdp`), smooth factor searches (:mod:`.structured_search`).

Imports only :mod:`certify.core` (errors, verdicts, matrix checks) from ``certify``.
"""
