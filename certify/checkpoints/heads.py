"""Every head of every layer of a third-party checkpoint, in one certificate.

``certify checkpoint PATH`` (a weights file or a Hugging Face style folder,
no ``--spec``) recognises the layout (:mod:`models.layouts`), then per head:

* tokens: the first layer's inputs -- the vocabulary's embedding rows when the
  model has an embedding (``vocab:V``), else the cube ``{0,1}^m`` (m <= 16) or
  the tokens of the first built-in / given family with the model's width.
  A deeper layer reads the previous layers' outputs, which are not a finite
  known set: it is listed as out of reach, not guessed (an fla ``linear_attn``
  model's row names the ``--sequences`` command). With ``--sequences``, every
  layer's tokens are its inputs at every position of the sequences
  (``positions:SxT``, :func:`certify.sources.thirdparty.positions_kernel`);
* claims: exact rank over Q on the tokens, the certified eps-rank, and
  nonnegativity on the tokens (``certify.rank``); on each family with the
  model's width, correctness and Lemma 3's gap domination when the head has a
  scalar readout (``models/`` heads). Third-party heads have none: their
  outputs are vectors fed to an output projection, so correctness is out of
  reach; Lemma 3's inequality itself concerns alpha alone, and is audited
  exactly per jump for the report (not a certificate claim: its checker
  needs the value table).

A head without a normalizing denominator (fla's ``do_feature_map_norm=False``:
the layer outputs ``sum_j alpha(x, z_j) v_j``) gets the same kernel claims, its
sentences naming it unnormalized kernel attention; the claims that are about the
normalized head (correctness, Lemma 3's gap domination) are listed once per model
as not applicable (:data:`NOT_APPLICABLE`), not audited.

Refused heads (:class:`models.layouts.Refusal`) are listed with their
reasons. Every head refused: ``UncertifiableError`` (exit 3). Some heads
certified: the exit code is the certified claims' (0 all proved, 1 otherwise)
and the report lists the refused heads.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from certify.core.certificate import Certificate, Claim
from certify.core.errors import InputError, UncertifiableError
from certify.core.files import sha256_file, write_text
from certify.core.memory import trim
from certify.core.verdict import Verdict, overall

BUILTIN_FAMILIES = ("paper-5.1", "ood-6-4-8-test", "ood-8-6-12-test", "ood-10-8-16-test")
MAX_CUBE = 16
#: the claims about the normalized head, and why a head without a denominator has none
NOT_APPLICABLE = {
    "correctness": "correctness on a family is a statement about the normalized head's output "
                   "sum_j alpha(x, z_j) v_j / sum_j alpha(x, z_j); these heads output sum_j alpha(x, z_j) v_j "
                   "(no normalizing denominator), so the paper's normalized-head theorems do not apply",
    "gap_domination (Lemma 3 audit)": "Lemma 3 bounds the normalized head's error by the gap alpha(x, y) / "
                                      "alpha(x, z); without the denominator the output is not a weighted "
                                      "average of values, so the lemma does not apply",
}


@dataclass
class HeadRow:
    """One line of the report table."""

    layer: int
    head: int | None
    status: str                                   # certified | refused | out of reach
    token_set: str = ""
    rank: str = ""
    eps_rank: str = ""
    nonnegative: str = ""
    lemma3: dict[str, str] = field(default_factory=dict)      # family -> audit summary
    claims_made: list[str] = field(default_factory=list)
    out_of_reach: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    feature_map: str = ""
    library_check: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class HeadsResult:
    certificate: Certificate
    rows: list[HeadRow]
    library: str
    layout: str
    families: list[str] = field(default_factory=list)
    detected: dict[str, Any] = field(default_factory=dict)
    #: claim -> why it does not apply, once per model (heads without a normalizing denominator)
    not_applicable: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: files written beside the certificate (name -> text): ``--text``'s token ids
    files: dict[str, str] = field(default_factory=dict)

    @property
    def refused(self) -> list[HeadRow]:
        return [r for r in self.rows if r.status == "refused"]

    def to_json(self) -> dict[str, Any]:
        claims = self.certificate.claims
        return {"verdict": overall(c.verdict for c in claims).value, "library": self.library, "layout": self.layout,
                "detected": self.detected, "heads": [r.to_json() for r in self.rows], "families": self.families,
                **({"not_applicable": self.not_applicable} if self.not_applicable else {}),
                "claims": [{"kind": c.kind.value, "verdict": c.verdict.value, "statement": c.statement,
                            "reason": c.reason, **dict(c.info)} for c in claims]}

    def table(self) -> str:
        """The heads as a Markdown table; a reason shared by several heads is written
        once below it (``[1] reason: layer 1 heads 0-15``) and the rows refer to it."""
        fams = sorted({f for r in self.rows for f in r.lemma3})
        head = ["layer", "head", "status", "tokens", "exact rank", "eps-rank", "nonnegative", "library check",
                *[f"Lemma 3 on {f}" for f in fams], "claims made", "out of reach / reason"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        whys = [r.reason or "; ".join(f"{k}: {v}" for k, v in r.out_of_reach.items()) for r in self.rows]
        shared = [w for w, rows in grouped(zip(whys, self.rows)).items() if w and len(rows) > 1]
        for r, why in zip(self.rows, whys):
            if why in shared:
                why = f"[{shared.index(why) + 1}]"
            cells = [str(r.layer), "all" if r.head is None else str(r.head), r.status, r.token_set, r.rank,
                     r.eps_rank, r.nonnegative, _check_cell(r.library_check), *[r.lemma3.get(f, "") for f in fams],
                     ", ".join(r.claims_made), why]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        notes = grouped(zip(whys, self.rows))
        if shared:
            lines.append("")
        lines += [f"[{i + 1}] {w}: {where(notes[w])}" for i, w in enumerate(shared)]
        return "\n".join(lines)


def grouped(pairs) -> dict[str, list[HeadRow]]:
    """Reason -> the rows it applies to, in order of first appearance."""
    out: dict[str, list[HeadRow]] = {}
    for why, row in pairs:
        out.setdefault(why, []).append(row)
    return out


def where(rows: Sequence[HeadRow]) -> str:
    """Which heads a reason covers, per layer: ``layer 1 heads 0-15; layer 2 (all heads)``."""
    by: dict[int, list[int | None]] = {}
    for r in rows:
        by.setdefault(r.layer, []).append(r.head)
    parts = []
    for layer, heads in by.items():
        if None in heads:
            parts.append(f"layer {layer} (all heads)")
        else:
            parts.append(f"layer {layer} head{'s' if len(heads) > 1 else ''} {_ranges(sorted(set(heads)))}")
    return "; ".join(parts)


def _ranges(xs: list) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}" if j > i + 1 else f"{xs[i]}, {xs[j]}")
        i = j + 1
    return ", ".join(out)


def _check_cell(check: dict[str, Any]) -> str:
    if not check:
        return ""
    if check.get("status") == "not run":
        return "not run"
    same = " (same assumption, not an independent check)" if check.get("independent") is False else ""
    hs = check.get("hidden_states") or {}
    inputs = (f"; inputs {hs.get('status')} (error {hs['max_error']:.1e})" if "max_error" in hs else
              f"; inputs {hs.get('status')}" if hs else "")
    return f"{check.get('status')}{same} (error {check.get('max_error', 0):.1e}){inputs}"


def load_detected(path: str, spec: str | None, assume: Sequence[str] = ()):
    """A third-party checkpoint read and detected (:class:`certify.sources.thirdparty.LoadedModel`),
    or, with an adapter spec, the one head it describes."""
    from certify.sources.thirdparty import LoadedModel, load_model
    if spec is None:
        return load_model(path, assume)
    if assume:
        raise InputError("--assume-default names a constructor argument of a detected layout; an adapter "
                         "spec states its layout in full")
    from certify.sources.checkpoint import lazy_state_dict
    from certify.sources.weights import read_weights, weights_file
    from models.adapters import AdaptedHead, adapt, read_spec
    from models.layouts import Detected, LayerPlan, Refusal
    from models.optional_torch import TorchView
    s = read_spec(spec)
    ws = read_weights(path)
    sd, stored = lazy_state_dict(path)
    h: AdaptedHead | Refusal
    try:
        h = adapt(sd, s)
    except UncertifiableError as exc:
        h = Refusal(0, s.head, f"adapter:{s.layout}", "spec", str(exc))
    m = int(getattr(h, "m", 0))
    det = Detected(f"spec:{s.layout}", f"adapter:{s.layout}", [LayerPlan(0, s.prefix, s.layout, [h], m=m)], m,
                   reason="adapter spec", stored_dtype=stored, container=f"adapter spec {spec}")
    model = LoadedModel(Path(path), weights_file(path), ws, {}, None, det, TorchView(sd))
    model.spec = (str(spec), sha256_file(spec))
    return model


def _head_index(h) -> int | None:
    if hasattr(h, "spec"):
        return h.spec.head
    if hasattr(h, "details"):
        return h.details.get("head")
    return getattr(h, "head", None)


# ---------------------------------------------------------------- Lemma 3 on alpha alone

def kernel_lemma3(head, family) -> dict[str, Any]:
    """Lemma 3's inequality ``alpha(x,y) > (n-2)(d-2eps)/(2eps) alpha(x,z)`` on every
    applicable jump, in exact rationals from the head's float features."""
    from certify.audit.head import rationalize
    from certify.audit.lemma3 import lemma3_factor
    from certify.audit.run import family_eps
    from certify.core.families import JUMP_COLUMNS
    eps = family_eps(family)
    if hasattr(head, "canonical_features"):            # the certified features
        q, k = head.canonical_features(family.tokens)
    else:
        import torch
        with torch.no_grad():
            q, k = head.feature_matrices(family.tokens)
    Q, K = rationalize(q, "query features"), rationalize(k, "key features")
    col = {c: i for i, c in enumerate(JUMP_COLUMNS)}
    cache: dict[tuple[int, int], Fraction] = {}

    def alpha(x, z):
        if (x, z) not in cache:
            cache[(x, z)] = sum((a * b for a, b in zip(Q[x], K[z])), Fraction(0))
        return cache[(x, z)]
    applicable, violated = 0, []
    for j, jump in enumerate(family.jumps):
        f = lemma3_factor(family.n, eps, int(jump[col["u"]] - jump[col["t"]]))
        if f is None:
            continue
        applicable += 1
        x, y, z = (int(jump[col[c]]) for c in ("x", "y", "z"))
        if not alpha(x, y) > f * alpha(x, z):
            violated.append(j)
    return {"applicable": applicable, "violated": len(violated), "first_violated": violated[:5]}


