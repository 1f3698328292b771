"""The floor and the paper's objects, on which everything else is built.

Floor: :mod:`.errors` (exceptions and exit codes), :mod:`.limits`,
:mod:`.numbers` (exact rationals as text, numeric matrices checked),
:mod:`.files` (hashes, atomic writes), :mod:`.outputs` (output folders owned by
manifest), :mod:`.progress`, :mod:`.engine` (tasks in process or on Ray),
:mod:`.verdict`.

The paper's objects: :mod:`.cube` (the Boolean cube, Min-IP targets, Eq. 1-2),
:mod:`.codes` (constant-weight codes), :mod:`.families` (the hard input
families), :mod:`.bounds` (Lemma 3/4, Thm 1/5/6, Cor 7, Eq. 8, Prop 10),
:mod:`.kernel` (the kernel value alpha on a token set), :mod:`.certificate`
(claims and certificates, their statements rendered by the checker).
"""
