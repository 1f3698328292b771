"""Finite input families: the hard instances the paper's proofs and experiments use.

A :class:`Family` is a finite set of equal-length input sequences over a set
of distinct Boolean tokens, with the positions whose error is checked
("scored") and the Min-IP targets. Builders:

* :func:`chain_family` -- the Thm 5 / Lemma 3 chain family of any code;
* :func:`paper51_family` -- the Sec. 5.1 family (``"paper-5.1"``);
* :func:`multilevel_spec` -- the Sec. 4 multilevel family, assignments lazily;
* :func:`ood_families` -- the Sec. 5.2 train / joint-OOD test pools.

The ``certify families`` command is :mod:`certify.cli.families`.

File format (``.json``; ``.npz`` holds the same fields as arrays):
``{"format": "certify-attention/family/1", "name", "m", "n",
"tokens": ["0101..." per token, coordinate 0 first], "inputs": [[token indices]],
"scored": [[0/1]], "targets": [[ints]], "params": {...}, "words": [bitstrings]
or null, "jumps": [[11 ints]] or null, "sha256"}``. Loading re-derives the
targets and the hash and rejects a file where either disagrees.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from certify.core import codes as _codes
from certify.core.cube import check_binary, targets_from_indices
from certify.core.errors import InputError
from certify.core.files import atomic_write_bytes, atomic_write_text, sha256_bytes

FORMAT = "certify-attention/family/1"


#: Columns of ``Family.jumps``. ``word_s``/``word_u`` index ``Family.words``;
#: ``x, y, z`` index tokens (query, lower-overlap key, higher-overlap key);
#: ``t = <x, y> < u = <x, z>``; ``input_y/z/m`` index the Lemma 3 inputs
#: ``Y = (x, y^(n-1))``, ``Z = (x, z^(n-1))``, ``M = (x, y, z^(n-2))``.
JUMP_COLUMNS = ("word_s", "word_u", "step", "x", "y", "z", "t", "u",
                "input_y", "input_z", "input_m")


@dataclass(frozen=True, eq=False)
class Family:
    name: str
    tokens: np.ndarray            # (K, m) uint8, distinct rows
    inputs: np.ndarray            # (I, n) int64 indices into tokens
    scored: np.ndarray            # (I, n) bool
    targets: np.ndarray           # (I, n) int64 Min-IP targets
    params: Mapping[str, Any] = field(default_factory=dict)
    words: np.ndarray | None = None   # (W, M) uint8
    jumps: np.ndarray | None = None   # (J, 11) int64

    def __post_init__(self) -> None:
        validate(self)

    @property
    def m(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def n(self) -> int:
        return int(self.inputs.shape[1])

    @cached_property
    def sha256(self) -> str:
        """Hash of the canonical JSON form without its own hash."""
        return sha256_bytes(_canonical(self._body()).encode())

    def query_tokens(self) -> np.ndarray:
        """Sorted token indices that occur at scored positions."""
        return np.unique(self.inputs[self.scored])

    def counts(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "m": self.m,
            "n": self.n,
            "words": None if self.words is None else int(self.words.shape[0]),
            "tokens": int(self.tokens.shape[0]),
            "inputs": int(self.inputs.shape[0]),
            "scored_positions": int(self.scored.sum()),
            "query_tokens": int(self.query_tokens().size),
            "jumps": 0 if self.jumps is None else int(self.jumps.shape[0]),
            "sha256": self.sha256,
        }

    # ------------------------------------------------------------ files
    def _body(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "m": self.m,
            "n": self.n,
            "tokens": [_bits(t) for t in self.tokens],
            "inputs": self.inputs.tolist(),
            "scored": self.scored.astype(int).tolist(),
            "targets": self.targets.tolist(),
            "params": dict(self.params),
            "words": None if self.words is None else [_bits(w) for w in self.words],
            "jumps": None if self.jumps is None else self.jumps.tolist(),
        }

    def to_json(self) -> dict[str, Any]:
        body = self._body()
        body["sha256"] = self.sha256
        return body

    @classmethod
    def from_json(cls, obj: Any) -> "Family":
        if not isinstance(obj, Mapping) or obj.get("format") != FORMAT:
            raise InputError(f"not a family file (format must be {FORMAT!r})")
        known = {"format", "name", "m", "n", "tokens", "inputs", "scored", "targets",
                 "params", "words", "jumps", "sha256"}
        extra = set(obj) - known
        if extra:
            raise InputError(f"family file has unknown keys: {sorted(extra)}")
        try:
            tokens = np.array([_unbits(s) for s in obj["tokens"]], dtype=np.uint8)
            inputs = _int_array(obj["inputs"], "inputs", 2)
            scored = _int_array(obj["scored"], "scored", 2).astype(bool)
            targets = _int_array(obj["targets"], "targets", 2)
            words = None if obj.get("words") is None else np.array(
                [_unbits(s) for s in obj["words"]], dtype=np.uint8)
            jumps = None if obj.get("jumps") is None else _int_array(obj["jumps"], "jumps", 2)
            fam = cls(name=str(obj["name"]), tokens=tokens, inputs=inputs, scored=scored,
                      targets=targets, params=dict(obj.get("params") or {}),
                      words=words, jumps=jumps)
        except KeyError as exc:
            raise InputError(f"family file lacks the field {exc.args[0]!r}") from None
        if tokens.ndim != 2 or int(obj.get("m", -1)) != fam.m or int(obj.get("n", -1)) != fam.n:
            raise InputError("family file: m or n disagrees with the tokens or inputs")
        if "sha256" in obj and obj["sha256"] != fam.sha256:
            raise InputError("family file: sha256 does not match its contents")
        return fam

    def save(self, path: str | os.PathLike) -> None:
        """Write ``.json`` or ``.npz`` atomically."""
        path = Path(path)
        if path.suffix == ".json":
            atomic_write_text(path, json.dumps(self.to_json()) + "\n")
        elif path.suffix == ".npz":
            import io
            buf = io.BytesIO()
            arrays = {"tokens": self.tokens, "inputs": self.inputs,
                      "scored": self.scored, "targets": self.targets,
                      "meta": np.array(json.dumps({"format": FORMAT, "name": self.name,
                                                   "params": dict(self.params),
                                                   "sha256": self.sha256}))}
            if self.words is not None:
                arrays["words"] = self.words
            if self.jumps is not None:
                arrays["jumps"] = self.jumps
            np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
            atomic_write_bytes(path, buf.getvalue())
        else:
            raise InputError(f"family files end in .json or .npz, got {path.name!r}")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Family":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"no family file at {path}")
        if path.suffix == ".json":
            try:
                obj = json.loads(path.read_text())
            except (ValueError, RecursionError) as exc:   # bad JSON, bad UTF-8, over-long integers
                raise InputError(f"family file {path} is not valid JSON: "
                                 f"{' '.join(str(exc).split())[:100]}") from None
            return cls.from_json(obj)
        if path.suffix == ".npz":
            try:
                with np.load(path, allow_pickle=False) as z:
                    data = {k: z[k] for k in z.files}
                meta = json.loads(str(data.pop("meta")))
            except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
                why = " ".join(str(exc).split())[:120] or type(exc).__name__
                raise InputError(f"family file {path} is corrupt or empty ({why})") from None
            if not isinstance(meta, dict):
                raise InputError(f"family file {path}: metadata is not a JSON object")
            if meta.get("format") != FORMAT:
                raise InputError(f"not a family file (format must be {FORMAT!r})")
            try:
                fam = cls(name=meta["name"], tokens=data["tokens"], inputs=data["inputs"],
                          scored=data["scored"], targets=data["targets"],
                          params=meta.get("params", {}), words=data.get("words"),
                          jumps=data.get("jumps"))
            except KeyError as exc:
                raise InputError(f"family file lacks the field {exc.args[0]!r}") from None
            if meta.get("sha256") != fam.sha256:
                raise InputError("family file: sha256 does not match its contents")
            return fam
        raise InputError(f"family files end in .json or .npz, got {path.name!r}")


def validate(f: Family) -> None:
    """Check shapes, binary distinct tokens, index ranges and that every target is
    the Min-IP target of its input. Normalises dtypes in place (frozen-safe)."""
    tokens = check_binary(f.tokens, "family tokens")
    if tokens.ndim != 2:
        raise InputError(f"family tokens must be (K, m), got shape {tokens.shape}")
    if np.unique(tokens, axis=0).shape[0] != tokens.shape[0]:
        raise InputError("family tokens are not distinct")
    inputs = np.asarray(f.inputs)
    if inputs.ndim != 2 or inputs.shape[0] == 0 or inputs.shape[1] == 0:
        raise InputError(f"family inputs must be a non-empty (I, n) array, got {inputs.shape}")
    if not np.issubdtype(inputs.dtype, np.integer):
        raise InputError("family inputs must be token indices (integers)")
    inputs = inputs.astype(np.int64)
    if inputs.min() < 0 or inputs.max() >= tokens.shape[0]:
        raise InputError("family inputs index tokens out of range")
    scored = np.asarray(f.scored)
    targets = np.asarray(f.targets)
    if scored.shape != inputs.shape or targets.shape != inputs.shape:
        raise InputError("family scored/targets must have the shape of inputs")
    if not scored.any():
        raise InputError("family has no scored position")
    expected = targets_from_indices(tokens, inputs)
    if not np.array_equal(expected, targets):
        i, j = np.argwhere(expected != targets)[0]
        raise InputError(f"family input {i} position {j}: target {int(targets[i, j])} is not "
                         f"the Min-IP target {int(expected[i, j])}")
    object.__setattr__(f, "tokens", tokens)
    object.__setattr__(f, "inputs", inputs)
    object.__setattr__(f, "scored", scored.astype(bool))
    object.__setattr__(f, "targets", targets.astype(np.int64))
    if f.words is not None:
        object.__setattr__(f, "words", _codes.as_words(f.words))
    if f.jumps is not None:
        jumps = np.asarray(f.jumps, dtype=np.int64)
        if jumps.ndim != 2 or jumps.shape[1] != len(JUMP_COLUMNS):
            raise InputError(f"family jumps must be (J, {len(JUMP_COLUMNS)})")
        object.__setattr__(f, "jumps", jumps)
    for a in (f.tokens, f.inputs, f.scored, f.targets, f.words, f.jumps):
        if a is not None:
            a.setflags(write=False)


def _bits(row: np.ndarray) -> str:
    return "".join("1" if v else "0" for v in row)


def _unbits(s: Any) -> list[int]:
    if not isinstance(s, str) or not s or set(s) - {"0", "1"}:
        raise InputError(f"a token must be a string of 0s and 1s, got {s!r}")
    return [int(c) for c in s]


def _int_array(x: Any, what: str, ndim: int) -> np.ndarray:
    try:
        arr = np.array(x)
    except ValueError:
        raise InputError(f"family {what} is ragged") from None
    if arr.ndim != ndim or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise InputError(f"family {what} must be a {ndim}-d integer array")
    return arr.astype(np.int64)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
