"""Token sequences for ``certify checkpoint MODEL --sequences SPEC``: read, checked, hashed.

``SPEC`` is a file of token ids -- ``.npy`` (an integer array ``(S, T)``) or ``.jsonl``
(one JSON list of ids per line, every line of one length T) -- or the seeded probe
``random:S,T,SEED`` for users without text: ``S`` sequences of ``T`` ids, id ``(s, t)``
the first 8 bytes of ``sha256("certify-attention/probe/1 SEED s t")`` (little-endian)
modulo the vocabulary size (the same ids on every machine and every numpy; a probe, not
text, and named as such in every sentence).

Everything is checked before any work, each failure one line (exit 2): an unknown
suffix, an empty file, a ragged or non-2-D array, floats or booleans, an id outside the
vocabulary, more than ``sequence_tokens`` ids (:mod:`certify.core.limits`; an ``.npy``
is refused from its header, a ``.jsonl`` as soon as the count passes it).

The sequences are bound by their content (:func:`content_sha256`: the ids as ``int64``
little-endian, row-major, after a header naming ``S x T``), so a file and its ``.jsonl``
twin name the same token set; a file is also an input of the certificate (by its
sha256), so that ``verify --replay-extraction`` finds it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from certify.core.errors import InputError
from certify.core.files import sha256_file
from certify.core.limits import limit

PROBE = re.compile(r"random:(\d{1,9}),(\d{1,9}),(\d{1,19})")
#: the version of the content hash and of the probe's ids
FORMAT = "certify-attention/sequences/1"


@dataclass(frozen=True)
class Sequences:
    """Token ids ``(S, T)`` (int64) with their name (the file as given, or the probe's
    ``random:S,T,SEED``), content hash and, for a file, the file's sha256."""

    ids: np.ndarray
    name: str
    sha256: str
    file_sha256: str | None = None

    @property
    def token_set(self) -> str:
        """The token set of a layer's inputs at these positions: ``positions:SxT``."""
        S, T = self.ids.shape
        return f"positions:{S}x{T}"

    @property
    def probe(self) -> bool:
        return self.file_sha256 is None


def content_sha256(ids: np.ndarray) -> str:
    """The hash that names a set of sequences (module docstring)."""
    S, T = ids.shape
    head = f"{FORMAT} {S}x{T}\n".encode()
    return hashlib.sha256(head + np.ascontiguousarray(ids, dtype="<i8").tobytes()).hexdigest()


def _count(n: int, what: str) -> None:
    cap = limit("sequence_tokens")
    if n > cap:
        raise InputError(f"--sequences {what}: {n} token ids is over the limit sequence_tokens ({cap}; "
                         f"raise it with CERTIFY_LIMIT_SEQUENCE_TOKENS)")


def probe_ids(S: int, T: int, seed: int, vocab: int) -> np.ndarray:
    """The seeded probe's ids (module docstring)."""
    out = np.empty((S, T), dtype=np.int64)
    for s in range(S):
        for t in range(T):
            d = hashlib.sha256(f"certify-attention/probe/1 {seed} {s} {t}".encode()).digest()
            out[s, t] = int.from_bytes(d[:8], "little") % vocab
    return out


def _npy(path: Path) -> np.ndarray:
    """An ``.npy`` file's integer array ``(S, T)``, its header checked before its data is read."""
    with open(path, "rb") as f:
        try:
            major, _ = np.lib.format.read_magic(f)
            shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if major == 1
                               else np.lib.format.read_array_header_2_0(f))
        except (ValueError, OSError) as exc:
            raise InputError(f"--sequences {path}: not a readable .npy file ({exc})") from None
    if dtype.kind == "O":
        raise InputError(f"--sequences {path}: an object array (ragged sequences?): give an integer array "
                         f"(S, T) of token ids")
    if dtype.kind not in "iu":
        raise InputError(f"--sequences {path}: the array holds {dtype} values; token ids are integers")
    if len(shape) != 2:
        raise InputError(f"--sequences {path}: an array of shape {tuple(shape)}; give (S, T): S sequences of "
                         f"T token ids")
    _count(int(np.prod(shape, dtype=object)), str(path))
    a = np.load(path, allow_pickle=False)
    if a.dtype == np.uint64 and a.size and int(a.max()) >= 2**63:
        raise InputError(f"--sequences {path}: a token id does not fit 64 bits")
    return a.astype(np.int64)


