"""One claim, checked by the reference path: its shape, what binds it to content,
and its kind's re-derivation (:mod:`~certify.reference.kernels`,
:mod:`~certify.reference.feasibility`, :mod:`~certify.reference.audit`,
:mod:`~certify.reference.transcript`, :mod:`~certify.reference.bounds`,
:mod:`~certify.reference.theorems`).

Binding. A family (feasibility, audit claims) is the embedded object, whose
content hash must be the claim's ``family_sha256`` and the certificate's input
``family:NAME``. A kernel's data is, in this order of preference: the
features an extraction replay wrote (hashed here against ``features_sha256``);
the source file re-read exactly (its sha256 first, which must be the claim's and
the certificate's input); the evidence's embedded integers (features, or
another claim's by ``features_claim``, hashed against ``features_sha256``; a
matrix hashed against ``matrix_sha256``). An extraction not replayed is the
assumption ``extraction:<source>``, a matrix file that is absent
``source:<name>``, as in the fast checker. The token set is bound by its count
(``cube:m``: ``2^m`` rows; ``vocab:N``: N; ``paper-5.1``'s 41 tokens by their
pinned hash; an explicit list by the hash of the embedded tokens).
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

from certify.reference import audit, bounds, feasibility, kernels, theorems, transcript
from certify.reference.builtin import is_builtin
from certify.reference.exact import Fails, canonical_sha256, int_rows, whole
from certify.reference.families import PAPER51_TOKENS, bind_name, builtin_tokens
from certify.reference.files import (
    features_sha256,
    locate,
    read_features_file,
    read_source,
    safetensors_sha256,
    sha256_file,
)
from certify.reference.kernels import Kernel
from certify.reference.limits import MAX_FEATURE_ENTRIES
from certify.reference.replay import Replays, job_key

KERNEL_KINDS = ("exact_rank", "eps_rank", "numerical_rank", "nonnegative", "code_rank")
AUDIT_KINDS = ("correctness", "gap_domination")
VERDICTS = ("proved", "refuted", "unknown")
#: below this many entries, data a claim summarises must be embedded (as in the fast checker)
TRUSTED_MIN_ENTRIES = 1 << 16
LAYOUT = "row-major little-endian (K, r)"


class Context:
    """A certificate being checked: its object, folder, the replays, and the source
    files read so far (each read once per certificate)."""

    def __init__(self, cert: Mapping[str, Any], base: Path | None, replays: Replays | None) -> None:
        self.cert, self.base, self.replays = cert, base, replays
        self.read: dict[str, Any] = {}

    @property
    def inputs(self) -> Mapping[str, Any]:
        i = self.cert.get("inputs")
        return i if isinstance(i, dict) else {}


def check(claim: Mapping[str, Any], ctx: Context) -> tuple[list[str], list[str]]:
    """``(problems, assumptions)`` of one claim that conforms to the schema."""
    kind, verdict = claim.get("kind"), claim.get("verdict")
    if verdict not in VERDICTS:
        return [f"verdict {verdict!r:.20} is not proved, refuted or unknown"], []
    if verdict != "proved" and not (isinstance(claim.get("reason"), str) and claim["reason"].strip()):
        return [f"a {verdict} claim needs a reason"], []
    if not isinstance(claim.get("parameters"), dict) or not isinstance(claim.get("evidence"), dict):
        return ["parameters and evidence must be objects"], []
    assumptions: list[str] = []
    declared = claim["evidence"].get("assumptions")
    if declared is not None and kind != "transcript":
        if not isinstance(declared, list) or not all(isinstance(a, str) and a for a in declared):
            return ["evidence.assumptions must be a list of names"], []
        assumptions += declared
    if kind == "bound":
        return bounds.check(claim), assumptions
    if kind == "transcript":              # its evidence's assumptions are the transcript check's
        return transcript.check(claim)
    if kind in ("feasible", "infeasible"):
        problems, assume = _family_input(claim, ctx)
        return problems + feasibility.check(claim), assumptions + assume
    if kind in AUDIT_KINDS:
        problems, assume = _family_input(claim, ctx)
        bad, assume2 = _head_source(claim, ctx)
        return problems + bad + audit.check(claim), assumptions + assume + assume2
    if kind in KERNEL_KINDS:
        bad, assume = _kernel_claim(claim, ctx)
        return bad, assumptions + assume
    if kind == "theorem":                 # a construction by its parameters, or a head on a family
        problems, assume = _family_input(claim, ctx) if "family" in claim["parameters"] else ([], [])
        return problems + theorems.check(claim), assumptions + assume
    return [f"no re-derivation for claim kind {kind!r:.30} (fails: nothing is passed unchecked)"], []


def _family_input(claim: Mapping[str, Any], ctx: Context) -> tuple[list[str], list[str]]:
    """(problems, assumptions): the family name bound to the claim's hash (a built-in
    name to its content), and listed among the certificate's inputs."""
    p = claim["parameters"]
    name, sha = p.get("family"), p.get("family_sha256")
    problems, assumptions = bind_name(name, sha)
    if ctx.inputs.get(f"family:{name}") != sha:
        problems.append(f"the certificate's inputs do not list family:{name} with the claim's "
                        "family_sha256")
    return problems, assumptions


