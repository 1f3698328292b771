"""``certify serve migrate --data OLD``: a data folder of the previous layout
moved into the current one.

The previous layout (database revision 0001) kept files beside the database:
``uploads/<generated name>`` (a queued job's upload, named by the job's
``upload_storage``), ``certificates/<sha256>/`` (a certificate's report files)
and ``work/``, with ``certify.db`` and ``token``, and no manifest. The current
layout keeps uploads and report files in the database and owns the folder by
its manifest (:mod:`datadir`).

The migration, in order, each step safe to repeat:

1. recognise the folder (:func:`previous_layout`): no manifest, a database at
   revision 0001, nothing but the previous layout's entries;
2. upgrade the database (Alembic, to the newest revision) and copy every
   upload a job names and every certificate's report files into it, each
   checked against its hash (an upload against the job's ``upload_sha256``);
   a job the old server was running goes back to the queue;
3. read every copied byte back from the database and compare hashes;
4. only then write the folder's manifest (the service's own from now on) and
   remove the old files it copied. Anything the migration did not copy is
   left where it is. A failure at any step before 4 leaves every old file in
   place (one line, exit 2).

``certify serve --data OLD`` on such a folder refuses to start and names this
command.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from certify.core.errors import InputError
from certify.service import datadir

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

#: the previous layout's entries (besides SQLite's -wal/-shm/-journal files)
OLD_ENTRIES = {"certify.db", "certify.db-wal", "certify.db-shm", "certify.db-journal", "token",
               "uploads", "certificates", "work"}
OLD_REVISION = "0001"


@dataclass(frozen=True)
class Migrated:
    jobs: int                 # job rows kept
    uploads: int              # uploads copied into the database
    certificates: int         # certificates whose report files were copied
    files: int                # report files copied
    requeued: int             # jobs the old server was running, queued again
    removed: tuple[str, ...]  # old entries removed after the copy was verified


def _revision(db: Path) -> str | None:
    """The Alembic revision of the SQLite file ``db``, read without writing
    anything beside it: a file without a write-ahead log is opened immutable
    (SQLite then makes no ``-wal`` or ``-shm`` file); with a log, read-only,
    and a ``-shm`` index made by this read alone is removed again."""
    wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
    had_shm = shm.exists()
    mode = "mode=ro" if wal.exists() else "immutable=1"
    conn = None
    try:
        conn = sqlite3.connect(f"file:{db}?{mode}", uri=True)
        row = conn.execute("select version_num from alembic_version").fetchone()
    except sqlite3.Error:
        row = None
    finally:
        if conn is not None:
            conn.close()
        if not had_shm and mode == "mode=ro":
            shm.unlink(missing_ok=True)
    return row[0] if row else None


def previous_layout(path: str | os.PathLike, db: str | None = None) -> bool:
    """Is ``path`` a data folder of the previous layout? (No manifest, only the
    previous layout's entries, and its database -- ``certify.db`` unless
    ``db`` names another -- at revision 0001 or with ``uploads/`` beside it.)"""
    p = Path(path)
    if not p.is_dir() or datadir.read_manifest(p) is not None:
        return False
    try:
        names = set(os.listdir(p))
    except OSError:
        return False
    if not names or not names <= OLD_ENTRIES:
        return False
    if db:
        return bool(names & {"uploads", "certificates"})
    return (p / "certify.db").is_file() and _revision(p / "certify.db") == OLD_REVISION


def refusal(path: str, db: str | None = None) -> str:
    return (f"--data {path} is a data folder of an earlier certify serve (database revision "
            f"{OLD_REVISION}, uploads/ and certificates/ beside it); move it into the current "
            f"layout first: {command_line('serve migrate', path, db)}")


def command_line(sub: str, path: str | os.PathLike, db: str | None = None) -> str:
    """The whole command ``certify SUB --data PATH [--db URL]``, quoted for a
    POSIX shell, to run as printed (a password in the URL is shown as ``***``)."""
    import shlex

    from certify.service.config import shown_url
    words = ["certify", *sub.split(), "--data", str(path)] + (["--db", shown_url(db)] if db else [])
    return " ".join(shlex.quote(w) for w in words)


def _drop_report_manifest(folder: Path) -> None:
    """Remove the manifest of a report folder (``certify report`` wrote one into
    each ``certificates/<sha256>/``) once the copy emptied the folder of
    everything else: the folder was the tool's own by that manifest, and the
    manifest alone would keep it. A folder holding anything more is left whole."""
    from certify.core import outputs

    man = folder / outputs.MANIFEST
    try:
        rest = set(os.listdir(folder)) - {outputs.MANIFEST}
    except OSError:
        return
    if not rest and man.is_file() and outputs.read_manifest(folder) is not None:
        man.unlink(missing_ok=True)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def migrate_folder(path: str | os.PathLike, db: str | None = None) -> Migrated:
    """Move the previous layout at ``path`` into the current one (see the module)."""
    from certify.service.config import check_db_url
    from certify.service.store import open_store

    p = Path(path).resolve()
    if not previous_layout(p, db):
        if datadir.read_manifest(p) is not None:
            raise InputError(f"--data {path} is already in the current layout (it has the "
                             f"service's manifest); nothing to migrate")
        raise InputError(f"--data {path} is not a data folder of an earlier certify serve "
                         f"(expected certify.db at revision {OLD_REVISION} with uploads/ and "
                         f"certificates/ beside it, and nothing else)")
    url = db or f"sqlite:///{p / datadir.DB}"
    check_db_url(url)
    locks = [datadir.lock_sqlite(Path(url[len("sqlite:///"):]).resolve())] \
        if url.startswith("sqlite:///") else []
    try:
        store = open_store(url)                     # Alembic: 0001 -> newest
        try:
            with store.write() as s:
                n_jobs, copied_up = _copy_uploads(s, p, path)
                requeued = _requeue_running(s)
                certs, copied_files = _copy_certificate_files(s, p)
            # 3: every copied byte read back and compared
            with store.session() as s:
                _read_back(s, path, copied_up, copied_files)
        finally:
            store.dispose()
        # 4: the folder becomes the service's; the copied old files go
        removed = _become_current(p, [f for f, _ in copied_up.values()]
                                  + [f for f, _ in copied_files.values()])
    finally:
        for lock in locks:
            lock.release()
    return Migrated(n_jobs, len(copied_up), certs, len(copied_files), requeued, tuple(removed))


#: a copied file: where it was, and the sha256 of its bytes (an upload already in
#: the database: the job's recorded sha256)
_Copied = tuple[Path, str | None]


def _copy_uploads(s: Session, p: Path, path: str | os.PathLike) -> tuple[int, dict[str, _Copied]]:
    """Copy every job's upload file under ``p/uploads`` into its upload row (in
    session ``s``). ``(jobs, copies by job id)``; :class:`InputError` when a live
    job's upload is missing or an upload does not have its recorded sha256."""
    from sqlalchemy import select, update

    from certify.service.schema import QUEUED, RUNNING, JobRow, UploadRow

    copied: dict[str, _Copied] = {}
    jobs = list(s.execute(select(JobRow.id, JobRow.upload_storage, JobRow.upload_sha256,
                                 JobRow.upload_name, JobRow.status)))
    have = set(s.scalars(select(UploadRow.job_id)))
    for job_id, storage, sha, name, status in jobs:
        if not storage or storage.startswith("."):    # none, or already a suffix
            continue
        f = p / "uploads" / Path(storage).name
        if job_id in have:
            copied[job_id] = (f, sha)
            continue
        if not f.is_file():
            if status in (QUEUED, RUNNING):
                raise InputError(f"--data {path}: job {job_id} waits for its upload "
                                 f"uploads/{f.name}, which is missing")
            continue
        data = f.read_bytes()
        if sha and _sha(data) != sha:
            raise InputError(f"--data {path}: uploads/{f.name} does not have the "
                             f"sha256 job {job_id} recorded; nothing was changed "
                             f"in the folder")
        s.add(UploadRow(job_id=job_id, size=len(data), data=data))
        s.execute(update(JobRow).where(JobRow.id == job_id).values(
            upload_storage=Path(name or storage).suffix.lower() or Path(storage).suffix,
            upload_size=len(data)))
        copied[job_id] = (f, _sha(data))
    return len(jobs), copied


