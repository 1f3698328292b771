"""Rank certificates of a kernel (Lemma 4, Thm 5): the exact two-sided rank
over Q (:mod:`.exact`), the certified eps-rank (:mod:`.eps`), the code rank of
Lemma 4 / Thm 5 (:mod:`.code`), nonnegativity (:mod:`.nonnegative`, beyond
the enumerable pairs from the feature map's structure, :mod:`.structure`); the
factor-form summary they share (:mod:`.summary`); :func:`.run.certify_rank`
makes them all.

``python -m certify.rank`` runs the ``certify rank`` command.
"""
