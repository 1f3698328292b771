"""Every name a sentence prints, bound to content (standard library and numpy only).

The renderer (:mod:`certify.checkers.statements`) prints only what a claim's
parameters say; this module makes sure each printed name means one thing,
whatever renderer version the certificate was made with:

* **token sets** -- ``cube:m`` only when the kernel has exactly ``2^m`` tokens
  (rows in the cube's order); ``family:NAME`` of a built-in family only when the
  tokens are that family's (count and the canonical hash of the token list,
  pinned or rebuilt by :mod:`certify.checkers.families`); any other token list
  by the hash of its tokens, checked against the tokens embedded in the
  evidence (or named as the assumption ``tokens:<sha256>`` when they are too
  many to embed and nothing else re-derives them); ``index`` (a matrix without
  tokens) only by its row count; ``positions:SxT`` (the inputs to one layer at
  every position of S sequences of T ids) by ``S T`` rows and the sequences'
  content hash, their name a file among the certificate's inputs or the probe
  ``random:S,T,SEED`` of those S and T (the ids and the features are re-derived by
  the extraction replay). The count is the one the evidence re-derives
  (embedded features or matrix), never a declared field alone.
* **codes** -- a built-in code name (``paper-5.1``) only when the embedded
  words have its pinned hash; any other code by the hash of its words.
* **models** -- a head read from weights is named by its weights file (tied to
  the file's sha256 by the certificate's inputs) and by the canonical hash of
  its tensors (:mod:`certify.checkers.tensors`), re-derived here from a present
  safetensors file or by the extraction replay; a head built in memory by the
  hash of its exact tables (re-derived by its checker). A readable ``model``
  label, where a claim has one, must be the weights file's own name.
* **sizes** -- whether a summary of data too large to embed may be trusted is
  decided from sizes re-derived here (:func:`measured_size`: the token count of
  the token set or of the embedded rows, times the feature width of an embedded
  Gram or feature matrix), never from a declared field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from certify.checkers.common import canonical_sha256, embedded_kernel_sha
from certify.checkers.families import BUILTIN_CODES, builtin_kind, builtin_tokens

KERNEL_KINDS = ("exact_rank", "eps_rank", "numerical_rank", "code_rank", "nonnegative")
MODEL_KINDS = ("correctness", "gap_domination")
_CUBE = re.compile(r"cube:(\d{1,3})")
_VOCAB = re.compile(r"vocab:(\d{1,12})")
_POSITIONS = re.compile(r"positions:(\d{1,9})x(\d{1,9})")
_PROBE = re.compile(r"random:(\d{1,9}),(\d{1,9}),(\d{1,19})")
#: explicit token lists up to this many tokens are embedded in the evidence; only a
#: longer one may be named by its hash alone (the producer's certify.rank.evidence rule)
EMBED_TOKENS = 1 << 16
#: the largest cube dimension a token set may name (2^62 tokens)
MAX_CUBE_M = 62


def token_list_sha256(tokens: list[str]) -> str:
    """The canonical hash of a token list (bit strings, in row order)."""
    return canonical_sha256(list(tokens))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _features_rows(ev: Mapping[str, Any], cert: Mapping[str, Any]) -> tuple[int, int] | None:
    """(rows, width) of the features a claim embeds, or refers to by ``features_claim``."""
    f = ev.get("features")
    if not isinstance(f, Mapping) and _int(ev.get("features_claim")) is not None:
        claims = cert.get("claims") or []
        i = ev["features_claim"]
        other = claims[i].get("evidence") if 0 <= i < len(claims) and isinstance(claims[i], dict) \
            else None
        f = other.get("features") if isinstance(other, Mapping) else None
    if isinstance(f, Mapping) and isinstance(f.get("phi_q"), list) and f["phi_q"] \
            and isinstance(f["phi_q"][0], list):
        return len(f["phi_q"]), len(f["phi_q"][0])
    return None


def rows_in_evidence(claim: Mapping[str, Any], cert: Mapping[str, Any]) -> int | None:
    """The kernel's token (row) count as the evidence itself carries it: embedded
    features or an embedded matrix (checked against the data by the kind's
    checker), or the shape of a matrix re-read from its source file."""
    ev = claim.get("evidence")
    if not isinstance(ev, Mapping):
        return None
    fr = _features_rows(ev, cert)
    if fr is not None:
        return fr[0]
    m = ev.get("matrix")
    if isinstance(m, list) and m:
        return len(m)
    return None


def token_set_count(p: Mapping[str, Any], ev: Mapping[str, Any]
                    ) -> tuple[list[str], list[str], int | None]:
    """(problems, assumptions, token count) the token set itself determines."""
    ts = p.get("token_set")
    if not isinstance(ts, str):
        return ["parameters.token_set must be a string"], [], None
    m = _CUBE.fullmatch(ts)
    if m:
        M = int(m.group(1))
        if not 1 <= M <= MAX_CUBE_M:
            return [f"token set {ts}: m must be 1..{MAX_CUBE_M}"], [], None
        return [], [], 1 << M
    if ts == "index":
        return [], [], None
    v = _VOCAB.fullmatch(ts)
    if v:                               # a model's vocabulary: token i is embedding row i
        return [], [], int(v.group(1))
    pos = _POSITIONS.fullmatch(ts)
    if pos:                             # a layer's inputs at every position of S sequences of T ids
        S, T = int(pos.group(1)), int(pos.group(2))
        if S < 1 or T < 1:
            return [f"token set {ts}: S and T must be >= 1"], [], None
        probe = _PROBE.fullmatch(str(p.get("sequences", "")))
        if probe is not None and (int(probe.group(1)), int(probe.group(2))) != (S, T):
            return [f"token set {ts}: the probe {p.get('sequences')!s:.40} is not {S} sequences of "
                    f"{T} ids"], [], None
        return [], [], S * T
    problems: list[str] = []
    assumptions: list[str] = []
    sha = p.get("tokens_sha256")
    embedded = ev.get("tokens") if isinstance(ev, Mapping) else None
    count = None
    if isinstance(embedded, list):
        if not all(isinstance(t, str) and t and not set(t) - {"0", "1"} for t in embedded) \
                or len({len(t) for t in embedded}) > 1:
            problems.append("evidence.tokens must be 0/1 strings of one length")
        else:
            count = len(embedded)
            if sha is not None and token_list_sha256(embedded) != sha:
                problems.append("parameters.tokens_sha256 is not the hash of the embedded tokens")
    if ts.startswith("family:") and builtin_kind(ts[7:]) is not None:
        bad, assume, pinned = builtin_tokens(ts[7:])
        problems += bad
        assumptions += assume
        if pinned is not None:
            n, want = pinned
            if sha is not None and sha != want:
                problems.append(f"token set {ts}: the built-in family's tokens have sha256 "
                                f"{want[:16]}..., the claim's {str(sha)[:16]}...")
            if count is not None and count != n:
                problems.append(f"token set {ts} has {n} tokens, the evidence {count}")
            count = n
        return problems, assumptions, count
    if ts != "tokens" and not ts.startswith("family:"):
        return [f"token set {ts!r:.40} is not cube:M, family:NAME, vocab:N, positions:SxT, tokens "
                "or index"], [], None
    if sha is not None and not isinstance(sha, str):
        problems.append("parameters.tokens_sha256 must be a string")
    elif count is None and sha is not None:
        assumptions.append(f"tokens:{sha[:16]}")         # nothing here re-derives the list
    return problems, assumptions, count


def bind_tokens(claim: Mapping[str, Any], cert: Mapping[str, Any], measured: int | None = None
                ) -> tuple[list[str], list[str]]:
    """A kernel claim's token set against the counts re-derived here (the evidence's
    rows, and ``measured``: the rows of the source file as re-read): every count a
    claim states (parameters, evidence, shape) must be that one."""
    p, ev = claim.get("parameters") or {}, claim.get("evidence") or {}
    problems, assumptions, k_set = token_set_count(p, ev)
    counts = {"the token set": k_set, "the evidence's rows": rows_in_evidence(claim, cert),
              "the source file's rows": measured,
              "parameters.num_tokens": _int(p.get("num_tokens")),
              "evidence.num_tokens": _int(ev.get("num_tokens"))}
    shape = p.get("shape")
    if isinstance(shape, list) and len(shape) == 2:
        counts["parameters.shape"] = _int(shape[0])
    layer, head = p.get("layer"), p.get("head")
    if layer is not None or head is not None:           # one head of a model: the adapter names it
        if _int(layer) is None or _int(head) is None or \
                not str(p.get("adapter", "")).endswith(f" layer {layer} head {head}"):
            problems.append(f"parameters layer {layer!r:.10}, head {head!r:.10} are not the ones "
                            "the adapter extracted (its name ends 'layer L head H')")
    seqs = p.get("sequences")
    if isinstance(seqs, str) and _PROBE.fullmatch(seqs) is None \
            and not isinstance((cert.get("inputs") or {}).get(seqs), str):
        problems.append(f"the sequences {seqs!r:.60} are neither the probe random:S,T,SEED nor a file among "
                        "the certificate's inputs (by its sha256)")
    if "num_tokens" in p and counts["parameters.num_tokens"] is None:
        problems.append("parameters.num_tokens must be an integer")
    ts = p.get("token_set")
    if isinstance(ts, str) and (ts == "tokens" or (ts.startswith("family:")
                                                   and builtin_kind(ts[7:]) is None)) \
            and not isinstance(ev.get("tokens"), list):
        rows = counts["the evidence's rows"] or measured
        if rows is not None and rows <= EMBED_TOKENS:
            problems.append(f"the explicit token list ({rows} tokens) is not embedded: up to "
                            f"{EMBED_TOKENS} tokens it must be (only a longer list is named by "
                            "its hash alone)")
    known = {w: k for w, k in counts.items() if k is not None}
    if len(set(known.values())) > 1:
        problems.append("the token counts disagree: "
                        + ", ".join(f"{w} {k}" for w, k in known.items()))
    return problems, assumptions


@dataclass(frozen=True)
class Referent:
    """What a claim is about, bound to content: ``how`` is one of ``file`` (a file
    named by its sha256, re-read when present), ``extraction`` (weights or a
    construction, replayed by ``--replay-extraction``), ``tables`` (a head built in
    memory, by the hash of its exact tables, which its checker re-derives),
    ``embedded`` (data the evidence embeds, by its hash, re-derived by the
    kind's checker), ``family`` (a built-in or hashed family), ``model`` (a transcript model's
    weights, embedded and re-hashed by its checker) or ``closed-form`` (a bound, or a
    theorem's construction decided on the cube: nothing but its parameters)."""

    how: str
    name: str
    sha256: str | None


def referent(claim: Mapping[str, Any]) -> Referent | None:
    """The binding of a claim's referent, one rule per kind; ``None`` when nothing
    binds it (verify then fails the claim: what is missing is never a pass)."""
    kind = claim.get("kind")
    p = claim.get("parameters")
    if not isinstance(p, Mapping):
        return None
    src, sha, adapter = p.get("source"), p.get("source_sha256"), p.get("adapter")
    if kind in KERNEL_KINDS:
        if not isinstance(src, str) or not isinstance(adapter, str) or "source_sha256" not in p:
            return None
        if adapter == "matrix-file":
            return Referent("file", src, sha) if isinstance(sha, str) else None
        if sha is None and adapter == "memory":           # bound by the embedded data's hash
            h = embedded_kernel_sha(claim)
            return Referent("embedded", "memory", h) if src == "memory" and h else None
        if sha is None:
            return Referent("extraction", src, None) if adapter == "construction" else None
        return Referent("extraction", src, sha) if isinstance(sha, str) else None
    if kind in MODEL_KINDS:
        if src is None:
            h = p.get("head_sha256")
            return Referent("tables", "head", h) if isinstance(h, str) else None
        if isinstance(src, str) and isinstance(sha, str) and isinstance(adapter, str) \
                and isinstance(p.get("weights_sha256"), str):
            return Referent("extraction", src, sha)
        return None
    if kind in ("feasible", "infeasible"):
        name, fsha = p.get("family"), p.get("family_sha256")
        return Referent("family", name, fsha) if isinstance(name, str) and isinstance(fsha, str) \
            else None
    if kind == "transcript":
        w = p.get("weights_sha256")
        return Referent("model", "weights", w) if isinstance(w, str) else None
    if kind == "bound":
        b = p.get("bound")
        return Referent("closed-form", b, None) if isinstance(b, str) else None
    if kind == "theorem":          # a construction by its parameters; a head by its tables' hash
        t, h = p.get("theorem"), p.get("head_sha256")
        if t in ("thm1", "thm6"):
            return Referent("closed-form", t, None)
        return Referent("tables", "head", h) if t == "thm8" and isinstance(h, str) else None
    return None


def token_content(p: Mapping[str, Any]) -> tuple:
    """A token set by its content, never by its label: ``{0,1}^m`` by m, a
    vocabulary by its size, an explicit or family token list by the hash of its
    tokens (bound by :func:`token_set_count`), a matrix's rows by their count."""
    ts = p.get("token_set")
    if isinstance(ts, str):
        m = _CUBE.fullmatch(ts)
        if m:
            return ("cube", int(m.group(1)))
        v = _VOCAB.fullmatch(ts)
        if v:
            return ("vocab", int(v.group(1)))
        if _POSITIONS.fullmatch(ts):         # a layer's inputs (the layer is part of the identity)
            return ("positions", ts, p.get("sequences_sha256"))
    if isinstance(p.get("tokens_sha256"), str):
        return ("tokens", p["tokens_sha256"])
    return ("rows", p.get("num_tokens"))


def kernel_identity(claim: Mapping[str, Any]) -> tuple | None:
    """One key per kernel, whatever the representation (matrix or features; a head
    of a checkpoint), built from bound content only: a matrix file or embedded
    data is its own kernel (its hash; a token-set label only names its rows); an
    extraction is the source's hash, adapter, layer, head, stated arguments, the
    token set's content (:func:`token_content`) and the features' dtype. A
    matrix-form and a factor-form claim of one file meet here. Whether the head
    is normalized (``parameters.normalized``) is not part of it: alpha is the
    same function with or without the denominator, so claims that differ only
    there are about one kernel and must agree (the replay re-derives the word)."""
    if claim.get("kind") not in KERNEL_KINDS:
        return None
    ref = referent(claim)
    if ref is None:
        return None
    if ref.how in ("file", "embedded"):
        return (ref.how, ref.sha256)
    p, ev = claim.get("parameters") or {}, claim.get("evidence") or {}
    fs = ev.get("features_sha256") if isinstance(ev, Mapping) else None
    dtype = fs.get("dtype") if isinstance(fs, Mapping) else p.get("dtype")
    stated = json.dumps(p.get("stated"), sort_keys=True)
    return (ref.how, ref.sha256 if ref.sha256 is not None else ref.name, p.get("adapter"),
            p.get("layer"), p.get("head"), stated, token_content(p), dtype)


def builtin_code_name(words: list[str]) -> str | None:
    """The built-in name of a word list, if it is a built-in code."""
    pin = (len(words), canonical_sha256(list(words)))
    return next((n for n, p in BUILTIN_CODES.items() if p == pin), None)


def bind_code(claim: Mapping[str, Any]) -> list[str]:
    """A ``code_rank`` claim's code: a built-in name exactly when the words are
    that code (and then always that name), else the words' hash."""
    p, ev = claim.get("parameters") or {}, claim.get("evidence") or {}
    words = ev.get("words")
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        return ["evidence.words must list the code's words"]
    sha = canonical_sha256(words)
    problems = []
    if "code_sha256" in p and p["code_sha256"] != sha:
        problems.append("parameters.code_sha256 is not the hash of the embedded words")
    if p.get("num_words") != len(words):
        problems.append(f"parameters.num_words is not the {len(words)} embedded words")
    name = p.get("code")
    canonical = next((n for n, pin in BUILTIN_CODES.items() if pin == (len(words), sha)), None)
    if canonical is not None and name != canonical:
        problems.append(f"the words are the built-in code {canonical!r}; the claim names it "
                        f"{name!r:.40} (a code has one name)")
    if name is not None:
        pinned = BUILTIN_CODES.get(name)
        if pinned is None and "code_sha256" not in p:
            problems.append(f"the code label {str(name)[:60]!r} is not a built-in code and "
                            "nothing binds it to the words (name codes by their hash)")
        elif pinned is not None and (len(words), sha) != pinned:
            problems.append(f"{name!r} is a built-in code with sha256 {pinned[1][:16]}...; "
                            f"the embedded words have {sha[:16]}...")
    return problems


def bind_model(claim: Mapping[str, Any], cert: Mapping[str, Any],
               base: Any) -> tuple[list[str], list[str]]:
    """A head's name: its weights file, the canonical hash of its tensors, and a
    readable label only when it is that file's own name."""
    from certify.checkers import sources as _sources
    from certify.checkers.tensors import TensorFileError, safetensors_sha256

    p = claim.get("parameters") or {}
    src, label, w = p.get("source"), p.get("model"), p.get("weights_sha256")
    problems: list[str] = []
    assumptions: list[str] = []
    if label is not None:
        if not isinstance(label, str) or not isinstance(src, str) \
                or label not in (Path(src).stem, Path(src).name, Path(src).parent.name):
            problems.append(f"the model label {str(label)[:60]!r} is not the name of the weights "
                            f"file the claim is bound to ({str(src)[:60]!r})")
    if w is None:
        return problems, assumptions
    if not isinstance(w, str) or not isinstance(src, str):
        return problems + ["parameters.weights_sha256 names weights without a weights file"], []
    found = _sources.locate(src, (cert.get("inputs") or {}).get(src), base)
    path = found.path if found is not None else None
    if path is not None and path.suffix == ".safetensors":
        try:
            got = safetensors_sha256(path)
        except (TensorFileError, OSError) as exc:
            return problems + [f"cannot read the weights {src}: {exc}"], []
        if got != w:
            problems.append(f"the weights in {src} have canonical sha256 {got[:16]}..., the "
                            f"claim's {w[:16]}...")
        return problems, assumptions
    # otherwise the weights are part of the extraction on this source: the replay
    # compares them (certify.checkers.sources.replay_extraction), else it is assumed
    return problems, assumptions


def measured_size(claim: Mapping[str, Any], cert: Mapping[str, Any],
                  measured: int | None = None) -> int | None:
    """Entries of the data a claim summarises, from sizes re-derived here: the
    token count (token set or embedded rows) times the feature width (an
    embedded Gram or feature matrix of this claim or of another claim of the
    certificate on the same features; 1 when none shows it, so the result is a
    lower bound). ``None`` when the token count is not derivable."""
    p, ev = claim.get("parameters") or {}, claim.get("evidence") or {}
    if not isinstance(ev, Mapping):
        return None
    # the rows actually read (a present source file) or embedded decide; a declared
    # token set counts only when nothing was read (then the extraction or the family
    # binds it, and bind_tokens has already required the counts to agree)
    k = measured if measured is not None else rows_in_evidence(claim, cert)
    if k is None:
        _, _, k = token_set_count(p, ev)
    if k is None:
        return None
    if ev.get("form") == "matrix" or "matrix_sha256" in ev or "B" in ev:
        return k * k
    r = _width(ev, cert)
    if r is None:                       # the width from another claim on the same features
        fs = ev.get("features_sha256")
        for other in cert.get("claims") or []:
            oe = other.get("evidence") if isinstance(other, dict) else None
            if isinstance(oe, Mapping) and fs is not None and oe.get("features_sha256") == fs:
                r = _width(oe, cert)
                if r is not None:
                    break
    # no width to be found: the features have at least one column, so k entries is
    # what is known for sure (a lower bound; trust needs it above the threshold)
    return k if r is None else k * r


def _width(ev: Mapping[str, Any], cert: Mapping[str, Any]) -> int | None:
    g = ev.get("gram_q")
    if isinstance(g, list) and g and all(isinstance(row, list) and len(row) == len(g) for row in g):
        return len(g)
    dims = g.get("shape") if isinstance(g, Mapping) else None           # packed (common.packed_matrix)
    if isinstance(dims, list) and len(dims) == 2 and dims[0] == dims[1] and type(dims[0]) is int \
            and dims[0] > 0:
        return dims[0]
    fr = _features_rows(ev, cert)
    if fr is not None:
        return fr[1]
    qf = ev.get("query_features")
    if isinstance(qf, list) and qf and isinstance(qf[0], list):
        return len(qf[0])
    return None
