"""Re-run the weights -> features step for ``certify verify --replay-extraction``.

Run by :func:`certify.checkers.sources.replay_extraction` in a separate process
(``python -m certify.cli.replay``; the checker itself never imports torch), with
one thread. A safetensors checkpoint's heads replay without torch (the canonical
extraction reads the weights' bytes itself); torch is imported only for a torch
pickle or a ``models/`` checkpoint, and a job that needs a missing extra says
which (:func:`needs_extra`). Reads a JSON list of jobs on stdin (``key``, ``source``, ``path``,
``adapter``, ``token_set``, ``dtype``, ``stated``, ``normalized``: every value the
claims of that kernel give, compared with the head the config builds) and prints one JSON object: key ->
``{"phi_q": sha256, "phi_k": sha256, "torch": version, "versions": {...}}`` or
``{"error": reason}``; ``"phi_q": "differs: ..."`` when the head the config builds is not the one
the claims state (stated arguments, normalization, a dtype other than the extraction's), a
failure for the checker rather than an error; a job with ``features_out`` (a path) also gets its
features written there (``features_file``), for the checker to recompute
summaries too large to embed. The hashes are those of
:func:`certify.rank.summary.feature_hashes` (the features in their dtype,
row-major little-endian), so equal hashes mean bit-for-bit equal features;
``versions`` records what the replayed arithmetic depends on (torch, numpy,
safetensors, this package, and the extraction code's version).

Sources it can replay: ``models/`` checkpoints (adapter ``models.checkpoint``),
a state dict read through an adapter spec (adapter ``adapter:<layout>``; the
spec is the one of that layout among the certificate's inputs),
every head of a third-party checkpoint whose layout is detected (adapter
``layout:<layout> layer L head H``: the same loader, the same extraction,
without the library comparison, which does not change the features), and the
constructions of :mod:`models.constructions` named as
``models.constructions.NAME(int, ...)``.
"""

from __future__ import annotations

import re
from typing import Any

from certify.core.files import sha256_file

#: how a claim names a library default the user accepted (models.layouts.FROM_DEFAULT)
FROM_DEFAULT = "library default, assumed"


class StatedDiffers(ValueError):
    """The kernel arguments a claim states are not those of the checkpoint's config
    and the accepted defaults: the replay reproduces another kernel than the
    sentence names (reported as a difference, not as a replay that did not run)."""


def _normalized_word(said: list[Any]) -> str:
    words = ["normalized" if v is True else "unnormalized" if v is False else repr(v)[:20] for v in said]
    return " and ".join(words)


_CONSTRUCTION = re.compile(r"models\.constructions\.(\w+)\(([\d, ]*)\)")
_ALLOWED = {"thm2_exact_features"}


def _positions_head(job: dict[str, Any], model: Any, head: tuple[int, int]):
    """One head on a layer's inputs at the positions of the job's sequences: the ids re-read
    from the located file (or the probe regenerated) must have the claim's content hash."""
    from certify.sources.sequences import read_sequences
    from certify.sources.thirdparty import positions_kernel
    name, want = job.get("sequences"), job.get("sequences_sha256")
    if not isinstance(name, str) or not isinstance(want, str):
        raise StatedDiffers("a positions token set without its sequences and their hash")
    emb = model.detected.embedding
    seqs = read_sequences(name, int(emb.shape[0]) if emb is not None else 0, path=job.get("sequences_path"))
    if seqs.sha256 != want or seqs.token_set != job.get("token_set"):
        raise StatedDiffers(f"the sequences {name[:60]} give the ids {seqs.token_set} with sha256 "
                            f"{seqs.sha256[:16]}..., the certificate's {job.get('token_set')} {want[:16]}...")
    return positions_kernel(model, seqs, layer=head[0], head=head[1], compare=False)


def _third_party_head(path: str, tokens: str | None, head: tuple[int, int], assume: list[str],
                      models: dict[Any, Any], job: dict[str, Any] | None = None):
    """One head of a third-party checkpoint, as :func:`certify.sources.load.load_kernel`
    reads it; the checkpoint is read and detected once per replay (``models``), so
    the heads of one layer share their embedding, decoded once, and its pre-norm."""
    from pathlib import Path

    from certify.checkers.common import path_problem
    from certify.core.errors import InputError
    from certify.sources.load import kind_of, load_kernel
    from certify.sources.thirdparty import head_kernel, load_model
    p = Path(path)
    if not p.exists():
        why = path_problem(p)
        raise InputError(f"{path}: {why}" if why else f"no such file: {path}")
    positions = (tokens or "").startswith("positions:")
    if kind_of(p) != "weights" and not positions:
        return load_kernel(path, tokens=tokens, layer=head[0], head=head[1], compare=False, assume=assume)
    key = (str(p), tuple(assume))
    if key not in models:
        models.clear()                     # one checkpoint's model kept at a time (and its forwards)
        models[key] = load_model(p, assume)
    if positions:
        return _positions_head(job or {}, models[key], head)
    return head_kernel(models[key], layer=head[0], head=head[1], tokens=tokens, compare=False)