# ---------------------------------------------------------------- certification

def certify_heads(path: str, *, spec: str | None = None, families: Sequence[str] = (),
                  eps: Fraction = Fraction(1, 1000), seed: int = 0, layer: int | None = None,
                  head: int | None = None, command: Sequence[str] = (),
                  assume: Sequence[str] = (), progress: bool = False,
                  sequences: str | None = None, text: tuple[str, int] | None = None,
                  engine: Any = None) -> HeadsResult:
    """Certify every head of a third-party checkpoint (module docstring). ``sequences``:
    certify every layer on the inputs to it at the positions of these token sequences
    (:mod:`certify.sources.sequences`: a file or ``random:S,T,SEED``; fla linear_attn
    models only, :mod:`models.layouts.forward`); ``text``: ``(FILE, T)``, the same on
    the ids of a text file under the model folder's ``tokenizer.json``, cut into sequences
    of T (:func:`certify.sources.sequences.text_sequences`; the ids are written beside the
    certificate as ``sequences.jsonl``). ``progress``:
    one bar on stderr over the heads, its postfix naming the head and the stage
    (extraction, rank, nonnegativity, audit); the caller decides (a terminal, no
    ``--json``, no ``--no-progress``). ``engine``: a :class:`certify.core.engine.Engine`
    (``--workers``, ``--ray-address``) over which each layer's heads compute their claims
    (:meth:`_HeadsRun.certify_layer`; default in this process); the certificate is the same."""
    t0 = time.perf_counter()
    model = load_detected(path, spec, assume)
    det = model.detected
    layers = _chosen_layers(det, layer)
    inputs = model.inputs
    if spec is not None:
        inputs[model.spec[0]] = model.spec[1]
    cert = Certificate(claims=[], command=list(command), inputs=dict(inputs), seeds={"primes": seed})
    from_text = None if text is None else _text(model, spec, text, cert)
    seqs = from_text.sequences if from_text is not None else \
        None if sequences is None else _sequences(model, spec, sequences, cert)
    first = model.layer(None)
    fams = _families(det, first, families, cert)
    run = _HeadsRun(model, spec, first, fams, cert, eps, seed, Path(path).name, seqs=seqs, path=str(path))
    rows: list[HeadRow] = []
    if progress:
        from tqdm.auto import tqdm
        run.bar = tqdm(total=0, desc="heads", unit="head", file=sys.stderr, leave=False)
    from certify.core.engine import Engine
    engine = engine if engine is not None else Engine(1, progress=False)
    for L in layers:
        heads = _chosen_heads(L, head)
        if run.bar is not None:
            run.bar.total += len(heads)
            run.bar.refresh()
        rows += run.certify_layer(L, heads, engine)
        if seqs is not None:
            from certify.sources.thirdparty import release_layer
            release_layer(model, seqs, L.index)
        trim()                          # this layer's temporaries back to the kernel
        if L is layers[0] and seqs is not None and engine.parallel and run.head_seconds:
            later = sum(len(_chosen_heads(M, head)) for M in layers[1:])
            if later:                   # other processes for the later layers when their heads pay for it
                engine.prepare([run.head_seconds] * later, label="heads of the later layers")
    if run.bar is not None:
        run.bar.close()
    _require_a_certified_head(rows, cert, det, layer, first)
    na = {claim: {"reason": why, "heads": run.unnormalized} for claim, why in NOT_APPLICABLE.items()} \
        if run.unnormalized else {}
    cert.environment.setdefault("seconds", round(time.perf_counter() - t0, 3))
    cert.environment["layout"] = {**det.describe(), "weights": model.weights.describe(),
                                  "config": str(model.config_path) if model.config_path else None,
                                  "heads": [r.to_json() for r in rows],
                                  **({"not_applicable": na} if na else {})}
    return HeadsResult(cert, rows, det.library, det.layout, [f.name for _, f in fams], det.describe(), na,
                       files={} if from_text is None else {from_text.sequences.name: from_text.jsonl})


