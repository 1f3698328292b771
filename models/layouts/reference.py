"""The library's own computation, compared with the extracted kernel.

The extractor (:mod:`models.layouts`) recomputes each head's features with
its own code; a mistake there (a missed pre-norm, a wrong head split, a
misread layer) would give a kernel the model does not compute. So the first
layer is also run by the library itself on sequences of the certified
tokens, with random values in place of the value projection's output, and
its attention output is compared with the one the extracted kernel gives
(its canonical features, the ones a certificate binds: ``FeatureHead.canonical_features``),
``o_i = sum_j alpha(x_i, x_j) v_j / (sum_j alpha(x_i, x_j) + the library's
epsilon)`` (prefix sums for causal layers), or ``o_i = sum_j alpha(x_i, x_j) v_j``
itself for an unnormalized head (fla's ``do_feature_map_norm=False``; the library's
module is built normalized or not as its config writes it). The comparison does not reuse the
extractor's path:

* performer-pytorch and linear-attention-transformer: the library's module
  (a ``Performer`` with its blocks up to the compared layer, a
  ``LinearAttentionTransformer`` with every layer, or a bare ``SelfAttention``) is built with the library's constructor, loaded
  strictly from the checkpoint and run forward on CPU; hooks replace the
  first layer's ``to_v`` output by the random values and read the input of
  its ``to_out`` (every head's output);
* fla (whose layer forwards need Triton on a GPU and are not called): the
  layer is built with fla's constructor and loaded strictly; its own
  submodules (``q_proj``, ``k_proj``, ``feature_map_q``, ...) are composed
  with fla's pure-PyTorch references (``fla.ops.*.naive``, and
  ``fla.modules.norm.layernorm.rms_norm_ref`` / ``layer_norm_ref`` for the
  norms whose modules run Triton kernels);
* zoology's Based key layout is run through fla's port
  (``BasedLinearAttention``); pytorch-fast-transformers is not installable
  with the pinned torch: its comparison cannot run, which is recorded.

The error of position ``i`` is scaled by the size of what is summed,
``e_i = max |o_lib - o_ext| |sum_j alpha_ij| / (sum_j |alpha_ij| max|v|)``
(for a nonnegative kernel: the error relative to the values); for an unnormalized
head ``e_i = max |o_lib - o_ext| / (sum_j <|phiQ_i|, |phiK_j|> max|v|)``, the size
of the products float arithmetic rounds (``sum_j alpha_ij`` for nonnegative
features; signed features cancel inside ``alpha_ij``, and at fla's default width
scaling by ``|alpha_ij|`` would count that cancellation as error): every position
compared, one whose every product is 0 by its absolute error; positions whose
denominator cancels to below ``1e-3 sum_j |alpha_ij|`` (signed kernels) are
ill-conditioned in both computations and left out, and counted. A head
agrees when ``max_i e_i <= tolerance`` (:data:`TOLERANCE`, float32 arithmetic).
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

import numpy as np
import torch

from models.feature_table import names_in
from models.layouts.base import Detected, FeatureHead, LayerPlan
from models.optional_torch import tt

#: largest scaled error (see the module docstring) at which a head agrees with its library
TOLERANCE = 1e-4
#: ill-conditioned positions: |sum alpha| < ILL * sum |alpha|
ILL = 1e-3
SEQ_LEN, MAX_SEQS = 16, 32
DIST = {"performer-pytorch": "performer-pytorch", "linear-attention-transformer": "linear-attention-transformer",
        "fla": "flash-linear-attention", "zoology": "flash-linear-attention",
        "pytorch-fast-transformers": "pytorch-fast-transformers"}


@dataclass
class LibraryCheck:
    """The comparison of one layer with its library's own computation."""

    library: str
    version: str | None
    status: str                          # agrees | disagrees | not run
    method: str
    reason: str = ""
    tolerance: float = TOLERANCE
    seed: int = 0
    sequences: int = 0
    length: int = 0
    errors: dict[int, float] = field(default_factory=dict)        # head -> max scaled error
    left_out: dict[int, int] = field(default_factory=dict)        # head -> ill-conditioned positions
    unnormalized: set[int] = field(default_factory=set)           # heads compared without a denominator

    def head(self, h: int) -> dict[str, Any]:
        """This comparison as one head sees it (JSON)."""
        out = {"library": self.library, "version": self.version, "method": self.method,
               "tolerance": self.tolerance, "seed": self.seed, "sequences": self.sequences,
               "length": self.length}
        if self.status == "not run":
            return {**out, "status": "not run", "reason": self.reason}
        if h not in self.errors:
            return {**out, "status": "not run", "reason": "this head is not compared (refused or local)"}
        err = self.errors[h]
        if h in self.unnormalized:            # o = sum_j alpha_ij v_j: no denominator on either side
            return {**out, "status": "agrees" if err <= self.tolerance else "disagrees", "max_error": err,
                    "positions_left_out": 0, "output": "A V (unnormalized)",
                    "error": "max_i |o_lib - o_ext| / (sum_j <|phiQ_i|, |phiK_j|> max|v|)"}
        return {**out, "status": "agrees" if err <= self.tolerance else "disagrees", "max_error": err,
                "positions_left_out": self.left_out.get(h, 0),
                "error": "max_i |o_lib - o_ext| |sum_j alpha_ij| / (sum_j |alpha_ij| max|v|)"}

    def agrees(self, h: int) -> bool | None:
        """True / False, or None when the comparison did not run for ``h``."""
        if self.status == "not run" or h not in self.errors:
            return None
        return self.errors[h] <= self.tolerance