def _source_input(p: Mapping[str, Any], ctx: Context) -> list[str]:
    sha = p.get("source_sha256")
    if sha is not None and ctx.inputs.get(str(p.get("source"))) != sha:
        return [f"the certificate's inputs do not list the source {p.get('source')!r:.80} with the "
                "claim's sha256"]
    return []


def _head_source(claim: Mapping[str, Any], ctx: Context) -> tuple[list[str], list[str]]:
    """A head read from weights: its file, and the replay of its tables and weights' hash."""
    p = claim["parameters"]
    src = p.get("source")
    if src is None:
        if any(k in p for k in ("source_sha256", "adapter", "weights_sha256", "model")):
            return ["a head built in memory names no source, adapter or weights"], []
        return [], []
    if not all(isinstance(p.get(k), str) for k in ("source", "source_sha256", "adapter", "weights_sha256")):
        return ["a head read from weights names its file, sha256, adapter and weights' hash"], []
    label = p.get("model")
    if label is not None and label not in (Path(src).stem, Path(src).name, Path(src).parent.name):
        return [f"the model label {label!r:.40} is not the weights file's name"], []
    problems = _source_input(p, ctx)
    path = locate(src, p.get("source_sha256"), ctx.base)
    if path is not None and path.suffix == ".safetensors":     # the weights' canonical hash, recomputed
        got = safetensors_sha256(path)
        if got != p["weights_sha256"]:
            problems.append(f"the weights in {src} have canonical sha256 {got[:16]}..., the claim's "
                            f"{p['weights_sha256'][:16]}...")
    if ctx.replays is None:
        return problems, [f"extraction:{src}"]
    r = ctx.replays.results.get(job_key(p, False, ctx.cert, ctx.base))
    if r is None or "error" in r:
        why = (r or {}).get("error", "not replayed")
        return problems, [f"extraction:{src} ({why})"]
    if (r.get("heads") or {}).get(p.get("family")) != p.get("head_sha256"):
        problems.append("the replayed head's tables hash is not the claim's head_sha256")
    if r.get("weights_sha256") != p.get("weights_sha256"):
        problems.append("the replayed weights' canonical hash is not the claim's weights_sha256")
    return problems, []


# ---------------------------------------------------------------- kernels

