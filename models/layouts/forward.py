"""Every layer on stated token sequences: the canonical forward of each family that has one,
chosen by the detected library (:mod:`models.layouts.fla_forward` for fla ``linear_attn``
language models, :mod:`models.layouts.lucidrains_forward` for performer-pytorch's
``PerformerLM`` and linear-attention-transformer's ``LinearAttentionTransformerLM``). Each module gives the same four functions: :func:`refusal` (why not, one
line), :func:`for_sequences` (the detection readied for positions' hidden states),
:func:`forward` and :func:`layer_features`, and :func:`max_length` where positions are
learned; :class:`Forward` is what they fill.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Mapping

import numpy as np

from models.layouts import fla_forward, lucidrains_forward
from models.layouts.base import Detected
from models.layouts.fla_forward import Forward

__all__ = ["Forward", "check_blocks", "for_sequences", "forward", "layer_features", "max_length", "refusal"]

#: the families whose every layer runs on stated sequences, for the message of the others
SUPPORTED = f"{fla_forward.SUPPORTED}; {lucidrains_forward.SUPPORTED}"


def _family(det: Detected) -> ModuleType | None:
    if det.layout in fla_forward.SEQUENCE_LAYOUTS:
        return fla_forward
    if det.library in lucidrains_forward.BLOCKS:
        return lucidrains_forward
    return None


#: layouts of layers that no installed library composes into a language model
LAYERS_ONLY = {"fla:based": "fla's BasedLinearAttention", "fla:rebased": "fla's ReBasedLinearAttention",
               "zoology:based": "zoology's Based mixer", "fla:linear_attn-layer": "fla's LinearAttention layer",
               "fla:layers": "fla layers"}


def refusal(det: Detected) -> str | None:
    """Why ``--sequences`` cannot run on this model (one line), or None."""
    fam = _family(det)
    if fam is None and det.layout in LAYERS_ONLY:
        return (f"--sequences: {LAYERS_ONLY[det.layout]} is a layer, not a language model: fla 0.6.0 has no model "
                f"class built of Based or ReBased layers and zoology is not installed, so the blocks around the "
                f"layers (norms, MLPs, residuals) are a user's module that the checkpoint does not state, and the "
                f"hidden states entering a deeper layer are not defined; without --sequences the first layer's "
                f"heads are certified on what they read (the vocabulary, with \"embedding\" in config.json); "
                f"every layer runs for {SUPPORTED}")
    if fam is None:
        return (f"--sequences certifies every layer of {SUPPORTED} only; this model is {det.library} "
                f"({det.layout}): without --sequences, its first layer's heads are certified on what they read "
                f"(the vocabulary, where it has one); its deeper layers need a canonical forward through its "
                f"own blocks, which exists for those families only")
    return fam.refusal(det)


def for_sequences(det: Detected) -> str | None:
    """:func:`refusal`, and when there is none the detection readied for stated sequences
    (heads that positions resolve put in place)."""
    why = refusal(det)
    if why is None:
        getattr(_family(det), "for_sequences", lambda d: None)(det)
    return why


def check_blocks(det: Detected, sd: Mapping[str, Any]) -> None:
    """InputError (one line) when a block's tensors are not the ones the family's forward reads:
    checked on the names before any work."""
    fam = _family(det)
    if fam is not None:
        fam.check_blocks(det, sd)


def max_length(det: Detected) -> int | None:
    """The longest sequence the model takes (its position embedding's rows), or None (no limit)."""
    return getattr(_family(det), "max_length", lambda d: None)(det)


def forward(det: Detected, sd: Mapping[str, Any], ids: np.ndarray, upto: int | None = None,
            keep_features: bool = True, resume: Forward | None = None) -> Forward:
    """The family's canonical forward (:func:`models.layouts.fla_forward.forward`)."""
    fam = _family(det)
    if fam is None:
        from certify.core.errors import InputError
        raise InputError(refusal(det) or "")
    return fam.forward(det, sd, ids, upto=upto, keep_features=keep_features, resume=resume)


def layer_features(det: Detected, sd: Mapping[str, Any], fwd: Forward, L: Any) -> None:
    """The family's :func:`models.layouts.fla_forward.layer_features`."""
    fam = _family(det)
    assert fam is not None, "layer_features after a refused forward"
    fam.layer_features(det, sd, fwd, L)