def head_claims(kernel: Any, opt: Any) -> list[Claim]:
    """A head's kernel claims, untagged and unnumbered: exact rank, eps-rank (and code rank
    with ``opt.code``) and nonnegativity -- the part of a head's certification that needs
    nothing but its kernel and the options (an :class:`certify.core.engine.Engine` task)."""
    from certify.rank import run as rank_mod
    from certify.rank.nonnegative import nonnegative_claim_factor
    from certify.rank.summary import summarize_features
    claims = list(rank_mod.certify_rank(kernel, opt).certificate.claims)
    claims.append(nonnegative_claim_factor(kernel, summarize_features(kernel), opt))
    return rank_mod.share_features(claims)


def _sequences(model: Any, spec: str | None, sequences: str, cert: Certificate) -> Any:
    """The ``--sequences`` read and checked against the model's vocabulary, before any work
    (InputError, one line: another family, a bad file); a file becomes an input of the
    certificate (by its sha256)."""
    from certify.sources.sequences import read_sequences
    from models.layouts.forward import for_sequences
    why = "--sequences reads a detected model, not an adapter spec" if spec is not None else \
        for_sequences(model.detected)
    if why is not None:
        raise InputError(why)
    seqs = read_sequences(sequences, int(model.detected.embedding.shape[0]))
    _fits(model, seqs, "--sequences")
    if seqs.file_sha256 is not None:
        cert.inputs[seqs.name] = seqs.file_sha256
    return seqs