def version(library: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(DIST.get(library, library))
    except metadata.PackageNotFoundError:
        return None


# ---------------------------------------------------------------- entry point

def check_layer(det: Detected, layer: LayerPlan, sd: Mapping[str, torch.Tensor], pool: torch.Tensor, *,
                seed: int = 0) -> LibraryCheck:
    """Compare every kernel head of ``layer`` (a layer reading the tokens) with the
    library's own computation on sequences drawn from ``pool``: token vectors
    ``(K, m)``, or vocabulary ids ``(V,)`` when the model has an embedding."""
    build = layer.library.get("build", "")
    lib = "fla" if build == "zoology-Based" else det.library          # zoology: through fla's port
    run = _RUNNERS.get(build)
    method = _METHODS.get(build, "")
    if build in _ON_STATES and pool.is_floating_point():        # an LM's layer on stated sequences' states
        method = _ON_STATES[build][layer.index > 0]
    check = LibraryCheck(lib, version(lib), "not run", method, seed=seed)
    heads = {i: h for i, h in enumerate(layer.heads) if isinstance(h, FeatureHead)}
    if not heads:
        check.reason = "no head of this layer is a kernel head"
        return check
    if run is None:
        check.reason = _NOT_RUN.get(build, f"no way to run {lib}'s own computation for this layer")
        return check
    if check.version is None and build != "zoology-Based":
        check.reason = f"{DIST.get(lib, lib)} is not installed"
        return check
    gen = torch.Generator().manual_seed(seed)
    n = min(MAX_SEQS, max(1, -(-len(pool) // SEQ_LEN)))
    idx = torch.cat([torch.randperm(len(pool), generator=gen) for _ in range(-(-n * SEQ_LEN // len(pool)))])
    inputs = pool[idx[:n * SEQ_LEN]].reshape(n, SEQ_LEN, *pool.shape[1:])           # (B, N[, m])
    if layer.library.get("embedded") and not inputs.is_floating_point():
        inputs = tt(det.embedding)[inputs]         # a bare layer under a stated embedding reads its rows
    dv = {i: int(h.Wv.shape[0]) for i, h in heads.items()}
    H = len(layer.heads)
    width = max(dv.values())
    V = torch.randn(n, SEQ_LEN, H, width, generator=gen).double()                  # (B, N, H, dv), float32 values
    check.sequences, check.length = n, SEQ_LEN
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                torch.random.fork_rng(devices=[]), torch.no_grad():
            warnings.simplefilter("ignore")
            lib_out, eps_rule = run(det, layer, sd, inputs, V[..., :width].to(torch.float32))
    except Exception as exc:             # the library's own code: any failure is reported, not hidden
        check.reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return check
    rows = inputs if inputs.is_floating_point() else tt(det.embedding)[inputs]
    flat = rows.reshape(-1, rows.shape[-1])
    for i, h in heads.items():
        cq, ck = h.canonical_features(flat.numpy())                               # the certified features
        q = torch.from_numpy(cq).reshape(n, SEQ_LEN, -1)
        k = torch.from_numpy(ck).reshape(n, SEQ_LEN, -1)
        A = q @ k.transpose(1, 2)                                                   # (B, N, N)
        if h.causal:
            A = A * torch.tril(torch.ones(SEQ_LEN, SEQ_LEN, dtype=torch.float64))
        v = V[:, :, i, :dv[i]]
        # a normalized head divides by sum_j alpha_ij (+ the library's epsilon); an unnormalized
        # one outputs A V itself: nothing cancels, no position is ill-conditioned
        den = eps_rule(A.sum(-1), q) if h.normalized else torch.ones(A.shape[:-1], dtype=A.dtype)   # (B, N)
        ours = (A @ v) / den[..., None]
        got = lib_out[:, :, i, :dv[i]].to(torch.float64)
        scale = A.abs().sum(-1) * v.abs().amax(dim=(1, 2))[:, None]
        if h.normalized:
            ill = (A.sum(-1).abs() < ILL * A.abs().sum(-1)) | (scale == 0)
        else:
            # A V in float32 is rounded relative to the products it sums, sum_j <|phiQ_i|, |phiK_j|>
            # (= sum_j alpha_ij for nonnegative features; signed ones cancel inside alpha_ij);
            # a position where every product is 0 must give 0: its absolute error
            Aabs = q.abs() @ k.abs().transpose(1, 2)
            if h.causal:
                Aabs = Aabs * torch.tril(torch.ones(SEQ_LEN, SEQ_LEN, dtype=torch.float64))
            scale = Aabs.sum(-1) * v.abs().amax(dim=(1, 2))[:, None]
            ill = torch.zeros_like(scale, dtype=torch.bool)
            scale = torch.where(scale == 0, 1.0, scale)
        e = ((ours - got).abs().amax(-1) * den.abs() / torch.where(ill, 1.0, scale))
        e = torch.where(ill, 0.0, e)
        if not h.normalized:
            check.unnormalized.add(i)
        check.errors[i] = float(e.max()) if not bool(torch.isnan(e).any()) else float("inf")
        check.left_out[i] = int(ill.sum())
    check.status = "agrees" if all(v <= check.tolerance for v in check.errors.values()) else "disagrees"
    return check


# ---------------------------------------------------------------- denominators

def _add(eps: float) -> Callable:
    return lambda s, q: s + eps


def _clamp(eps: float) -> Callable:
    return lambda s, q: s.clamp(min=eps)


def _performer_causal(s, q):
    return s + 1e-6 * q.sum(-1)          # q . (cumsum(k) + 1e-6)


# ---------------------------------------------------------------- lucidrains (full module forward)

#: performer's kernel functions: lower-cased name -> the ``torch.nn`` class (:mod:`models.feature_table`)
_KERNEL_MODULES = {n.lower(): n for n in names_in("performer-pytorch")}


def _strip(sd: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}


ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


def _load(module: ModuleT, sd: Mapping[str, torch.Tensor]) -> ModuleT:
    """``module`` (the library's own class) with the checkpoint's tensors loaded, strictly, in eval mode."""
    res = module.load_state_dict(dict(sd), strict=False)
    # performer's proj_updater.instance is a second name of the same layers (loaded through net.*)
    missing = [k for k in res.missing_keys if "proj_updater" not in k.split(".")]
    if missing or res.unexpected_keys:
        raise ValueError(f"the library's module built from the config does not load the checkpoint strictly "
                         f"(missing {missing[:3]}, unexpected {res.unexpected_keys[:3]})")
    return module.eval()


@contextlib.contextmanager
def _streamed(cls: Any, cfg: Any, sd: Mapping[str, Any], prefix: str):
    """The library's whole model ``cls(cfg)`` for a forward of its backbone, holding one
    block's tensors at a time: built on the meta device, the tensors outside the blocks
    (embedding, final norm) assigned at once, each block's assigned (from ``sd``, read then)
    by a hook just before the library's own forward calls the block, and dropped again (the
    block back on the meta device) just after. The forward is the library's, unchanged; a
    24-layer model at hidden 1024 holds about 60 MB of block tensors instead of 1.5 GB.
    A block that the checkpoint does not fill completely (a tensor left on the meta device,
    one of another dtype or shape) is an error: nothing runs on made-up weights."""
    with torch.device("meta"):
        model = cls(cfg)
    blocks = re.compile(r"^model\.layers\.(\d+)\.")
    names = [k[len(prefix):] for k in sd if k.startswith(prefix)]
    by_block: dict[int, list[str]] = {}
    for n in names:
        m = blocks.match(n)
        if m:
            by_block.setdefault(int(m.group(1)), []).append(n)
    rest = [n for n in names if not blocks.match(n) and not n.startswith("lm_head.")]

    def assign(module: Any, keys: list[str], strip: str, later: tuple[str, ...] = ()) -> None:
        """``keys`` assigned to ``module``; everything it has (but ``later``) must be filled."""
        own = module.state_dict()
        got = {k[len(strip):]: tt(sd[prefix + k]) for k in keys}
        bad = [k for k, v in got.items() if k not in own or v.dtype != own[k].dtype or v.shape != own[k].shape]
        res = module.load_state_dict(got, strict=False, assign=True)
        left = [n for n, t in [*module.named_parameters(), *module.named_buffers()]
                if t.is_meta and not n.startswith(later)] + [k for k in res.missing_keys if not k.startswith(later)]
        if bad or left:
            raise ValueError(f"the checkpoint does not fill the library's module {strip or 'model'} "
                             f"(differs {bad[:2]}, missing {left[:2]})")

    assign(model, rest, "", later=("model.layers.", "lm_head."))     # the blocks as they run; no head
    hooks = []
    for i, layer in enumerate(model.model.layers):
        head = f"model.layers.{i}."

        def before(mod: Any, args: Any, head: str = head, i: int = i) -> None:
            assign(mod, by_block.get(i, []), head)

        def after(mod: Any, args: Any, out: Any) -> None:
            mod.to("meta")                              # the block's tensors dropped
        hooks += [layer.register_forward_pre_hook(before), layer.register_forward_hook(after)]
    try:
        yield model.eval()
    finally:
        for h in hooks:
            h.remove()


def _ff(sd, root: str) -> tuple[int, bool]:
    """``(ff_mult, ff_glu)`` from the first feed-forward's shapes."""
    pat = re.compile(re.escape(root) + r"(net|layers)\.(layers\.0\.1|blocks\.0\.g\.net)\.(fn\.)+w1\.weight$")
    k = next((k for k in sd if pat.match(k)), None)
    if k is None:
        return 4, False
    w1, w2 = sd[k], sd[k[:-len("w1.weight")] + "w2.weight"]
    return int(w2.shape[1]) // int(w2.shape[0]), int(w1.shape[0]) == 2 * int(w2.shape[1])


def _lucidrains_module(det: Detected, layer: LayerPlan, sd, alone: bool = False):
    """``(module, sub-state-dict, path of the first layer's attention, input transform)``;
    ``alone``: a sequential stack's block ``layer`` by itself (its weights as block 0 of a
    one-block stack), for inputs that are the hidden states entering it."""
    cfg, info = det.config, layer.library
    build = info["build"]
    p = layer.prefix
    dim = int(sd[p + "to_q.weight"].shape[1])
    heads, d = int(info["heads"]), int(info["dim_head"])
    if det.library == "performer-pytorch":
        from performer_pytorch import performer_pytorch as lib
        # the config as written: an argument it does not give is left to the constructor's own default
        att = _written(cfg, ("causal", "generalized_attention", "no_projection", "local_window_size"))
        if "kernel_fn" in cfg:
            att["kernel_fn"] = _kernel_module(cfg["kernel_fn"])
        att.update(nb_features=int(info["nb_features"]), qkv_bias=p + "to_q.bias" in sd,
                   attn_out_bias=p + "to_out.bias" in sd)
        if build == "SelfAttention":
            local = cfg.get("local_heads", cfg.get("local_attn_heads"))
            m = lib.SelfAttention(dim=dim, heads=heads, dim_head=d,
                                  **({"local_heads": int(local)} if local is not None else {}), **att)
            return m, _strip(sd, info["strip"]), "", None
        root = info["lm_root"] + "performer." if info.get("lm_root") is not None else info["strip"]
        mult, glu = _ff(sd, root)
        block = p[len(root):].split(".fn.")[0]
        kind = {"use_scalenorm": False, "use_rezero": False}
        if root + block + ".g" in sd and root + block + ".norm.weight" not in sd:
            scale = det.defaults.get("use_scalenorm") or cfg.get("use_scalenorm")
            kind["use_scalenorm" if scale else "use_rezero"] = True
        cross = bool(cfg.get("cross_attend", False))
        local = cfg.get("local_attn_heads", cfg.get("local_heads"))
        if local is not None:
            att["local_attn_heads"] = tuple(local) if isinstance(local, list) else local
        sub, depth = _strip(sd, root), len(det.layers) // (2 if cross else 1)
        rev = ".blocks." in "." + p[len(root):]
        per_layer = isinstance(att.get("local_attn_heads"), tuple)     # one entry per layer: all built
        upto = _layers_upto(p[len(root):], sub) if not (cross or rev or per_layer) else None
        path = p[len(root):].rstrip(".")
        if alone and upto is not None:   # the block alone, on the hidden states entering it
            sub, depth, path = _alone(upto[0], upto[1] - 1), 1, re.sub(r"layers\.\d+\.", "layers.0.", path, count=1)
        elif upto is not None:           # the layers after the compared one do not change its output
            sub, depth = upto
        m = lib.Performer(dim=dim, depth=depth, heads=heads, dim_head=d,
                          ff_mult=mult, ff_glu=glu, reversible=rev,
                          shift_tokens=bool(cfg.get("shift_tokens", False)),
                          cross_attend=cross, **kind, **att)
        return m, sub, path, _embed(det, info)
    from linear_attention_transformer import linear_attention_transformer as lib
    att = _written(cfg, ("causal", "blindspot_size"))
    local = cfg.get("n_local_attn_heads")
    if local is not None:
        att["n_local_attn_heads"] = tuple(local) if isinstance(local, list) else local
    if build == "SelfAttention":
        att.update(_written(cfg, ("local_attn_window_size",)))
        m = lib.SelfAttention(dim=dim, heads=heads, dim_head=d, **att)
        return m, _strip(sd, info["strip"]), "", None
    root = info["strip"]
    att.update(_written(cfg, ("local_attn_window_size", "attend_axially")))
    sub, depth, path = _strip(sd, root), len(det.layers), p[len(root):].rstrip(".")
    rev = ".blocks." in "." + p[len(root):]
    if alone and not (rev or cfg.get("attend_axially") or isinstance(att.get("n_local_attn_heads"), tuple)):
        sub, depth = _alone(sub, layer.index), 1          # the block alone, on the hidden states entering it
        path = re.sub(r"layers\.layers\.\d+\.", "layers.layers.0.", path, count=1)
    m = lib.LinearAttentionTransformer(dim=dim, depth=depth, max_seq_len=int(cfg.get("max_seq_len", 4096)),
                                       heads=heads, dim_head=d, reversible=rev,
                                       shift_tokens=bool(cfg.get("shift_tokens", False)), **att)
    return m, sub, path, _embed(det, info)


def _layers_upto(path: str, sub: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], int] | None:
    """A sequential performer stack read only up to the compared layer: ``(its weights
    through block i, i + 1)`` for ``path`` in block ``i`` (``net.layers.i.0.fn.``), or
    None when the path is not of that form. Block i's output depends on blocks 0..i
    only, so the comparison is the same; the later blocks are neither built (their
    random projections drawn) nor run."""
    m = re.match(r"net\.layers\.(\d+)\.0\.", path)
    if m is None:
        return None
    i = int(m.group(1))
    blk = re.compile(r"(?:net|proj_updater\.instance)\.layers\.(\d+)\.")     # the updater's second name
    kept = {k: v for k, v in sub.items() if (b := blk.match(k)) is None or int(b.group(1)) <= i}
    return kept, i + 1


def _alone(sub: Mapping[str, torch.Tensor], i: int) -> dict[str, torch.Tensor]:
    """Block ``i``'s weights (of :func:`_layers_upto`'s) renamed as block 0 (under both names)."""
    blk = re.compile(r"((?:net|proj_updater\.instance\.net|layers)\.layers\.)(\d+)\.")
    return {b.group(1) + "0." + k[b.end():]: v for k, v in sub.items()
            if (b := blk.match(k)) is not None and int(b.group(2)) == i}


def _written(cfg: Mapping[str, Any], keys) -> dict[str, Any]:
    """The constructor arguments among ``keys`` that the config gives, as written
    (the rest are left to the library's own defaults, never to the extractor's)."""
    return {k: cfg[k] for k in keys if k in cfg}


def _kernel_module(name: Any) -> torch.nn.Module:
    """performer's ``kernel_fn`` as a config writes it (``"Softplus"``, ``"nn.Softplus()"``,
    ``"softplus"``) -> the torch module."""
    key = str(name).lower().removeprefix("torch.").removeprefix("nn.").removesuffix("()")
    if key not in _KERNEL_MODULES:
        raise ValueError(f"kernel_fn {name!r} names no torch.nn activation this check knows")
    return getattr(torch.nn, _KERNEL_MODULES[key])()


def _embed(det: Detected, info) -> Callable | None:
    """An LM's path from ids to the container's input (its positions are absent,
    or the layer would be refused): embedding rows, then ``project_in``."""
    if info.get("lm_root") is None:
        return None
    E = tt(det.embedding)
    return lambda ids: E[ids]


def _run_lucidrains(det: Detected, layer: LayerPlan, sd, inputs, V):
    alone = inputs.is_floating_point() and layer.index > 0       # a deeper layer's hidden states
    module, sub, path, embed = _lucidrains_module(det, layer, sd, alone=alone)
    if alone and not re.match(r"(net|layers)\.layers\.0\.", path):
        raise ValueError("a deeper layer on hidden states is compared in a sequential stack only")
    module = _load(module, sub)
    if inputs.is_floating_point():
        embed = None                     # vectors given as the container's input (hidden states)
    if embed is not None and layer.library["lm_root"] + "transformer.project_in.weight" in sd:
        raise ValueError("a language model with project_in is compared only as a whole, which needs its "
                         "position embeddings")
    attn = module.get_submodule(path) if path else module
    B, N = inputs.shape[:2]
    H = len(layer.heads)
    d = int(layer.library["dim_head"])
    seen = {}

    def replace_v(mod, args, out):
        return V[..., :d].reshape(B, N, H * d).to(out.dtype)

    def read_out(mod, args):
        seen["o"] = args[0].detach().reshape(B, N, H, -1)
    h1 = attn.to_v.register_forward_hook(replace_v)
    h2 = attn.to_out.register_forward_pre_hook(read_out)
    try:
        x = embed(inputs) if embed is not None else inputs.to(torch.float32)
        module(x)
    finally:
        h1.remove()
        h2.remove()
    if det.library == "performer-pytorch":
        rule = _performer_causal if getattr(attn.fast_attention, "causal", False) else _add(0.0)
    else:
        rule = _clamp(1e-3)
    return seen["o"], rule


# ---------------------------------------------------------------- fla (submodules + naive ops)

def _fla_linear_attention(det: Detected, layer: LayerPlan, sd, inputs, V):
    from einops import rearrange, repeat
    from fla.layers import LinearAttention
    from fla.modules.norm.layernorm import rms_norm_ref
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn
    info = layer.library
    p = layer.prefix
    Wq = sd[p + "q_proj.weight"]
    hidden = int(Wq.shape[1])
    H, Hkv = int(info["num_heads"]), int(info["num_kv_heads"])
    # the kernel's arguments as the config writes them: a model's config through fla's own
    # LinearAttentionConfig (its defaults, not ours); a bare layer's config as written, the rest
    # left to LinearAttention's own defaults. The head split, the map a learned map's keys show
    # and the tying the stored copies show are the weights'.
    if info.get("model"):
        from fla.models import LinearAttentionConfig
        mc = LinearAttentionConfig(**{k: v for k, v in det.config.items() if k not in ("library", "class")})
        written = {"norm_q": mc.norm_q, "norm_k": mc.norm_k, "feature_map": mc.feature_map,
                   "do_feature_map_norm": mc.norm_feature_map}
    else:
        written = _written(det.config, ("norm_q", "norm_k", "feature_map", "do_feature_map_norm"))
    written.setdefault("feature_map", info["feature_map"])
    attn = LinearAttention(hidden_size=hidden, expand_k=int(Wq.shape[0]) / hidden,
                           expand_v=int(info["value_dim"]) / hidden, num_heads=H,
                           num_kv_heads=Hkv if Hkv != H else None,
                           tie_feature_map_qk=info["tie_feature_map_qk"], output_norm=info["output_norm"],
                           elementwise_affine=info["elementwise_affine"],
                           norm_eps=info["norm_eps"], **written)
    sub = _strip(sd, p)
    if info["tie_feature_map_qk"]:       # one stored copy of the shared map: fill the other, as load_model does
        for a, b in (("feature_map_q.", "feature_map_k."), ("feature_map_k.", "feature_map_q.")):
            sub.update({b + k[len(a):]: v for k, v in list(sub.items())
                        if k.startswith(a) and b + k[len(a):] not in sub})
    attn = _load(attn, sub)
    if info.get("model") and not inputs.is_floating_point():
        R = info["root"]
        x = torch.nn.functional.embedding(inputs, sd[R + "model.embeddings.weight"])
        w = sd.get(R + "model.layers.0.attn_norm.weight")
        if info.get("fuse_norm", True):
            x = rms_norm_ref(x, w, None, eps=info["attn_norm_eps"])          # fla's RMSNorm, reference op
        else:
            x = torch.nn.functional.rms_norm(x, (hidden,), w, info["attn_norm_eps"])
    elif info.get("model"):                                  # vectors as hidden states: attn_norm only
        R = info["root"]
        w = sd.get(R + f"model.layers.{layer.index}.attn_norm.weight")
        x = rms_norm_ref(inputs.to(torch.float32), w, None, eps=info["attn_norm_eps"])
    else:
        x = inputs.to(torch.float32)
    q, k = attn.q_proj(x), attn.k_proj(x)
    q = rearrange(q, "... (h d) -> ... h d", d=attn.head_k_dim)
    if attn.num_kv_groups > 1:
        k = repeat(k, "... (h d) -> ... (h g) d", d=attn.head_k_dim, g=attn.num_kv_groups)
    else:
        k = rearrange(k, "... (h d) -> ... h d", d=attn.head_k_dim)
    q, k = attn.feature_map_q(q), attn.feature_map_k(k)
    if attn.norm_q:
        q = q / (q.sum(-1, True) + 1e-4)
    if attn.norm_k:
        k = k / (k.sum(-1, True) + 1e-4)
    v = V[..., :attn.head_v_dim]                                                    # (B, T, H, dv)
    # normalized or not as the library's module is (the config as written): an extraction that
    # reads the denominator wrongly disagrees here
    o, _ = naive_recurrent_linear_attn(q, k, v, normalize=attn.do_feature_map_norm)
    return o, _add(1e-10)


def _fla_based(det: Detected, layer: LayerPlan, sd, inputs, V):
    from fla.layers import BasedLinearAttention
    from fla.ops.based.naive import naive_parallel_based
    info = layer.library
    p = layer.prefix
    names = info.get("names")
    sub = _strip(sd, p)
    if names:                                           # zoology's names for fla's port
        sub = {dict(zip(names, ("q_proj", "k_proj", "v_proj", "o_proj")))[k.split(".")[0]] + ".weight": v
               for k, v in sub.items() if k.split(".")[0] in names}
    hidden = int(sub["q_proj.weight"].shape[1])
    fd, H = int(info["feature_dim"]), int(info["num_heads"])
    layer_mod = BasedLinearAttention(hidden_size=hidden, feature_dim=fd, num_heads=H, num_key_value_heads=H,
                                     causal=bool(info["causal"]), eps=float(info.get("eps", 1e-12)))
    layer_mod = _load(layer_mod, sub)
    x = inputs.to(torch.float32)
    dv = layer_mod.head_v_dim
    q = layer_mod.q_proj(x).reshape(*x.shape[:2], H, fd).transpose(1, 2)          # (B, H, T, D)
    k = layer_mod.k_proj(x).reshape(*x.shape[:2], H, fd).transpose(1, 2)
    v = V[..., :dv].transpose(1, 2)
    if info["causal"]:
        o = naive_parallel_based(q, k, v, scale=fd ** -0.5, use_norm=True)
        return o.transpose(1, 2), _add(1e-6)
    seen = {}
    layer_mod.o_proj = torch.nn.Identity()
    h = layer_mod.v_proj.register_forward_hook(lambda m, a, out: V[..., :dv].reshape(*x.shape[:2], H * dv))
    try:
        seen["o"] = layer_mod.forward_reference(x)
    finally:
        h.remove()
    return seen["o"].reshape(*x.shape[:2], H, dv), _add(layer_mod.eps)


def _fla_rebased(det: Detected, layer: LayerPlan, sd, inputs, V):
    from fla.layers import ReBasedLinearAttention
    from fla.modules.norm.layernorm import layer_norm_ref
    from fla.ops.rebased.naive import naive_parallel_rebased
    info = layer.library
    if not info["causal"]:
        raise ValueError("fla has no CPU reference op for a non-causal ReBased layer")
    p = layer.prefix
    hidden = int(sd[p + "q_proj.weight"].shape[1])
    fd, H, Hkv = int(info["feature_dim"]), int(info["num_heads"]), int(info["num_key_value_heads"])
    mod = ReBasedLinearAttention(hidden_size=hidden, feature_dim=fd, num_heads=H, num_key_value_heads=Hkv,
                                 use_gamma=info["use_gamma"], use_beta=info["use_beta"], normalize=info["normalize"])
    mod = _load(mod, _strip(sd, p))
    x = inputs.to(torch.float32)
    q = mod.q_proj(x).reshape(*x.shape[:2], H, fd).transpose(1, 2)
    k = mod.k_proj(x).reshape(*x.shape[:2], H, fd).transpose(1, 2)
    fm = mod.feature_map
    if fm.use_gamma and fm.use_beta and fm.normalize:             # fla's Triton layer_norm: its reference op
        q, k = (layer_norm_ref(t, fm.gamma, fm.beta, eps=1e-5) for t in (q, k))
    else:
        q, k = fm(q, flatten=False), fm(k, flatten=False)
    v = V[..., :mod.head_dim].transpose(1, 2)
    o = naive_parallel_rebased(q, k, v, use_norm=True)
    return o.transpose(1, 2), _add(1e-6)


_RUNNERS = {"SelfAttention": _run_lucidrains, "Performer": _run_lucidrains,
            "LinearAttentionTransformer": _run_lucidrains, "PerformerLM": _run_lucidrains,
            "LinearAttentionTransformerLM": _run_lucidrains,
            "LinearAttention": _fla_linear_attention, "BasedLinearAttention": _fla_based,
            "zoology-Based": _fla_based, "ReBasedLinearAttention": _fla_rebased}
_METHODS = {
    "SelfAttention": "the library's SelfAttention built from the config, loaded strictly, forward on CPU; "
                     "hooks: to_v output replaced by random values, to_out input read",
    "Performer": "the library's Performer (its blocks up to the compared layer; every block when reversible, "
                 "cross-attending or with per-layer local heads) built from the config, loaded strictly, forward on CPU; "
                 "hooks on the first layer: to_v output replaced by random values, to_out input read",
    "LinearAttentionTransformer": "the library's LinearAttentionTransformer (every layer) built from the config, "
                                  "loaded strictly, forward on CPU; hooks on the first layer: to_v output "
                                  "replaced by random values, to_out input read",
    "PerformerLM": "the library's Performer (the LM's layers) on the embedding rows, forward on CPU; hooks on "
                   "the first layer",
    "LinearAttentionTransformerLM": "the library's LinearAttentionTransformer (the LM's layers) on the "
                                    "embedding rows, forward on CPU; hooks on the first layer",
    "LinearAttention": "fla's LinearAttention built from the config, loaded strictly; its q_proj, k_proj, "
                       "feature_map_q/k (and the model's embeddings and attn_norm through "
                       "fla.modules.norm.layernorm.rms_norm_ref) composed with "
                       "fla.ops.linear_attn.naive.naive_recurrent_linear_attn(normalize=do_feature_map_norm "
                       "as the config writes it: (A V)/(A 1) or A V)",
    "BasedLinearAttention": "fla's BasedLinearAttention built from the config, loaded strictly; q_proj, k_proj "
                            "with fla.ops.based.naive.naive_parallel_based (non-causal: forward_reference)",
    "zoology-Based": "zoology is not installed: the mixer's weights in fla's port BasedLinearAttention, "
                     "q_proj, k_proj with fla.ops.based.naive.naive_parallel_based",
    "ReBasedLinearAttention": "fla's ReBasedLinearAttention built from the config, loaded strictly; q_proj, "
                              "k_proj, feature_map (layer_norm_ref) with "
                              "fla.ops.rebased.naive.naive_parallel_rebased",
}
#: the library check of a language model's layer on the hidden states of stated sequences: (the
#: first layer's: the stack from its input; a deeper layer's: its block alone)
_ON_STATES = {b: tuple(f"the library's {c} {how} built from the config, loaded strictly, forward on CPU on the "
                       f"hidden states entering the layer; hooks: to_v output replaced by random values, to_out "
                       f"input read" for how in ("(the LM's layers, the first one compared)",
                                                 "block alone (the layer's weights as block 0 of a one-block stack)"))
              for b, c in (("PerformerLM", "Performer"), ("LinearAttentionTransformerLM", "LinearAttentionTransformer"))}
_NOT_RUN = {"fast-transformers": "pytorch-fast-transformers is not installed (its 2021 C++ extensions do not "
                                 "build against the pinned torch): the layout is read from its key table"}


# ---------------------------------------------------------------- every layer's inputs (fla linear_attn)

#: how the hidden states of the canonical forward are compared with fla's own model
FORWARD_METHOD = ("fla's LinearAttentionForCausalLM built from config.json (LinearAttentionConfig), loaded "
                  "strictly, its own forward on CPU with output_hidden_states, fla's Triton ops replaced by "
                  "their pure-PyTorch references: fla.ops.linear_attn.naive.naive_recurrent_linear_attn, "
                  "fla.modules.norm.layernorm.rms_norm_ref (with the residual add of the fused norm), "
                  "x * sigmoid(x) * y for the fused SwiGLU")
FORWARD_ERROR = "max over positions of max|h_lib - h_canonical| / max|h_canonical| (the position's row)"


@contextlib.contextmanager
def _fla_references():
    """fla's Triton ops replaced by its pure-PyTorch references for the duration (module
    attributes patched and restored): the linear attention op of every mode, the fused
    RMSNorm (with its residual add) and the fused SwiGLU."""
    import fla.layers.linear_attn as la
    import fla.modules.mlp as mlp
    from fla.modules import RMSNorm
    from fla.modules.norm.layernorm import rms_norm_ref
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn

    def op(q, k, v, initial_state=None, normalize=False, cu_seqlens=None, **kw):
        # output_final_state (in kw) asks for the state naive_recurrent_linear_attn returns anyway
        if initial_state is not None or cu_seqlens is not None:
            raise ValueError("the reference check runs whole sequences from an empty state")
        return naive_recurrent_linear_attn(q, k, v, normalize=normalize)

    def norm(self, x, residual=None, prenorm=False, **kw):          # residual_in_fp32: float32 already
        w = self.weight if self.weight is not None else torch.ones(x.shape[-1], dtype=x.dtype)
        return rms_norm_ref(x, w, self.bias, residual=residual, eps=self.eps, prenorm=prenorm)

    def swiglu(x, y):
        return x * torch.sigmoid(x) * y

    def swiglu_linear(x, y, weight, bias):
        return torch.nn.functional.linear(swiglu(x, y), weight, bias)
    saved = [(la, n, getattr(la, n)) for n in ("chunk_linear_attn", "fused_chunk_linear_attn",
                                               "fused_recurrent_linear_attn")]
    saved += [(mlp, "swiglu", mlp.swiglu), (mlp, "swiglu_linear", mlp.swiglu_linear),
              (RMSNorm, "forward", RMSNorm.forward)]
    try:
        for mod, name, _ in saved[:3]:
            setattr(mod, name, op)
        mlp.swiglu, mlp.swiglu_linear, RMSNorm.forward = swiglu, swiglu_linear, norm
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def check_forward(det: Detected, sd: Mapping[str, torch.Tensor], ids, inputs) -> dict[str, Any]:
    """The hidden states entering every layer (``inputs[L]``, ``(S T, d)`` float64, the canonical
    forward of :mod:`models.layouts.forward`) against the library's own model on the same ids
    (fla: :func:`_check_forward_fla`; performer-pytorch, linear-attention-transformer:
    :func:`_check_forward_lucidrains`)."""
    if det.library in ("performer-pytorch", "linear-attention-transformer"):
        return _check_forward_lucidrains(det, sd, ids, inputs)
    return _check_forward_fla(det, sd, ids, inputs)


def _errors(got: list[torch.Tensor], inputs) -> list[float]:
    """Per layer :data:`FORWARD_ERROR` of the library's hidden states ``got[L]`` against ours."""
    errors = []
    for L, ours in enumerate(inputs):
        lib = got[L].reshape(ours.shape[0], -1).to(torch.float64).numpy()
        size = np.abs(ours).max(axis=1)
        e = np.abs(lib - ours).max(axis=1) / np.where(size == 0, 1.0, size)
        errors.append(float(e.max()) if np.isfinite(e).all() else float("inf"))
    return errors


#: how the hidden states of a lucidrains LM are compared with the library's own model
LUCIDRAINS_FORWARD_METHOD = (
    "the library's own language model (performer-pytorch PerformerLM with rotary_position_emb=False, "
    "axial_position_emb=False; linear-attention-transformer LinearAttentionTransformerLM with "
    "use_axial_pos_emb=False) built from config.json (the other arguments as written, else the "
    "constructor's defaults; heads, dim_head, nb_features, ff_mult, ff_glu and the biases from the "
    "weights' shapes), loaded strictly, eval mode, its own forward on CPU (performer: "
    "causal_linear_attention_noncuda); a pre-hook on each block's attention wrapper reads the hidden "
    "states entering it")


def _lucidrains_lm(det: Detected, sd: Mapping[str, torch.Tensor]) -> tuple[torch.nn.Module, Any]:
    """The library's LM built from the config and loaded strictly, and its blocks."""
    cfg, L0 = det.config, det.layers[0]
    info, p = L0.library, L0.prefix
    sub = _strip(sd, info["lm_root"])
    V, dim = (int(n) for n in sub["token_emb.weight"].shape)
    n_pos = int(sub["pos_emb.emb.weight"].shape[0])
    common = dict(num_tokens=V, max_seq_len=n_pos, dim=dim, depth=len(det.layers), heads=int(info["heads"]),
                  dim_head=int(info["dim_head"]))
    if det.library == "performer-pytorch":
        from performer_pytorch import PerformerLM
        att = _written(cfg, ("causal", "generalized_attention", "no_projection"))
        if "kernel_fn" in cfg:
            att["kernel_fn"] = _kernel_module(cfg["kernel_fn"])
        mult, glu = _ff(sd, info["lm_root"] + "performer.")
        model = PerformerLM(**common, nb_features=int(info["nb_features"]), ff_mult=mult, ff_glu=glu,
                            rotary_position_emb=False, axial_position_emb=False,
                            qkv_bias=p + "to_q.bias" in sd, attn_out_bias=p + "to_out.bias" in sd,
                            tie_embed="to_out.weight" not in sub, **att)
        return _load(model, sub), model.performer.net.layers
    from linear_attention_transformer import LinearAttentionTransformerLM
    att = _written(cfg, ("causal", "blindspot_size", "n_local_attn_heads"))
    model = LinearAttentionTransformerLM(**common, use_axial_pos_emb=False, use_rotary_emb=False, **att)
    return _load(model, sub), model.transformer.layers.layers


def _check_forward_lucidrains(det: Detected, sd: Mapping[str, torch.Tensor], ids, inputs) -> dict[str, Any]:
    out: dict[str, Any] = {"library": det.library, "version": version(det.library),
                           "method": LUCIDRAINS_FORWARD_METHOD, "error": FORWARD_ERROR, "tolerance": TOLERANCE,
                           "status": "not run"}
    if out["version"] is None:
        return {**out, "reason": f"{det.library} is not installed"}
    got: dict[int, torch.Tensor] = {}
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                torch.random.fork_rng(devices=[]), torch.no_grad():
            warnings.simplefilter("ignore")
            model, blocks = _lucidrains_lm(det, sd)
            hooks = [blk[0].register_forward_pre_hook(lambda mod, args, i=i: got.__setitem__(i, args[0]))
                     for i, blk in enumerate(blocks)]
            try:
                model(torch.as_tensor(ids, dtype=torch.long))
            finally:
                for hk in hooks:
                    hk.remove()
    except Exception as exc:             # the library's own code: any failure is reported, not hidden
        return {**out, "reason": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
    errors = _errors([got[i] for i in range(len(inputs))], inputs)
    return {**out, "status": "agrees" if all(e <= TOLERANCE for e in errors) else "disagrees",
            "layers": errors, "sequences": int(ids.shape[0]), "length": int(ids.shape[1])}


def _check_forward_fla(det: Detected, sd: Mapping[str, torch.Tensor], ids, inputs) -> dict[str, Any]:
    """The hidden states entering every layer (``inputs[L]``, ``(S T, d)`` float64, the canonical
    forward of :mod:`models.layouts.fla_forward`) against fla's own model on the same ids
    ``(S, T)`` (:data:`FORWARD_METHOD`): per layer the largest error (:data:`FORWARD_ERROR`),
    ``agrees`` when every one is at most :data:`TOLERANCE` (float32 arithmetic)."""
    out: dict[str, Any] = {"library": "fla", "version": version("fla"), "method": FORWARD_METHOD,
                           "error": FORWARD_ERROR, "tolerance": TOLERANCE, "status": "not run"}
    if out["version"] is None:
        return {**out, "reason": "flash-linear-attention is not installed"}
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                torch.random.fork_rng(devices=[]), torch.no_grad(), _fla_references():
            warnings.simplefilter("ignore")
            from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
            cfg = LinearAttentionConfig(**{k: v for k, v in det.config.items()
                                           if k not in ("library", "class")})
            with _streamed(LinearAttentionForCausalLM, cfg, sd, det.prefix) as model:
                got = model.model(torch.as_tensor(ids, dtype=torch.long), use_cache=False,
                                  output_hidden_states=True).hidden_states
    except Exception as exc:             # the library's own code: any failure is reported, not hidden
        return {**out, "reason": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
    errors = _errors(got, inputs)
    return {**out, "status": "agrees" if all(e <= TOLERANCE for e in errors) else "disagrees",
            "layers": errors, "sequences": int(ids.shape[0]), "length": int(ids.shape[1])}
