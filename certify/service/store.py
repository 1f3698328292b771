"""The service's store: jobs (a persistent queue) and certificates, in SQLAlchemy.

SQLite file by default (WAL mode, busy timeout), PostgreSQL by URL
(``postgresql://...``, driver psycopg 3). The schema is created and upgraded
by Alembic (``certify/service/migrations``); :func:`open_store` runs the
upgrade, so a new data folder needs nothing else.

Certificates are content-addressed: the key is the sha256 of the JSON text,
which is kept verbatim. The fields a user filters on are columns: the kinds
and the overall verdict, the family hash, the model (source file) hash, the
rank and the dates; each claim also has its own row (kind, verdict, rank,
family hash) for the kind filter.

A finished job and its certificate are committed in one transaction
(:meth:`Store.finish_job`), so a crash leaves either both or neither.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from sqlalchemy import (Column, DateTime, ForeignKey, Integer, String, Text, create_engine, delete,
                        event, func, select, update)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_MS = 30_000

#: job states; ``queued`` and ``running`` are the live queue.
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"


class Base(DeclarativeBase):
    pass


class CertificateRow(Base):
    __tablename__ = "certificates"
    sha256 = Column(String(64), primary_key=True)
    kind = Column(String(200), nullable=False, index=True)       # distinct claim kinds, comma-separated
    verdict = Column(String(16), nullable=False, index=True)     # refuted > unknown > proved
    family_sha256 = Column(String(64), index=True)
    model_sha256 = Column(String(64), index=True)
    rank = Column(Integer, index=True)
    created_at = Column(DateTime(timezone=True), index=True)     # the certificate's own date
    stored_at = Column(DateTime(timezone=True), nullable=False, index=True)
    source_name = Column(String(255))                            # the user's original file name
    source_sha256 = Column(String(64))
    command = Column(String(32), nullable=False)
    job_id = Column(String(32))
    json_text = Column(Text, nullable=False)                     # verbatim
    verification = Column(Text)                                  # the server's verify result (JSON)
    verify_exit = Column(Integer)
    verify_mode = Column(String(200))


class ClaimRow(Base):
    __tablename__ = "claims"
    id = Column(Integer, primary_key=True, autoincrement=True)
    cert_sha256 = Column(String(64), ForeignKey("certificates.sha256", ondelete="CASCADE"),
                         nullable=False, index=True)
    idx = Column(Integer, nullable=False)
    kind = Column(String(32), nullable=False, index=True)
    verdict = Column(String(16), nullable=False)
    rank = Column(Integer)
    family_sha256 = Column(String(64))


class JobRow(Base):
    __tablename__ = "jobs"
    id = Column(String(32), primary_key=True)
    command = Column(String(32), nullable=False)
    options = Column(Text, nullable=False)                       # JSON
    status = Column(String(16), nullable=False, index=True)
    reason = Column(Text)
    created_at = Column(DateTime(timezone=True), nullable=False, index=True)
    started_at = Column(DateTime(timezone=True))
    finished_at = Column(DateTime(timezone=True))
    attempts = Column(Integer, nullable=False, default=0)
    upload_name = Column(String(255))                            # original name (display only)
    upload_sha256 = Column(String(64))
    upload_storage = Column(String(80))                          # generated storage name
    exit_code = Column(Integer)
    cert_sha256 = Column(String(64))
    result = Column(Text)                                        # JSON (e.g. a verification)


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def _aware(t: dt.datetime | None) -> dt.datetime | None:
    return None if t is None or t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


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
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()
        return engine
    return create_engine(url, pool_size=20, max_overflow=20, pool_pre_ping=True)


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


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
    def __init__(self, url: str):
        self.url = url
        self.engine = make_engine(url)
        migrate(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return self._session()

    def dispose(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------ jobs

    def add_job(self, command: str, options: Mapping[str, Any], *, upload_name: str | None = None,
                upload_sha256: str | None = None, upload_storage: str | None = None) -> str:
        job_id = uuid.uuid4().hex
        with self.session() as s, s.begin():
            s.add(JobRow(id=job_id, command=command, options=json.dumps(dict(options)),
                         status=QUEUED, created_at=now(), attempts=0, upload_name=upload_name,
                         upload_sha256=upload_sha256, upload_storage=upload_storage))
        return job_id

    def job(self, job_id: str) -> JobRow | None:
        with self.session() as s:
            return s.get(JobRow, job_id)

    def claim_next_job(self) -> JobRow | None:
        """Move the oldest queued job to ``running`` (a compare-and-set, so two
        dispatchers never take the same job) and return it."""
        with self.session() as s:
            ids = list(s.scalars(select(JobRow.id).where(JobRow.status == QUEUED)
                                 .order_by(JobRow.created_at, JobRow.id).limit(8)))
        for job_id in ids:
            with self.session() as s, s.begin():
                res = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == QUEUED)
                                .values(status=RUNNING, started_at=now(),
                                        attempts=JobRow.attempts + 1))
                job = s.get(JobRow, job_id) if res.rowcount == 1 else None
            if job is not None:
                return job
        return None

    def fail_job(self, job_id: str, reason: str, exit_code: int | None = None,
                 result: Mapping[str, Any] | None = None) -> None:
        with self.session() as s, s.begin():
            s.execute(update(JobRow).where(JobRow.id == job_id).values(
                status=FAILED, reason=reason, finished_at=now(), exit_code=exit_code,
                result=None if result is None else json.dumps(result)))

    def finish_job(self, job_id: str, *, exit_code: int, result: Mapping[str, Any] | None,
                   certificate: Mapping[str, Any] | None = None) -> str | None:
        """Mark the job done and store its certificate, in one transaction.
        ``certificate``: text, sha256, command, source_name, source_sha256,
        model_sha256, verification (JSON), verify_exit, verify_mode."""
        sha = None
        with self.session() as s, s.begin():
            if certificate is not None:
                sha = certificate["sha256"]
                if s.get(CertificateRow, sha) is None:
                    s.add(self._certificate_row(certificate, job_id))
                    s.flush()
                    obj = json.loads(certificate["text"])
                    from certify.api import claim_index
                    for i, c in enumerate(claim_index(obj)):
                        s.add(ClaimRow(cert_sha256=sha, idx=i, **c))
            s.execute(update(JobRow).where(JobRow.id == job_id).values(
                status=DONE, finished_at=now(), exit_code=exit_code, cert_sha256=sha,
                result=None if result is None else json.dumps(result)))
        return sha

    @staticmethod
    def _certificate_row(c: Mapping[str, Any], job_id: str) -> CertificateRow:
        from certify.api import claim_index
        obj = json.loads(c["text"])
        claims = claim_index(obj)
        kinds = ",".join(dict.fromkeys(x["kind"] for x in claims))
        ranks = [x["rank"] for x in claims if x["rank"] is not None]
        fams = [x["family_sha256"] for x in claims if x["family_sha256"]]
        try:
            created = dt.datetime.fromisoformat(obj.get("created", ""))
        except (TypeError, ValueError):
            created = None
        return CertificateRow(
            sha256=c["sha256"], kind=kinds[:200], verdict=overall_verdict([x["verdict"] for x in claims]),
            family_sha256=fams[0] if fams else None, model_sha256=c.get("model_sha256"),
            rank=ranks[0] if ranks else None, created_at=created, stored_at=now(),
            source_name=c.get("source_name"), source_sha256=c.get("source_sha256"),
            command=c["command"], job_id=job_id, json_text=c["text"],
            verification=json.dumps(c.get("verification")) if c.get("verification") else None,
            verify_exit=c.get("verify_exit"), verify_mode=c.get("verify_mode"))

    def recover(self, max_attempts: int) -> tuple[list[str], list[str]]:
        """After a restart: every job left ``running`` was interrupted. Re-queue it
        while it has attempts left, else mark it failed with the reason."""
        requeued, failed = [], []
        with self.session() as s, s.begin():
            for job in s.scalars(select(JobRow).where(JobRow.status == RUNNING)):
                if job.attempts < max_attempts:
                    job.status, job.started_at = QUEUED, None
                    job.reason = f"re-queued after the server stopped during attempt {job.attempts}"
                    requeued.append(job.id)
                else:
                    job.status, job.finished_at = FAILED, now()
                    job.reason = (f"the server stopped during the job {job.attempts} times "
                                  f"(limit {max_attempts}); not retried")
                    failed.append(job.id)
        return requeued, failed

    def jobs(self, limit: int = 50) -> list[JobRow]:
        with self.session() as s:
            return list(s.scalars(select(JobRow).order_by(JobRow.created_at.desc()).limit(limit)))

    def count_jobs(self, status: str | None = None) -> int:
        with self.session() as s:
            q = select(func.count()).select_from(JobRow)
            if status:
                q = q.where(JobRow.status == status)
            return int(s.scalar(q))

    # ------------------------------------------------------------ certificates

    def certificate(self, sha: str) -> CertificateRow | None:
        with self.session() as s:
            return s.get(CertificateRow, sha)

    def claims(self, sha: str) -> list[ClaimRow]:
        with self.session() as s:
            return list(s.scalars(select(ClaimRow).where(ClaimRow.cert_sha256 == sha)
                                  .order_by(ClaimRow.idx)))

    def certificates(self, f: Filters = Filters(), limit: int = 200, offset: int = 0
                     ) -> list[CertificateRow]:
        q = select(CertificateRow)
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
            return list(s.scalars(q))

    def delete_certificate(self, sha: str) -> bool:
        with self.session() as s, s.begin():
            s.execute(delete(ClaimRow).where(ClaimRow.cert_sha256 == sha))
            return s.execute(delete(CertificateRow).where(CertificateRow.sha256 == sha)).rowcount == 1

    def certificate_shas(self) -> Iterator[str]:
        with self.session() as s:
            yield from s.scalars(select(CertificateRow.sha256))


def as_dict(row: CertificateRow | JobRow) -> dict[str, Any]:
    out = {}
    for col in row.__table__.columns:
        v = getattr(row, col.name)
        if isinstance(v, dt.datetime):
            v = _aware(v).isoformat()
        out[col.name] = v
    return out