def _embedded_features(ev: Mapping[str, Any], ctx: Context) -> tuple[Any, Any] | None:
    """The features the evidence embeds (or another claim's, by ``features_claim``)."""
    f = ev.get("features")
    if f is None and "features_claim" in ev:
        i = whole(ev["features_claim"], "features_claim", 0)
        claims = ctx.cert.get("claims") or []
        other = claims[i].get("evidence") if i < len(claims) and isinstance(claims[i], dict) else None
        f = other.get("features") if isinstance(other, dict) else None
        if f is None:
            raise Fails(f"features_claim {i} is not a claim with embedded features")
    if f is None:
        return None
    if not isinstance(f, dict) or set(f) != {"phi_q", "phi_q_exponent", "phi_k", "phi_k_exponent"}:
        raise Fails("features must be {phi_q, phi_q_exponent, phi_k, phi_k_exponent}")
    q, k = int_rows(f["phi_q"], "features.phi_q"), int_rows(f["phi_k"], "features.phi_k")
    for rows in (q, k):
        if len(rows) * len(rows[0]) > MAX_FEATURE_ENTRIES:
            from certify.reference.exact import Refused
            raise Refused(f"embedded features of {len(rows)} x {len(rows[0])} entries, above the "
                          f"reference checker's limit of {MAX_FEATURE_ENTRIES}")
    return (kernels.fq(q, whole(f["phi_q_exponent"], "phi_q_exponent")),
            kernels.fq(k, whole(f["phi_k_exponent"], "phi_k_exponent")))


def _check_hash(fs: Any, q: list[list[Fraction]], k: list[list[Fraction]], what: str) -> None:
    if not isinstance(fs, dict) or set(fs) != {"phi_q", "phi_k", "dtype", "layout"} or fs["layout"] != LAYOUT:
        raise Fails(f"features_sha256 must be {{phi_q, phi_k, dtype, layout: {LAYOUT!r}}}")
    if len(q) != len(k) or len(q[0]) != len(k[0]):
        raise Fails(f"{what}: PhiQ and PhiK have different shapes")
    if features_sha256(q, fs["dtype"]) != fs["phi_q"] or features_sha256(k, fs["dtype"]) != fs["phi_k"]:
        raise Fails(f"features_sha256 is not the hash of {what}")


def _file(p: Mapping[str, Any], ctx: Context) -> tuple[dict[str, Any] | None, list[str]]:
    """A matrix file source: ``(data or None, assumptions)``; its sha256 checked."""
    src, sha = p.get("source"), p.get("source_sha256")
    if not isinstance(sha, str):
        raise Fails("a matrix file source needs its sha256")
    path = locate(src, sha, ctx.base)
    if path is None or not isinstance(src, str):
        return None, [f"source:{src}"]
    if src not in ctx.read:
        if sha256_file(path) != sha:
            raise Fails(f"the source file {path} is not the one certified (sha256 differs)")
        ctx.read[src] = read_source(path, str(src))
    data = ctx.read[src]
    # the dtype is not printed, but it is a field: it must be what the file holds
    if "dtype" in p and p["dtype"] != data["dtype"]:
        raise Fails(f"parameters.dtype {p['dtype']!r:.20} is not the source file's {data['dtype']}")
    return data, []


def _float_matrix(ev: Mapping[str, Any], file_data: dict[str, Any] | None) -> Kernel:
    """A numerical_rank claim's matrix: the source file's values, else the embedded ``matrix
    2^matrix_exponent``, every one a float64, bound by ``values_sha256``."""
    embedded = None
    if "matrix" in ev:
        e = Fraction(2) ** whole(ev.get("matrix_exponent"), "evidence.matrix_exponent")
        embedded = [[Fraction(v) * e for v in row] for row in int_rows(ev["matrix"], "evidence.matrix")]
    if file_data is not None:
        rows = file_data.get("matrix")
        if rows is None or file_data.get("dtype") == "rational":
            raise Fails("a numerical_rank claim is about an array of floats, which the source is not")
        if embedded is not None and embedded != rows:
            raise Fails("the embedded matrix is not the source file's matrix")
    elif embedded is not None:
        rows = embedded
    else:
        raise Fails("the matrix is neither embedded nor present as its source file")
    if ev.get("shape") != [len(rows), len(rows[0]) if rows else 0]:
        raise Fails(f"evidence.shape {ev.get('shape')!r:.30} is not the matrix's shape")
    if kernels.float64_sha256(rows) != ev.get("values_sha256"):
        raise Fails("values_sha256 is not the hash of the matrix's float64 values")
    return Kernel(matrix=rows)


