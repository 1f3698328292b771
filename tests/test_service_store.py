"""The service's store and queue on SQLite and on a real PostgreSQL 15 server:
Alembic schema, claims with leases timed by the database's clock (each job
claimed once, a stale claim never commits, only an expired lease is
re-queued), uploads kept only while their job lives, content-addressed
certificates with filter columns and files, one-transaction finish."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid

import pytest
from service_support import postgres_cluster
from sqlalchemy import inspect, text

from certify.core.certificate import Certificate, Claim, ClaimKind
from certify.core.files import sha256_bytes
from certify.core.verdict import Verdict
from certify.service import schema
from certify.service import store as st
from certify.service.queue import Queue, Upload


@pytest.fixture(scope="module")
def pg_cluster(tmp_path_factory):
    yield from postgres_cluster(tmp_path_factory)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = st.Store(f"sqlite:///{tmp_path / 'c.db'}")
    else:
        cluster = request.getfixturevalue("pg_cluster")
        s = st.Store(cluster.create_db("t" + uuid.uuid4().hex[:12]))     # a clean database per test
    yield s
    s.dispose()


@pytest.fixture
def queue(store):
    return Queue(store, max_attempts=2)


def _cert(rank: int, verdict: Verdict = Verdict.PROVED, family_sha: str = "f" * 64) -> str:
    claims = [Claim(ClaimKind.INFEASIBLE if verdict is Verdict.PROVED else ClaimKind.FEASIBLE,
                    f"statement at rank {rank}", verdict,
                    {"rank": rank, "family": "fam", "family_sha256": family_sha},
                    reason=None if verdict is Verdict.PROVED else "time limit"),
              Claim(ClaimKind.EXACT_RANK, "rank", Verdict.PROVED, {},
                    {"rank_lower": rank + 1, "rank_upper": rank + 1})]
    # the store keeps any certificate text verbatim: this one is synthetic, never checked
    return json.dumps(Certificate(claims=claims, environment={}).to_json(), indent=1) + "\n"


def _doc(text_: str, **kw) -> dict:
    return {"sha256": sha256_bytes(text_.encode()), "text": text_, "command": "feasibility", **kw}


def _claimed(queue, lease: float = 30.0, node: str = "n1"):
    job_id = queue.add("feasibility", {})
    c = queue.claim(node, lease)
    assert c is not None and c.job.id == job_id
    return c


def test_schema_by_alembic_and_migrate_is_idempotent(store):
    schema.migrate(store.engine)                       # second run: nothing to do
    insp = inspect(store.engine)
    assert {"jobs", "job_claims", "uploads", "certificates", "certificate_files", "claims",
            "alembic_version", "admission"} <= set(insp.get_table_names())
    cols = {c["name"] for c in insp.get_columns("jobs")}
    assert {"claim_id", "node_id", "lease_until", "anonymous", "client", "created_epoch",
            "reserved_bytes", "result_bytes", "progress"} <= cols
    with store.engine.connect() as conn:
        assert conn.execute(text("select version_num from alembic_version")).scalar() == "0004"


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path):
    s = st.Store(f"sqlite:///{tmp_path / 'w.db'}")
    with s.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == schema.SQLITE_BUSY_MS
    s.dispose()


def test_each_job_is_claimed_exactly_once_under_concurrency(queue):
    ids = [queue.add("rank", {"i": i}) for i in range(30)]
    got: list[str] = []
    lock = threading.Lock()

    def worker(node):
        while (c := queue.claim(node, 30)) is not None:
            with lock:
                got.append(c.job.id)

    threads = [threading.Thread(target=worker, args=(f"n{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(ids) and len(got) == len(set(got)) == 30
    assert queue.count("running") == 30 and queue.count("queued") == 0
    assert all(len(queue.claims(j)) == 1 for j in ids)


def test_leases_run_on_the_database_clock(queue, store, monkeypatch):
    """The lease ends ``lease`` seconds after the claim by the database's clock;
    the node's clock (here moved a year ahead) plays no part."""
    import certify.service.queue as qmod
    monkeypatch.setattr(qmod, "now", lambda: dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc))
    t0 = store.db_time()
    c = _claimed(queue, lease=60)
    job = queue.job(c.job.id)
    assert t0 + 59 <= job.lease_until <= store.db_time() + 60
    assert queue.requeue_expired() == ([], [])                  # not expired: never re-queued
    assert queue.job(c.job.id).status == "running"


