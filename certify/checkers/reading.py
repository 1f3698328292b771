"""Reading a certificate file: JSON text -> certificate object, or
:class:`NotACertificate` (``certify verify`` exit 2).

Shared by the fast checker (:mod:`certify.checkers.verify`) and the reference
checker (:mod:`certify.reference`), so that both refuse exactly the same files.
Imports only the standard library and :mod:`certify.checkers.schema` (the
certificate versions and their renderers).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from certify.checkers import schema as _schema


class NotACertificate(ValueError):
    """A file or text that is not a certificate at all (``certify verify`` exit 2).
    The command layer maps it to its bad-input exit code like any input error."""


def parse(text: str) -> dict[str, Any]:
    """JSON text -> certificate object; :class:`NotACertificate` when it is not one."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotACertificate(f"not JSON: {exc.msg} at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:      # over-long integers, nesting too deep
        raise NotACertificate(f"not a usable JSON document ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:80]})") from None
    if isinstance(obj, dict) and isinstance(obj.get("schema"), str) and obj["schema"] in _schema.RETIRED:
        cmd = obj.get("command")
        how = (" ".join(cmd) if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd)
               else "the command that made it")
        raise NotACertificate(f"{obj['schema']} is no longer read: "
                              f"{_schema.RETIRED[obj['schema']]}; re-make it with this release: "
                              f"{how[:200]}")
    if not isinstance(obj, dict) or not isinstance(obj.get("schema"), str) \
            or obj["schema"] not in _schema.VERSIONS:
        raise NotACertificate(f"not a certificate this checker reads (schema must be one of "
                              f"{', '.join(map(repr, _schema.VERSIONS))})")
    claims = obj.get("claims")
    if not isinstance(claims, list) or not claims:
        raise NotACertificate("certificate has no claims")
    for i, c in enumerate(claims):
        if not isinstance(c, dict):             # its fields are the schema's to check (exit 1)
            raise NotACertificate(f"claim {i} is not a JSON object")
    inputs = obj.get("inputs", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise NotACertificate("certificate inputs must map names to sha256 strings")
    renderer = obj.get("renderer")
    if renderer != _schema.RENDERER_OF[obj["schema"]]:
        raise NotACertificate(f"{obj['schema']} is rendered by {_schema.RENDERER_OF[obj['schema']]}, "
                              f"not {str(renderer)[:60]!r}")
    return obj


def read_certificate(path: str | os.PathLike) -> dict[str, Any]:
    """The certificate in the file at ``path`` (:func:`parse`), or :class:`NotACertificate`
    naming the path."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise NotACertificate(f"{path} is not a regular file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise NotACertificate(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return parse(text)
    except NotACertificate as exc:
        raise NotACertificate(f"{path}: {exc}") from None