def _kernel(claim: Mapping[str, Any], ctx: Context) -> tuple[Kernel, list[str]]:
    """The claim's kernel as exact data, bound to its hashes, and the assumptions left."""
    p, ev = claim["parameters"], claim["evidence"]
    adapter, src, sha = p.get("adapter"), p.get("source"), p.get("source_sha256")
    if not isinstance(src, str) or not isinstance(adapter, str) or "source_sha256" not in p:
        raise Fails("a kernel claim names its source, source_sha256 and adapter")
    problems = _source_input(p, ctx)
    if problems:
        raise Fails(problems[0])
    assumptions: list[str] = []
    matrix_form = ev.get("form") == "matrix" or "B" in ev
    file_data = None
    replayed = None
    if adapter == "matrix-file":
        file_data, assumptions = _file(p, ctx)
    elif adapter == "memory":
        if src != "memory" or sha is not None:
            raise Fails("a kernel built in memory is named 'memory', with no sha256")
    else:
        if sha is None and adapter != "construction":
            raise Fails("only a construction or data in memory is named without a sha256")
        fs = ev.get("features_sha256")
        if not isinstance(fs, dict):
            raise Fails("an extraction's claim carries its features' sha256")
        if ctx.replays is None:
            assumptions = [f"extraction:{src}"]
        else:
            r = ctx.replays.results.get(job_key(p, True, ctx.cert, ctx.base))
            said = str((r or {}).get("phi_q", ""))
            if r is not None and "error" not in r and said.startswith("differs"):
                # the replay built the head the config gives and it is not the sentence's
                # (stated arguments, normalization, dtype): a failure, not an assumption
                raise Fails(f"extraction replay of {src}: {said[:200]}")
            if r is None or "error" in r or not r.get("features_file"):
                why = (r or {}).get("error", "not replayed")
                assumptions = [f"extraction:{src} ({why})"]
            else:
                replayed = read_features_file(r["features_file"])
                _check_hash(fs, *replayed, "the replayed features")
    if claim["kind"] == "numerical_rank":
        return _float_matrix(ev, file_data), assumptions
    if matrix_form:
        if "B" in ev:
            raise Fails("a code_rank claim with a stated B (trusted) is not re-derived here")
        scale, shape = ev.get("scale"), ev.get("shape")
        embedded = int_rows(ev["matrix"], "evidence.matrix") if "matrix" in ev else None
        if file_data is not None:
            if "matrix" not in file_data:
                raise Fails("the source holds features, the claim a matrix")
            N = kernels.unscaled(file_data["matrix"], scale)
            if embedded is not None and embedded != N:
                raise Fails("the embedded matrix is not the source file's matrix")
        elif embedded is not None:
            N = embedded
        else:
            raise Fails("the matrix is neither embedded nor present as its source file")
        if shape != [len(N), len(N[0])]:
            raise Fails(f"evidence.shape {shape!r:.30} is not the matrix's {len(N)} x {len(N[0])}")
        if kernels.matrix_sha256(N, scale) != ev.get("matrix_sha256"):
            raise Fails("matrix_sha256 is not the hash of the scale and the matrix")
        return Kernel(matrix=kernels.scaled(N, scale)), assumptions
    fs = ev.get("features_sha256")
    embedded_f = _embedded_features(ev, ctx)
    if embedded_f is not None:
        _check_hash(fs, *embedded_f, "the embedded features")
    if file_data is not None:
        if "phi_q" not in file_data:
            raise Fails("the source holds a matrix, the claim features")
        fq_, fk_ = ([[Fraction(x) for x in r] for r in file_data[s]] for s in ("phi_q", "phi_k"))
        _check_hash(fs, fq_, fk_, "the source file's features")
        if fs["dtype"] != file_data["dtype"]:           # hashed as what the file holds, not as stated
            raise Fails(f"features_sha256.dtype {fs['dtype']!r:.20} is not the source file's "
                        f"{file_data['dtype'] or 'two dtypes'}")
        return Kernel(phi_q=fq_, phi_k=fk_), assumptions
    data = replayed or embedded_f
    if data is None:
        trusted = ev.get("trusted")
        if isinstance(trusted, list) and trusted:
            return Kernel(), assumptions + [f"trusted:{claim['kind']}:{','.join(map(str, trusted))}"]
        raise Fails("the features are neither embedded, nor in a source file, nor replayed")
    return Kernel(phi_q=data[0], phi_k=data[1]), assumptions