def _fits(model: Any, seqs: Any, flag: str) -> None:
    """InputError (one line, before any work) when a block holds other tensors than the
    forward reads, or the sequences are longer than the model's learned positions."""
    from models.layouts.forward import check_blocks, max_length
    det = model.detected
    check_blocks(det, model.stored)
    n, T = max_length(det), int(seqs.ids.shape[1])
    if n is not None and T > n:
        raise InputError(f"{flag}: sequences of length {T} are longer than the model's {n} learned positions "
                         f"(max_seq_len)")


def _text(model: Any, spec: str | None, text: tuple[str, int], cert: Certificate) -> Any:
    """``--text FILE``: its ids under the model folder's ``tokenizer.json``, checked before any
    work like ``--sequences``; the ids' file (written beside the certificate) becomes an input
    of the certificate and the text's provenance an entry of its environment."""
    from certify.sources.sequences import text_sequences
    from models.layouts.forward import for_sequences
    why = "--text reads a detected model, not an adapter spec" if spec is not None else \
        for_sequences(model.detected)
    if why is not None:
        raise InputError(why)
    folder = model.config_path.parent if model.config_path is not None else Path(model.path).parent
    got = text_sequences(text[0], text[1], folder / "tokenizer.json", int(model.detected.embedding.shape[0]))
    _fits(model, got.sequences, "--text")
    cert.inputs[got.sequences.name] = str(got.sequences.file_sha256)       # a file's: set
    cert.environment["text"] = got.provenance
    return got


def _chosen_layers(det: Any, layer: int | None) -> list[Any]:
    """The detected layers, or the one ``--layer`` names (InputError when there is none)."""
    if layer is None:
        return list(det.layers)
    layers = [L for L in det.layers if L.index == layer]
    if not layers:
        raise InputError(f"--layer {layer}: the model has layers {[L.index for L in det.layers]}")
    return layers


def _chosen_heads(L: Any, head: int | None) -> list[Any]:
    """The heads of layer ``L``, or the one ``--head`` names with the layer's refusals that
    name no head (InputError when there is none)."""
    from models.layouts import Refusal
    if head is None:
        return list(L.heads)
    heads = [h for h in L.heads if isinstance(h, Refusal) and h.head is None or _head_index(h) == head]
    if not heads:
        raise InputError(f"--head {head}: layer {L.index} has heads 0..{len(L.heads) - 1}")
    return heads


def _families(det: Any, first: Any, families: Sequence[str], cert: Certificate) -> list[tuple[str, Any]]:
    """``(name, family)`` of the named and built-in families the model reads (its first
    layer's width, no embedding); a named family's file goes into ``cert.inputs``; a named
    family of another width is an InputError. A model of a vocabulary reads no family:
    the built-in ones are not built for it."""
    from certify.core.families import load_family
    fams = []
    for name in dict.fromkeys([*families, *BUILTIN_FAMILIES]):
        if det.embedding is not None and name not in families:
            continue
        fam = load_family(name)
        if fam.m == first.m and det.embedding is None:
            fams.append((name, fam))
            if Path(name).is_file():
                cert.inputs[name] = sha256_file(name)
        elif name in families:
            raise InputError(f"family {name}: token dimension {fam.m}, the model reads "
                             + (f"vocabulary rows (width {det.m})" if det.embedding is not None
                                else f"{first.m}-dimensional vectors"))
    return fams