def test_only_an_expired_lease_is_requeued_and_a_stale_claim_never_commits(queue):
    c1 = _claimed(queue, lease=0.4)
    other = _claimed(queue, lease=60)
    assert queue.renew([c1.claim_id, other.claim_id], 0.4) == {c1.claim_id, other.claim_id}
    time.sleep(0.6)                                              # c1's lease runs out
    queue.renew([other.claim_id], 60)
    assert queue.requeue_expired() == ([c1.job.id], [])
    job = queue.job(c1.job.id)
    assert job.status == "queued" and job.claim_id is None
    assert job.reason.startswith("re-queued after attempt 1 was interrupted")
    assert queue.job(other.job.id).status == "running"          # its lease is live
    assert queue.renew([c1.claim_id], 60) == set()               # the old holder learns it lost
    c2 = queue.claim("n2", 60)
    assert c2.job.id == c1.job.id and c2.claim_id != c1.claim_id and c2.job.attempts == 2
    # the old claim's result is refused; the live claim's is taken, once
    t = _cert(8)
    assert not queue.finish(c1.job.id, c1.claim_id, exit_code=0, result=None, certificate=_doc(t))
    assert not queue.fail(c1.job.id, c1.claim_id, "late")
    assert queue.finish(c2.job.id, c2.claim_id, exit_code=0, result=None, certificate=_doc(t))
    assert not queue.finish(c2.job.id, c2.claim_id, exit_code=0, result=None, certificate=_doc(t))
    assert queue.job(c1.job.id).status == "done"
    assert [(x.node_id, x.outcome) for x in queue.claims(c1.job.id)] == [("n1", "expired"),
                                                                         ("n2", "done")]


def test_attempts_run_out_then_the_job_fails_with_the_reason(queue):
    up = Upload("m.json", "a" * 64, ".json", b"[[1]]")
    job_id = queue.add("rank", {}, upload=up)
    for _ in range(2):
        c = queue.claim("n1", 60)
        assert c.job.id == job_id
        assert queue.expire_running("n1") == 1
        queue.requeue_expired()
    job = queue.job(job_id)
    assert job.status == "failed" and job.attempts == 2
    assert job.reason == "not retried: 2 attempt(s) were interrupted (limit 2, --job-attempts)"
    assert queue.upload(job_id) is None                          # the upload went with the job


def test_release_gives_the_job_back_without_counting_the_attempt(queue):
    c = _claimed(queue)
    queue.release([c.claim_id])
    job = queue.job(c.job.id)
    assert (job.status, job.attempts, job.claim_id) == ("queued", 0, None)
    assert job.reason == "re-queued: the server running it was stopped"
    assert [x.outcome for x in queue.claims(c.job.id)] == ["released"]


def test_a_requeued_jobs_reason_is_cleared_when_it_finishes(queue):
    """A job given back by a stopped server, then finished, no longer says it
    was re-queued; its progress is the live claim's only."""
    c = _claimed(queue)
    assert queue.set_progress(c.claim_id, '{"step": 2}')
    assert queue.job(c.job.id).progress == '{"step": 2}'
    queue.release([c.claim_id])
    job = queue.job(c.job.id)
    assert job.reason == "re-queued: the server running it was stopped" and job.progress is None
    assert not queue.set_progress(c.claim_id, '{"step": 3}')     # the released claim is not live
    c2 = queue.claim("n2", 60)
    assert c2.job.id == c.job.id and c2.job.reason.startswith("re-queued")
    assert queue.finish(c2.job.id, c2.claim_id, exit_code=0, result=None,
                        certificate=_doc(_cert(3)))
    job = queue.job(c.job.id)
    assert (job.status, job.reason, job.progress) == ("done", None, None)
    # a failure keeps its own reason
    c3 = _claimed(queue)
    queue.release([c3.claim_id])
    c4 = queue.claim("n2", 60)
    assert queue.fail(c4.job.id, c4.claim_id, "bad input: x")
    assert queue.job(c4.job.id).reason == "bad input: x"


def test_a_queued_jobs_position(queue):
    ids = [queue.add("rank", {"i": i}) for i in range(3)]
    assert [queue.position(j) for j in ids] == [0, 1, 2]
    c = queue.claim("n1", 60)
    assert c.job.id == ids[0]
    assert [queue.position(j) for j in ids] == [None, 0, 1]


def test_uploads_live_as_long_as_their_job_unless_kept(store):
    for keep in (False, True):
        q = Queue(store, keep_uploads=keep)
        job_id = q.add("rank", {}, upload=Upload("m.json", "b" * 64, ".json", b"x" * 1000))
        assert q.upload(job_id) == b"x" * 1000 and store.storage_used() >= 1000
        c = q.claim("n", 60)
        assert q.fail(job_id, c.claim_id, "bad input: m.json: nope", exit_code=2)
        assert (q.upload(job_id) is not None) == keep
    # the kept upload only, and each ended job's row: its reason and its options
    assert store.storage_used() == 1000 + 2 * (len("bad input: m.json: nope") + len("{}"))


