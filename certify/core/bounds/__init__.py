"""The paper's closed-form bounds, in exact integer / rational arithmetic.

Lemma 3 (gap domination factor), Lemma 4 (approximate identity rank, also
strict and per-pair) and its nonnegative refinement (:mod:`.lemmas`); Thm 5
(amplified rank bound), Thm 6 (three-token phase transition, code-size
hypothesis checked with integers), Cor 7 (growing exact length), Prop 10
(size of the multilevel code) (:mod:`.codes`); Thm 1 (softmin temperature,
:mod:`.temperature`); Thm 9 / Eq. 8 (transcript bits, :mod:`.transcript`);
the table of all of them and the ``BOUND`` claim (:mod:`.table`).

Every decision is made with Python ints and ``Fraction``; ``mpmath`` only
renders logarithms for people. Hypotheses are checked exactly and a violation
raises :class:`certify.core.errors.InputError`. Results with more than one
number are frozen dataclasses; :func:`bound_claim` turns one into a ``BOUND``
claim whose evidence :mod:`certify.checkers.closed_form` re-derives.

This package namespace re-exports the public names of its modules.

>>> lemma4_rank_bound(15, 4), lemma4_rank_bound(15, 4, strict=True)
(8, 9)
>>> thm6(200).log2_lower_bound
19
"""

from __future__ import annotations

from certify.core.bounds.codes import (
                                       Cor7Bound,
                                       Prop10Bound,
                                       Thm5Bound,
                                       Thm6Bound,
                                       cor7,
                                       middle_layer_code_size,
                                       prop10,
                                       prop10_s,
                                       thm5,
                                       thm6,
                                       thm6_log2_lower_bound,
)
from certify.core.bounds.exact import (
                                       E_UPPER,
                                       HALF,
                                       MAX_EXACT_M,
                                       MAX_POWER_BITS,
                                       MAX_TABLE_N,
                                       THM6_EXTENDED_MIN_M,
                                       THM6_MIN_M,
                                       as_fraction,
                                       as_int,
                                       ceil_log2,
                                       ceil_q,
                                       check_eps,
                                       floor_log2,
                                       floor_q,
)
from certify.core.bounds.lemmas import (
                                       Lemma3Factor,
                                       Lemma4Bound,
                                       PerPairBound,
                                       lemma3,
                                       lemma3_factor,
                                       lemma3_min_gap,
                                       lemma4,
                                       lemma4_bound,
                                       lemma4_rank_bound,
                                       perron_discriminant,
                                       perron_max_excluded_rank,
                                       rank_bound_per_pair,
)
from certify.core.bounds.table import bound_claim, bounds_table, format_table
from certify.core.bounds.temperature import Temperature, thm1_temperature
from certify.core.bounds.transcript import (
                                       Eq8Check,
                                       alphabets_suffice,
                                       bits_available,
                                       bits_needed,
                                       eq8,
                                       minimal_bits_per_coordinate,
                                       transcript_bound_holds,
)

__all__ = [
    "Cor7Bound", "E_UPPER", "Eq8Check", "HALF", "Lemma3Factor", "Lemma4Bound", "MAX_EXACT_M",
    "MAX_POWER_BITS", "MAX_TABLE_N", "PerPairBound", "Prop10Bound", "THM6_EXTENDED_MIN_M",
    "THM6_MIN_M", "Temperature", "Thm5Bound", "Thm6Bound", "alphabets_suffice", "as_fraction",
    "as_int", "bits_available", "bits_needed", "bound_claim", "bounds_table", "ceil_log2",
    "ceil_q", "check_eps", "cor7", "eq8", "floor_log2", "floor_q", "format_table", "lemma3",
    "lemma3_factor", "lemma3_min_gap", "lemma4", "lemma4_bound", "lemma4_rank_bound",
    "middle_layer_code_size", "minimal_bits_per_coordinate", "perron_discriminant",
    "perron_max_excluded_rank", "prop10", "prop10_s", "rank_bound_per_pair",
    "thm1_temperature", "thm5", "thm6", "thm6_log2_lower_bound", "transcript_bound_holds",
]
