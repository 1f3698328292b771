"""The service's certificate store: content-addressed certificates, their
report files, filters, storage accounting (SQLAlchemy, see :mod:`schema`).

Certificates are keyed by the sha256 of their JSON text, which is kept
verbatim. The fields a user filters on are columns: the kinds and the overall
verdict, the family hash, the model (source file) hash, the rank and the
dates; each claim also has its own row (kind, verdict, rank, family hash) for
the kind filter. A certificate's report files (``report.md``, ``report.tex``,
figures) are rows of ``certificate_files``, so any node serves them.

The job queue lives in :mod:`certify.service.queue`; a finished job and its
certificate are committed in one transaction there (:meth:`Queue.finish`),
through :func:`add_certificate`.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from sqlalchemy import ColumnExpressionArgument, Insert, Row, delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from certify.core.errors import InputError
from certify.service.config import shown_url
from certify.service.schema import (
    AdmissionRow,
    Base,
    CertificateFileRow,
    CertificateRow,
    ClaimRow,
    JobRow,
    UploadRow,
    aware,
    db_epoch,
    make_engine,
    migrate,
    now,
    rowcount,
)

#: the columns a certificate list shows (not the JSON text, not the verification)
LIST_COLUMNS = [c for c in CertificateRow.__table__.columns if c.name not in ("json_text", "verification")]


def overall_verdict(verdicts: Sequence[str]) -> str:
    if "refuted" in verdicts:
        return "refuted"
    return "unknown" if "unknown" in verdicts or not verdicts else "proved"


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    verdict: str | None = None
    family_sha256: str | None = None
    model_sha256: str | None = None
    rank: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None


class Store:
    """The database of one service (shared by every node with PostgreSQL)."""

    def __init__(self, url: str):
        from sqlalchemy import event

        from certify.service.health import Health

        self.url = url
        self.engine = make_engine(url)
        #: whether the database answers (503 and one log line per outage, see :mod:`health`)
        self.health = Health(shown_url(url))
        event.listen(self.engine, "checkout", lambda *_: self.health.answered())
        migrate(self.engine)
        self.clock = db_epoch(self.engine)
        self.postgres = self.engine.dialect.name == "postgresql"
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._writer = sessionmaker(self.engine.execution_options(sqlite_immediate=True),
                                    expire_on_commit=False)
        self._write_lock = nullcontext() if self.postgres else threading.Lock()
        self._used: tuple[float, int] | None = None

    def session(self) -> Session:
        self.health.gate()
        return self._session()

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction. On SQLite it begins with ``BEGIN IMMEDIATE`` (the
        database's write lock, taken before the first read), and this server's
        writers queue on a lock instead of SQLite's busy-wait sleeps (one server
        per SQLite file, so the lock is all the contention there is)."""
        self.health.gate()
        with self._write_lock:
            with self._writer() as s, s.begin():
                yield s

    @staticmethod
    def lock_admission(s: Session) -> None:
        """Hold the admission row until ``s`` commits: on PostgreSQL a row lock
        (``SELECT ... FOR UPDATE``) every admitting server waits for; on SQLite
        the write transaction's ``BEGIN IMMEDIATE`` already holds the database."""
        s.execute(select(AdmissionRow.id).where(AdmissionRow.id == 1).with_for_update())

    def dispose(self) -> None:
        self.engine.dispose()

    def db_time(self) -> float:
        """The database's clock, epoch seconds."""
        with self.session() as s:
            return float(s.execute(select(self.clock)).scalar_one())

    # ------------------------------------------------------------ certificates

    def certificate(self, sha: str) -> CertificateRow | None:
        with self.session() as s:
            return s.get(CertificateRow, sha)

    def certificate_facts(self, sha: str) -> Row | None:
        """A certificate's verdict and the server's verify exit status (no text)."""
        with self.session() as s:
            return s.execute(select(CertificateRow.verdict, CertificateRow.verify_exit)
                             .where(CertificateRow.sha256 == sha)).first()

    def claims(self, sha: str) -> list[ClaimRow]:
        with self.session() as s:
            return list(s.scalars(select(ClaimRow).where(ClaimRow.cert_sha256 == sha)
                                  .order_by(ClaimRow.idx)))

    def certificates(self, f: Filters = Filters(), limit: int = 50, offset: int = 0) -> list[Row]:
        """Rows for a list: every column but the JSON text and the verification
        (plain rows, attribute access; no ORM objects to build)."""
        q = select(*LIST_COLUMNS)
        if f.kind:
            q = q.where(CertificateRow.sha256.in_(select(ClaimRow.cert_sha256)
                                                  .where(ClaimRow.kind == f.kind)))
        if f.verdict:
            q = q.where(CertificateRow.verdict == f.verdict)
        if f.family_sha256:
            q = q.where(CertificateRow.sha256.in_(
                select(ClaimRow.cert_sha256).where(ClaimRow.family_sha256 == f.family_sha256)))
        if f.model_sha256:
            q = q.where(CertificateRow.model_sha256 == f.model_sha256)
        if f.rank is not None:
            q = q.where(CertificateRow.sha256.in_(select(ClaimRow.cert_sha256)
                                                  .where(ClaimRow.rank == f.rank)))
        if f.since:
            q = q.where(CertificateRow.stored_at >= f.since)
        if f.until:
            q = q.where(CertificateRow.stored_at <= f.until)
        q = q.order_by(CertificateRow.stored_at.desc(), CertificateRow.sha256).limit(limit).offset(offset)
        with self.session() as s:
            return list(s.execute(q))

    def exists(self, sha: str) -> bool:
        with self.session() as s:
            return s.scalar(select(CertificateRow.sha256).where(CertificateRow.sha256 == sha)) is not None

    def delete_certificate(self, sha: str) -> bool:
        self.grew(None)
        with self.write() as s:
            s.execute(delete(ClaimRow).where(ClaimRow.cert_sha256 == sha))
            s.execute(delete(CertificateFileRow).where(CertificateFileRow.cert_sha256 == sha))
            return rowcount(s.execute(delete(CertificateRow).where(CertificateRow.sha256 == sha))) == 1

    def files(self, sha: str) -> list[tuple[str, int]]:
        """``(name, size)`` of a certificate's report files."""
        with self.session() as s:
            return [(n, int(z)) for n, z in s.execute(
                select(CertificateFileRow.name, CertificateFileRow.size)
                .where(CertificateFileRow.cert_sha256 == sha).order_by(CertificateFileRow.name))]

    def file(self, sha: str, name: str) -> bytes | None:
        with self.session() as s:
            return s.scalar(select(CertificateFileRow.data).where(
                CertificateFileRow.cert_sha256 == sha, CertificateFileRow.name == name))

    # ------------------------------------------------------------ storage

    def storage_used(self, max_age: float = 0.0) -> int:
        """Bytes held (see :func:`storage_used_in`; a figure at most ``max_age``
        seconds old: for display and early refusals, never for admission)."""
        now = time.monotonic()
        if self._used is not None and now - self._used[0] <= max_age:
            return self._used[1]
        with self.session() as s:
            used = storage_used_in(s)
        self._used = (now, used)
        return used

    def grew(self, size: int | None) -> None:
        """Note ``size`` bytes stored by this server (None: some were freed), so
        the cached figure of :meth:`storage_used` stays exact for this server."""
        if size is None or self._used is None:
            self._used = None
        else:
            self._used = (self._used[0], self._used[1] + size)