def test_certificates_are_content_addressed_with_filter_columns_and_files(queue, store):
    t1, t2 = _cert(8), _cert(13, Verdict.UNKNOWN, family_sha="e" * 64)
    c1, c2, c3 = (_claimed(queue) for _ in range(3))
    assert queue.finish(c1.job.id, c1.claim_id, exit_code=0, result=None,
                        certificate=_doc(t1, model_sha256="a" * 64), files={"report.md": b"# r\n"})
    assert queue.finish(c2.job.id, c2.claim_id, exit_code=1, result=None, certificate=_doc(t2))
    s1, s2 = sha256_bytes(t1.encode()), sha256_bytes(t2.encode())
    # the same text again: one row, the first job's files
    assert queue.finish(c3.job.id, c3.claim_id, exit_code=0, result=None, certificate=_doc(t1),
                        files={"other.md": b"x"})
    assert store.certificate(s1).json_text == t1                     # verbatim
    assert store.files(s1) == [("report.md", 4)] and store.file(s1, "report.md") == b"# r\n"
    assert store.file(s1, "../certify.db") is None
    assert len(store.certificates()) == 2
    assert queue.job(c3.job.id).cert_sha256 == s1 and queue.job(c3.job.id).status == "done"
    assert store.storage_used() == len(t1.encode()) + 4 + len(t2.encode()) + 3 * len("{}")
    F = st.Filters
    sh = lambda f: {r.sha256 for r in store.certificates(f)}       # noqa: E731
    assert sh(F(kind="infeasible")) == {s1} and sh(F(kind="feasible")) == {s2}
    assert sh(F(kind="exact_rank")) == {s1, s2}
    assert sh(F(verdict="proved")) == {s1} and sh(F(verdict="unknown")) == {s2}
    assert sh(F(rank=13)) == {s2} and sh(F(rank=9)) == {s1}          # claim ranks, incl. exact rank
    assert sh(F(family_sha256="e" * 64)) == {s2} and sh(F(family_sha256="f" * 64)) == {s1}
    assert sh(F(model_sha256="a" * 64)) == {s1}
    row = store.certificate(s2)
    assert (row.kind, row.verdict, row.rank) == ("feasible,exact_rank", "unknown", 13)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    assert sh(F(since=later)) == set() and sh(F(until=later)) == {s1, s2}
    assert sh(F(until=dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc))) == {s1, s2}
    assert store.delete_certificate(s1) and not store.delete_certificate(s1)
    assert sh(F()) == {s2} and store.files(s1) == [] and store.claims(s1) == []


def test_finish_is_one_transaction(queue, store, monkeypatch):
    """A failure while storing leaves neither the certificate nor a finished job."""
    c = _claimed(queue)
    import certify.api as api
    real = api.claim_index

    def broken(obj):
        raise RuntimeError("disk full")

    monkeypatch.setattr(api, "claim_index", broken)
    t = _cert(8)
    with pytest.raises(RuntimeError, match="disk full"):
        queue.finish(c.job.id, c.claim_id, exit_code=0, result=None, certificate=_doc(t))
    assert store.certificate(sha256_bytes(t.encode())) is None
    job = queue.job(c.job.id)
    assert job.status == "running" and job.cert_sha256 is None and job.claim_id == c.claim_id
    monkeypatch.setattr(api, "claim_index", real)
    assert queue.finish(c.job.id, c.claim_id, exit_code=0, result={"x": 1}, certificate=_doc(t))
    assert queue.job(c.job.id).status == "done" and json.loads(queue.job(c.job.id).result) == {"x": 1}


# ---------------------------------------------------------------- admission under concurrency

def _second(store):
    """A second server's store on the same database (its own pool and, on
    SQLite, its own in-process lock: only the database orders the two)."""
    return st.Store(store.url)


def _race(stores, n, submit):
    """``submit(queue, i)`` from ``n`` threads at once over ``stores``:
    the ids admitted and the refusals."""
    from certify.service.queue import Refused
    queues = [Queue(s, max_attempts=2) for s in stores]
    start = threading.Barrier(n)
    ok, no, lock = [], [], threading.Lock()

    def one(i):
        start.wait()
        try:
            jid = submit(queues[i % len(queues)], i)
            with lock:
                ok.append(jid)
        except Refused as r:
            with lock:
                no.append(r)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ok, no


def test_anonymous_queue_cap_holds_under_concurrent_submissions(store):
    from certify.service.queue import Quota
    other = _second(store)
    try:
        quota = Quota(max_storage_bytes=1 << 40, max_anonymous_queued=5)
        data = b"{" + b" " * (2 << 20) + b"}"                       # a 2 MB upload each
        ok, no = _race([store, other], 20, lambda q, i: q.add(
            "verify", {}, upload=Upload(f"c{i}.json", "a" * 64, ".json", data), anonymous=True,
            client="10.0.0.1", quota=quota))
        assert len(ok) == 5 and len(no) == 15
        assert {r.status for r in no} == {429}
        assert "5 jobs submitted without the token are waiting" in no[0].detail
        q = Queue(store)
        assert q.count("queued", anonymous=True) == 5
        with store.session() as s:                                   # no upload of a refused one
            assert s.scalar(text("select count(*) from uploads")) == 5
        # a job with the token is not counted against the anonymous cap
        assert q.add("verify", {}, anonymous=False, quota=quota)
    finally:
        other.dispose()


