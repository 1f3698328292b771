"""Families by name (``paper-5.1``, ``ood-M-q-n-split``, ``multilevel-M-s-h-q``)
or file, the size limits of their parameters, and code files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from certify.core import codes as _codes
from certify.core.errors import InputError
from certify.core.families.chain import paper51_family
from certify.core.families.family import Family, _unbits
from certify.core.families.multilevel import multilevel_spec
from certify.core.families.ood import ood_families


def builtin_names() -> list[str]:
    return ["paper-5.1", "ood-M-q-n-train|test (e.g. ood-6-4-8-test)",
            "multilevel-M-s-h-q (e.g. multilevel-12-2-6-4)"]


def load_family(name_or_path: str) -> Family:
    """A built-in family by name, or a family file (``.json`` / ``.npz``)."""
    spec = str(name_or_path)
    if spec == "paper-5.1":
        return paper51_family()
    parts = spec.split("-")
    if parts[0] == "ood" and len(parts) == 5 and parts[4] in ("train", "test"):
        try:
            M, q, n = (int(p) for p in parts[1:4] if len(p) < 12)
        except ValueError:
            raise InputError(f"bad OOD family name {spec!r}") from None
        check_family_size(M=M, q=q)
        train, test = ood_families(M, q, n)
        return train if parts[4] == "train" else test
    if parts[0] == "multilevel" and len(parts) == 5 and not os.path.exists(spec):
        try:
            M, s, h, q = (int(p) for p in parts[1:] if len(p) < 12)
        except ValueError:
            raise InputError(f"bad multilevel family name {spec!r}") from None
        check_family_size(M=M, q=q, s=s, h=h)
        return multilevel_spec(M, s, h, q).family()
    if os.path.exists(spec):
        return Family.load(spec)
    raise InputError(f"unknown family {spec!r}: not a file and not one of {', '.join(builtin_names())}")


def check_family_size(**params: int | None) -> None:
    """Family parameters against the documented limits (certify.limits)."""
    from certify.core import limits
    for nm, v in params.items():
        if v is None:
            continue
        key = {"M": "family_m", "m": "family_m", "size": "family_size", "n": "chain_n"}.get(nm, "family_q")
        limits.check_int(key, int(v), f"family parameter {nm}", low=0)


def load_code(path: str) -> np.ndarray:
    """A code file: JSON list of bit strings (``["1100", ...]``, or ``{"words": [...]}``),
    ``.npy`` (a 0/1 array) or ``.txt`` (one bit string per line)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no code file at {path}")
    try:
        if p.suffix == ".npy":
            return _codes.as_words(np.load(p, allow_pickle=False))
        text = p.read_text()
        rows = json.loads(text) if p.suffix == ".json" else text.split()
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"code file {path} is unreadable: {exc}") from None
    if isinstance(rows, dict) and "words" in rows:      # also a family file's words
        rows = rows["words"]
    if not isinstance(rows, list) or not rows:
        raise InputError(f"code file {path} must list the code words")
    words = [_unbits(r) for r in rows]
    if len({len(w) for w in words}) != 1:
        raise InputError(f"code file {path}: words have different lengths")
    return _codes.as_words(words)