def _require_a_certified_head(rows: list[HeadRow], cert: Certificate, det: Any, layer: int | None,
                              first: Any) -> None:
    """UncertifiableError when no head is a fixed kernel head, or none gave a claim."""
    if not any(r.status in ("certified", "out of reach") for r in rows):
        raise UncertifiableError(f"{det.library} ({det.layout}): no head is a fixed kernel head: "
                                 + _reasons(rows))
    if not cert.claims:
        which = f"layer {layer}" if layer is not None else "the model"
        fix = ""
        if layer is not None and layer != first.index:
            fix = (f"; layer {first.index} reads the tokens: certify it with --layer {first.index}, "
                   "or give no --layer")
        raise UncertifiableError(f"{det.library} ({det.layout}): no head of {which} can be certified: "
                                 + _reasons(rows) + fix)


@dataclass
class _HeadsRun:
    """What the heads of one :func:`certify_heads` run share: the model, the families it
    reads, the certificate being filled, the options and the progress bar."""

    model: Any                              # certify.sources.thirdparty.LoadedModel
    spec: str | None
    first: Any                              # the layer that reads the tokens
    fams: list[tuple[str, Any]]
    cert: Certificate
    eps: Fraction
    seed: int
    label: str                              # the checkpoint's file name
    bar: Any = None
    unnormalized: list[str] = field(default_factory=list)   # "layer.head" without a denominator
    head_seconds: float = 0.0               # CPU s of one head's claims, as last computed here
    seqs: Any = None                        # certify.sources.sequences.Sequences (--sequences)
    path: str = ""                          # the checkpoint as named (for the command a reason prints)

    def certify_layer(self, L: Any, heads: Sequence[Any], engine: Any) -> list[HeadRow]:
        """The rows of ``heads`` of layer ``L``: refused, out of reach, or certified, their
        claims added to the certificate in head order (the kernel's, then the families').
        The kernels are extracted here, one head after another; their exact rank, eps-rank
        and nonnegativity claims (:func:`head_claims`, which needs nothing but the kernel) are
        computed by ``engine``: in this process, or spread over its workers when every
        kernel's features are stored and the engine distributes (Ray or forked processes:
        :func:`certify_heads` asks it after the first layer whether the later layers' heads
        pay for that; a lazy vocabulary
        kernel is computed here), the same claims either way, merged in head order. In this
        process the heads go one at a time (:meth:`_one_head`): one head's features are held
        at once, not the layer's (a whole-vocabulary head's are hundreds of MB)."""
        if not engine.distributes:
            return [self._one_head(L, h) for h in heads]
        prepared = [self._prepare(L, h) for h in heads]
        kernels = [(row.head, k) for _, row, k in prepared if k is not None]
        done: Any = iter(())
        if kernels:
            opt = self._rank_options()
            if engine.distributes and all(k.phi_q is not None and k.phi_k is not None for _, k in kernels):
                if self.bar is not None:
                    self.bar.set_postfix_str(f"layer {L.index}: exact rank, eps-rank, nonnegativity")
                done = iter(engine.map(head_claims, [(k, opt) for _, k in kernels], label=f"layer {L.index} heads"))
            else:
                t, out = time.process_time(), []
                for hi, k in kernels:
                    if self.bar is not None:
                        self.bar.set_postfix_str(f"layer {L.index} head {hi}: exact rank, eps-rank, nonnegativity")
                    out.append(head_claims(k, opt))
                self.head_seconds = (time.process_time() - t) / len(kernels)
                done = iter(out)
        rows = []
        for h, row, kernel in prepared:
            if kernel is not None:
                self._finish(L, h, row, kernel, next(done))
            rows.append(row)
        return rows

    def _one_head(self, L: Any, h: Any) -> HeadRow:
        """One head extracted, its claims computed (:func:`head_claims`) and added, in this
        process; its kernel is dropped before the next head's is made. The same claims, in the
        same order, as the layer's batch in :meth:`certify_layer`."""
        h, row, kernel = self._prepare(L, h)
        if kernel is not None:
            if self.bar is not None:
                self.bar.set_postfix_str(f"layer {L.index} head {row.head}: exact rank, eps-rank, nonnegativity")
            t = time.process_time()
            computed = head_claims(kernel, self._rank_options())
            self.head_seconds = time.process_time() - t
            self._finish(L, h, row, kernel, computed)
        return row

    def _prepare(self, L: Any, h: Any) -> tuple[Any, HeadRow, Any]:
        """``(h, row, kernel)``: the head's row and its kernel, or None (a refused or out of
        reach head, or a kernel the library disagrees with: the row says why)."""
        from models.layouts import Refusal
        if self.bar is not None:
            self.bar.update(1)          # counted as it starts: the postfix names what it is doing
            which = _head_index(h) if not isinstance(h, Refusal) else "-"
            self.bar.set_postfix_str(f"layer {L.index} head {which}: extraction")
        if isinstance(h, Refusal):
            return h, HeadRow(L.index, h.head, "refused", reason=f"{h.module}: {h.mechanism}: {h.reason}"), None
        hi = _head_index(h)
        row = HeadRow(L.index, hi, "certified", feature_map=str(getattr(h, "feature_map", "")))
        tokens = self._tokens(L, row)
        kernel = None if tokens is None else self._kernel(L, h, hi, tokens, row)
        if kernel is not None:
            row.token_set = kernel.token_set
            row.library_check = dict(kernel.provenance.details.get("library_check") or {})
        return h, row, kernel

    def _finish(self, L: Any, h: Any, row: HeadRow, kernel: Any, computed: list[Claim]) -> None:
        """The head's kernel claims (``computed`` by :func:`head_claims`) tagged, numbered and
        added to the certificate, then the families' claims."""
        hi = row.head
        claims, tag = self._kernel_claims(computed, kernel, L, hi, row)
        if getattr(h, "normalized", True) is False:
            # the kernel claims above are made; those about the normalized head are not
            # applicable (listed once for the model), so no family is audited
            self.unnormalized.append(f"{L.index}.{hi}")
            self.cert.claims += claims
            return
        if self.bar is not None and self.fams:
            self.bar.set_postfix_str(f"layer {L.index} head {hi}: families")
        self.cert.claims += claims + self._family_claims(L, h, hi, tag, row)

    def _tokens(self, L: Any, row: HeadRow) -> str | None:
        """The token set head claims of layer ``L`` are made on; None (the row says why) when
        the layer is out of reach."""
        det, first = self.model.detected, self.first
        if self.seqs is not None:               # every layer on its inputs at the stated positions
            return self.seqs.token_set
        if not L.reads_tokens:
            from models.layouts.forward import refusal
            row.status = "out of reach"
            row.reason = (f"its inputs are the outputs of layer {L.index - 1}, not a finite known token set; "
                          f"only layer {first.index} reads the tokens")
            if refusal(det) is None:            # still out of reach here: it needs stated sequences
                row.reason += (f"; it needs token sequences, whose positions give its inputs: certify "
                               f"checkpoint {self.path} --sequences FILE.npy|FILE.jsonl|random:S,T,SEED")
            return None
        if det.embedding is not None and L.index == first.index:
            return "vocab"
        if L.m <= MAX_CUBE:
            return f"cube:{L.m}"
        if self.fams and self.fams[0][1].m == L.m:
            return self.fams[0][0]
        row.status = "out of reach"
        row.reason = (f"width {L.m} > {MAX_CUBE} and no family of that width: no finite token set"
                      + (f"; {det.fix}" if det.fix and L.index == first.index else ""))
        return None

    def _kernel(self, L: Any, h: Any, hi: int | None, tokens: str, row: HeadRow) -> Any:
        """The head's kernel on ``tokens`` (through its adapter spec, else the detected layout);
        None when the library's own computation disagrees (the row says so)."""
        from certify.core.kernel import Provenance
        from certify.sources.checkpoint import SPEC_CHECK, from_model
        from certify.sources.thirdparty import ExtractionMismatch, head_kernel
        model = self.model
        if self.spec is not None:
            prov = Provenance(str(model.source), model.sha256(model.source), f"adapter:{h.spec.layout}",
                              "float64",
                              details={**h.describe(), "spec": model.spec[0], "spec_sha256": model.spec[1],
                                       "library_check": SPEC_CHECK})
            return from_model(h, tokens, prov)
        try:
            if self.seqs is not None and hi is not None:
                from certify.sources.thirdparty import positions_kernel
                return positions_kernel(model, self.seqs, layer=L.index, head=hi, seed=self.seed)
            return head_kernel(model, layer=L.index, head=hi, tokens=tokens, seed=self.seed)
        except ExtractionMismatch as exc:
            row.status, row.reason = "refused", f"{model.detected.library}: extraction check: {exc}"
            return None

    def _rank_options(self) -> Any:
        """The options of every head's :func:`head_claims`: the seed, eps and, on paper-5.1,
        its code (a code rank claim)."""
        from certify.rank import run as rank_mod
        code = next((f.words for n, f in self.fams if n == "paper-5.1" and f.words is not None), None)
        # enclosures only where the float pencil bounds give them: the exact characteristic polynomial
        # per head was most of a checkpoint's run (its eps-rank counts are certified either way)
        return rank_mod.RankOptions(seed=self.seed, eps=self.eps, code=code,
                                    code_name="paper-5.1" if code is not None else None,
                                    enclosure_fallback=False)

    def _kernel_claims(self, computed: list[Claim], kernel: Any, L: Any, hi: int | None,
                       row: HeadRow) -> tuple[list[Claim], dict[str, Any]]:
        """``(claims, tag)``: the kernel's claims ``computed`` by :func:`head_claims`, tagged
        with the head (``tag``, their ``info``) and numbered after the certificate's claims so
        far; the row's rank, eps-rank and nonnegativity read from them."""
        from certify.sources.load import extraction_info
        tag = {"layer": L.index, "head": hi, "library": self.model.detected.library,
               **extraction_info(kernel)}
        claims = [_shift(replace(c, info={**dict(c.info), **tag}), len(self.cert.claims)) for c in computed]
        for c in claims:
            kind = c.kind.value
            val = _short(c)
            if kind == "exact_rank":
                row.rank = val
            elif kind == "eps_rank":
                row.eps_rank = val
            elif kind == "nonnegative":
                row.nonnegative = val
            row.claims_made.append(kind)
        return claims, tag

    def _family_claims(self, L: Any, h: Any, hi: int | None, tag: dict[str, Any],
                       row: HeadRow) -> list[Claim]:
        """The audit's claims on each family of the head's width when the head has a scalar
        readout; else Lemma 3 on alpha alone, for the report (the row notes what is out of reach)."""
        from certify import audit
        readout = (hasattr(h, "readout") and hasattr(h, "values")) or hasattr(h, "g")
        out: list[Claim] = []
        for _name, fam in self.fams:
            if fam.m != L.m:
                continue
            if readout:
                name = f"{self.label} layer {L.index} head {hi}"
                fc = audit.audit_claims(audit.head_from_model(h, fam), fam, name)
                out += [replace(c, info={**dict(c.info), **tag}) for c in fc]
                row.claims_made += [f"{c.kind.value} on {fam.name}" for c in fc]
            elif fam.jumps is not None and fam.n >= 3:
                a = kernel_lemma3(h, fam)
                row.lemma3[fam.name] = (f"{a['violated']} of {a['applicable']} jumps violated"
                                        if a["violated"] else f"holds on all {a['applicable']} jumps")
        if self.fams and not readout:
            row.out_of_reach["correctness"] = (
                "no scalar readout: the head's outputs are vectors fed to the layer's output projection, "
                "so t_hat on a family is not defined by the head")
            row.out_of_reach["gap_domination claim"] = (
                "audited exactly per jump for this report (Lemma 3 concerns alpha alone), but its "
                "certificate claim carries the value table, which this head does not have")
        elif not self.fams:
            row.out_of_reach["families"] = ("the model reads vocabulary rows, not Boolean tokens"
                                            if self.model.detected.embedding is not None else
                                            f"no family has the model's width {L.m}")
        return out


