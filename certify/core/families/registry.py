"""Families by name (``paper-5.1``, ``ood-M-q-n-split``, ``multilevel-M-s-h-q``)
or file, the size limits of their parameters, and code files.
"""

from __future__ import annotations

import functools
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


def _ood_params(spec: str) -> tuple[int, int, int]:
    parts = spec.split("-")
    try:
        M, q, n = (int(p) for p in parts[1:4] if len(p) < 12)
    except ValueError:
        raise InputError(f"bad OOD family name {spec!r}") from None
    return M, q, n


def _multilevel_params(spec: str) -> tuple[int, int, int, int]:
    try:
        M, s, h, q = (int(p) for p in spec.split("-")[1:] if len(p) < 12)
    except ValueError:
        raise InputError(f"bad multilevel family name {spec!r}") from None
    return M, s, h, q


def _is_ood(parts: list[str]) -> bool:
    return parts[0] == "ood" and len(parts) == 5 and parts[4] in ("train", "test")


def check_ood(M: int, q: int, n: int) -> None:
    """The checks :func:`ood_families` makes before building, with its messages
    (without building the pools: a name is refused at once, never after work)."""
    from math import comb
    if n != 2 * q:
        raise InputError(f"the Sec. 5.2 family has length n = 2q, got n = {n}, q = {q}")
    if M < 2 or M % 2 or q < 1:
        raise InputError(f"need even M >= 2 and q >= 1, got M = {M}, q = {q}")
    from certify.checkers.generators import OOD_DEFAULTS, _pool_of
    total, seed = comb(M, M // 2), OOD_DEFAULTS["seed"]
    if total <= 1 << 16:
        sizes = [0, 0]
        for i in range(total):
            sizes[_pool_of(seed, 1, i)] += 1
        few = min(sizes) < q
    else:
        few = q > total // 4
    if few:
        raise InputError(f"M = {M} gives too few codewords for q = {q} in each pool")


def check_family_name(spec: str) -> None:
    """Refuse a built-in family name that :func:`load_family` would refuse, with
    the same message, without building the family (the service checks a job's
    family names this way at submission). A file name is not checked here."""
    spec = str(spec)
    if spec == "paper-5.1":
        return
    parts = spec.split("-")
    if _is_ood(parts):
        M, q, n = _ood_params(spec)
        check_family_size(M=M, q=q)
        check_ood(M, q, n)
        return
    if parts[0] == "multilevel" and len(parts) == 5:
        M, s, h, q = _multilevel_params(spec)
        check_family_size(M=M, q=q, s=s, h=h)
        multilevel_code_check(M, s, h, q)
        return
    raise InputError(f"unknown family {spec!r}: not a file and not one of {', '.join(builtin_names())}")


@functools.lru_cache(maxsize=4096)
def multilevel_code_check(M: int, s: int, h: int, q: int) -> None:
    """:func:`multilevel_spec`'s checks (its code built up to ``q`` words);
    remembered per parameters, as the search for a code too small is not free."""
    multilevel_spec(M, s, h, q)


def load_family(name_or_path: str) -> Family:
    """A built-in family by name, or a family file (``.json`` / ``.npz``)."""
    spec = str(name_or_path)
    parts = spec.split("-")
    if spec == "paper-5.1" or _is_ood(parts) or (parts[0] == "multilevel" and len(parts) == 5
                                                 and not os.path.exists(spec)):
        return _builtin(spec)
    if os.path.exists(spec):
        return Family.load(spec)
    raise InputError(f"unknown family {spec!r}: not a file and not one of {', '.join(builtin_names())}")


@functools.lru_cache(maxsize=16)
def _builtin(spec: str) -> Family:
    """A built-in family, built once per process (a name means one family forever);
    its arrays are read-only, so no caller can change what the next one reads."""
    parts = spec.split("-")
    if spec == "paper-5.1":
        fam = paper51_family()
    elif _is_ood(parts):
        M, q, n = _ood_params(spec)
        check_family_size(M=M, q=q)
        check_ood(M, q, n)
        train, test = ood_families(M, q, n)
        fam = train if parts[4] == "train" else test
    else:
        M, s, h, q = _multilevel_params(spec)
        check_family_size(M=M, q=q, s=s, h=h)
        fam = multilevel_spec(M, s, h, q).family()
    for v in vars(fam).values():
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return fam


def check_family_size(**params: int | None) -> None:
    """Family parameters against the documented limits (certify.core.limits)."""
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
