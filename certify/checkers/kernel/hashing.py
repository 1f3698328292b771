"""Hash binding: the canonical sha256 of a JSON value.

Statement: ``canonical_sha256(x) == canonical_sha256(y)`` iff the canonical JSON
texts of ``x`` and ``y`` (sorted keys, no whitespace, ``json.dumps`` defaults)
are equal, up to a sha256 collision. A claim bound to a hash is bound to every
byte of that text, so two values that differ in any key or entry have different
hashes unless sha256 collides.
"""
import hashlib
import json
from typing import Any


def canonical_sha256(obj: Any) -> str:
    """sha256 (hex) of ``json.dumps(obj, sort_keys=True, separators=(",", ":"))``."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
