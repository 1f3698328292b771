"""The service's store on SQLite and on a real PostgreSQL 15 server: Alembic
schema, the job queue (compare-and-set claims, recovery), content-addressed
certificates with filter columns, one-transaction finish."""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest
from service_support import PostgresCluster
from sqlalchemy import inspect, text

from certify.core.certificate import Certificate, Claim, ClaimKind
from certify.core.files import sha256_bytes
from certify.core.verdict import Verdict
from certify.service import store as st


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory):
    cluster = PostgresCluster(tmp_path_factory.mktemp("pg"))
    try:
        url = cluster.start()
    except Exception as exc:          # noqa: BLE001 - the reason is reported
        cluster.stop()
        pytest.fail(f"could not start a throwaway PostgreSQL cluster: {exc}")
    yield url
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = st.Store(f"sqlite:///{tmp_path / 'c.db'}")
    else:
        url = request.getfixturevalue("pg_url")
        s = st.Store(url)
        with s.engine.begin() as conn:                 # a clean slate per test
            for t in ("claims", "certificates", "jobs"):
                conn.execute(text(f"DELETE FROM {t}"))
    yield s
    s.dispose()


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


def test_schema_by_alembic_and_migrate_is_idempotent(store):
    st.migrate(store.engine)                       # second run: nothing to do
    insp = inspect(store.engine)
    assert {"jobs", "certificates", "claims", "alembic_version"} <= set(insp.get_table_names())
    cols = {c["name"] for c in insp.get_columns("certificates")}
    assert {"sha256", "kind", "verdict", "family_sha256", "model_sha256", "rank", "created_at",
            "stored_at", "json_text"} <= cols
    with store.engine.connect() as conn:
        assert conn.execute(text("select version_num from alembic_version")).scalar() == "0001"


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path):
    s = st.Store(f"sqlite:///{tmp_path / 'w.db'}")
    with s.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == st.SQLITE_BUSY_MS
    s.dispose()


def test_each_job_is_claimed_exactly_once_under_concurrency(store):
    ids = [store.add_job("rank", {"i": i}) for i in range(30)]
    got: list[str] = []
    lock = threading.Lock()

    def worker():
        while (job := store.claim_next_job()) is not None:
            with lock:
                got.append(job.id)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(ids) and len(got) == len(set(got)) == 30
    assert store.count_jobs("running") == 30 and store.count_jobs("queued") == 0


def test_recover_requeues_then_fails_with_the_reason(store):
    a = store.add_job("rank", {})
    assert store.claim_next_job().id == a
    assert store.recover(max_attempts=2) == ([a], [])
    job = store.job(a)
    assert job.status == "queued" and job.reason == "re-queued after the server stopped during attempt 1"
    assert store.claim_next_job().attempts == 2
    assert store.recover(max_attempts=2) == ([], [a])
    job = store.job(a)
    assert job.status == "failed" and "stopped during the job 2 times" in job.reason


def test_certificates_are_content_addressed_with_filter_columns(store):
    t1, t2 = _cert(8), _cert(13, Verdict.UNKNOWN, family_sha="e" * 64)
    j1, j2, j3 = (store.add_job("feasibility", {}) for _ in range(3))
    s1 = store.finish_job(j1, exit_code=0, result=None, certificate=_doc(t1, model_sha256="a" * 64))
    s2 = store.finish_job(j2, exit_code=1, result=None, certificate=_doc(t2))
    assert store.finish_job(j3, exit_code=0, result=None, certificate=_doc(t1)) == s1   # same text: one row
    assert store.certificate(s1).json_text == t1                     # verbatim
    assert len(store.certificates()) == 2
    assert store.job(j3).cert_sha256 == s1 and store.job(j3).status == "done"
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
    assert store.delete_certificate(s2) and not store.delete_certificate(s2)
    assert sh(F()) == {s1} and [c.kind for c in store.claims(s1)] == ["infeasible", "exact_rank"]


def test_finish_is_one_transaction(store, monkeypatch):
    """A failure while storing leaves neither the certificate nor a finished job."""
    job = store.add_job("feasibility", {})
    store.claim_next_job()
    import certify.api as api
    calls = {"n": 0}
    real = api.claim_index

    def flaky(obj):
        calls["n"] += 1
        if calls["n"] == 2:              # after the certificate row was added and flushed
            raise RuntimeError("disk full")
        return real(obj)

    monkeypatch.setattr(api, "claim_index", flaky)
    t = _cert(8)
    with pytest.raises(RuntimeError, match="disk full"):
        store.finish_job(job, exit_code=0, result=None, certificate=_doc(t))
    assert store.certificate(sha256_bytes(t.encode())) is None
    assert store.claims(sha256_bytes(t.encode())) == []
    assert store.job(job).status == "running" and store.job(job).cert_sha256 is None
    monkeypatch.setattr(api, "claim_index", real)
    store.finish_job(job, exit_code=0, result={"x": 1}, certificate=_doc(t))
    assert store.job(job).status == "done" and json.loads(store.job(job).result) == {"x": 1}