def _reasons(rows: list[HeadRow]) -> str:
    """The refusals, each reason once with the heads it applies to (``reason (layer 1
    heads 0-15)``)."""
    return "; ".join(f"{why} ({where(rs)})" for why, rs in grouped((r.reason, r) for r in rows if r.reason).items())


def _shift(c: Claim, offset: int) -> Claim:
    """References between claims (``features_claim``, ``grams_claim``) are certificate indices."""
    refs = [k for k in ("features_claim", "grams_claim") if k in c.evidence]
    if not refs:
        return c
    return replace(c, evidence={**dict(c.evidence), **{k: c.evidence[k] + offset for k in refs}})


def _short(c: Claim) -> str:
    p, ev = c.parameters, c.evidence
    if c.kind.value == "exact_rank":
        lo, hi = ev.get("rank_lower"), ev.get("rank_upper")
        v = str(lo) if lo == hi else f"[{lo}, {hi}]"
    elif c.kind.value == "eps_rank":
        v = f"{'' if c.statement and 'exactly' in c.statement else '>= '}{ev.get('k')} (eps {p.get('eps')})"
    else:
        v = ""
    return f"{v} {c.verdict.value}".strip()


# ---------------------------------------------------------------- output

def write_out(res: HeadsResult, out: str) -> Path:
    """Certificate, report and the head table, written as one folder (atomic)."""
    import shutil
    import tempfile

    from certify.report import build as report
    outp = Path(out)
    outp.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{outp.name}.stage.", dir=outp.parent))
    try:
        # the self-check reads the certificate from the folder the report's check reads it
        # from: one check serves both (same text, same base)
        for name, body in res.files.items():        # beside the certificate, as in the folder
            (stage / name).write_text(body, encoding="utf-8")
        text, checked = res.certificate.checked_dumps(stage.resolve())
        with open(stage / "certificate.json", "wb") as f:
            write_text(f, text)
        # the report reads the text just checked and written (not the file again: a 24-layer
        # model's certificate is a gigabyte)
        report.build([report.loaded_from_text(text, stage / "certificate.json")], outp, command="checkpoint",
                     extra={"certificate.json": text, "heads.md": heads_markdown(res),
                            "heads.json": json.dumps(res.to_json(), indent=1), **res.files},
                     verified=[checked])
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return outp


