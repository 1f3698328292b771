"""The job queue: one table shared by every node, one live claim per job.

A node takes the oldest queued job with ``SELECT ... FOR UPDATE SKIP LOCKED``
(PostgreSQL; on SQLite, whose writers take turns, the same statement without
the clause) and a compare-and-set to ``running`` that records a fresh claim
id, the node, and a lease ending ``lease`` seconds later by the database's
clock. While the job's process lives, its node renews the lease
(:meth:`Queue.renew`); a node that stops renewing -- killed, cut off from the
database -- lets it expire, and only then does any node put the job back in
the queue (:meth:`Queue.requeue_expired`), or fail it once it has been
claimed ``max_attempts`` times. Finishing or failing a job is conditional on
the claim still being the job's live claim, so a stale worker can never
commit: each job ends exactly once, whichever node ran it.

Every claim is recorded in ``job_claims`` (node, start, end, outcome): the
record that names a node's work folders as its own.

Admission (:meth:`Queue.add`) is decided in the same write transaction as the
insert, holding the admission lock (:meth:`Store.lock_admission`): the cap on
anonymous jobs waiting, the per-client window of open submissions (counted
from the jobs table by the database's clock, so every server sees the same
count) and the storage cap, with the job's upload and a reservation for its
result counted before anything is written. Two submissions can never both be
admitted on the same free slot. A result is stored (:meth:`Queue.finish`)
only when it fits under the storage cap, again under the lock; an ended
anonymous job expires after the retention period (:meth:`Queue.expire`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from sqlalchemy import delete, func, select, update

from certify.service.schema import (
    DONE,
    FAILED,
    QUEUED,
    RUNNING,
    JobClaimRow,
    JobRow,
    UploadRow,
    now,
    rowcount,
)
from certify.service.store import Store, add_certificate, storage_used_in

MB = 1 << 20
#: bytes reserved for a job's result while it is queued or running
RESULT_RESERVE = 64 * 1024
#: the window of the per-client open-submission rate (seconds)
RATE_WINDOW = 60.0


@dataclass(frozen=True)
class Claim:
    job: JobRow
    claim_id: str


@dataclass(frozen=True)
class Upload:
    name: str            # the user's file name (display, messages)
    sha256: str
    suffix: str          # .zip, .json, ...
    data: bytes


@dataclass(frozen=True)
class Quota:
    """What admission enforces (the service's ``--max-*`` options)."""
    max_storage_bytes: int
    max_anonymous_queued: int = 1 << 20
    open_submit_rate: int = 0               # anonymous submissions per client per minute (0: none)


class Refused(Exception):
    """A submission refused by admission: HTTP ``status``, the message, and
    the seconds after which to retry (None: not said)."""

    def __init__(self, status: int, detail: str, retry_after: int | None = None):
        super().__init__(detail)
        self.status, self.detail, self.retry_after = status, detail, retry_after


class _Lost(Exception):
    """The claim is no longer the job's live claim."""


class _Full(Exception):
    """The result does not fit under the storage cap."""


def storage_full(used: int, cap: int, more: int = 0) -> str:
    need = f" and this needs {more / MB:.1f} MB more" if more else ""
    return (f"storage full: {used / MB:.1f} MB of the {cap / MB:.0f} MB cap are used{need} "
            f"(--max-storage-mb); delete certificates or raise the cap")


def _held(values: Mapping[str, Any]) -> int:
    """Bytes an ended job's row holds beyond its options: result and reason."""
    return sum(len(str(values.get(k) or "").encode()) for k in ("result", "reason"))


class Queue:
    def __init__(self, store: Store, *, max_attempts: int = 2, keep_uploads: bool = False,
                 max_storage_bytes: int | None = None):
        self.store, self.max_attempts, self.keep_uploads = store, max_attempts, keep_uploads
        self.max_storage_bytes = max_storage_bytes
        self.clock = store.clock

    def session(self):
        return self.store.session()

    # ------------------------------------------------------------ submitting and reading

    def add(self, command: str, options: Mapping[str, Any], *, upload: Upload | None = None,
            anonymous: bool = False, client: str | None = None, quota: Quota | None = None) -> str:
        """Admit and queue a job (and its upload's bytes) in one transaction
        holding the admission lock; its id, or :class:`Refused` (nothing
        written) when ``quota`` refuses it."""
        job_id = uuid.uuid4().hex
        opts = json.dumps(dict(options))
        size = len(upload.data) if upload else 0
        with self.store.write() as s:
            t = float(s.execute(select(self.clock)).scalar_one())
            if quota is not None:
                self.store.lock_admission(s)
                self._admit(s, quota, anonymous, client, t, size + RESULT_RESERVE + len(opts))
            s.add(JobRow(id=job_id, command=command, options=opts,
                         status=QUEUED, created_at=now(), attempts=0, anonymous=anonymous,
                         client=(client or "")[:64] or None, created_epoch=t,
                         reserved_bytes=RESULT_RESERVE + len(opts), result_bytes=0,
                         upload_name=upload.name if upload else None,
                         upload_sha256=upload.sha256 if upload else None,
                         upload_storage=upload.suffix if upload else None,
                         upload_size=size if upload else None))
            if upload is not None:
                s.flush()
                s.add(UploadRow(job_id=job_id, size=size, data=upload.data))
        self.store.grew(None)
        return job_id

    def _admit(self, s, quota: Quota, anonymous: bool, client: str | None, t: float,
               need: int) -> None:
        """The admission checks, in the locked transaction ``s`` (see the module)."""
        if anonymous:
            waiting = s.scalar(select(func.count()).select_from(JobRow).where(
                JobRow.status == QUEUED, JobRow.anonymous.is_(True)))
            if waiting >= quota.max_anonymous_queued:
                raise Refused(429, f"{quota.max_anonymous_queued} jobs submitted without the "
                                   f"token are waiting (--max-anonymous-queued); try again later", 30)
            if quota.open_submit_rate > 0 and client:
                recent = s.execute(select(func.count(), func.min(JobRow.created_epoch)).where(
                    JobRow.client == client[:64], JobRow.anonymous.is_(True),
                    JobRow.created_epoch > t - RATE_WINDOW)).one()
                if recent[0] >= quota.open_submit_rate:
                    # t is read before the lock: a row admitted meanwhile may be newer than t
                    wait = min(int(RATE_WINDOW), max(1, math.ceil(recent[1] + RATE_WINDOW - t)))
                    raise Refused(429, f"rate limit: at most {quota.open_submit_rate} open "
                                       f"submissions per minute from one client "
                                       f"(--open-submit-rate); retry in {wait} s", wait)
        used = storage_used_in(s)
        if used + need > quota.max_storage_bytes:
            raise Refused(507, storage_full(used, quota.max_storage_bytes, need))

    def job(self, job_id: str) -> JobRow | None:
        with self.session() as s:
            return s.get(JobRow, job_id)

    def jobs(self, limit: int = 50) -> list:
        """The newest jobs, as plain rows (not their options or results)."""
        cols = [c for c in JobRow.__table__.columns if c.name not in ("options", "result")]
        with self.session() as s:
            return list(s.execute(select(*cols).order_by(JobRow.created_at.desc()).limit(limit)))

    def count(self, status: str | None = None, *, anonymous: bool | None = None) -> int:
        q = select(func.count()).select_from(JobRow)
        if status:
            q = q.where(JobRow.status == status)
        if anonymous is not None:
            q = q.where(JobRow.anonymous == anonymous)
        with self.session() as s:
            return int(s.scalar(q))

    def upload(self, job_id: str) -> bytes | None:
        with self.session() as s:
            return s.scalar(select(UploadRow.data).where(UploadRow.job_id == job_id))

    def claims(self, job_id: str) -> list[JobClaimRow]:
        with self.session() as s:
            return list(s.scalars(select(JobClaimRow).where(JobClaimRow.job_id == job_id)
                                  .order_by(JobClaimRow.claimed_at)))

    def node_claims(self, node: str) -> list[JobClaimRow]:
        with self.session() as s:
            return list(s.scalars(select(JobClaimRow).where(JobClaimRow.node_id == node)))

    # ------------------------------------------------------------ claims and leases

    def claim(self, node: str, lease: float) -> Claim | None:
        """Take the oldest queued job for ``node`` with a lease of ``lease`` seconds."""
        cid = uuid.uuid4().hex
        with self.session() as s:              # a plain read first: no write when nothing waits
            if s.scalar(select(JobRow.id).where(JobRow.status == QUEUED).limit(1)) is None:
                return None
        try:
            with self.store.write() as s:
                q = (select(JobRow.id).where(JobRow.status == QUEUED)
                     .order_by(JobRow.created_at, JobRow.id).limit(1)
                     .with_for_update(skip_locked=True))
                job_id = s.scalar(q)
                if job_id is None:
                    return None
                t = s.execute(select(self.clock)).scalar_one()
                res = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == QUEUED)
                                .values(status=RUNNING, claim_id=cid, node_id=node,
                                        lease_until=t + lease, started_at=now(),
                                        attempts=JobRow.attempts + 1))
                if rowcount(res) != 1:
                    raise _Lost
                s.add(JobClaimRow(claim_id=cid, job_id=job_id, node_id=node, claimed_at=t))
                s.flush()
                job = s.get_one(JobRow, job_id)
                s.refresh(job)
        except _Lost:
            return None
        return Claim(job, cid)

    def renew(self, claim_ids: list[str], lease: float) -> set[str]:
        """Extend the leases of ``claim_ids``; the ids still held."""
        if not claim_ids:
            return set()
        with self.store.write() as s:
            s.execute(update(JobRow).where(JobRow.claim_id.in_(claim_ids), JobRow.status == RUNNING)
                      .values(lease_until=self.clock + lease))
            return set(s.scalars(select(JobRow.claim_id).where(JobRow.claim_id.in_(claim_ids),
                                                               JobRow.status == RUNNING)))

    def set_progress(self, claim_id: str, progress: str) -> bool:
        """Record the progress of a running job (a JSON document written by its
        worker, see :mod:`certify.service.worker`), so every server's page shows
        it; only while ``claim_id`` is the job's live claim."""
        with self.store.write() as s:
            return rowcount(s.execute(update(JobRow).where(JobRow.claim_id == claim_id,
                                                           JobRow.status == RUNNING)
                                      .values(progress=progress[:4000]))) == 1

    def position(self, job_id: str) -> int | None:
        """How many queued jobs will be claimed before this queued one."""
        with self.session() as s:
            job = s.get(JobRow, job_id)
            if job is None or job.status != QUEUED:
                return None
            return int(s.scalar(select(func.count()).select_from(JobRow).where(
                JobRow.status == QUEUED,
                (JobRow.created_at < job.created_at)
                | ((JobRow.created_at == job.created_at) & (JobRow.id < job.id)))))

    def release(self, claim_ids: list[str]) -> None:
        """Give the jobs of ``claim_ids`` back to the queue now (their server is
        stopping and has stopped their processes); the attempt is not counted."""
        if not claim_ids:
            return
        with self.store.write() as s:
            for cid in claim_ids:
                res = s.execute(update(JobRow).where(JobRow.claim_id == cid, JobRow.status == RUNNING)
                                .values(status=QUEUED, claim_id=None, node_id=None, lease_until=None,
                                        started_at=None, attempts=JobRow.attempts - 1, progress=None,
                                        reason="re-queued: the server running it was stopped"))
                if rowcount(res) == 1:
                    s.execute(update(JobClaimRow).where(JobClaimRow.claim_id == cid)
                              .values(ended_at=self.clock, outcome="released"))

    def expire_running(self, node: str | None = None) -> int:
        """End the leases of every running job (``node``'s only, when given):
        used at start-up, when a lock proves their holder is gone."""
        q = update(JobRow).where(JobRow.status == RUNNING)
        if node is not None:
            q = q.where(JobRow.node_id == node)
        with self.store.write() as s:
            return rowcount(s.execute(q.values(lease_until=0.0)))

    def requeue_expired(self) -> tuple[list[str], list[str]]:
        """Every running job whose lease ended: back to the queue while it has
        attempts left, else failed with the reason. ``(re-queued, failed)``."""
        requeued: list[str] = []
        failed: list[str] = []
        with self.session() as s:              # a plain read first: no write when none expired
            if s.scalar(select(JobRow.id).where(JobRow.status == RUNNING,
                                                JobRow.lease_until < self.clock).limit(1)) is None:
                return requeued, failed
        with self.store.write() as s:
            rows = s.execute(select(JobRow.id, JobRow.claim_id, JobRow.attempts)
                             .where(JobRow.status == RUNNING, JobRow.lease_until < self.clock)
                             .with_for_update(skip_locked=True)).all()
            for job_id, cid, attempts in rows:
                cond = update(JobRow).where(JobRow.id == job_id, JobRow.claim_id == cid,
                                            JobRow.status == RUNNING)
                common = dict(claim_id=None, node_id=None, lease_until=None, progress=None)
                if attempts < self.max_attempts:
                    res = s.execute(cond.values(
                        status=QUEUED, started_at=None, **common,
                        reason=f"re-queued after attempt {attempts} was interrupted (its lease "
                               f"expired: the server running it stopped or lost the database)"))
                    (requeued if rowcount(res) == 1 else []).append(job_id)
                else:
                    why = (f"not retried: {attempts} attempt(s) were interrupted "
                           f"(limit {self.max_attempts}, --job-attempts)")
                    res = s.execute(cond.values(
                        status=FAILED, finished_at=now(), **common, reason=why, reserved_bytes=0,
                        result_bytes=len(why.encode()) + func.length(JobRow.options)))
                    if rowcount(res) == 1:
                        failed.append(job_id)
                        self._drop_upload(s, job_id)
                s.execute(update(JobClaimRow).where(JobClaimRow.claim_id == cid)
                          .values(ended_at=self.clock, outcome="expired"))
        return requeued, failed

    # ------------------------------------------------------------ ending a job

    def finish(self, job_id: str, claim_id: str, *, exit_code: int, result: Mapping[str, Any] | None,
               certificate: Mapping[str, Any] | None = None,
               files: Mapping[str, bytes] | None = None) -> bool:
        """Mark the job done and store its certificate and files, in one
        transaction, if ``claim_id`` is still its live claim (else nothing; False)."""
        sha = certificate["sha256"] if certificate is not None else None
        try:
            with self.store.write() as s:
                if self.max_storage_bytes is not None:
                    self.store.lock_admission(s)
                # a reason left by an earlier attempt ("re-queued: ...") is over
                self._end(s, job_id, claim_id, "done", status=DONE, exit_code=exit_code,
                          cert_sha256=sha, reason=None,
                          result=None if result is None else json.dumps(result))
                if certificate is not None:
                    add_certificate(s, certificate, job_id, files or {}, self.store.postgres)
                if self.max_storage_bytes is not None:
                    used = storage_used_in(s)
                    if used > self.max_storage_bytes:
                        raise _Full(storage_full(used, self.max_storage_bytes))
        except _Lost:
            return False
        except _Full as full:
            return self.fail(job_id, claim_id, f"the result was not stored: {full} (with it)",
                             exit_code=1)
        self.store.grew(None)          # a certificate came, an upload went
        return True

    def fail(self, job_id: str, claim_id: str, reason: str, *, exit_code: int | None = None,
             result: Mapping[str, Any] | None = None) -> bool:
        """Mark the job failed with ``reason`` if ``claim_id`` is its live claim."""
        try:
            with self.store.write() as s:
                self._end(s, job_id, claim_id, "failed", status=FAILED, reason=reason,
                          exit_code=exit_code,
                          result=None if result is None else json.dumps(result))
        except _Lost:
            return False
        return True

    def _end(self, s, job_id: str, claim_id: str, outcome: str, **values) -> None:
        held = _held(values)
        res = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.claim_id == claim_id,
                                             JobRow.status == RUNNING)
                        .values(finished_at=now(), lease_until=None, reserved_bytes=0, progress=None,
                                result_bytes=held + func.length(JobRow.options), **values))
        if rowcount(res) != 1:
            raise _Lost
        s.execute(update(JobClaimRow).where(JobClaimRow.claim_id == claim_id)
                  .values(ended_at=self.clock, outcome=outcome))
        self._drop_upload(s, job_id)

    def expire(self, retention_days: float) -> int:
        """Delete the anonymous jobs that ended more than ``retention_days`` ago,
        with their uploads and claim records; how many. Their bytes leave the
        storage figure with them."""
        before = now() - dt.timedelta(days=retention_days)
        with self.store.write() as s:
            ids = list(s.scalars(select(JobRow.id).where(
                JobRow.anonymous.is_(True), JobRow.status.in_((DONE, FAILED)),
                JobRow.finished_at < before).limit(10_000)))
            if not ids:
                return 0
            s.execute(delete(UploadRow).where(UploadRow.job_id.in_(ids)))
            s.execute(delete(JobClaimRow).where(JobClaimRow.job_id.in_(ids)))
            s.execute(delete(JobRow).where(JobRow.id.in_(ids)))
        self.store.grew(None)
        return len(ids)

    def _drop_upload(self, s, job_id: str) -> None:
        self.store.grew(None)
        if not self.keep_uploads:
            s.execute(delete(UploadRow).where(UploadRow.job_id == job_id))
