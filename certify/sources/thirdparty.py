"""Third-party checkpoints: a weights file or model folder -> its layout -> one head's kernel.

:func:`load_model` reads the weights (:func:`certify.sources.weights.read_weights`,
the one reader) and the config beside them, and detects the layout
(:func:`models.layouts.detect`). :func:`head_kernel` is the kernel of one
head on a token set, with its provenance: the model's own path to the layer,
what was read, the defaults that decided, and the comparison with the
library's own computation (:func:`models.layouts.reference.check_layer`),
which runs once per layer and token set. A head whose extracted kernel
disagrees with its library beyond the tolerance is refused with the numbers
(:class:`ExtractionMismatch`, exit 3); a comparison that cannot run is
recorded with its reason.

Token sets: ``vocab`` / ``vocab:V`` (the embedding rows; the default when the
model has an embedding), ``cube:M`` and families (vectors fed to the first
layer's path; the default is ``cube:m`` for ``m <= 16``). ``rank``,
``extract``, ``checkpoint`` and the replay of ``verify`` all come here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from certify.core.errors import InputError, UncertifiableError
from certify.core.files import sha256_file
from certify.core.kernel import Kernel, Provenance, from_features, parse_tokens
from certify.core.memory import trim
from certify.sources.weights import ITEMSIZE, WeightSet, read_config, read_weights, weights_file
from models.canonical import CANONICAL

#: version of the extraction's definition (the canonical arithmetic of models.canonical); a replay names it
EXTRACTION = f"layouts/3+{CANONICAL}"
#: dtype of the canonical features
CANONICAL_DTYPE = "float64"
MAX_CUBE = 16
ADAPTER = re.compile(r"^layout:(?P<layout>\S+) layer (?P<layer>\d+) head (?P<head>\d+)$")


class ExtractionMismatch(UncertifiableError):
    """The extracted kernel disagrees with the library's own computation."""


@dataclass
class LoadedModel:
    """A third-party checkpoint, read and detected."""

    path: Path                              # what the user named
    source: Path                            # the file the claims name (weights file or shard index)
    weights: WeightSet
    config: dict[str, Any]
    config_path: Path | None
    detected: Any                           # models.layouts.Detected
    tensors: Mapping[str, Any]              # the state dict as torch tensors (half precision as float32), read on lookup
    checks: dict[tuple[int, str], Any] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)   # path -> sha256, each file hashed once
    spec: tuple[str, str] | None = None     # (adapter spec file, its sha256) when read through one
    #: the state dict as stored weights (models.canonical.stored.Weight), for the canonical forward
    stored: Mapping[str, Any] = field(default_factory=dict)
    #: the canonical forward and its library check per sequences (their content hash)
    forwards: dict[tuple[str, str], Any] = field(default_factory=dict)

    def sha256(self, f: str | Path) -> str:
        """The sha256 of a file of this model, computed once (not once per head)."""
        if str(f) not in self.hashes:
            self.hashes[str(f)] = sha256_file(f)
        return self.hashes[str(f)]

    @property
    def inputs(self) -> dict[str, str]:
        files = [*self.weights.files, *([self.config_path] if self.config_path is not None else [])]
        return {str(f): self.sha256(f) for f in files}

    def layer(self, index: int | None):
        layers = self.detected.layers
        if index is None:
            return next((L for L in layers if L.reads_tokens), layers[0])
        found = [L for L in layers if L.index == index]
        if not found:
            raise InputError(f"--layer {index}: the model has layers {[L.index for L in layers]}")
        return found[0]


def read_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Path]]:
    """``(state dict as torch tensors, config, files read)`` of a weights file or folder."""
    ws = read_weights(path)
    cfg, cfg_path = read_config(weights_file(path))
    files = {"weights": ws.files[0]}
    if cfg_path is not None:
        files["config"] = cfg_path
    return ws.torch(), cfg, files


