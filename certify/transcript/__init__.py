"""Theorem 9 / Eq. 8 against quantized sketch models on the Sec. 4 multilevel
family: the model (:mod:`.model`), the capacity bound (:mod:`.capacity`), the
float proposal (:mod:`.search`), exact replay (:mod:`.replay`), the certified
enumeration (:mod:`.enumerate`, its one-layer fast path :mod:`.onelayer` with
the compiled passes ``_ballkernel.c``, the ball constants :mod:`.balls`;
claims in :mod:`.certified`), and
:func:`.run.run_transcript` on top.

``python -m certify.transcript`` runs the ``certify transcript`` command.
"""
