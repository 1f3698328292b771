"""certify serve bounded by configuration, against real servers: the time and
memory limits of a job, a per-client rate limit on the open endpoints (429),
a cap on anonymous jobs waiting (429), a total storage cap (507)."""

from __future__ import annotations

import json
import sqlite3
import time

import httpx
import pytest
from service_support import Server, checkpoint_zip, wait_job

from certify.service.guard import RateLimiter

LONG_JOB = {"command": "feasibility", "family": "paper-5.1", "rank": "12", "time_limit": "30"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Three servers started at once: tight caps (one worker, small queue and
    storage), a small memory limit, and a one-second time limit."""
    base = tmp_path_factory.mktemp("bounds")
    all_ = (Server(base / "tight", "--workers", "1", "--open-submit-rate", "4", "--read-rate", "0",
                   "--max-anonymous-queued", "2", "--max-storage-mb", "1"),
            Server(base / "small", "--job-memory-mb", "256", "--workers", "1", "--read-rate", "0"),
            Server(base / "quick", "--job-seconds", "1", "--workers", "1", "--read-rate", "0"))
    for s in all_:
        s.launch()
    try:
        yield tuple(s.wait_ready() for s in all_)
    finally:
        for s in all_:
            s.stop()


def test_rate_limiter_refills_per_minute():
    lim = RateLimiter(3)
    assert [lim.take("a", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert lim.take("a", now=0.0) == pytest.approx(20.0)         # one token per 20 s
    assert lim.take("b", now=0.0) == 0.0                          # per client
    assert lim.take("a", now=20.0) == 0.0 and lim.take("a", now=20.0) > 0
    assert RateLimiter(0).take("a") == 0.0                        # 0: no limit


def test_open_submissions_anonymous_queue_and_storage_are_capped(servers):
    tight = servers[0]
    with httpx.Client(timeout=60) as c:
        # the one worker is busy, so the next jobs wait
        busy = c.post(tight.url + "/api/jobs", headers=tight.auth, data=LONG_JOB).json()["id"]
        wait_job(c, tight.url, busy, timeout=60, until=("running",))
        cert = json.dumps({"schema": "x"})
        verify = lambda: c.post(tight.url + "/api/verify",                     # noqa: E731
                                files={"file": ("c.json", cert, "application/json")})
        codes = [verify() for _ in range(5)]
        assert [r.status_code for r in codes] == [201, 201, 429, 429, 429], [r.text for r in codes]
        assert "--max-anonymous-queued" in codes[2].json()["detail"]
        assert "2 jobs submitted without the token are waiting" in codes[2].json()["detail"]
        assert "rate limit: at most 4 open submissions per minute" in codes[4].json()["detail"]
        assert int(codes[4].headers["retry-after"]) >= 1
        # the token holder is limited by neither
        r = c.post(tight.url + "/api/verify", headers=tight.auth,
                   files={"file": ("c.json", cert, "application/json")})
        assert r.status_code == 201
        # storage: 1 MB in all; a queued upload counts until its job ends
        big = b"[" + b"1," * 200_000 + b"1]"                          # 400 kB
        a = c.post(tight.url + "/api/jobs", headers=tight.auth, data={"command": "rank"},
                   files={"file": ("a.json", big, "application/json")})
        assert a.status_code == 201, a.text
        b = c.post(tight.url + "/api/jobs", headers=tight.auth, data={"command": "rank"},
                   files={"file": ("b.json", big + b" " * 300_000, "application/json")})
        assert b.status_code == 507, b.text
        assert b.json()["detail"].startswith("storage full: ") and "--max-storage-mb" in b.json()["detail"]
        with sqlite3.connect(tight.data / "certify.db") as db:
            assert db.execute("select count(*) from jobs where upload_name = 'b.json'").fetchone() == (0,)


def test_time_limit(servers):
    quick = servers[2]
    with httpx.Client(timeout=60) as c:
        # a 1 s search, then the exact check and the report: longer than 1 s in all
        r = c.post(quick.url + "/api/jobs", headers=quick.auth, data={**LONG_JOB, "time_limit": "1"})
        assert r.status_code == 201, r.text
        job = wait_job(c, quick.url, r.json()["id"], timeout=60, until=("running",))
        t0 = time.monotonic()
        job = wait_job(c, quick.url, r.json()["id"], timeout=60)
        assert job["status"] == "failed" and job["exit_code"] == 1
        assert job["reason"].startswith("time limit: the job ran longer than 1 s") \
            or "SIGXCPU" in job["reason"] or "SIGKILL" in job["reason"], job["reason"]
        assert time.monotonic() - t0 < 10


def test_memory_limit(servers):
    small = servers[1]
    with httpx.Client(timeout=60) as c:
        r = c.post(small.url + "/api/jobs", headers=small.auth, data={"command": "checkpoint"},
                   files={"file": ("m.zip", checkpoint_zip(), "application/zip")})
        job = wait_job(c, small.url, r.json()["id"], timeout=120)
        assert job["status"] == "failed" and job["reason"], job
        assert job["cert_sha256"] is None
        assert "memory" in job["reason"] or "without a result" in job["reason"], job["reason"]