def _jsonl(path: Path) -> np.ndarray:
    """A ``.jsonl`` file's lines as rows of one length (blank lines skipped)."""
    rows: list[list[int]] = []
    total = 0
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise InputError(f"--sequences {path}: line {no} is not JSON") from None
            if not isinstance(row, list) or \
                    not all(isinstance(v, int) and not isinstance(v, bool) for v in row):
                raise InputError(f"--sequences {path}: line {no} is not a list of integer token ids")
            if rows and len(row) != len(rows[0]):
                raise InputError(f"--sequences {path}: line {no} has {len(row)} ids, the first "
                                 f"{len(rows[0])}: give sequences of one length")
            total += len(row)
            _count(total, str(path))
            rows.append(row)
    if not rows:
        return np.zeros((0, 0), dtype=np.int64)
    if any(v < -(2**63) or v >= 2**63 for r in rows for v in r):
        raise InputError(f"--sequences {path}: a token id does not fit 64 bits")
    return np.array(rows, dtype=np.int64)


def read_sequences(spec: str, vocab: int, path: str | None = None) -> Sequences:
    """The sequences ``spec`` names (module docstring), checked against a vocabulary of
    ``vocab`` ids. ``path``: where the file is read from when it is not ``spec`` itself
    (the replay reads the file it located by its sha256)."""
    m = PROBE.fullmatch(spec)
    if m is not None:
        S, T, seed = (int(g) for g in m.groups())
        if S < 1 or T < 1:
            raise InputError(f"--sequences {spec}: S and T must be >= 1")
        _count(S * T, spec)
        if vocab < 1:
            raise InputError(f"--sequences {spec}: the model's vocabulary is empty")
        ids = probe_ids(S, T, seed, vocab)
        return Sequences(ids, spec, content_sha256(ids))
    if spec.startswith("random:"):
        raise InputError(f"--sequences {spec[:60]}: the probe is random:S,T,SEED (three integers)")
    p = Path(path if path is not None else spec)
    if not p.is_file():
        raise InputError(f"--sequences {spec[:200]}: no such file")
    suffix = Path(spec).suffix.lower()
    if suffix == ".npy":
        ids = _npy(p)
    elif suffix == ".jsonl":
        ids = _jsonl(p)
    else:
        raise InputError(f"--sequences {spec[:200]}: give a .npy array (S, T), a .jsonl file of id lists or "
                         f"random:S,T,SEED")
    if ids.size == 0:
        raise InputError(f"--sequences {spec[:200]}: no token ids (an empty file or array)")
    bad = (ids < 0) | (ids >= vocab)
    if bad.any():
        s, t = (int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"--sequences {spec[:200]}: id {int(ids[s, t])} (sequence {s}, position {t}) is "
                         f"outside the vocabulary 0..{vocab - 1}")
    ids = ids.astype(np.int64)
    return Sequences(ids, spec, content_sha256(ids), sha256_file(p))


#: the name of the token ids ``--text`` certifies, written into the output folder beside
#: the certificate (where ``verify --replay-extraction`` finds it by its sha256)
TEXT_IDS = "sequences.jsonl"
#: bytes of text read per token id allowed (a cap before tokenizing: ``sequence_tokens`` x this)
TEXT_BYTES_PER_TOKEN = 64


