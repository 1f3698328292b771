"""A bounded load test on loopback: concurrent submissions of small jobs and
concurrent reads; nothing is lost; latency percentiles are printed.
The suite runs a small version; the full one (50 submissions, 500 reads) is
opt-in: ``pytest --runslow tests/test_service_load.py -s``."""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from service_support import Server, wait_job


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _summary(name: str, xs: list[float]) -> str:
    return (f"{name}: n={len(xs)} p50={_pct(xs, 50) * 1000:.1f} ms p95={_pct(xs, 95) * 1000:.1f} ms "
            f"p99={_pct(xs, 99) * 1000:.1f} ms max={max(xs) * 1000:.1f} ms "
            f"mean={statistics.fmean(xs) * 1000:.1f} ms")


def run_load(tmp_path, submissions: int, reads: int, workers: int = 2) -> dict:
    with Server(tmp_path / "data", "--workers", str(workers)) as s, \
            httpx.Client(timeout=120, limits=httpx.Limits(max_connections=100)) as c:
        # one certificate to read from the start
        r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                   files={"file": ("seed.json", "[[1,2],[3,4]]", "application/json")})
        seed = wait_job(c, s.url, r.json()["id"])["cert_sha256"]

        def submit(i: int):
            t0 = time.perf_counter()
            # a distinct 2 x 2 matrix each: rank 2 unless i == 0 (rank 1)
            m = [[i, i], [1, 1]] if i == 0 else [[i + 1, 0], [0, 1]]
            r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                       files={"file": (f"m{i}.json", json.dumps(m), "application/json")})
            return time.perf_counter() - t0, r.status_code, r.json().get("id"), i

        paths = ["/", "/api/certificates", f"/api/certificates/{seed}", f"/certificates/{seed}",
                 "/api/health"]

        def read(i: int):
            t0 = time.perf_counter()
            r = c.get(s.url + paths[i % len(paths)])
            return time.perf_counter() - t0, r.status_code

        t_all = time.perf_counter()
        with ThreadPoolExecutor(50) as pool:
            subs = list(pool.map(submit, range(submissions)))
            rd = list(pool.map(read, range(reads)))          # while the jobs run
        assert [code for _, code, _, _ in subs] == [201] * submissions
        assert [code for _, code in rd] == [200] * reads
        t_jobs = time.perf_counter()
        done = {i: wait_job(c, s.url, jid, timeout=60 + 10 * submissions) for _, _, jid, i in subs}
        t_end = time.perf_counter()
        assert all(j["status"] == "done" for j in done.values()), \
            [j for j in done.values() if j["status"] != "done"]
        # nothing lost: every job's certificate is stored, readable, and says the right rank
        for i, j in done.items():
            cert = json.loads(c.get(f"{s.url}/api/certificates/{j['cert_sha256']}").text)
            ev = cert["claims"][0]["evidence"]
            assert ev["rank_lower"] == ev["rank_upper"] == (1 if i == 0 else 2)
        listed = {r["sha256"] for r in c.get(s.url + "/api/certificates",
                                             params={"limit": 1000}).json()}
        assert {j["cert_sha256"] for j in done.values()} | {seed} <= listed
        stats = {"submit": [t for t, *_ in subs], "read": [t for t, _ in rd]}
        print()
        print(_summary(f"{submissions} concurrent submissions", stats["submit"]))
        print(_summary(f"{reads} concurrent reads (while jobs run)", stats["read"]))
        print(f"all {submissions} jobs done {t_end - t_all:.1f} s after the first submission "
              f"({submissions / (t_end - t_all):.2f} jobs/s with {workers} workers; "
              f"{t_end - t_jobs:.1f} s after the reads)")
        return stats


def test_load_small(tmp_path):
    run_load(tmp_path, submissions=8, reads=100)


@pytest.mark.slow
def test_load_full(tmp_path):
    run_load(tmp_path, submissions=50, reads=500)
