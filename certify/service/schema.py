"""The service's tables (SQLAlchemy), its engine, and the database's clock.

SQLite file by default (WAL mode, busy timeout), PostgreSQL by URL
(``postgresql://...``, driver psycopg 3). The schema is created and upgraded
by Alembic (``certify/service/migrations``); :func:`migrate` runs the upgrade,
so a new database needs nothing else.

Tables: ``jobs`` (the queue; a running job carries its claim id, the node
that holds it and the lease's end), ``job_claims`` (every claim ever made:
node, start, end, outcome -- the record of which work folder belongs to
whom), ``uploads`` (the bytes of a job's upload, while the job lives),
``certificates`` (content-addressed, verbatim JSON, filter columns),
``admission`` (one row: the lock every admission holds while it counts and
inserts), ``claims`` (one row per claim of a certificate, for the filters) and
``certificate_files`` (the report's files). Everything a node needs to run
any job or serve any result is in the database, so with PostgreSQL any
number of nodes share one queue and one store.

Leases are timed by the database's clock (:func:`db_epoch`: ``now()`` on
PostgreSQL, ``julianday('now')`` on SQLite), never a node's.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, cast, overload

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    create_engine,
    event,
    literal_column,
    text,
)
from sqlalchemy.engine import CursorResult, Engine, Result
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.elements import ColumnElement

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_MS = 30_000

#: job states; ``queued`` and ``running`` are the live queue.
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"


class Base(DeclarativeBase):
    pass


class CertificateRow(Base):
    __tablename__ = "certificates"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    # distinct claim kinds, comma-separated
    kind: Mapped[str] = mapped_column(String(200), nullable=False, index=True)
    verdict: Mapped[str] = mapped_column(String(16), nullable=False, index=True)  # refuted > unknown > proved
    family_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    model_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    rank: Mapped[int | None] = mapped_column(Integer, index=True)
    # the certificate's own date
    created_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    stored_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)
    source_name: Mapped[str | None] = mapped_column(String(255))  # the user's original file name
    source_sha256: Mapped[str | None] = mapped_column(String(64))
    command: Mapped[str] = mapped_column(String(32), nullable=False)
    job_id: Mapped[str | None] = mapped_column(String(32))
    json_text: Mapped[str] = mapped_column(Text, nullable=False)  # verbatim
    verification: Mapped[str | None] = mapped_column(Text)  # the server's verify result (JSON)
    verify_exit: Mapped[int | None] = mapped_column(Integer)
    verify_mode: Mapped[str | None] = mapped_column(String(200))
    size: Mapped[int | None] = mapped_column(BigInteger)  # bytes of json_text + files


class ClaimRow(Base):
    __tablename__ = "claims"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cert_sha256: Mapped[str] = mapped_column(String(64),
                                             ForeignKey("certificates.sha256", ondelete="CASCADE"),
                                             nullable=False, index=True)
    idx: Mapped[int] = mapped_column(Integer, nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False, index=True)
    verdict: Mapped[str] = mapped_column(String(16), nullable=False)
    rank: Mapped[int | None] = mapped_column(Integer)
    family_sha256: Mapped[str | None] = mapped_column(String(64))


class CertificateFileRow(Base):
    __tablename__ = "certificate_files"
    cert_sha256: Mapped[str] = mapped_column(String(64),
                                             ForeignKey("certificates.sha256", ondelete="CASCADE"),
                                             primary_key=True)
    name: Mapped[str] = mapped_column(String(120), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class JobRow(Base):
    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    command: Mapped[str] = mapped_column(String(32), nullable=False)
    options: Mapped[str] = mapped_column(Text, nullable=False)  # JSON
    status: Mapped[str] = mapped_column(String(16), nullable=False, index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    upload_name: Mapped[str | None] = mapped_column(String(255))  # original name (display only)
    upload_sha256: Mapped[str | None] = mapped_column(String(64))
    upload_storage: Mapped[str | None] = mapped_column(String(80))  # upload suffix (.zip, .json, ...)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    cert_sha256: Mapped[str | None] = mapped_column(String(64))
    result: Mapped[str | None] = mapped_column(Text)  # JSON (e.g. a verification)
    claim_id: Mapped[str | None] = mapped_column(String(32), index=True)  # the live claim, while running
    node_id: Mapped[str | None] = mapped_column(String(32))  # the node holding it
    lease_until: Mapped[float | None] = mapped_column(Float, index=True)  # database epoch seconds
    # submitted without the token
    anonymous: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    upload_size: Mapped[int | None] = mapped_column(BigInteger)
    client: Mapped[str | None] = mapped_column(String(64))  # the submitting client's address
    created_epoch: Mapped[float | None] = mapped_column(Float)  # database epoch seconds
    # held for the result while live
    reserved_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    # its result, reason, options
    result_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    progress: Mapped[str | None] = mapped_column(Text)  # JSON: the running job's stage


class AdmissionRow(Base):
    """One row, locked by every admission (see :meth:`Store.admit`)."""
    __tablename__ = "admission"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)


class JobClaimRow(Base):
    __tablename__ = "job_claims"
    claim_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(32), nullable=False, index=True)
    node_id: Mapped[str] = mapped_column(String(32), nullable=False, index=True)
    claimed_at: Mapped[float] = mapped_column(Float, nullable=False)  # database epoch seconds
    ended_at: Mapped[float | None] = mapped_column(Float)
    outcome: Mapped[str | None] = mapped_column(String(16))  # done, failed, expired


class UploadRow(Base):
    __tablename__ = "uploads"
    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


def now() -> dt.datetime:
    """This node's clock, for display dates only (never for leases)."""
    return dt.datetime.now(dt.timezone.utc)


@overload
def aware(t: dt.datetime) -> dt.datetime: ...


@overload
def aware(t: None) -> None: ...


def aware(t: dt.datetime | None) -> dt.datetime | None:
    """``t`` with its time zone (a naive time from SQLite is UTC)."""
    if t is None or t.tzinfo is not None:
        return t
    return t.replace(tzinfo=dt.timezone.utc)


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched. ``Session.execute`` is typed as
    returning a :class:`Result`; for those statements it is a :class:`CursorResult`."""
    return cast(CursorResult[Any], result).rowcount


def db_epoch(engine: Engine) -> ColumnElement[float]:
    """The database's own clock in epoch seconds, as an SQL expression."""
    if engine.dialect.name == "postgresql":
        return literal_column("CAST(EXTRACT(EPOCH FROM now()) AS DOUBLE PRECISION)")
    return literal_column("((julianday('now') - 2440587.5) * 86400.0)")


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL and a busy timeout on every connection."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_MS / 1000,
                                                  "check_same_thread": False},
                               pool_size=20, max_overflow=20)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):            # noqa: ANN001
            dbapi_conn.isolation_level = None         # transactions begun below, not by the driver
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn):                             # noqa: ANN001
            # a write transaction takes the database's write lock at once
            # (BEGIN IMMEDIATE): what it counts cannot change before it inserts
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(
                "sqlite_immediate") else "BEGIN")
        return engine
    return create_engine(url, pool_size=20, max_overflow=20, pool_pre_ping=True,
                         connect_args={"connect_timeout": 10})


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to the newest Alembic revision (or to ``revision``)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":       # servers starting at once migrate in turn
            conn.execute(text("SELECT pg_advisory_xact_lock(7270210021)"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