def _requeue_running(s: Session) -> int:
    """Send the jobs that were running back to the queue (in session ``s``); how many."""
    from sqlalchemy import update

    from certify.service.schema import QUEUED, RUNNING, JobRow, rowcount

    return rowcount(s.execute(update(JobRow).where(JobRow.status == RUNNING).values(
        status=QUEUED, started_at=None,
        reason="re-queued: moved from an earlier layout while running")))


def _copy_certificate_files(s: Session, p: Path) -> tuple[int, dict[tuple[str, str], _Copied]]:
    """Copy each stored certificate's report files under ``p/certificates/<sha256>``
    into its file rows, and count them in its size (in session ``s``).
    ``(certificates with a folder, copies by (sha256, name))``."""
    from sqlalchemy import select, update

    from certify.service.schema import CertificateFileRow, CertificateRow

    certs = 0
    copied: dict[tuple[str, str], _Copied] = {}
    for sha256, in s.execute(select(CertificateRow.sha256)):
        folder = p / "certificates" / sha256
        if not folder.is_dir():
            continue
        stored = {n for n, in s.execute(select(CertificateFileRow.name).where(
            CertificateFileRow.cert_sha256 == sha256))}
        size = 0
        for f in sorted(folder.iterdir()):
            if not f.is_file() or f.name.startswith("."):
                continue
            data = f.read_bytes()
            size += len(data)
            copied[(sha256, f.name)] = (f, _sha(data))
            if f.name not in stored:
                s.add(CertificateFileRow(cert_sha256=sha256, name=f.name,
                                         size=len(data), data=data))
        s.flush()
        text = s.execute(select(CertificateRow.json_text).where(
            CertificateRow.sha256 == sha256)).scalar_one()
        s.execute(update(CertificateRow).where(CertificateRow.sha256 == sha256)
                  .values(size=len(text.encode()) + size))
        certs += 1
    return certs, copied


