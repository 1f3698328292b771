"""Auto-detected layouts: a checkpoint's tensors and config -> every head of every layer.

:func:`detect` decides the layout from the config first (``library``,
``model_type``, ``class``) and the keys second; it never guesses: keys that
fit two layouts with nothing to decide between them are an ``InputError``
that lists the candidates and the config key that decides. Before that,
wrapper entries are set aside (``proj_updater.instance.`` -- performer's
second view of its own layers --, EMA copies, optimizer state: never
layers). Detection reads names and shapes only: the tensors are stored
weights (:class:`models.canonical.stored.Weight`, read and decoded exactly
when a head's features need them) or torch tensors (half precision converted
exactly to float32).

The result is a :class:`~models.layouts.base.Detected`: layers, each head a
kernel head or a :class:`~models.layouts.base.Refusal` with its reason.
Softmax attention is recognised (:mod:`.softmax`) so that it is refused for
that reason. Unrecognised keys are an ``InputError`` that says how to write a
spec. Reading the files is :func:`certify.sources.thirdparty.read_checkpoint`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping

from certify.core.errors import InputError, UncertifiableError
from models.layouts import fla, lucidrains, others, softmax
from models.layouts.base import SPEC_HINT, Detected, FeatureHead, LayerPlan, Refusal, compute_dtype

#: library -> detectors tried on the keys
DETECTORS: Mapping[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Detected | None]] = {
    "performer-pytorch": lucidrains.detect,
    "linear-attention-transformer": lucidrains.detect,
    "pytorch-fast-transformers": others.detect_fast_transformers,
    "zoology": others.detect_zoology,
    "fla": fla.detect_layer,
    "softmax": softmax.detect,
}
LIBRARIES = ("performer-pytorch", "linear-attention-transformer", "pytorch-fast-transformers", "fla", "zoology")
#: key components that mark a wrapper's copy of the model, never a layer
WRAPPERS = ("proj_updater", "ema", "ema_model", "model_ema", "shadow", "shadow_params", "optimizer",
            "optimizer_states", "optim", "averaged_model", "swa_model")

__all__ = ["Detected", "FeatureHead", "LayerPlan", "Refusal", "detect", "LIBRARIES", "drop_wrappers", "prepare",
           "require_stated"]
#: where a stated kernel argument came from
FROM_CONFIG, FROM_DEFAULT = "config.json", "library default, assumed"
#: ``assume`` entry accepting every unstated default (``--assume-library-defaults``); each
#: accepted default is still recorded by name in ``det.stated``
ALL_DEFAULTS = "*"


def drop_wrappers(sd: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(tensors, set-aside keys)``: keys with a wrapper component (:data:`WRAPPERS`)
    are set aside, unless nothing else is left."""
    keep = {k: v for k, v in sd.items() if not set(k.split(".")) & set(WRAPPERS)}
    if not keep:
        return dict(sd), []
    return keep, sorted(set(sd) - set(keep))


def prepare(sd: Mapping[str, Any]) -> dict[str, Any]:
    """The tensors detection reads: wrappers set aside, half precision as float32."""
    return compute_dtype(drop_wrappers(sd)[0])[0]


def detect(sd: Mapping[str, Any], config: Mapping[str, Any], *, name: str = "checkpoint",
           assume: Iterable[str] = ()) -> Detected:
    """The layout of a state dict (see the module docstring); ``assume``: the
    kernel arguments whose library default the user accepts
    (:func:`require_stated`)."""
    if not isinstance(config, Mapping):
        raise InputError(f"{name}: the config must be a JSON object")
    sd, dropped = drop_wrappers(sd)
    sd, stored = compute_dtype(sd)
    det = _detect(sd, config, name)
    require_stated(det, config, assume)
    det.stored_dtype = stored
    if stored:
        det.notes.append(f"weights stored as {stored}, decoded exactly from their bits (every {stored} value "
                         f"is a float32 and a float64); the canonical features are float64 (the library "
                         f"check runs the library in float32)")
    if dropped:
        roots = sorted({k.split(".")[0] if k.split(".")[0] in WRAPPERS else
                        next(c for c in k.split(".") if c in WRAPPERS) for k in dropped})
        det.notes.append(f"{len(dropped)} tensors of wrappers ({', '.join(roots)}) set aside: a wrapper's copy "
                         f"of the layers is not a layer")
    return det