def load_model(path: str | Path, assume: Sequence[str] = ()) -> LoadedModel:
    """Read and detect a third-party checkpoint (see the module docstring);
    ``assume``: the kernel arguments whose library default the user accepts
    (``--assume-default``, :func:`models.layouts.require_stated`)."""
    from models.layouts import detect
    from models.optional_torch import TorchView
    p = Path(path)
    if p.name == "config.json":                  # the model's config stands for its folder
        p = p.parent
    elif p.name.endswith(".config.json"):        # X.config.json stands for X.<weights suffix>
        stem = p.name[:-len(".config.json")]
        p = next((p.with_name(stem + s) for s in (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
                  if p.with_name(stem + s).is_file()), p)
    ws = read_weights(p)
    source = weights_file(p)
    config, config_path = read_config(source)
    sd = ws.lazy()               # names, dtypes and shapes; a tensor's bytes are read when its values are
    det = detect(sd, config, name=str(path), assume=assume)
    if ws.nesting:
        det.notes.append(f"a training checkpoint: the model's tensors are under {' -> '.join(ws.nesting)}"
                         + (f"; set aside: {', '.join(ws.ignored[:6])}" if ws.ignored else ""))
    _plausible(det, ws)          # from the header alone: a size refused before any byte is read or hashed
    model = LoadedModel(p, source, ws, config, config_path, det, TorchView(sd), stored=sd)
    model.sha256(source)         # the file named, hashed before a tensor's bytes are read
    return model


def _plausible(det, ws: WeightSet) -> None:
    """The sizes the run would read, as the header declares them (the header's byte
    ranges are already checked against the file: :func:`certify.sources.weights.safetensors_header`),
    within the documented limits: the vocabulary (the embedding's rows, each a token
    of the kernel) at most ``vocab``."""
    from certify.core.limits import limit
    emb = det.embedding
    if emb is not None and len(emb.shape) == 2 and int(emb.shape[0]) > limit("vocab"):
        rows, width = (int(n) for n in emb.shape)
        name = getattr(emb, "name", "the embedding")
        size = rows * width * ITEMSIZE.get(str(getattr(emb, "dtype", "")), 4)
        raise InputError(f"{ws.files[0]}: {name!s:.80} declares {rows} x {width} ({size / 2**30:.1f} GiB): a "
                         f"vocabulary of {rows} tokens is over the limit vocab ({limit('vocab')}; raise it with "
                         f"CERTIFY_LIMIT_VOCAB); refused from the header, before the file is read")


# ---------------------------------------------------------------- tokens

def _token_set(model: LoadedModel, L, tokens: str | None) -> tuple[str, int | None, np.ndarray | None]:
    """``(token set name, m, token rows or None)``; ``m`` None for the vocabulary."""
    det = model.detected
    emb = det.embedding if L.reads_tokens and L.index == model.layer(None).index else None
    if emb is not None and emb.shape[0] == 0:
        raise InputError("the model's embedding has no rows: its vocabulary is empty, no token to "
                         "certify the kernel on")
    if tokens is None:
        if emb is not None:
            return f"vocab:{emb.shape[0]}", None, None
        if L.m <= MAX_CUBE:
            return f"cube:{L.m}", L.m, None
        raise InputError(f"layer {L.index} reads {L.m}-dimensional vectors: give a token set, --tokens cube:M "
                         f"(M <= 24) or --family NAME|FILE of width {L.m}"
                         + (f"; or, {det.fix}" if det.fix else ""))
    if tokens == "vocab" or tokens.startswith("vocab:"):
        if emb is None:
            raise InputError(f"{tokens}: the model has no embedding (layer {L.index} reads {L.m}-dimensional "
                             f"vectors; give cube:{L.m} or a family"
                             + (f"; or, {det.fix})" if det.fix else ")"))
        if tokens != "vocab" and tokens != f"vocab:{emb.shape[0]}":
            raise InputError(f"{tokens}: the vocabulary has {emb.shape[0]} rows")
        return f"vocab:{emb.shape[0]}", None, None
    name = tokens[len("family:"):] if tokens.startswith("family:") else tokens
    ts, m, toks = parse_tokens(name)
    if m != L.m:
        raise InputError(f"token set {ts} has width {m}; layer {L.index} reads {L.m}-dimensional vectors")
    return ts, m, toks


def _pool(model: LoadedModel, ts: str, m: int | None, toks: np.ndarray | None, seed: int):
    """The first layer's inputs the library check draws its sequences from."""
    import torch
    if m is None:
        return torch.arange(int(ts.split(":")[1]))
    if toks is not None:
        return torch.from_numpy(np.array(toks, dtype=np.float32))
    g = torch.Generator().manual_seed(seed)
    n = min(1 << m, 512)
    idx = torch.randperm(1 << m, generator=g)[:n] if m <= 20 else torch.randint(0, 1 << m, (n,), generator=g)
    return ((idx[:, None] >> torch.arange(m)) & 1).to(torch.float32)


# ---------------------------------------------------------------- one head

def select_head(model: LoadedModel, layer: int | None, head: int | None):
    """``(LayerPlan, head index, head)``; the first kernel head of the first
    token-reading layer by default. A refused head is :class:`UncertifiableError`."""
    from models.layouts import Refusal
    L = model.layer(layer)
    if head is None:
        idx = next((i for i, h in enumerate(L.heads) if not isinstance(h, Refusal)), None)
        if idx is None:
            r = L.heads[0]
            raise UncertifiableError(f"{model.detected.library} ({model.detected.layout}) layer {L.index}: "
                                     f"{r.mechanism}: {r.reason}")
        head = getattr(L.heads[idx], "details", {}).get("head", idx)
    h = next((x for x in L.heads if not isinstance(x, Refusal) and x.details.get("head") == head), None)
    if h is None:
        r = next((x for x in L.heads if isinstance(x, Refusal) and x.head in (None, head)), None)
        if r is not None:
            raise UncertifiableError(f"{model.detected.library} ({model.detected.layout}) layer {L.index} head "
                                     f"{head}: {r.mechanism}: {r.reason}")
        raise InputError(f"--head {head}: layer {L.index} has heads 0..{len(L.heads) - 1}")
    if not L.reads_tokens:
        raise InputError(f"layer {L.index} reads the outputs of the layer before it, not a finite known token "
                         f"set; layer {model.layer(None).index} reads the tokens: --layer "
                         f"{model.layer(None).index}, or no --layer")
    return L, head, h


@dataclass(frozen=True)
class CheckNotRun:
    """A library check that could not run here (torch is not installed)."""

    library: str
    reason: str
    seed: int = 0

    def head(self, h: int) -> dict[str, Any]:
        return {"library": self.library, "version": None, "method": "", "seed": self.seed, "status": "not run",
                "reason": self.reason}

    def agrees(self, h: int) -> bool | None:
        return None


#: why the library check does not run without torch
NEEDS_LIBRARIES = ("needs the [libraries] extra (torch and the library): "
                   "pip install 'certify-attention[libraries]'")


def library_check(model: LoadedModel, L, ts: str, m: int | None, toks, *, seed: int = 0):
    """The comparison of layer ``L`` with its library on token set ``ts`` (cached);
    without torch it is recorded as not run (the features need no torch)."""
    key = (L.index, ts)
    if key not in model.checks:
        try:
            from models.layouts.reference import check_layer
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".")[0] != "torch":
                raise
            model.checks[key] = CheckNotRun(model.detected.library, NEEDS_LIBRARIES, seed)
            return model.checks[key]
        model.checks[key] = check_layer(model.detected, L, model.tensors, _pool(model, ts, m, toks, seed),
                                        seed=seed)
    return model.checks[key]