_CUBE = re.compile(r"cube:(\d{1,3})")
_VOCAB = re.compile(r"vocab:(\d{1,12})")
_POSITIONS = re.compile(r"positions:(\d{1,9})x(\d{1,9})")
_PROBE = re.compile(r"random:(\d{1,9}),(\d{1,9}),(\d{1,19})")


def _tokens(claim: Mapping[str, Any], rows: int, inputs: Mapping[str, Any] | None = None
            ) -> tuple[list[list[int]] | None, int | None, list[str]]:
    """``(token list or None, cube m or None, assumptions)``; the token set bound to the
    kernel's ``rows``. ``positions:SxT`` (the inputs to a layer at every position of S
    sequences of T ids): S T rows, the sequences the seeded probe of that S and T or a file
    among the certificate's ``inputs``; the ids themselves are re-derived by the replay
    (their content hash against ``sequences_sha256``), whose features these rows are."""
    p, ev = claim["parameters"], claim["evidence"]
    ts = p.get("token_set")
    if not isinstance(ts, str):
        raise Fails("parameters.token_set must be a string")
    emb = ev.get("tokens")
    toks = None
    if emb is not None:
        if not isinstance(emb, list) or not all(isinstance(t, str) and t and not set(t) - {"0", "1"}
                                                for t in emb) or len({len(t) for t in emb}) > 1:
            raise Fails("evidence.tokens must be 0/1 strings of one length")
        if len(emb) != rows:
            raise Fails(f"{len(emb)} tokens are embedded for a kernel of {rows} rows")
        if p.get("tokens_sha256") is not None and canonical_sha256(emb) != p.get("tokens_sha256"):
            raise Fails("parameters.tokens_sha256 is not the hash of the embedded tokens")
        toks = [[int(c) for c in t] for t in emb]
    m = _CUBE.fullmatch(ts)
    if m:
        if rows != 1 << int(m.group(1)):
            raise Fails(f"token set {ts} has {1 << int(m.group(1))} tokens, the kernel {rows} rows")
        return toks, int(m.group(1)), []
    pos = _POSITIONS.fullmatch(ts)
    if pos:
        S, T = int(pos.group(1)), int(pos.group(2))
        if rows != S * T:
            raise Fails(f"token set {ts}: {S * T} positions, the kernel has {rows} rows")
        seqs, probe = p.get("sequences"), _PROBE.fullmatch(str(p.get("sequences")))
        if not isinstance(seqs, str) or not isinstance(p.get("sequences_sha256"), str):
            raise Fails("a positions token set names its sequences and their sha256")
        if probe is not None and (int(probe.group(1)), int(probe.group(2))) != (S, T):
            raise Fails(f"the probe {seqs:.40} is not {S} sequences of {T} ids")
        if probe is None and not isinstance((inputs or {}).get(seqs), str):
            raise Fails(f"the sequences file {seqs:.60} is not among the certificate's inputs")
        return None, None, []
    v = _VOCAB.fullmatch(ts)
    if v:
        if rows != int(v.group(1)):
            raise Fails(f"token set {ts}, but the kernel has {rows} rows")
        return toks, None, []
    if ts == "index":
        return toks, None, []
    if ts == "family:paper-5.1":
        if rows != PAPER51_TOKENS[0] or p.get("tokens_sha256") not in (None, PAPER51_TOKENS[1]):
            raise Fails("the kernel's tokens are not paper-5.1's 41 tokens (pinned hash)")
        if toks is not None and canonical_sha256(ev["tokens"]) != PAPER51_TOKENS[1]:
            raise Fails("the embedded tokens are not paper-5.1's")
        return toks, None, []
    if ts.startswith("family:") and is_builtin(ts[7:]):        # multilevel-..., ood-...
        built, problems, assume = builtin_tokens(ts[7:])
        if problems:
            raise Fails(problems[0])
        if built is None:                                         # beyond the rebuild's limits
            return toks, None, assume
        if rows != len(built) or p.get("tokens_sha256") not in (None, canonical_sha256(built)):
            raise Fails(f"the kernel's tokens are not {ts[7:]}'s {len(built)} tokens (rebuilt)")
        if emb is not None and emb != built:
            raise Fails(f"the embedded tokens are not {ts[7:]}'s")
        return [[int(c) for c in t] for t in built], None, []
    if ts == "tokens" or ts.startswith("family:"):
        if toks is None:
            sha = p.get("tokens_sha256")
            if rows > TRUSTED_MIN_ENTRIES and isinstance(sha, str):
                return None, None, [f"tokens:{sha[:16]}"]
            raise Fails("the explicit token list is not embedded")
        return toks, None, []
    raise Fails(f"token set {ts!r:.40} is not cube:M, family:NAME, vocab:N, positions:SxT, tokens or index")