def _detect(sd: Mapping[str, Any], config: Mapping[str, Any], name: str) -> Detected:
    lib = config.get("library")
    mt = config.get("model_type")
    if lib is not None and lib not in LIBRARIES:
        raise InputError(f"{name}: config library {lib!r} is not one of {LIBRARIES}")
    if lib in (None, "fla") and (mt is not None or fla.model_root(sd) is not None):
        model = fla.detect_model(sd, config)
        if model is not None:
            return model
    if lib is None and mt in softmax.SOFTMAX_MODEL_TYPES:
        refused = softmax.detect(sd, config)        # a softmax model_type is always refused
        if refused is not None:
            return refused
    if mt is not None and lib is None and mt not in fla.REFUSED_MODELS and mt != "linear_attn":
        config = {k: v for k, v in config.items() if k != "model_type"}
    order = [(k, f) for k, f in DETECTORS.items() if lib is None or k == lib]
    found: list[tuple[str, Detected]] = []
    seen = set()
    for key, fn in order:
        if fn in seen:
            continue
        seen.add(fn)
        got = fn(sd, config if key != "softmax" else {**config, **({"model_type": mt} if mt else {})})
        if got is not None and got.layers:
            found.append((key, got))
    if len(found) > 1:
        what = "; ".join(f"{d.library} ({d.container}{', prefix ' + repr(d.prefix) if d.prefix else ''})"
                         for _, d in found)
        raise InputError(f"{name}: the keys fit more than one library: {what}; config.json \"library\" "
                         f"decides, or pass one model per checkpoint")
    if found:
        return found[0][1]
    shown = sorted(sd)[:6]
    raise InputError(f"cannot tell the layout of {name}: keys {shown}{' ...' if len(sd) > 6 else ''} match none "
                     f"of {', '.join(LIBRARIES)}; {SPEC_HINT}")


def _value(v: Any) -> Any:
    """A stated value as JSON can carry it (a config's value as written)."""
    return v if isinstance(v, (str, int, float, bool)) or v is None else json.loads(json.dumps(v, default=str))


def require_stated(det: Detected, config: Mapping[str, Any], assume: Iterable[str] = ()) -> None:
    """No default decides a kernel silently.

    Every kernel-changing constructor argument (:data:`.defaults.KERNEL_ARGS`)
    that config.json does not state and the weights cannot tell
    (``det.unstated``) must be accepted by name (``assume``, the command line's
    ``--assume-default NAME``); otherwise a model with a kernel head is refused
    (:class:`UncertifiableError`, exit 3) naming each argument and how to state
    it. A model whose every head is refused for another reason is left as it is
    (its refusals say why). ``det.stated`` then records every kernel argument the
    certificate rests on beyond the weights: the config's, and the accepted
    defaults."""
    from models.layouts.defaults import KERNEL_ARGS
    assume = list(dict.fromkeys(assume))
    if ALL_DEFAULTS in assume:           # --assume-library-defaults: every unstated argument, each named
        assume = list(det.unstated)
    table = KERNEL_ARGS.get(det.kernel_args, {})
    bad = [a for a in assume if a not in det.unstated]
    if bad:
        why = ("config.json states it" if bad[0] in config else
               "the weights tell it" if bad[0] in table else
               f"not a kernel argument of {det.kernel_args[0]} {det.kernel_args[1]} "
               f"(those are: {', '.join(table) or 'none'})")
        raise InputError(f"--assume-default {bad[0]}: nothing to assume ({why})")
    kernel = any(not isinstance(h, Refusal) for L in det.layers for h in L.heads)
    missing = [a for a in det.unstated if a not in assume]
    if kernel and missing:
        lib, cls = det.kernel_args
        what = "; ".join(f"{a} ({table.get(a, 'changes the kernel')}; unstated it would be read as "
                         f"{json.dumps(_value(det.unstated[a]))})" for a in missing)
        raise UncertifiableError(
            f"{lib} {cls}: the kernel depends on constructor arguments that config.json does not state and "
            f"the weights cannot tell: {what}. State them in config.json next to the weights (e.g. "
            f"{{{', '.join(json.dumps(a) + ': ...' for a in missing)}}}) or accept the library default with "
            + " ".join(f"--assume-default {a}" for a in missing)
            + ("" if len(missing) == 1 else " (all at once: --assume-library-defaults)"))
    det.stated = {a: {"value": _value(config[a]), "from": FROM_CONFIG} for a in table if a in config}
    det.stated.update({a: {"value": _value(det.unstated[a]), "from": FROM_DEFAULT} for a in assume})
    if det.embedding is not None and isinstance(config.get("embedding"), str):
        # the wiring config.json states (fla's bare layer under a user's embedding): the
        # tokens are that tensor's rows, a statement about the module the weights cannot show
        det.stated["embedding"] = {"value": config["embedding"], "from": FROM_CONFIG}