def test_storage_cap_holds_under_concurrency_and_counts_results(store):
    from certify.service.queue import RESULT_RESERVE, Quota
    other = _second(store)
    try:
        mb = 1 << 20
        quota = Quota(max_storage_bytes=10 * mb)
        data = b"x" * mb
        ok, no = _race([store, other], 16, lambda q, i: q.add(
            "rank", {}, upload=Upload(f"m{i}.json", "b" * 64, ".json", data), quota=quota))
        per_job = mb + RESULT_RESERVE + len("{}")
        assert len(ok) == (10 * mb) // per_job == 9 and {r.status for r in no} == {507}
        assert "storage full" in no[0].detail and "--max-storage-mb" in no[0].detail
        used = store.storage_used()
        assert used == 9 * per_job <= 10 * mb
        # a result is stored only when it fits under the cap, under the same lock
        q = Queue(store, max_storage_bytes=10 * mb)
        c = q.claim("n1", 60)
        big = {"verification": "v" * (5 * mb)}                        # a 5 MB verify result
        assert q.finish(c.job.id, c.claim_id, exit_code=0, result=big)
        job = q.job(c.job.id)
        assert job.status == "failed" and job.reason.startswith("the result was not stored: storage full")
        assert store.storage_used() <= 10 * mb
        c = q.claim("n1", 60)                                        # a small one fits
        assert q.finish(c.job.id, c.claim_id, exit_code=0, result={"verification": "ok"})
        assert q.job(c.job.id).status == "done"
        assert store.storage_used() < used                           # its upload went
    finally:
        other.dispose()


def test_open_submission_rate_is_counted_in_the_database_per_client(store):
    from certify.service.queue import Quota
    other = _second(store)
    try:
        quota = Quota(max_storage_bytes=1 << 40, open_submit_rate=3)
        ok, no = _race([store, other], 10, lambda q, i: q.add(
            "verify", {}, anonymous=True, client="10.0.0.1", quota=quota))
        assert len(ok) == 3 and {r.status for r in no} == {429}
        assert "at most 3 open submissions per minute" in no[0].detail and 1 <= no[0].retry_after <= 60
        q = Queue(store)
        assert q.add("verify", {}, anonymous=True, client="10.0.0.2", quota=quota)   # another client
        assert q.add("verify", {}, anonymous=False, client="10.0.0.1", quota=quota)  # the token
    finally:
        other.dispose()


def test_ended_anonymous_jobs_expire_and_the_storage_figure_shrinks(store):
    q = Queue(store)
    anon = q.add("verify", {}, upload=Upload("c.json", "a" * 64, ".json", b"{}" * 500), anonymous=True)
    mine = q.add("verify", {}, upload=Upload("d.json", "a" * 64, ".json", b"{}" * 500))
    for _ in range(2):
        c = q.claim("n1", 60)
        assert q.finish(c.job.id, c.claim_id, exit_code=0, result={"verification": "x" * 5000})
    live = q.add("verify", {}, anonymous=True)                       # still queued: never expires
    used = store.storage_used()
    assert q.expire(1) == 0                                          # ended just now
    with store.write() as s:                                         # both ended 2 days ago
        s.execute(text("update jobs set finished_at = :t where id in (:a, :b)"),
                  {"t": dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=2), "a": anon, "b": mine})
    assert q.expire(1) == 1
    assert q.job(anon) is None and q.claims(anon) == []
    assert q.job(mine) is not None and q.job(live) is not None      # the token's job stays
    assert used - store.storage_used() >= 5000


def test_an_idle_dispatcher_waits_longer_each_tick_and_a_busy_one_polls():
    """The dispatcher's wait between ticks: twice the last while idle, from the poll up to
    IDLE_POLL; the poll again as soon as a job runs (a submission wakes it at once)."""
    from certify.service.dispatcher import IDLE_POLL, next_wait
    waits, w = [], 0.2
    for _ in range(6):
        w = next_wait(w, 0.2, idle=True)
        waits.append(w)
    assert waits == [0.4, 0.8, IDLE_POLL, IDLE_POLL, IDLE_POLL, IDLE_POLL] and IDLE_POLL == 1.6
    assert next_wait(IDLE_POLL, 0.2, idle=False) == 0.2
    assert next_wait(0.05, 0.2, idle=True) == 0.2          # never below the poll