def mismatch(check, head: int) -> str | None:
    """The refusal reason when head ``head`` disagrees with its library, else None."""
    if check.agrees(head) is not False:
        return None
    j = check.head(head)
    return (f"the extracted kernel disagrees with {check.library} {check.version}'s own computation: scaled "
            f"error {j['max_error']:.3g} > tolerance {check.tolerance:g} on {check.sequences} sequences of "
            f"{check.length} tokens ({check.method}); no claim is made about this head")


#: how a comparison reads when the library's module was built with the same assumed defaults
SAME_ASSUMPTION = "same assumption, not an independent check"


def check_independence(det) -> dict[str, Any]:
    """Whether the library check is independent of the extraction's assumptions: the
    library's module is built from the config as written and, for an argument the config
    does not state, from the default the user accepted (``--assume-default``), which is
    the extractor's assumption too. Agreement then shows the extraction reproduces the
    library under that assumption, not that the assumption is the model's."""
    from models.layouts import FROM_DEFAULT
    assumed = sorted(k for k, v in (getattr(det, "stated", None) or {}).items()
                     if isinstance(v, dict) and v.get("from") == FROM_DEFAULT)
    if not assumed:
        return {"independent": True}
    return {"independent": False,
            "note": f"{SAME_ASSUMPTION}: the library's module was built with the assumed "
                    f"default{'s' if len(assumed) > 1 else ''} {', '.join(assumed)} as well"}


