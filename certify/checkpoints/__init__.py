"""A trained model, end to end: which certification a path gets (:mod:`.dispatch`),
a ``models/`` head (:mod:`.run`: kernel, ranks, exact correctness, the Lemma 3
audit), every head of a third-party model (:mod:`.heads`), a folder of
checkpoints (:mod:`.batch`), and the replay of extraction that
``certify verify --replay-extraction`` runs (:mod:`.replay`)."""