# ---------------------------------------------------------------- opening a store

def open_store(url: str):
    """The store at ``url``, migrated; :class:`InputError` when it cannot be used."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return Store(url)
    except (SQLAlchemyError, OSError, ValueError) as exc:
        line = " ".join(str(getattr(exc, "orig", None) or exc).split())
        line = line.split(" (Background on this error")[0][:300]
        raise InputError(f"--db {shown_url(url)}: cannot use the database ({line})") from None


def storage_used_in(s: Session) -> int:
    """Bytes the store holds, read in session ``s``: uploads, certificates (JSON
    and report files), every job's result, reason and options, and the bytes
    reserved for the results of the jobs still queued or running."""
    return (_total(s, UploadRow.size) + _total(s, CertificateRow.size)
            + _total(s, JobRow.result_bytes + JobRow.reserved_bytes))


def _total(s: Session, amount: ColumnExpressionArgument[Any]) -> int:
    """The sum of ``amount`` over its table's rows, in session ``s`` (0 for none)."""
    total = s.execute(select(func.sum(amount))).scalar_one()
    return 0 if total is None else int(total)


def add_certificate(s: Session, c: Mapping[str, Any], job_id: str,
                    files: Mapping[str, bytes], postgres: bool) -> bool:
    """Insert certificate ``c`` (text, sha256, command, source_name,
    source_sha256, model_sha256, verification, verify_exit, verify_mode), its
    claim rows and its files in session ``s``, unless a certificate with that
    sha256 is already stored (then nothing: it is the same text). True when
    inserted."""
    from certify.api import claim_index

    obj = json.loads(c["text"])
    claims = [{"kind": x["kind"][:32], "verdict": x["verdict"][:16],
               "rank": x["rank"] if x["rank"] is not None and 0 <= x["rank"] < 2**31 else None,
               "family_sha256": (x["family_sha256"] or "")[:64] or None}
              for x in claim_index(obj)]
    kinds = ",".join(dict.fromkeys(x["kind"] for x in claims))
    ranks = [x["rank"] for x in claims if x["rank"] is not None]
    fams = [x["family_sha256"] for x in claims if x["family_sha256"]]
    try:
        created = aware(dt.datetime.fromisoformat(obj.get("created", "")))
    except (TypeError, ValueError):
        created = None
    size = len(c["text"].encode()) + sum(len(b) for b in files.values())
    row = dict(
        sha256=c["sha256"], kind=kinds[:200], verdict=overall_verdict([x["verdict"] for x in claims]),
        family_sha256=fams[0] if fams else None, model_sha256=c.get("model_sha256"),
        rank=ranks[0] if ranks else None, created_at=created, stored_at=now(),
        source_name=c.get("source_name"), source_sha256=c.get("source_sha256"),
        command=c["command"], job_id=job_id, json_text=c["text"],
        verification=json.dumps(c.get("verification")) if c.get("verification") else None,
        verify_exit=c.get("verify_exit"), verify_mode=c.get("verify_mode"), size=size)
    inserted = s.execute(_insert_new(row, postgres).returning(CertificateRow.sha256)).first()
    if inserted is None:
        return False
    for i, x in enumerate(claims):
        s.add(ClaimRow(cert_sha256=c["sha256"], idx=i, **x))
    for name, data in files.items():
        s.add(CertificateFileRow(cert_sha256=c["sha256"], name=name, size=len(data), data=data))
    s.flush()
    return True


def _insert_new(row: Mapping[str, Any], postgres: bool) -> Insert:
    """``INSERT`` of certificate ``row`` that does nothing when its sha256 is stored."""
    if postgres:
        from sqlalchemy.dialects.postgresql import insert as pg_insert
        return pg_insert(CertificateRow).values(**row).on_conflict_do_nothing(index_elements=["sha256"])
    from sqlalchemy.dialects.sqlite import insert as lite_insert
    return lite_insert(CertificateRow).values(**row).on_conflict_do_nothing(index_elements=["sha256"])


def as_dict(row: CertificateRow | JobRow | Row) -> dict[str, Any]:
    """A row's columns (an ORM object's loaded ones), dates in ISO form."""
    items = row._asdict().items() if isinstance(row, Row) else _loaded_columns(row)
    return {k: aware(v).isoformat() if isinstance(v, dt.datetime) else v for k, v in items}


def _loaded_columns(row: Base) -> list[tuple[str, Any]]:
    """``(name, value)`` of the columns of ORM object ``row`` that are loaded."""
    from sqlalchemy import inspect as sa_inspect
    unloaded = sa_inspect(row).unloaded
    return [(c.name, getattr(row, c.name)) for c in row.__table__.columns if c.name not in unloaded]