def head_kernel(model: LoadedModel, *, layer: int | None = None, head: int | None = None,
                tokens: str | None = None, compare: bool = True, seed: int = 0) -> Kernel:
    """The kernel of one head on a token set, with its provenance (module docstring)."""
    from certify.sources.checkpoint import from_model
    L, hi, h = select_head(model, layer, head)
    ts, m, toks = _token_set(model, L, tokens)
    det = model.detected
    details: dict[str, Any] = {**h.describe(), "library": det.library, "layer": L.index, "head": hi,
                               "layout": det.describe(), "weights": model.weights.describe(),
                               "config": str(model.config_path) if model.config_path else None,
                               "extraction": EXTRACTION}
    if m is not None and det.embedding is not None:
        details["tokens_as"] = "vectors fed to the first layer's path (the model's own inputs are vocabulary ids)"
    if compare:
        check = library_check(model, L, ts, m, toks, seed=seed)
        details["library_check"] = check.head(hi)
        details["library_check"].update(check_independence(det))
        why = mismatch(check, hi)
        if why is not None:
            raise ExtractionMismatch(f"{det.library} layer {L.index} head {hi}: {why}")
    prov = Provenance(str(model.source), model.sha256(model.source),
                      f"layout:{det.layout} layer {L.index} head {hi}", CANONICAL_DTYPE, details=details)
    if m is None:
        q, k = h.canonical_features(det.embedding)
        return from_features(q, k, prov, token_set=ts, guarantee=h.guarantee)
    if toks is None or tokens is None:      # token rows come only from a named token set
        return from_model(h, ts, prov)
    return from_model(h, tokens[len("family:"):] if tokens.startswith("family:") else tokens, prov)


def load_head_kernel(path: str | Path, *, layer: int | None = None, head: int | None = None,
                     tokens: str | None = None, compare: bool = True, seed: int = 0,
                     assume: Sequence[str] = ()) -> Kernel:
    return head_kernel(load_model(path, assume), layer=layer, head=head, tokens=tokens, compare=compare,
                       seed=seed)


def parse_adapter(adapter: str) -> tuple[int, int] | None:
    """``(layer, head)`` of a third-party kernel's adapter name, or None."""
    m = ADAPTER.match(adapter or "")
    return (int(m.group("layer")), int(m.group("head"))) if m else None


# ---------------------------------------------------------------- every layer on stated sequences

def forward_on(model: LoadedModel, seqs: Any, upto: int | None = None) -> Any:
    """The canonical forward (:func:`models.layouts.forward.forward`) of the model on the
    sequences, computed once per model and sequences (the heads of every layer share it);
    ``upto``: the last layer it must reach."""
    from models.layouts.forward import forward
    key = ("forward", seqs.sha256)
    have = model.forwards.get(key)
    need = len(model.detected.layers) - 1 if upto is None else upto
    if have is None or len(have.inputs) <= need:         # continued from the blocks computed so far
        model.forwards[key] = forward(model.detected, model.stored, seqs.ids, upto=need, keep_features=False,
                                      resume=have)
    return model.forwards[key]


def release_layer(model: LoadedModel, seqs: Any, layer: int) -> None:
    """Drop what the cached canonical forward on ``seqs`` holds for layer ``layer`` once its
    heads are certified (the layers go in order): the hidden states entering it and its
    features (a 24-layer model's inputs are 400 MB at 2,048 positions and hidden 1024). A
    later request for that layer is an error, not a silent recomputation."""
    fwd = model.forwards.get(("forward", seqs.sha256))
    if fwd is not None and layer < len(fwd.inputs):
        fwd.inputs[layer] = None
        fwd.features = {k: v for k, v in fwd.features.items() if k[0] != layer}


