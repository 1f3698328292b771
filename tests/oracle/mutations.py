"""Mutations of a certificate: every field of every claim (and of the certificate around
them) deleted, nulled, retyped, moved by +-1, written as a float or (0 and 1) as a boolean,
swapped with a sibling or edited; and adversarial numbers written into a claim's source file.

A mutation is a pure function of the certificate (the containers along the changed path are
copied, the rest shared); one that leaves the certificate's JSON unchanged is dropped
(:func:`sites`). ``meaning(path)`` says whether
the field is part of what a certificate asserts (a claim's kind, statement, verdict,
parameters, the evidence fields that state its result, the inputs binding its sources): a
changed meaning must never verify at exit 0. Elsewhere (diagnostics such as ``created`` or a
claim's ``info``, and witnesses, which another valid witness may replace) only the two
checkers' agreement is required.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

Path_ = tuple[Any, ...]

#: evidence fields that state a claim's result or bind its object (a witness, by contrast, may
#: be replaced by another valid witness: a slightly moved ``witness_y`` still proves the claim,
#: and an embedded matrix may be dropped where its source file is present and re-read)
ASSERTED = ("rank_lower", "rank_upper", "k", "exact", "eps", "shape", "scale", "matrix_sha256",
            "features_sha256", "num_tokens", "r", "upper_witness", "form", "method",
            "k_lower", "k_upper", "tol_lower", "tol_upper", "values_sha256")


def meaning(path: Path_) -> bool:
    """Whether changing the field at ``path`` changes what the certificate asserts (then it
    must not verify at exit 0)."""
    if not path or path[0] in ("schema", "renderer", "inputs"):
        return True
    if path[0] != "claims" or len(path) < 3:
        return False
    if path[2] in ("kind", "verdict", "statement", "parameters"):
        return True
    return path[2] == "evidence" and len(path) >= 4 and path[3] in ASSERTED


def documented_difference(path: Path_) -> bool:
    """A field only the fast checker reads (docs/trust.md, "The reviewer's slow path"): a claim's
    sentence (the reference compares what it is rendered from) and the evidence's witnesses
    (the reference re-derives the claim from the whole matrix): an edit there fails the fast
    path and may pass the reference."""
    return len(path) >= 3 and path[0] == "claims" and (
        path[2] == "statement" or path[2] == "evidence" and not meaning(path))


def leaves(obj: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, value) of a JSON value, containers included (depth first)."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, path + (i,))


def get(obj: Any, path: Path_) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _edit_string(s: str) -> str:
    hexes = "0123456789abcdef"
    if s and s[-1] in hexes:                  # a hash: one hex digit changed
        return s[:-1] + hexes[(hexes.index(s[-1]) + 1) % 16]
    for i, ch in enumerate(s):                # a number in text: one digit moved
        if ch.isdigit():
            return s[:i] + str((int(ch) + 1) % 10) + s[i + 1:]
    return s + "x"


def _retype(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(v)
    if isinstance(v, str):
        return int(v) if v.lstrip("-").isdigit() and len(v) < 30 else [v]
    if isinstance(v, list):
        return {str(i): x for i, x in enumerate(v)}
    if isinstance(v, dict):
        return list(v.values())
    return 0                                  # None -> 0


OPS = ("delete", "null", "retype", "plus1", "minus1", "swap", "edit", "float", "bool")


def apply(cert: dict, path: Path_, op: str) -> dict | None:
    """The certificate with ``op`` applied at ``path``; None when the op does not apply there."""
    if not path:
        return None
    c = parent = copy.copy(cert)                # only the containers along the path are copied
    for p in path[:-1]:
        parent[p] = copy.copy(parent[p])
        parent = parent[p]
    key = path[-1]
    v = parent[key]
    if op == "delete":
        del parent[key]
    elif op == "null":
        parent[key] = None
    elif op == "retype":
        parent[key] = _retype(v)
    elif op in ("plus1", "minus1"):
        if isinstance(v, bool) or not isinstance(v, int):
            return None
        parent[key] = v + (1 if op == "plus1" else -1)
    elif op == "float":
        if isinstance(v, bool) or not isinstance(v, int):
            return None
        if abs(v) >= 2 ** 1000:
            return None
        parent[key] = float(v) if abs(v) < 2 ** 53 else float(v) * (1 + 2 ** -52)
    elif op == "bool":                         # 0 / 1 written as false / true (Python: equal)
        if isinstance(v, bool) or v not in (0, 1) or not isinstance(v, int):
            return None
        parent[key] = bool(v)
    elif op == "swap":
        keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
        others = [k for k in keys if k != key and parent[k] != v]
        if not others:
            return None
        o = others[0]
        parent[key], parent[o] = parent[o], v
    elif op == "edit":
        if not isinstance(v, str):
            return None
        parent[key] = _edit_string(v)
    else:
        raise ValueError(op)
    return c


def canonical(c: Any) -> str:
    return json.dumps(c, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Site:
    path: Path_
    op: str

    def changes_meaning(self, cert: dict) -> bool:
        """:func:`meaning` of the path, except a rational written as a string turned into the
        same integer (``"2"`` -> ``2``: the same number)."""
        if self.op == "retype" and isinstance(v := get(cert, self.path), str) and v.lstrip("-").isdigit():
            return False
        return meaning(self.path)


def sites(cert: dict, max_list: int = 4) -> list[Site]:
    """Every (path, op) that changes ``cert``; in long lists (matrices, features) only the
    first ``max_list`` items of each list are visited (their kind of entry is the same)."""
    out = []
    for path, value in leaves(cert):
        if any(isinstance(p, int) and p >= max_list for p in path):
            continue
        before = canonical(value)
        for op in OPS:
            m = apply(cert, path, op)
            if m is None:
                continue
            parent = get(m, path[:-1])
            if op in ("delete", "swap") or canonical(parent[path[-1]]) != before:
                out.append(Site(path, op))
    return out


# ---------------------------------------------------------------- adversarial source numbers

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

#: name -> function of the source array, giving the array written in its place
ADVERSARIAL = {
    "int64-min": lambda a: _put(a.astype(np.int64) if a.dtype.kind != "f" else a, I64_MIN),
    "int64-max": lambda a: _put(a.astype(np.int64) if a.dtype.kind != "f" else a, I64_MAX),
    "2^53+1-int": lambda a: _put(a.astype(np.int64), 2 ** 53 + 1),
    "2^53+1-float": lambda a: _put(a.astype(np.float64), 2.0 ** 53 + 2),
    "negative-zero": lambda a: _put(a.astype(np.float64), -0.0),
    "subnormal": lambda a: _put(a.astype(np.float64), 5e-324),
    "nan": lambda a: _put(a.astype(np.float64), np.nan),
    "inf": lambda a: _put(a.astype(np.float64), np.inf),
    "longdouble": lambda a: a.astype(np.longdouble),
    "longdouble-tiny": lambda a: _put(a.astype(np.longdouble), np.longdouble(1) + np.longdouble(2) ** -60),
    "float16": lambda a: a.astype(np.float16),
    "complex": lambda a: a.astype(np.complex128),
    "datetime": lambda a: a.astype(np.int64).astype("datetime64[s]"),
    "str": lambda a: a.astype(str),
    "fortran": lambda a: np.asfortranarray(a),
    "big-endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
    "reshaped": lambda a: a.reshape(a.shape[::-1]) if a.ndim == 2 and a.shape[0] != a.shape[1] else a.T.copy(),
    "uint64-big": lambda a: _put(np.abs(a.astype(np.int64)).astype(np.uint64), (1 << 64) - 1),
    "empty": lambda a: a[:0],
    "bool": lambda a: a != 0,
}


def _put(a: np.ndarray, v: Any) -> np.ndarray:
    a = a.copy()
    a.flat[0] = v
    return a