def _kernel_claim(claim: Mapping[str, Any], ctx: Context) -> tuple[list[str], list[str]]:
    K, assumptions = _kernel(claim, ctx)
    kind, p, ev = claim["kind"], claim["parameters"], claim["evidence"]
    if K.phi_q is None and K.matrix is None:          # trusted summaries of data not at hand
        return _trusted(claim, ctx), assumptions
    toks, cube_m, assume = _tokens(claim, K.rows, ctx.inputs)
    assumptions += assume
    problems = []
    if "layer" in p or "head" in p:          # one head of a model: the adapter (replayed) names it
        if not str(p.get("adapter")).endswith(f" layer {p.get('layer')} head {p.get('head')}"):
            problems.append(f"parameters layer {p.get('layer')!r:.10}, head {p.get('head')!r:.10} are not "
                            "the ones the adapter names ('... layer L head H')")
    if "normalized" in p and p["normalized"] is not False:     # alpha is the same either way
        problems.append("parameters.normalized is present only as false (a head without a denominator)")
    if "num_tokens" in p and p["num_tokens"] != K.rows:
        problems.append(f"parameters.num_tokens is {p['num_tokens']!r:.20}, the kernel has {K.rows} rows")
    if "num_tokens" in ev and ev["num_tokens"] != K.rows:
        problems.append(f"evidence.num_tokens is {ev['num_tokens']!r:.20}, the kernel has {K.rows} rows")
    if K.phi_q is not None:
        r = len(K.phi_q[0])
        if "r" in ev and ev["r"] != r:
            problems.append(f"evidence.r is {ev['r']!r:.20}, the features have {r} columns")
        if kind == "exact_rank" and (p.get("shape") != [K.rows, K.rows] or p.get("form") != "factor"
                                     or p.get("dtype") != ev["features_sha256"].get("dtype")):
            problems.append("parameters shape, form and dtype are not the features' [K, K], factor, dtype")
        try:
            stated = _stated_grams(claim, ctx)
        except Fails as exc:
            return [str(exc)], assumptions
        if stated is not None:
            problems += _grams(stated, K)
    elif kind == "exact_rank" and (p.get("shape") != [K.rows, K.cols] or p.get("form") != "matrix"):
        problems.append("parameters shape and form are not the matrix's")
    if problems:
        return problems, assumptions
    if kind == "exact_rank":
        return kernels.exact_rank(claim, K), assumptions
    if kind == "eps_rank":
        return kernels.eps_rank(claim, K), assumptions
    if kind == "numerical_rank":
        return kernels.numerical_rank(claim, K), assumptions
    if kind == "nonnegative":
        return kernels.nonnegative(claim, K), assumptions
    return kernels.code_rank(claim, K, toks, cube_m), assumptions


