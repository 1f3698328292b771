"""The service's data folder (``certify serve --data DIR``): owned by manifest, locked.

Like every folder certify writes, the data folder carries the manifest
``.certify-manifest.json`` (format ``certify-attention/service-data/1``), which
names this node (a random id) and the entries the service made:

* a new or empty folder gets the layout (manifest, ``work/``; the SQLite
  database ``certify.db`` and the ``token`` when those are the defaults);
* a folder with the service's manifest is recognised as its own;
* any other folder -- one holding a user's ``work/thesis.tex``, the current
  folder of a project -- is refused with one line (exit 2) before anything
  is written.

Whatever the service later removes at start-up is a path recorded as its own:
a work folder is named by a claim id the store recorded for this node
(:func:`clean_work`); an entry it has no record of is left alone.

One server per data folder: ``serve.lock`` is held with ``flock`` for the
server's lifetime (the kernel drops it when the process dies, however it
dies) and names the holder; a second ``certify serve`` on the folder exits 2
naming it. A SQLite database is locked the same way (``flock`` on the
database file), so two data folders cannot share one SQLite file either.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from certify.core.errors import InputError

MANIFEST = ".certify-manifest.json"          # the name every certify output folder uses
FORMAT = "certify-attention/service-data/1"
LOCK = "serve.lock"
WORK = "work"
TOKEN = "token"
DB = "certify.db"
#: entries the service may make in its data folder (SQLite adds -wal/-shm/-journal)
LAYOUT = (MANIFEST, LOCK, WORK, TOKEN, DB, DB + "-wal", DB + "-shm", DB + "-journal")


@dataclass(frozen=True)
class DataFolder:
    path: Path
    node: str                 # this node's id (the manifest's)
    created: bool             # the layout was made by this start

    @property
    def work(self) -> Path:
        return self.path / WORK


def read_manifest(path: Path) -> dict | None:
    try:
        obj = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT or not isinstance(obj.get("node"), str):
        return None
    return obj


def inspect(path: str | os.PathLike) -> tuple[Path, dict | None]:
    """Check ``path`` without writing anything: ``(resolved path, manifest)``;
    the manifest is None for a new or empty folder. :class:`InputError` for a
    file, an unreadable folder, or a folder holding anything but the service's
    own layout."""
    p = Path(path)
    shown = str(path)
    if p.is_symlink() and not p.is_dir():
        raise InputError(f"--data {shown} is a link to something that is not a folder")
    if p.exists() and not p.is_dir():
        raise InputError(f"--data {shown} is a file, not a folder")
    p = p.resolve()
    if p == Path(p.anchor):
        raise InputError(f"--data {shown}: give a folder of its own, not the file system's root")
    if not p.exists():
        _check_creatable(p, shown)
        return p, None
    try:
        names = os.listdir(p)
    except OSError as exc:
        raise InputError(f"--data {shown}: cannot list it ({exc.strerror})") from None
    if not names:
        return p, None
    manifest = read_manifest(p)
    if manifest is None:
        shown_names = ", ".join(sorted(names)[:3]) + ("..." if len(names) > 3 else "")
        raise InputError(f"--data {shown} holds files certify serve did not make ({shown_names}) "
                         f"and no service manifest {MANIFEST}; give a new or empty folder")
    return p, manifest


def _check_creatable(p: Path, shown: str) -> None:
    anc = p.parent
    while not anc.exists() and anc.parent != anc:
        anc = anc.parent
    if not anc.is_dir():
        raise InputError(f"--data {shown}: {anc} is not a folder")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise InputError(f"--data {shown}: cannot create it in {anc} (permission denied)")


def open_folder(path: str | os.PathLike) -> DataFolder:
    """The data folder at ``path``: recognised by its manifest, or laid out new
    (see :func:`inspect` for what is refused)."""
    p, manifest = inspect(path)
    if manifest is not None:
        (p / WORK).mkdir(exist_ok=True)
        return DataFolder(p, manifest["node"], created=False)
    from certify.core.files import atomic_write_text

    node = uuid.uuid4().hex
    try:
        p.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p / MANIFEST, json.dumps({
            "format": FORMAT, "node": node,
            "created": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
            "layout": list(LAYOUT)}, indent=1) + "\n")
        (p / WORK).mkdir(exist_ok=True)
    except OSError as exc:
        raise InputError(f"--data {path}: cannot create the service's layout "
                         f"({exc.strerror or exc})") from None
    return DataFolder(p, node, created=True)


def remove_new_layout(folder: DataFolder) -> None:
    """Undo :func:`open_folder` for a folder laid out by this start (a start-up
    that failed later): only the entries of the layout are removed."""
    if not folder.created:
        return
    for name in LAYOUT:
        q = folder.path / name
        if q.is_dir() and not q.is_symlink():
            try:
                q.rmdir()                    # only when still empty
            except OSError:
                pass
        elif q.exists() or q.is_symlink():
            q.unlink(missing_ok=True)
    try:
        folder.path.rmdir()
    except OSError:
        pass


# ---------------------------------------------------------------- one server per folder

class Lock:
    """An exclusive ``flock`` held for the server's lifetime."""

    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _holder(path: Path) -> str:
    try:
        h = json.loads(path.read_text(encoding="utf-8"))
        return (f"certify serve pid {int(h['pid'])} on {h.get('host', '?')}"
                + (f" ({h['url']})" if h.get("url") else "")
                + (f", since {h['since']}" if h.get("since") else ""))
    except (OSError, ValueError, KeyError, TypeError):
        return "another certify serve"


def lock_folder(folder: DataFolder, url: str) -> Lock:
    """Hold ``serve.lock`` (write who holds it) or :class:`InputError` naming the holder."""
    path = folder.path / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(f"--data {folder.path} is in use by {_holder(path)}; "
                         f"one server per data folder") from None
    info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "url": url,
                       "since": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()})
    os.ftruncate(fd, 0)
    os.pwrite(fd, info.encode() + b"\n", 0)
    return Lock(fd, path)


def lock_sqlite(db_path: Path) -> Lock:
    """``flock`` the SQLite database file itself (independent of SQLite's own
    POSIX locks): one server per SQLite database."""
    try:
        fd = os.open(db_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise InputError(f"--db sqlite:///{db_path}: cannot open the database file "
                         f"({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(f"--db sqlite:///{db_path} is in use by another certify serve "
                         f"(one server per SQLite database; use PostgreSQL for several)") from None
    return Lock(fd, db_path)


# ---------------------------------------------------------------- start-up cleanup

def clean_work(folder: DataFolder, recorded: set[str]) -> tuple[list[str], list[str]]:
    """Remove the work folders named by ``recorded`` (claim ids the store holds
    for this node, whose jobs are over or were interrupted); leave every other
    entry alone. ``(removed, left alone)``."""
    removed: list[str] = []
    left: list[str] = []
    try:
        entries = sorted(os.listdir(folder.work))
    except OSError:
        return removed, left
    for name in entries:
        q = folder.work / name
        if name in recorded and q.is_dir() and not q.is_symlink():
            shutil.rmtree(q, ignore_errors=True)
            removed.append(name)
        else:
            left.append(name)
    return removed, left
