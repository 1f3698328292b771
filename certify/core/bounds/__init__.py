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
claim whose evidence :mod:`certify.checkers.bounds` re-derives.

This package namespace re-exports the public names of its modules.

>>> lemma4_rank_bound(15, 4), lemma4_rank_bound(15, 4, strict=True)
(8, 9)
>>> thm6(200).log2_lower_bound
19
"""

from __future__ import annotations

from certify.core.bounds.codes import (Thm5Bound, thm5, middle_layer_code_size, Thm6Bound, thm6,
                                       thm6_log2_lower_bound, Cor7Bound, cor7, prop10_s,
                                       Prop10Bound, prop10)
from certify.core.bounds.exact import (MAX_EXACT_M, MAX_TABLE_N, MAX_POWER_BITS, THM6_MIN_M,
                                       THM6_EXTENDED_MIN_M, E_UPPER, HALF, as_int, as_fraction,
                                       check_eps, floor_q, ceil_q, floor_log2, ceil_log2)
from certify.core.bounds.lemmas import (lemma3_min_gap, lemma3_factor, Lemma3Factor, lemma3,
                                        lemma4_bound, lemma4_rank_bound, Lemma4Bound, lemma4,
                                        PerPairBound, rank_bound_per_pair, perron_discriminant,
                                        perron_max_excluded_rank)
from certify.core.bounds.table import bound_claim, bounds_table, format_table
from certify.core.bounds.temperature import Temperature, thm1_temperature
from certify.core.bounds.transcript import (bits_available, bits_needed, transcript_bound_holds,
                                            alphabets_suffice, minimal_bits_per_coordinate,
                                            Eq8Check, eq8)

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