def _kernel(job: dict[str, Any], models: dict[Any, Any] | None = None):
    from certify.core.errors import InputError, UncertifiableError
    from certify.sources.load import load_kernel
    from certify.sources.thirdparty import parse_adapter
    adapter, ts = job.get("adapter"), job.get("token_set")
    tokens = None if ts in (None, "tokens") else ts
    head = parse_adapter(adapter or "")
    if head is not None:
        if job.get("path") is None:
            raise ValueError("the checkpoint file is not present")
        stated = job.get("stated")
        if not isinstance(stated, dict):
            # the kernel arguments beyond the weights are part of what the sentence names: a claim
            # that does not state them cannot be replayed (no argument is ever assumed for it)
            raise StatedDiffers("the claim does not state the kernel arguments of its third-party "
                                "head, so the replay cannot know which kernel it names")
        assume = [k for k, v in stated.items() if isinstance(v, dict) and v.get("from") == FROM_DEFAULT]
        try:
            kernel = _third_party_head(job["path"], tokens, head, assume, {} if models is None else models,
                                       job)
        except (InputError, UncertifiableError) as exc:
            if "--assume-default" not in str(exc):
                raise
            raise StatedDiffers(f"the certificate's stated kernel arguments {stated} are not the checkpoint's: "
                                f"{exc}") from None
        got = ((kernel.provenance.details or {}).get("layout") or {}).get("stated") or {}
        if got != stated:
            raise StatedDiffers(f"the certificate states the kernel arguments {stated}; the checkpoint's config "
                                f"and the accepted defaults give {got}")
        # normalized or not: the features are the same either way, so the sentence's word is
        # compared with the head the config builds (every value the claims of this kernel give)
        norm = (kernel.provenance.details or {}).get("normalized", True) is not False
        said = job.get("normalized") or [True]
        if any(not isinstance(v, bool) or v != norm for v in said):
            raise StatedDiffers(f"the certificate calls the head {_normalized_word(said)}; the checkpoint's config "
                                f"builds it {'normalized' if norm else 'unnormalized (no denominator)'}")
        return kernel
    if adapter == "construction":
        m = _CONSTRUCTION.fullmatch(job.get("source") or "")
        if m is None or m.group(1) not in _ALLOWED:
            raise ValueError("not a construction this replay knows")
        return _construction(m.group(1), [int(v) for v in m.group(2).split(",") if v.strip()],
                             ts)
    if job.get("path") is None:
        raise ValueError("the checkpoint file is not present")
    if str(adapter).startswith("adapter:"):
        return load_kernel(job["path"], tokens=tokens, spec=_spec(job, str(adapter)[len("adapter:"):]))
    return load_kernel(job["path"], tokens=tokens)


def _spec(job: dict[str, Any], layout: str) -> str:
    """The adapter spec among the certificate's inputs (exactly one of that layout)."""
    from certify.core.errors import InputError
    from models.adapters import read_spec
    found = []
    for p in job.get("specs") or []:
        try:
            if read_spec(p).layout == layout:
                found.append(p)
        except InputError:
            continue
    if len(found) != 1:
        raise ValueError(f"{len(found)} adapter specs of layout {layout!r} among the certificate's inputs "
                         f"(one is needed)")
    return found[0]


def _construction(name: str, args: list[int], token_set: str | None):
    import numpy as np

    import models.constructions as con
    from certify.core.kernel import Provenance, from_features
    out = getattr(con, name)(*args)
    # exact dyadic Fractions -> float64, as certify.api.demo.cube_kernel_certificate does
    phi_q = np.array([[float(v) for v in row] for row in out.phi_q])
    phi_k = np.array([[float(v) for v in row] for row in out.phi_k])
    return from_features(phi_q, phi_k, Provenance(name, None, "construction", "float64"),
                         tokens=out.tokens, token_set=token_set)


def _heads(job: dict[str, Any]) -> tuple[dict[str, str], str]:
    """(family name -> sha256 of the exact head of a models/ checkpoint on it,
    the canonical hash of the checkpoint's tensors)."""
    from certify import audit
    from certify.checkpoints.run import load_head
    from certify.core.families import load_family
    if job.get("adapter") != "models.checkpoint" or job.get("path") is None:
        raise ValueError("only a present models/ checkpoint's head can be replayed")
    model, _, _, wsha = load_head(job["path"], None)
    return {f: audit.head_from_model(model, load_family(f)).sha256
            for f in dict.fromkeys(f for f, _ in job["heads"])}, wsha


