"""The dispatcher: a thread of the server that claims jobs and runs them.

Each tick it (1) collects finished job processes and stores their results,
conditional on still holding the claim; (2) stops a job past its time limit;
(3) renews the leases of its running jobs (a lease it lost -- it expired and
another node took the job -- stops its process, whose result would be
refused anyway); (4) puts every expired lease back in the queue (any node
does this for every node: a dead node's jobs are taken over); (5) deletes the
anonymous jobs past their retention (``--retention-days``, once a minute);
(6) claims queued jobs while it has free workers, writes each one's upload
into a work folder of its own claim (``DATA/work/<claim id>/``) and starts
its process (:mod:`launcher`).

When a job ends its work folder is removed (``--keep-work`` keeps it) and its
upload is deleted from the store (``--keep-uploads`` keeps it). A job's
internal failure is logged here, with its traceback, on the server's stderr;
the job's own record says only "internal error". A running job's progress
(the ``progress`` file its worker writes) is copied into the job's row when it
changes, so every server's page shows it.

When the database stops answering (:mod:`certify.service.health`: one log
line per outage, no traceback) the jobs run on; a job that ends meanwhile
keeps its work folder and result, and its outcome is stored as soon as the
database answers again, before any lease is looked at -- conditional, as
always, on its claim still being the job's live claim.

Jobs never run on Ray: a job runs in a process on the node that claimed it,
and its lease is that node's. When a node dies its job processes die with it
(:mod:`launcher`) and the lease lapses; another node then runs the job from
the start.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from certify.service.config import Limits
from certify.service.health import is_outage, reason_of
from certify.service.launcher import LAUNCHER_GONE, Launcher
from certify.service.queue import Claim, Queue

#: seconds between two sweeps of expired anonymous jobs
RETENTION_SWEEP = 60.0


@dataclass
class _Running:
    job_id: str
    claim_id: str
    workdir: Path
    started: float
    upload_name: str | None
    progress: str | None = None              # the progress last copied into the job's row


def log(msg: str) -> None:
    print(f"certify serve: {msg}", file=sys.stderr, flush=True)


#: the longest wait between two ticks of an idle dispatcher (nothing running, nothing
#: claimed): the wait doubles from ``poll`` up to it, and a submission to this server
#: (:meth:`Dispatcher.wake`) or a job found ends it; a job queued by another server of a
#: shared database, or a lease that lapsed, is taken up within this many seconds
IDLE_POLL = 1.6


def next_wait(wait: float, poll: float, *, idle: bool) -> float:
    """The wait before the next tick after one that waited ``wait``: ``poll`` while jobs run
    (or wait to be stored), else twice the last wait, from ``poll`` up to :data:`IDLE_POLL`
    (an idle server's ticks, a database read each, were most of its CPU)."""
    return min(max(wait * 2, poll), IDLE_POLL) if idle else poll


class Dispatcher:
    """Claims queued jobs for ``node`` and runs up to ``workers`` at a time."""

    def __init__(self, queue: Queue, work: Path, node: str, limits: Limits, *, workers: int = 2,
                 lease: float = 30.0, keep_work: bool = False, poll: float = 0.2,
                 launcher: Launcher | None = None, retention_days: float | None = None):
        self.queue, self.work, self.node, self.limits = queue, Path(work), node, limits
        self.workers, self.lease, self.keep_work, self.poll = max(1, workers), lease, keep_work, poll
        self.launcher = launcher or Launcher()
        self.running: dict[str, _Running] = {}      # claim id -> job
        self.unstored: dict[str, tuple[_Running, object]] = {}   # ended while the database was down
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewed = self._swept = self._expired = 0.0
        self.retention_days = retention_days

    # ------------------------------------------------------------ life cycle

    def start(self) -> None:
        self.launcher.start()                 # imports the library while the server starts
        self._thread = threading.Thread(target=self._loop, name="certify-dispatcher", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Stop the jobs and give them back to the queue at once."""
        self._stop.set()
        self._wake.set()
        self.launcher.stop()              # kills the jobs; a launch under way gives up
        if self._thread is not None:
            self._thread.join(timeout=15)
        try:
            self.queue.release([r.claim_id for r in self.running.values()])
        except Exception as exc:              # noqa: BLE001 - the database may be gone; leases lapse
            if not is_outage(exc):
                traceback.print_exc()
            elif self.running:
                log(f"{len(self.running)} running job(s) could not be given back to the queue (the "
                    f"database is not answering: {reason_of(exc)}); their leases lapse and they "
                    f"are re-queued then")
        if self.unstored:
            log(f"{len(self.unstored)} finished job(s) could not be stored (the database is not "
                f"answering); their leases lapse and they run again")
        for r in [*self.running.values(), *(r for r, _ in self.unstored.values())]:
            self._cleanup(r)
        self.running.clear()
        self.unstored.clear()

    def _loop(self) -> None:
        health = self.queue.store.health
        wait = self.poll
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as exc:          # noqa: BLE001 - keep serving; log and retry
                if is_outage(exc):
                    health.failed(exc)        # one line per outage; the tick is tried again
                else:
                    traceback.print_exc()
                    self._stop.wait(1.0)
            wait = next_wait(wait, self.poll, idle=not self.running and not self.unstored)
            if self._wake.wait(wait):
                wait = self.poll
            self._wake.clear()

    # ------------------------------------------------------------ one tick

    def _tick(self) -> None:
        for cid, (r, store) in list(self.unstored.items()):       # first: what ended meanwhile
            del self.unstored[cid]
            self._end(r, store, running=False)
        for cid, r in list(self.running.items()):
            rc = self.launcher.status(cid)
            if self._stop.is_set():           # stopping: stop() gives the running jobs back
                return
            if rc is None and time.monotonic() - r.started > self.limits.time_seconds:
                self.launcher.kill(cid)
                self.launcher.wait(cid)
                self._end(r, lambda r=r: self.queue.fail(
                    r.job_id, r.claim_id, f"time limit: the job ran longer than "
                                          f"{self.limits.time_seconds:g} s (--job-seconds) and was "
                                          f"stopped", exit_code=1))
            elif rc is not None:
                self._end(r, lambda r=r, rc=rc: self._finish(r, rc))
        now = time.monotonic()
        if self.running and now - self._renewed >= self.lease / 4:
            self._renewed = now
            held = self.queue.renew(list(self.running), self.lease)
            for cid in set(self.running) - held:
                r = self.running[cid]
                log(f"job {r.job_id}: lost its claim (the lease expired); stopping its process")
                self.launcher.kill(cid)
                self.launcher.wait(cid)
                self._end(r, lambda: False)
        self._copy_progress()
        if now - self._swept >= min(1.0, self.lease / 4):
            self._swept = now
            requeued, failed = self.queue.requeue_expired()
            for jid in requeued:
                log(f"job {jid} re-queued (its lease expired)")
            for jid in failed:
                log(f"job {jid} failed (interrupted too often)")
        if self.retention_days is not None and now - self._expired >= RETENTION_SWEEP:
            self._expired = now
            gone = self.queue.expire(self.retention_days)
            if gone:
                log(f"{gone} anonymous job(s) older than {self.retention_days:g} days deleted "
                    f"(--retention-days)")
        while len(self.running) < self.workers and not self._stop.is_set():
            claim = self.queue.claim(self.node, self.lease)
            if claim is None:
                break
            self._spawn(claim)

    def _copy_progress(self) -> None:
        """Copy each running job's progress into its row when it changed."""
        for cid, r in list(self.running.items()):
            try:
                text = (r.workdir / "progress").read_text(encoding="utf-8")
            except OSError:
                continue
            if text != r.progress:
                self.queue.set_progress(cid, text)
                r.progress = text

    def _end(self, r: _Running, store, *, running: bool = True) -> None:
        """Take ``r`` off the running set, store its outcome, clean up. While the
        database is not answering the outcome waits (:attr:`unstored`) with its
        work folder, to be stored at the start of a later tick."""
        if running:
            del self.running[r.claim_id]
        try:
            if not store():
                log(f"job {r.job_id}: its claim ended elsewhere; this result was discarded")
        except Exception as exc:              # noqa: BLE001 - e.g. the database refused the commit
            if is_outage(exc):
                self.queue.store.health.failed(exc)
                self.unstored[r.claim_id] = (r, store)      # kept, with its work folder
                return
            traceback.print_exc()
            try:
                self.queue.fail(r.job_id, r.claim_id, f"internal error: the result could not be "
                                                      f"stored ({type(exc).__name__})")
            except Exception:                 # noqa: BLE001
                traceback.print_exc()
        self.launcher.forget(r.claim_id)
        self._cleanup(r)

    def _spawn(self, claim: Claim) -> None:
        job, cid = claim.job, claim.claim_id
        workdir = self.work / cid
        r = _Running(job.id, cid, workdir, time.monotonic(), job.upload_name)
        self.running[cid] = r
        try:
            workdir.mkdir(parents=True)
            upload = None
            if job.upload_sha256:
                data = self.queue.upload(job.id)
                if data is None:
                    raise LookupError("the upload is no longer stored")
                name = "upload" + (job.upload_storage or "")
                (workdir / name).write_bytes(data)
                upload = {"file": name, "name": job.upload_name, "sha256": job.upload_sha256}
            (workdir / "job.json").write_text(json.dumps({
                "id": job.id, "claim": cid, "command": job.command,
                "options": json.loads(job.options), "upload": upload,
                "limits": self.limits.as_dict()}))
            pid = self.launcher.launch(cid, workdir)
            (workdir / "worker.pid").write_text(str(pid))
            r.started = time.monotonic()
        except Exception as exc:              # noqa: BLE001
            if self._stop.is_set():           # stopping: the job goes back to the queue
                return
            if is_outage(exc):                # its lease lapses, and the job is queued again
                del self.running[cid]
                self._cleanup(r)
                raise
            traceback.print_exc()
            why = f"internal error: the job could not start ({type(exc).__name__})"
            self._end(r, lambda: self.queue.fail(job.id, cid, why))

    def _finish(self, r: _Running, rc: int) -> bool:
        res_path = r.workdir / "result.json"
        if not res_path.is_file():
            if rc == LAUNCHER_GONE and self.launcher.pid is None:
                why = "the job launcher stopped"
            elif rc < 0:
                why = f"killed by signal {signal.Signals(-rc).name}"
                if rc in (-signal.SIGKILL, -signal.SIGXCPU):
                    why += " (time or memory limit)"
            else:
                why = f"exit status {rc}"
            tail = _tail(r.workdir / "worker.log")
            if tail:
                log(f"job {r.job_id}: the worker stopped without a result ({why}); last line: {tail}")
            return self.queue.fail(r.job_id, r.claim_id, f"the worker stopped without a result: {why}",
                                   exit_code=1)
        doc = json.loads(res_path.read_text(encoding="utf-8"))
        if doc["kind"] == "error":
            tb = doc.pop("traceback", None)
            if tb:
                log(f"job {r.job_id}: internal error\n{tb.rstrip()}")
            return self.queue.fail(r.job_id, r.claim_id, doc["error"], exit_code=doc.get("exit_code"))
        if doc["kind"] == "verification":
            return self.queue.finish(r.job_id, r.claim_id, exit_code=doc["exit_code"], result=doc)
        from certify.core.files import sha256_bytes
        text = (r.workdir / doc["certificate_file"]).read_text(encoding="utf-8")
        sha = doc["sha256"]
        if sha256_bytes(text.encode()) != sha:
            return self.queue.fail(r.job_id, r.claim_id,
                                   "internal error: the worker's certificate does not match its hash",
                                   exit_code=1)
        report = r.workdir / "report"
        files = {p.name: p.read_bytes() for p in sorted(report.iterdir())
                 if p.is_file() and not p.name.startswith(".")} if report.is_dir() else {}
        job = self.queue.job(r.job_id)
        if job is None:             # deleted: its claim is not live, as finish would find
            return False
        return self.queue.finish(
            r.job_id, r.claim_id, exit_code=doc["exit_code"],
            result={"report_files": doc["report_files"]},
            certificate={"sha256": sha, "text": text, "command": job.command,
                         "source_name": job.upload_name, "source_sha256": job.upload_sha256,
                         "model_sha256": doc.get("model_sha256"),
                         "verification": doc["verification"], "verify_exit": doc["verify_exit"],
                         "verify_mode": doc["verify_mode"]},
            files=files)

    def _cleanup(self, r: _Running) -> None:
        if not self.keep_work:
            shutil.rmtree(r.workdir, ignore_errors=True)


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