@dataclass(frozen=True)
class TextSequences:
    """``--text FILE``: the sequences (named :data:`TEXT_IDS`), the ``.jsonl`` text that
    holds their ids (the file the certificate names by its sha256) and where they came
    from (recorded in the certificate's environment and the report, not certified: the
    claims are about the ids)."""

    sequences: Sequences
    jsonl: str
    provenance: dict[str, object]



def text_line(p: Mapping[str, object]) -> str:
    """A ``--text`` run's provenance (:attr:`TextSequences.provenance`) in one line."""
    return (f"token ids: {TEXT_IDS}, the text {p['text']} (sha256 {str(p['text_sha256'])[:16]}...) "
            f"tokenized by {p['tokenizer']} (sha256 {str(p['tokenizer_sha256'])[:16]}...) with the "
            f"tokenizers library {p['tokenizers']} (no special tokens added) into {p['tokens']} ids, cut into "
            f"{p['S']} sequences of {p['T']} ({p['dropped']} ids of the tail dropped)")


def text_sequences(text: str, length: int, tokenizer: Path, vocab: int) -> TextSequences:
    """The ids of the UTF-8 text file ``text`` under the model's ``tokenizer.json`` (the
    ``tokenizers`` library, no special tokens added), as one stream cut into ``S`` sequences
    of ``length`` ids (``S = N // length``; the tail dropped; one sequence of all ``N`` ids
    when ``N < length``), checked like a ``--sequences`` file (InputError, one line)."""
    p = Path(text)
    if length < 1:
        raise InputError(f"--text-length {length}: give T >= 1 (ids per sequence)")
    if not p.is_file():
        raise InputError(f"--text {text[:200]}: no such file")
    if not tokenizer.is_file():
        raise InputError(f"--text {text[:200]}: the model folder has no tokenizer.json ({tokenizer.parent}); give "
                         f"token ids with --sequences FILE.npy|FILE.jsonl instead")
    cap = limit("sequence_tokens") * TEXT_BYTES_PER_TOKEN
    size = p.stat().st_size
    if size > cap:
        raise InputError(f"--text {text[:200]}: {size} bytes is over {cap} (the limit sequence_tokens x "
                         f"{TEXT_BYTES_PER_TOKEN} bytes; raise it with CERTIFY_LIMIT_SEQUENCE_TOKENS)")
    raw = p.read_bytes()
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"--text {text[:200]}: not UTF-8 text (byte {exc.start})") from None
    try:
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(str(tokenizer))
    except ImportError:
        raise InputError("--text needs the tokenizers library (pip install tokenizers)") from None
    except Exception as exc:                 # noqa: BLE001 - the library's parse errors are its own types
        raise InputError(f"--text: {tokenizer} is not a tokenizers file ({str(exc)[:120]})") from None
    stream = tok.encode(body, add_special_tokens=False).ids
    if not stream:
        raise InputError(f"--text {text[:200]}: no tokens (an empty text)")
    _count(len(stream), text)
    T = min(length, len(stream))
    S = len(stream) // T
    ids = np.array(stream[:S * T], dtype=np.int64).reshape(S, T)
    bad = ids >= vocab
    if bad.any():
        s, t = (int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"--text {text[:200]}: the tokenizer gives id {int(ids[s, t])} (sequence {s}, position {t}), "
                         f"outside the model's vocabulary 0..{vocab - 1}")
    jsonl = "".join(json.dumps([int(v) for v in row]) + "\n" for row in ids)
    seqs = Sequences(ids, TEXT_IDS, content_sha256(ids), hashlib.sha256(jsonl.encode()).hexdigest())
    prov: dict[str, object] = {"text": text, "text_sha256": hashlib.sha256(raw).hexdigest(),
                               "tokenizer": str(tokenizer), "tokenizer_sha256": sha256_file(tokenizer),
                               "tokenizers": tokenizers.__version__, "tokens": len(stream), "S": S, "T": T,
                               "dropped": len(stream) - S * T, "ids": TEXT_IDS}
    return TextSequences(seqs, jsonl, prov)
