"""certify serve bounded by configuration, against real servers: the time and
memory limits of a job, a per-client rate limit on the open endpoints (429),
a cap on anonymous jobs waiting (429), a total storage cap (507) -- the caps
holding under concurrent submissions -- and the client's address taken from
the socket unless a trusted proxy names it."""

from __future__ import annotations

import datetime as dt
import io
import json
import sqlite3
import threading

import httpx
import numpy as np
import pytest
from service_support import Server, hold_jobs, wait_job

from certify.service.guard import RateLimiter

#: the trusted proxy's address: a loopback address of its own, so that one server sees
#: connections from the proxy (bound to it) and from a client that is not the proxy (127.0.0.1)
PROXY = "127.0.0.2"
LONG_JOB = {"command": "feasibility", "family": "paper-5.1", "rank": "12", "time_limit": "30"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Servers started at once: tight caps (one worker, small queue and
    storage), a one-second time limit, caps raced by
    concurrent uploads, and an open-submission limit behind a trusted proxy
    (:data:`PROXY`; a client connecting from elsewhere is not it)."""
    base = tmp_path_factory.mktemp("bounds")
    all_ = (Server(base / "tight", "--workers", "1", "--open-submit-rate", "4", "--read-rate", "0",
                   "--max-anonymous-queued", "2", "--max-storage-mb", "1"),
            Server(base / "quick", "--job-seconds", "1", "--workers", "1", "--read-rate", "0"),
            Server(base / "gate", "--workers", "1", "--read-rate", "0", "--open-submit-rate", "100",
                   "--max-anonymous-queued", "5", "--max-storage-mb", "18", "--max-upload-mb", "3"),
            Server(base / "proxied", "--read-rate", "0", "--open-submit-rate", "2",
                   "--trusted-proxy", PROXY))
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
        wait_job(c, tight.url, busy, until=("running",))
        hold_jobs(tight)                           # it holds the worker without computing
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
    """The limit stops the job (never before it ran its second): what the job
    records, not how long the test waited, so a loaded machine cannot fail it."""
    quick = servers[1]
    with httpx.Client(timeout=60) as c:
        # a 1 s search, then the exact check and the report: longer than 1 s in all
        r = c.post(quick.url + "/api/jobs", headers=quick.auth, data={**LONG_JOB, "time_limit": "1"})
        assert r.status_code == 201, r.text
        job = wait_job(c, quick.url, r.json()["id"])
        assert job["status"] == "failed" and job["exit_code"] == 1 and job["cert_sha256"] is None
        assert job["reason"].startswith("time limit: the job ran longer than 1 s") \
            or "SIGXCPU" in job["reason"] or "SIGKILL" in job["reason"], job["reason"]
        ran = dt.datetime.fromisoformat(job["finished_at"]) - dt.datetime.fromisoformat(job["started_at"])
        assert ran.total_seconds() >= 1.0


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A server with the smallest memory limit accepted (1024 MB)."""
    with Server(tmp_path_factory.mktemp("small") / "small", "--job-memory-mb", "1024", "--workers", "1",
                "--read-rate", "0", "--max-unpacked-mb", "400") as s:
        yield s


@pytest.mark.slow  # a 1 GB job killed at its limit (9 s, a server of its own); the other caps run by default
def test_memory_limit(small):
    """The smallest limit accepted (1024 MB, the loaded library included) runs a
    small job; a job that needs more memory is stopped and says so."""
    with httpx.Client(timeout=60) as c:
        r = c.post(small.url + "/api/jobs", headers=small.auth, data={"command": "rank"},
                   files={"file": ("i.json", "[[1,2],[2,4]]", "application/json")})
        job = wait_job(c, small.url, r.json()["id"])
        assert job["status"] == "done" and job["exit_code"] == 0, job
        buf = io.BytesIO()                          # 6000 x 6000 ones: 288 MB once read
        np.savez_compressed(buf, matrix=np.ones((6000, 6000)))
        r = c.post(small.url + "/api/jobs", headers=small.auth, data={"command": "rank"},
                   files={"file": ("m.npz", buf.getvalue(), "application/octet-stream")})
        assert r.status_code == 201, r.text
        job = wait_job(c, small.url, r.json()["id"])
        assert job["status"] == "failed" and job["reason"], job
        assert job["cert_sha256"] is None
        assert "memory" in job["reason"] or "without a result" in job["reason"], job["reason"]


def _at_once(n, post):
    """``post(i)`` from ``n`` threads released together; the responses."""
    start, out = threading.Barrier(n), [None] * n

    def one(i):
        start.wait()
        out[i] = post(i)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_caps_hold_under_concurrent_uploads(servers):
    """20 anonymous 2 MB uploads at once against --max-anonymous-queued 5, then
    4 token uploads of 3 MB at once against the 18 MB storage cap (uploads and
    the reservations of their results count)."""
    gate = servers[2]
    with httpx.Client(timeout=120) as c:
        busy = c.post(gate.url + "/api/jobs", headers=gate.auth, data=LONG_JOB).json()["id"]
        wait_job(c, gate.url, busy, until=("running",))
        hold_jobs(gate)
        two = b"{" + b" " * (2 << 20) + b"}"
        # one client for all the threads (a connection each): a client per request would
        # build an SSL context each time
        codes = [r.status_code for r in _at_once(20, lambda i: c.post(
            gate.url + "/api/verify", files={"file": (f"c{i}.json", two, "application/json")}))]
        assert sorted(codes) == [201] * 5 + [429] * 15, codes
        assert c.get(gate.url + "/api/health").json()["queued"] == 5
        three = b"{" + b" " * (3 << 20) + b"}"
        res = _at_once(4, lambda i: c.post(
            gate.url + "/api/verify", headers=gate.auth,
            files={"file": (f"t{i}.json", three[:-(1 << 10)] + b"}", "application/json")}))
        assert sorted(r.status_code for r in res) == [201, 201, 507, 507], [r.text for r in res]
        assert [r for r in res if r.status_code == 507][0].json()["detail"].startswith("storage full")
        health = c.get(gate.url + "/api/health").json()
        assert health["storage_bytes"] <= health["max_storage_bytes"] == 18 << 20
        with sqlite3.connect(gate.data / "certify.db") as db:
            assert db.execute("select count(*) from uploads").fetchone() == (7,)


def test_forwarded_for_is_honoured_only_from_a_trusted_proxy(servers):
    s = servers[3]
    cert = json.dumps({"schema": "x"})

    clients = {None: httpx.Client(timeout=60),
               PROXY: httpx.Client(transport=httpx.HTTPTransport(local_address=PROXY), timeout=60)}

    def post(who, via=None):
        return clients[via].post(s.url + "/api/verify", headers={"X-Forwarded-For": who},
                                 files={"file": ("c.json", cert, "application/json")})
    # a forged header from a client that is not the proxy does not make a new client:
    # the third submission is over the limit
    assert [post(f"203.0.113.{i}").status_code for i in range(3)] == [201, 201, 429]
    # through the trusted proxy each forwarded address is a client of its own
    assert [post(f"203.0.113.{i}", PROXY).status_code for i in range(3)] == [201, 201, 201]
    assert [post("198.51.100.7", PROXY).status_code for _ in range(3)] == [201, 201, 429]
    for c in clients.values():
        c.close()
    with sqlite3.connect(s.data / "certify.db") as db:
        assert dict(db.execute("select client, count(*) from jobs group by client").fetchall()) == {
            "127.0.0.1": 2, "203.0.113.0": 1, "203.0.113.1": 1, "203.0.113.2": 1, "198.51.100.7": 2}


def test_repeated_fields_and_unknown_query_parameters_are_refused(servers):
    s = servers[3]
    with httpx.Client(timeout=60) as c:
        r = c.post(s.url + "/api/jobs", headers=s.auth,
                   data={"command": "feasibility", "rank": ["3", "12"]})
        assert r.status_code == 422 and r.json()["detail"] == "rank: the field is given 2 times; give it once"
        r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": ["rank", "rank"]},
                   files={"file": ("i.json", "[[1]]", "application/json")})
        assert r.status_code == 422 and r.json()["detail"].startswith("command: the field is given 2")
        r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                   files=[("file", ("a.json", b"[[1]]", "application/json")),
                          ("file", ("b.json", b"[[2]]", "application/json"))])
        assert r.status_code == 422 and r.json()["detail"].startswith("file: the field is given 2")
        r = c.post(s.url + "/api/verify?x=1", headers=s.auth,
                   files={"file": ("c.json", "{}", "application/json")})
        assert r.status_code == 422 and "unknown query parameter 'x'" in r.json()["detail"]
        r = c.post(s.url + "/api/jobs?rank=3", headers=s.auth, data={"command": "feasibility"})
        assert r.status_code == 422 and "unknown query parameter 'rank'" in r.json()["detail"]
        with sqlite3.connect(s.data / "certify.db") as db:
            assert db.execute("select count(*) from jobs where command != 'verify'").fetchone() == (0,)
