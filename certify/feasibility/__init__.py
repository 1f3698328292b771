"""Is there a rank-r normalized nonnegative kernel head that solves a finite
family? (Lemma 3 chains, Lemma 4, the paper's Sec. 5.1 bracket.)

Bottom to top: :mod:`.model` (the model class, the exact check of a witness),
:mod:`.chain_bounds` (Lemma 3 + Lemma 4 lower bounds from the family's own
chains), :mod:`.result`, the searches (:mod:`.lp_search`, :mod:`.witness_search`,
:mod:`.sdp_search`) and the convex dual certificates (:mod:`.convex_bounds`),
and :func:`.decide.decide` on top.

``python -m certify.feasibility --rank 8`` runs the ``certify feasibility`` command.
"""