def _unpack(v: Any, what: str) -> Any:
    """A Gram as stated: JSON rows as they are, or a packed matrix (``packed: int-le``) read
    into rows: ``shape`` entries of ``bytes`` little-endian two's-complement bytes each, in
    canonical base64 (the format's rules, certify/checkers/fields.py PACKED_INTS)."""
    if not isinstance(v, dict):
        return v
    import base64
    import binascii
    if sorted(v) != ["base64", "bytes", "packed", "shape"] or v["packed"] != "int-le":
        raise Fails(f"{what}: not a packed integer matrix")
    w, dims, text = v["bytes"], v["shape"], v["base64"]
    if not (isinstance(dims, list) and len(dims) == 2 and isinstance(text, str)):
        raise Fails(f"{what}: packed shape or base64 malformed")
    rows, cols, w = whole(dims[0], f"{what} rows", 1), whole(dims[1], f"{what} columns", 1), whole(w, what, 1)
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise Fails(f"{what}: packed base64 does not decode") from None
    if len(data) != rows * cols * w or base64.b64encode(data).decode("ascii") != text:
        raise Fails(f"{what}: packed base64 is not the one encoding of {rows} x {cols} entries of {w} bytes")
    out = []
    for i in range(rows):
        row = data[i * cols * w:(i + 1) * cols * w]
        out.append([int.from_bytes(row[j * w:(j + 1) * w], "little", signed=True) for j in range(cols)])
    return out


_GRAM_KEYS = ("gram_q", "gram_q_exponent", "gram_k", "gram_k_exponent")


def _stated_grams(claim: Mapping[str, Any], ctx: Context) -> dict[str, Any] | None:
    """The Grams the claim states (packed ones as rows), or those of the claim its
    ``grams_claim`` names (an eps-rank claim naming another exact-rank factor claim of the
    certificate, stating its Grams, on the same features_sha256, num_tokens and r); None
    when it states none."""
    ev = claim["evidence"]
    if "grams_claim" in ev:
        i = whole(ev["grams_claim"], "grams_claim", 0)
        claims = ctx.cert.get("claims")
        other = claims[i] if isinstance(claims, list) and i < len(claims) else None
        oev = other.get("evidence") if isinstance(other, dict) else None
        if claim.get("kind") != "eps_rank" or other is claim or any(k in ev for k in _GRAM_KEYS) \
                or not isinstance(other, dict) or not isinstance(oev, dict) or other.get("kind") != "exact_rank" \
                or oev.get("form") != "factor" or "grams_claim" in oev \
                or not all(k in oev for k in _GRAM_KEYS) \
                or any(oev.get(k) != ev.get(k) for k in ("features_sha256", "num_tokens", "r")):
            raise Fails(f"grams_claim {i} is not another exact_rank factor claim stating the Grams "
                        "of the same features")
        ev = oev
    if "gram_q" not in ev:
        return None
    return {k: _unpack(ev[k], k) for k in _GRAM_KEYS}


def _grams(ev: Mapping[str, Any], K: Kernel) -> list[str]:
    """The stated feature Grams ``gram_s 2^e = Phi_s^T Phi_s``, recomputed exactly."""
    from certify.reference.exact import fmpz, integer_form
    for side, rows in (("q", K.phi_q), ("k", K.phi_k)):
        N, s = integer_form(rows or [])
        A = fmpz(N)
        G = A.transpose() * A
        stated = int_rows(ev[f"gram_{side}"], f"gram_{side}")
        e = Fraction(2) ** whole(ev[f"gram_{side}_exponent"], f"gram_{side}_exponent")
        if len(stated) != G.nrows() or any(
                Fraction(stated[i][j]) * e != int(G[i, j]) * s * s
                for i in range(G.nrows()) for j in range(G.ncols())):
            return [f"gram_{side} 2^exponent is not the Gram matrix of the features"]
    return []


def _trusted(claim: Mapping[str, Any], ctx: Context) -> list[str]:
    """Summaries taken as stated: only for data too large to embed (token count x width
    from the token set and the stated Grams)."""
    p = claim["parameters"]
    ts = p.get("token_set")
    m = _CUBE.fullmatch(ts) if isinstance(ts, str) else None
    k = (1 << int(m.group(1))) if m else (p.get("num_tokens") if isinstance(p.get("num_tokens"), int) else None)
    try:
        g = (_stated_grams(claim, ctx) or {}).get("gram_q")
    except Fails as exc:
        return [str(exc)]
    width = len(g) if isinstance(g, list) and g else 1
    if k is None or k * width < TRUSTED_MIN_ENTRIES:
        return [f"trusted summaries of data with {k} x {width} entries: below {TRUSTED_MIN_ENTRIES} "
                "entries the data must be embedded"]
    return []
