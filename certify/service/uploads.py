"""Uploaded files: their names, and the checks of a zipped checkpoint folder.

A user's file keeps its base name only, reduced to ``[A-Za-z0-9._-]``
(:func:`safe_name`), for display and inside the job's private folder. A
folder comes as a zip, checked when it arrives (:func:`check_zip`: member
names -- no absolute paths, ``..``, links or devices, no member twice, no
name that is both a file and a folder, each name at most 200 characters
and each path at most 1024, as a file system allows -- their number, and the declared
unpacked size) and again while it is unpacked inside the limited job process
(:func:`unpack_zip`, which counts the bytes actually written, so a zip whose
headers lie is caught). Every refusal is an :class:`InputError` naming the
member, never a path on the server.
"""

from __future__ import annotations

import re
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from certify.core.errors import InputError

SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_ZIP_MEMBERS = 256
#: a zip member's names are limited as paths on disk are, with room for the
#: names the job makes beside them (``.NAME.XXXXXXXX.tmp``) and for its folder
MAX_MEMBER_PART = 200
MAX_MEMBER_PATH = 1024


def safe_name(name: str | None, default: str = "upload") -> str:
    """The base name of a user's file, reduced to ``[A-Za-z0-9._-]``."""
    base = PurePosixPath(str(name or "").replace("\\", "/")).name
    base = SAFE_NAME.sub("_", base).lstrip(".") or default
    return base[:120]


def check_zip(source: str | Path | BinaryIO, unpacked_limit: int) -> list[str]:
    """The member files of a zip upload after the checks (or :class:`InputError`)."""
    try:
        with zipfile.ZipFile(source) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise InputError(f"not a readable zip file ({_one_line(exc)})") from None
    if len(infos) > MAX_ZIP_MEMBERS:
        raise InputError(f"the zip holds {len(infos)} members (limit {MAX_ZIP_MEMBERS})")
    total, files, seen = 0, [], set()
    folders: set[str] = set()
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name).parts
        mode = info.external_attr >> 16
        if (name.startswith("/") or "\\" in name or ".." in parts or re.match(r"^[A-Za-z]:", name)
                or "\x00" in name):
            raise InputError(f"zip member {name!r} has an unsafe path")
        ftype = stat.S_IFMT(mode)          # 0 when the zip records no file type
        if ftype and ftype not in (stat.S_IFREG, stat.S_IFDIR):
            raise InputError(f"zip member {name!r} is not a plain file")
        if any(SAFE_NAME.search(p) or p.startswith(".") for p in parts):
            raise InputError(f"zip member {name!r}: names may use only letters, digits, . _ -")
        if len(name) > MAX_MEMBER_PATH or any(len(p) > MAX_MEMBER_PART for p in parts):
            raise InputError(f"zip member {name[:60]!r}...: each name in a member's path may have "
                             f"at most {MAX_MEMBER_PART} characters, the path {MAX_MEMBER_PATH}")
        key = "/".join(parts)
        if key in seen:
            raise InputError(f"zip member {key!r} appears twice")
        seen.add(key)
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        if info.is_dir():
            folders.add(key)
            continue
        total += info.file_size
        if total > unpacked_limit:
            raise InputError(f"the zip unpacks to more than {unpacked_limit} bytes")
        files.append(key)
    clash = sorted(set(files) & folders)
    if clash:
        raise InputError(f"zip member {clash[0]!r} is both a file and a folder")
    if not files:
        raise InputError("the zip holds no files")
    return files


def unpack_zip(path: Path, dest: Path, unpacked_limit: int) -> list[Path]:
    """Unpack the checked members into ``dest`` (new files only), counting the
    bytes actually written; a corrupt or lying member is an :class:`InputError`."""
    names = check_zip(path, unpacked_limit)
    dest_root = dest.resolve()
    written, out = 0, []
    try:
        with zipfile.ZipFile(path) as z:
            for name in names:
                target = dest_root.joinpath(*PurePosixPath(name).parts)
                if dest_root not in target.parents:
                    raise InputError(f"zip member {name!r} leaves the upload folder")
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(name) as src, open(target, "xb") as dst:
                    while chunk := src.read(1 << 20):
                        written += len(chunk)
                        if written > unpacked_limit:
                            raise InputError(f"the zip unpacks to more than {unpacked_limit} bytes")
                        dst.write(chunk)
                out.append(target)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise InputError(f"a member of the zip is corrupt ({_one_line(exc)})") from None
    except RuntimeError as exc:            # zipfile: an encrypted member
        raise InputError(f"a member of the zip cannot be read ({_one_line(exc)})") from None
    except FileExistsError:
        raise InputError("the zip names a member twice") from None
    return out


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    # zipfile quotes member names; a path on the server never reaches the message
    return text[:200] or type(exc).__name__


def matrix_shape(name: str, data: bytes) -> tuple[int, int] | None:
    """The (rows, columns) of a matrix upload, read cheaply (a ``.npy`` or
    ``.npz`` header, the rows of a ``.csv``, the lists of a ``.json``); None
    when it cannot be told this way (the job reads the file and decides)."""
    import io
    import json

    suffix = Path(name).suffix.lower()
    try:
        if suffix == ".npy":
            return _npy_shape(io.BytesIO(data))
        if suffix == ".npz":
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                names = [n for n in z.namelist() if n.endswith(".npy")]
                if len(names) != 1 and "matrix.npy" not in names:
                    return None
                with z.open("matrix.npy" if "matrix.npy" in names else names[0]) as f:
                    return _npy_shape(f)
        if suffix == ".csv":
            lines = [r for r in data.decode("utf-8").splitlines() if r.strip()]
            return (len(lines), len(lines[0].split(","))) if lines else None
        if suffix == ".json":
            obj = json.loads(data)
            rows = obj.get("matrix") if isinstance(obj, dict) else obj
            if isinstance(rows, list) and rows and all(isinstance(r, list) for r in rows):
                return len(rows), len(rows[0])
    except (ValueError, OSError, zipfile.BadZipFile, UnicodeDecodeError, RecursionError,
            KeyError, EOFError):
        return None
    return None


def _npy_shape(f) -> tuple[int, int] | None:
    import numpy as np
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, _ = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, _ = np.lib.format.read_array_header_2_0(f)
    else:
        return None
    return (int(shape[0]), int(shape[1])) if len(shape) == 2 else None