def write_features(kernel, path: str, rows: tuple[list, list] | None = None) -> str:
    """The kernel's features as ``phi_q``, ``phi_k`` in a features file at ``path``
    (:func:`certify.checkers.gram.write_features`, written atomically), for a checker that recomputes summaries too large to embed
    (:func:`certify.checkers.gram.gram_problems`): the features go to it as a
    file, never as JSON on stdout. ``rows``: the batches of a pass already made (the
    hashing pass of :func:`replay`), so the features are computed once."""
    from certify.checkers.gram import write_features as write
    qs, ks = rows if rows is not None else ([], [])
    # in the kernel's own row order, whatever its tokens are (a vocabulary's rows have no
    # Boolean coordinates: they are read by index)
    if rows is None:
        for q, k in kernel.feature_batches(1 << 14):
            qs.append(q)
            ks.append(k)
    write(path, qs, ks)
    return path


def versions() -> dict[str, Any]:
    """What the replayed arithmetic depends on (the installed versions as the certificate's
    environment reads them: :func:`certify.core.certificate.installed_versions`)."""
    from certify.core.certificate import installed_versions
    from certify.sources.thirdparty import EXTRACTION
    return {"extraction": EXTRACTION, **installed_versions(("torch", "numpy", "safetensors", "certify-attention"))}


def needs_extra(exc: BaseException) -> str | None:
    """The reason a job could not replay for want of an extra (one line naming it),
    or None when ``exc`` is not a missing module of an extra. torch is missing for
    a torch pickle (``.pt``, ``.bin``) or a ``models/`` checkpoint: ``[models]``;
    safetensors for a safetensors checkpoint: ``[replay]``."""
    from certify.core.extras import DIST, extra_for
    extra = extra_for(exc)
    if extra is None:
        return None
    name = str(getattr(exc, "name", "") or "").split(".")[0]
    return (f"the replay of extraction needs the [{extra}] extra for this source (no module {name}): "
            f"pip install '{DIST}[{extra}]'")


def replay(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each job's features (and heads) recomputed, keyed as the jobs are. The jobs are one
    certificate's check: they share one scratch (:mod:`certify.checkers.scratch`), so a source
    named by many jobs (every head of a checkpoint) is hashed once while it is unchanged."""
    from certify.checkers import scratch
    with scratch.session():
        return _replay(jobs)


def _replay(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    # torch is imported only by the sources that need it (pickles, models/ checkpoints; one
    # thread: the checker runs this process with OMP_NUM_THREADS=1); its version, if installed,
    # is read from the package metadata
    from certify.rank.summary import feature_hashes
    out: dict[str, Any] = {}
    vers = versions()
    torch_version = vers.get("torch")
    models: dict[Any, Any] = {}          # the third-party checkpoint read last (its heads follow each other)
    for job in jobs:
        key = str(job.get("key", job.get("source")))
        try:
            rec: dict[str, Any] = {"torch": torch_version, "versions": vers}
            want_sha, path = job.get("source_sha256"), job.get("path")
            if isinstance(want_sha, str) and isinstance(path, str) and sha256_file(path) != want_sha:
                # the job is keyed by content (certify.checkers.sources.extraction_id): never
                # replay another file than the one whose bytes the certificate names
                raise ValueError(f"{path} is not the certificate's source (its sha256 differs)")
            if job.get("want"):
                try:
                    kernel = _kernel(job, models)
                    dtype, sha_q, sha_k, qs, ks = feature_hashes(kernel, keep=bool(job.get("features_out")))
                except StatedDiffers as exc:      # the features of another model than the sentence's
                    rec.update({"phi_q": f"differs: {exc}"[:300], "phi_k": "differs"})
                    out[key] = rec
                    continue
                if job.get("dtype") not in (None, dtype):      # features of another precision
                    rec.update({"phi_q": f"differs: the features come out as {dtype}, the certificate "
                                         f"has {job['dtype']}"[:300], "phi_k": "differs"})
                    out[key] = rec
                    continue
                rec.update({"phi_q": sha_q, "phi_k": sha_k})
                if job.get("features_out"):
                    rec["features_file"] = write_features(kernel, job["features_out"], (qs, ks))
            if job.get("heads") or job.get("weights"):
                rec["heads"], rec["weights_sha256"] = _heads(job)
            out[key] = rec
        except ModuleNotFoundError as exc:
            why = needs_extra(exc)
            out[key] = {"error": why if why is not None else f"{type(exc).__name__}: {exc}"[:300]}
        except Exception as exc:           # reported back to verify, which names it
            out[key] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out
