"""Content hashes (sha256 of bytes, files and canonical JSON) and atomic writes.

Every file certify writes goes through :func:`atomic_write_bytes`: a reader
never sees a half-written file, and a crash leaves the old file intact.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 (hex) of a file's bytes: the checker's (:func:`certify.checkers.sources.sha256_file`),
    which reads a file once per process while it is unchanged."""
    from certify.checkers.sources import sha256_file as digest
    return digest(path)


def sha256_json(obj: Any) -> str:
    """Hash of a canonical JSON form (sorted keys, no spaces)."""
    return sha256_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def exclusive_temp(folder: str | os.PathLike, prefix: str, suffix: str = "") -> tuple[int, str]:
    """``(fd, path)`` of a new file in ``folder`` that no other process can have
    opened (created with ``O_EXCL``, mode 0600, a random name; a clash draws
    another): ``tempfile.mkstemp``'s guarantee without importing tempfile and
    shutil, which cost a command a few ms of CPU."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name in {os.fspath(folder)}")


#: characters of a large text encoded and written at a time (:func:`write_text`)
TEXT_CHUNK = 1 << 24


def write_text(f: Any, text: str) -> None:
    """``text`` written as UTF-8 to the binary file ``f`` :data:`TEXT_CHUNK` characters at
    a time: a certificate of hundreds of MB is never held a second time as one bytes
    object (the same bytes as ``text.encode()``)."""
    for i in range(0, len(text), TEXT_CHUNK):
        f.write(text[i:i + TEXT_CHUNK].encode())


def atomic_write_bytes(path: str | os.PathLike, data: bytes | str) -> None:
    """Write to a temporary file in the same folder, fsync, then rename: a reader
    never sees a half-written file, and a crash leaves the old file intact. A ``str``
    is written as UTF-8 (:func:`write_text`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = exclusive_temp(path.parent, f".{path.name}.", ".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)      # mkstemp makes 0600; give the usual mode
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, str):
                write_text(f, data)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text)
