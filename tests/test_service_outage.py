"""The database goes away under a running service and comes back: a real
PostgreSQL 15 server is stopped (``pg_ctl stop -m fast``: every connection
cut) and started again. Every page then answers 503 with one clear reason as
an HTML page, the API as JSON, each with ``Retry-After``; the log gets one
line when the outage begins and one when it ends, no traceback; and the
service answers again by itself once the database is back. Here the
application runs in process on the real database (default suite, a few
seconds); the same with a ``certify serve`` process and a job running through
the outage, finished exactly once after it: tests/test_service_postgres.py
(``--runslow``)."""

from __future__ import annotations

import time

import pytest
from service_support import TOKEN, postgres_cluster
from waits import wait_until

from certify.service.app import create_app
from certify.service.config import ServiceConfig
from certify.service.store import Store

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    yield from postgres_cluster(tmp_path_factory)


def test_an_outage_is_503_with_one_reason_one_log_line_and_recovers_by_itself(pg, tmp_path, capsys):
    from starlette.testclient import TestClient

    url = pg.create_db("outage")
    cfg = ServiceConfig(data=tmp_path, db=url, token=TOKEN, dispatch=False, read_rate=0)
    store = Store(url)
    with TestClient(create_app(cfg, store), raise_server_exceptions=False) as c:
        r = c.post("/api/jobs", headers=AUTH, data={"command": "feasibility", "rank": "8"})
        assert r.status_code == 201, r.text
        job = r.json()["id"]
        assert c.get("/api/health").json()["queued"] == 1
        capsys.readouterr()
        pg.pause()
        try:
            pages = ["/", "/jobs", f"/jobs/{job}", "/certificates/" + "a" * 64]
            api = ["/api/health", "/api/certificates", f"/api/jobs/{job}",
                   "/api/certificates/" + "a" * 64]
            for _round in range(2):                 # the second after a retry reached the database
                for path in pages:
                    r = c.get(path)
                    assert r.status_code == 503, (path, r.status_code, r.text[:300])
                    assert r.headers["content-type"].startswith("text/html"), path
                    assert "<h1>503: Service Unavailable</h1>" in r.text, r.text
                    assert "the database is not answering (" in r.text and "internal error" not in r.text
                    assert int(r.headers["retry-after"]) >= 1
                for path in api:
                    r = c.get(path)
                    assert r.status_code == 503 and r.headers["content-type"] == "application/json", path
                    assert r.json()["detail"].startswith("the database is not answering ("), r.json()
                    assert "retries by itself" in r.json()["detail"]
                r = c.post("/api/jobs", headers=AUTH, data={"command": "feasibility", "rank": "8"})
                assert r.status_code == 503 and r.json()["detail"].startswith("the database is not")
                r = c.post("/api/verify", files={"file": ("c.json", b"{}", "application/json")})
                assert r.status_code == 503, r.text
                assert c.get("/submit").status_code == 200        # a page that needs no database
                for _ in range(24):           # clients that keep asking, 1.2 s and more of pauses
                    assert c.get("/api/health").status_code == 503
                    time.sleep(0.05)
        finally:
            pg.resume()
        # nothing to restart: the next requests reach the database again
        # (clients asking all the while: an attempt still reaches it at least once a second)
        wait_until(lambda: c.get("/api/health").status_code == 200, "the service to answer")
        assert c.get(f"/api/jobs/{job}").json()["status"] == "queued"
        for path in ["/", "/jobs", f"/jobs/{job}"]:
            assert c.get(path).status_code == 200, path
        assert c.get("/certificates/" + "a" * 64).status_code == 404
        r = c.post("/api/jobs", headers=AUTH, data={"command": "feasibility", "rank": "8"})
        assert r.status_code == 201
    store.dispose()
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    down = [ln for ln in lines if "is not answering" in ln]
    back = [ln for ln in lines if "answers again" in ln]
    assert len(down) == 1 and len(back) == 1, err
    assert down[0].startswith("certify serve: the database (postgresql://postgres@127.0.0.1:")
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(lines) == 2, err