def heads_markdown(res: HeadsResult) -> str:
    n_cert = sum(r.status == "certified" for r in res.rows)
    lines = [f"# Heads of a {res.library} checkpoint ({res.layout})", "",
             f"{n_cert} head(s) certified, {len(res.refused)} refused, "
             f"{sum(r.status == 'out of reach' for r in res.rows)} out of reach.", "",
             res.table(), ""]
    if res.refused:
        lines += ["## Refused", ""] + [f"- layer {r.layer}, head {'all' if r.head is None else r.head}: "
                                       f"{r.reason}" for r in res.refused] + [""]
    if res.not_applicable:
        lines += ["## Not applicable", "", not_applicable_line(res.not_applicable), ""] + [
            f"- {claim}: {v['reason']}" for claim, v in res.not_applicable.items()] + [""]
    lines += ["## How it was read", ""] + [f"- {ln}" for ln in reading_lines(res)] + [""]
    lines += ["Lemma 3 columns: the inequality alpha(x,y) > (n-2)(d-2eps)/(2eps) alpha(x,z) on each "
              "applicable jump, decided in exact rationals from the head's features (a report entry; "
              "the certificate's gap_domination claims exist only for heads with a scalar readout).", ""]
    return "\n".join(lines)


def reading_lines(res: HeadsResult) -> list[str]:
    """How the checkpoint was read, for people: what recognised the layout, where
    it sits, the path to the first layer, the defaults that decided, the notes and
    the comparison with the library's own computation."""
    d = res.detected
    out = [f"recognised by: {d.get('detected_by', '')}" + (f" ({d['container']})" if d.get("container") else "")]
    if d.get("prefix"):
        out.append(f"key prefix: {d['prefix']!r}")
    first = next((r for r in res.rows if r.status == "certified"), None)
    claims = res.certificate.claims
    path = next((c.info.get("input_path") for c in claims if c.info.get("input_path") is not None), None)
    if first is not None:
        steps = ([f"embedding rows ({d['embedding'][0]} x {d['embedding'][1]})"] if d.get("embedding") else []) \
            + list(path or [])
        out.append("path to the first layer's projections: " + (" -> ".join(steps) if steps else
                                                                  "none (its inputs are the tokens)"))
    if d.get("defaults_used"):
        out.append("library defaults (no config key gave them): "
                   + ", ".join(f"{k} = {v}" for k, v in d["defaults_used"].items()))
    if d.get("stated"):
        out.append("stated kernel arguments (the claims hold for the model built with them): "
                   + ", ".join(f"{k} = {v['value']} ({v['from']})" for k, v in d["stated"].items()))
    out += list(d.get("notes", []))
    if isinstance(res.certificate.environment.get("text"), dict):
        from certify.sources.sequences import text_line
        out.append(text_line(res.certificate.environment["text"]))
    chk = next((r.library_check for r in res.rows if r.library_check), None)
    if chk:
        out.append(f"library check: {chk.get('library')} {chk.get('version')}: {chk.get('method')}"
                   + (f"; not run: {chk.get('reason')}" if chk.get("status") == "not run" else
                      f"; tolerance {chk.get('tolerance')} on {chk.get('sequences')} sequences of "
                      f"{chk.get('length')} tokens (seed {chk.get('seed')})")
                   + (f"; {chk['note']}" if chk.get("independent") is False and chk.get("note") else ""))
    hs = chk.get("hidden_states") if chk else None
    if hs:
        errs = [(r.layer, r.library_check["hidden_states"].get("max_error")) for r in res.rows
                if (r.library_check or {}).get("hidden_states")]
        per = ", ".join(f"layer {L} {e:.1e}" for L, e in dict(errs).items() if e is not None)
        out.append(f"library check of every layer's inputs: {hs.get('library')} {hs.get('version')}: "
                   f"{hs.get('method')}; {hs.get('status')}"
                   + (f" (not run: {hs.get('reason')})" if hs.get("status") == "not run" else
                      f", error ({hs.get('error')}) {per}; tolerance {hs.get('tolerance')}"))
    return out


