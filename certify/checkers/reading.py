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
from typing import Any, Mapping

from certify.checkers import schema as _schema


class NotACertificate(ValueError):
    """A file or text that is not a certificate at all (``certify verify`` exit 2).
    The command layer maps it to its bad-input exit code like any input error."""


def remake_command(obj: Mapping[str, Any]) -> str:
    """The ``certify`` command that re-makes a certificate with this release, from its
    ``command``: as recorded for the command line; for a job of ``certify serve``
    (recorded as ``certify serve COMMAND FILE...``) the command the job ran,
    ``certify COMMAND FILE...`` (a ``.zip`` upload unpacked first, its folder named)."""
    cmd = obj.get("command")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd):
        return "the command that made it"
    if cmd[0] == "certify serve" or cmd[:2] == ["certify", "serve"]:
        rest = cmd[1:] if cmd[0] == "certify serve" else cmd[2:]
        if not rest:
            return "the command that made it"
        args = [f"{a[:-4]}/" if a.endswith(".zip") else a for a in rest[1:]]
        unzip = [a for a in rest[1:] if a.endswith(".zip")]
        line = " ".join(["certify", rest[0], *args])
        return (f"{line} (with {', '.join(unzip)} unpacked into {', '.join(a[:-4] + '/' for a in unzip)})"
                if unzip else line)[:300]
    return " ".join(cmd)[:300]


def release_refusal(obj: Any) -> str | None:
    """Why this release's checker refuses a certificate's version (one line, with the
    command that re-makes it), or None when it reads that version
    (:data:`certify.checkers.schema.VERSIONS`)."""
    if not isinstance(obj, Mapping) or (isinstance(obj.get("schema"), str) and obj["schema"] in _schema.VERSIONS):
        return None
    schema = str(obj.get("schema"))[:80]
    why = _schema.RETIRED.get(schema, f"this release reads {', '.join(_schema.VERSIONS)} only")
    return f"{schema} is no longer read: {why}; re-make it with this release: {remake_command(obj)}"


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
        raise NotACertificate(str(release_refusal(obj)))
    if not isinstance(obj, dict) or not isinstance(obj.get("schema"), str) \
            or obj["schema"] not in _schema.VERSIONS:
        raise NotACertificate(f"not a certificate this checker reads (schema must be one of "
                              f"{', '.join(map(repr, _schema.VERSIONS))})")
    claims = obj.get("claims")
    if not isinstance(claims, list) or not claims:
        raise NotACertificate("certificate has no claims" + (" list" if "claims" not in obj else "")
                              + _unexpected_root_keys(obj))
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


def path_problem(path: Any) -> str | None:
    """Why something at ``path`` cannot be read as a file, in words: a folder, a FIFO, a
    socket or a device, a loop of symbolic links or one pointing nowhere, a permission
    problem. None when it is a readable regular file, or when nothing is there (only
    then is a file "absent")."""
    import errno
    import os
    import stat
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        code = getattr(exc, "errno", None)
        if code == errno.ELOOP:
            return "a loop of symbolic links"
        if code in (errno.EACCES, errno.EPERM):
            return "permission denied (a folder on its path cannot be searched)"
        if code == errno.ENAMETOOLONG:
            return "name too long"
        if code == errno.ENOTDIR:
            return "a part of the path is a file, not a folder"
        try:
            if code == errno.ENOENT and os.path.islink(path):
                return f"a symbolic link to {os.readlink(path)}, which does not exist"
        except (OSError, ValueError):
            pass
        return None
    mode = st.st_mode
    for test, what in ((stat.S_ISDIR, "a folder, not a file"),
                       (stat.S_ISFIFO, "a FIFO (named pipe), not a regular file"),
                       (stat.S_ISSOCK, "a socket, not a regular file"),
                       (stat.S_ISCHR, "a device, not a regular file"),
                       (stat.S_ISBLK, "a device, not a regular file")):
        if test(mode):
            return what
    if not os.access(path, os.R_OK):
        return "permission denied (not readable)"
    return None


def read_certificate(path: str | os.PathLike) -> dict[str, Any]:
    """The certificate in the file at ``path`` (:func:`parse`), or :class:`NotACertificate`
    naming the path."""
    path = Path(path)
    why = path_problem(path)                # a folder, a FIFO, a symbolic link loop, a permission problem
    if why is not None:
        raise NotACertificate(f"{path}: {why}")
    if not os.path.lexists(path):
        raise NotACertificate(f"no such file: {path}")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise NotACertificate(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return parse(text)
    except NotACertificate as exc:
        raise NotACertificate(f"{path}: {exc}") from None


def _unexpected_root_keys(obj: Mapping[str, Any]) -> str:
    """``; unexpected key 'claim' (did you mean 'claims'?)`` for the keys of a
    certificate's root the schema does not have, or nothing."""
    import difflib
    known = list((_schema.published().get("properties") or {}))
    extra = [k for k in obj if k not in known]
    if not extra:
        return ""
    parts = []
    for k in extra[:5]:
        close = difflib.get_close_matches(str(k), [n for n in known if n not in obj], n=1)
        parts.append(f"{str(k)[:40]!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"; unexpected key{'s' if len(extra) > 1 else ''} " + ", ".join(parts)