def forward_check(model: LoadedModel, seqs: Any) -> dict[str, Any]:
    """The hidden states of every layer against the library's own model on the sequences (cached;
    :func:`models.layouts.reference.check_forward`), or why it did not run."""
    key = ("forward check", seqs.sha256)
    if key not in model.forwards:
        try:
            from models.layouts.reference import check_forward
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".")[0] != "torch":
                raise
            model.forwards[key] = {"library": model.detected.library, "status": "not run",
                                   "reason": NEEDS_LIBRARIES}
            return model.forwards[key]
        fwd = forward_on(model, seqs)
        model.forwards[key] = check_forward(model.detected, model.tensors, seqs.ids, fwd.inputs)
        trim()                                # the library's whole model, gone: give its pages back
    return model.forwards[key]


def positions_kernel(model: LoadedModel, seqs: Any, *, layer: int, head: int, compare: bool = True,
                     seed: int = 0) -> Kernel:
    """The kernel of head ``head`` of layer ``layer`` on the inputs to that layer at every
    position of the sequences (token set ``positions:SxT``, row ``s T + t``), from the
    canonical forward; ``compare``: the layer's heads against the library's own module on those
    inputs and every layer's inputs against the library's own model (a disagreement beyond the
    tolerance is :class:`ExtractionMismatch`)."""
    from models.layouts import Refusal
    from models.layouts.forward import for_sequences
    det = model.detected
    why = for_sequences(det)
    if why is not None:
        raise InputError(why)
    L = model.layer(layer)
    h = next((x for x in L.heads if not isinstance(x, Refusal) and x.details.get("head") == head), None)
    if h is None:
        raise InputError(f"--head {head}: layer {L.index} has heads 0..{len(L.heads) - 1}")
    fwd = forward_on(model, seqs, upto=L.index)
    if (L.index, head) not in fwd.features:            # one layer's features held at a time
        from models.layouts.forward import layer_features
        layer_features(det, model.stored, fwd, L)
    q, k = fwd.features[(L.index, head)]
    ts = seqs.token_set
    details: dict[str, Any] = {**h.describe(), "library": det.library, "layer": L.index, "head": head,
                               "layout": det.describe(), "weights": model.weights.describe(),
                               "config": str(model.config_path) if model.config_path else None,
                               "extraction": EXTRACTION, "sequences": seqs.name,
                               "sequences_sha256": seqs.sha256,
                               "tokens_as": f"the inputs to layer {L.index} at every position of the "
                                            f"sequences (row s T + t), from the canonical forward of every "
                                            f"block before it"}
    if compare:
        # cached per layer and sequences (two sets of sequences may share S x T)
        check = library_check(model, L, f"{ts}@{seqs.sha256}", L.m, fwd.inputs[L.index], seed=seed)
        fc = forward_check(model, seqs)
        details["library_check"] = {**check.head(head), **check_independence(det),
                                    "hidden_states": {**{k: v for k, v in fc.items() if k != "layers"},
                                                      **({"max_error": fc["layers"][L.index]}
                                                         if "layers" in fc else {})}}
        why = mismatch(check, head)
        if why is None and fc.get("status") == "disagrees" and fc["layers"][L.index] > fc["tolerance"]:
            why = (f"the canonical hidden states entering layer {L.index} disagree with {fc.get('library')} "
                   f"{fc.get('version')}'s own forward: error {fc['layers'][L.index]:.3g} > tolerance "
                   f"{fc['tolerance']:g}")
        if why is not None:
            raise ExtractionMismatch(f"{det.library} layer {L.index} head {head}: {why}")
    prov = Provenance(str(model.source), model.sha256(model.source),
                      f"layout:{det.layout} layer {L.index} head {head}", CANONICAL_DTYPE, details=details)
    return from_features(q, k, prov, token_set=ts, guarantee=h.guarantee)