def _read_back(s: Session, path: str | os.PathLike, uploads: dict[str, _Copied],
               files: dict[tuple[str, str], _Copied]) -> None:
    """Read every copy back (in session ``s``) and compare its sha256 with the
    file's; :class:`InputError` (the old files kept) at the first that differs."""
    from sqlalchemy import select

    from certify.service.schema import CertificateFileRow, UploadRow

    for job_id, (f, sha) in uploads.items():
        got = s.scalar(select(UploadRow.data).where(UploadRow.job_id == job_id))
        if got is None or _sha(got) != sha:
            raise InputError(f"--data {path}: the copy of uploads/{f.name} does not "
                             f"read back; the old files are kept")
    for (sha256, name), (_f, sha) in files.items():
        got = s.scalar(select(CertificateFileRow.data).where(
            CertificateFileRow.cert_sha256 == sha256, CertificateFileRow.name == name))
        if got is None or _sha(got) != sha:
            raise InputError(f"--data {path}: the copy of certificates/{sha256[:12]}"
                             f".../{name} does not read back; the old files are kept")


def _become_current(p: Path, copied: list[Path]) -> list[str]:
    """Make ``p`` the service's folder (its manifest, ``work/``) and remove the
    ``copied`` files and the folders they leave empty; the folders removed."""
    from certify.core.files import atomic_write_text
    atomic_write_text(p / datadir.MANIFEST, json.dumps({
        "format": datadir.FORMAT, "node": uuid.uuid4().hex,
        "created": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "layout": list(datadir.LAYOUT), "migrated_from": f"revision {OLD_REVISION}"},
        indent=1) + "\n")
    removed = []
    for f in copied:
        f.unlink(missing_ok=True)
    for sub in ("uploads", "certificates"):
        d = p / sub
        if not d.is_dir():
            continue
        for child in sorted(d.iterdir()) if sub == "certificates" else []:
            _drop_report_manifest(child)
            try:
                child.rmdir()                  # a certificate folder emptied by the copy
            except OSError:
                pass
        try:
            d.rmdir()
            removed.append(sub)
        except OSError:
            pass                               # holds what was not copied: left alone
    (p / datadir.WORK).mkdir(exist_ok=True)
    return removed