def not_applicable_line(na: dict[str, dict[str, Any]]) -> str:
    """One line for the model: which heads have no normalizing denominator, and the
    claims that therefore do not apply to them."""
    heads = next(iter(na.values()))["heads"]
    return (f"{len(heads)} head(s) ({', '.join(heads)}, as layer.head) are unnormalized kernel attention "
            f"(no normalizing denominator): the kernel claims are made; {', '.join(na)} do not apply")


def result_lines(res: HeadsResult, ckpt: str) -> list[str]:
    """The result for people: how the checkpoint was read, the heads' table, the claims
    that do not apply to unnormalized heads (once per model), each claim that is not proved
    (one line per verdict, kind and reason, with the heads it covers) and the verdict."""
    out = [f"checkpoint {ckpt}: {res.library} ({res.layout})", *(f"  {ln}" for ln in reading_lines(res)),
           res.table()]
    if res.not_applicable:
        out.append(f"  not applicable: {not_applicable_line(res.not_applicable)}")
    open_: dict[tuple[str, str, str | None], list[HeadRow]] = {}
    for c in res.certificate.claims:
        if c.verdict is not Verdict.PROVED:
            open_.setdefault((c.verdict.value, c.kind.value, c.reason), []).append(
                HeadRow(int(c.info.get("layer") or 0), c.info.get("head"), ""))
    out += [f"  [{v}] {kind}: {why} ({where(rows)})" for (v, kind, why), rows in open_.items()]
    out.append(f"verdict: {overall(c.verdict for c in res.certificate.claims).value}")
    return out
