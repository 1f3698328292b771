"""Torch models of the paper: feature maps (:mod:`.feature_maps`), kernel and
softmax heads (:mod:`.heads`), the paper's constructions (:mod:`.constructions`),
quantized sketch models of Thm 9 (:mod:`.sketch`, :mod:`.quantize`),
checkpoints (:mod:`.checkpoint`), training of Sec. 5 (:mod:`.train`), and the
layouts of third-party libraries (:mod:`.layouts`, :mod:`.adapters`).

Imports only :mod:`certify.core` from ``certify``.
"""
