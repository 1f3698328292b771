"""The load driver for certify serve: N clients (one connection each, all at
once, asyncio) each submit their share of small rank jobs and make their share
of reads of pages and the API while the jobs run; then every job must end
done, exactly once, with the right certificate. With ``anonymous`` the
clients also upload certificates to the open ``/api/verify`` without the
token, against the servers' caps: every admitted one must end done exactly
once, and a sampler of ``/api/health`` records the most anonymous jobs seen
waiting and the most bytes stored (the caps must hold). Latency percentiles
of the submissions and of the reads are returned (and printed): each request's
time as the HTTP client measured it (``Response.elapsed``), a measurement
printed for docs/service.md, never a pass mark."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import statistics
from dataclasses import dataclass, field

import httpx
from service_support import Server, wait_job


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(name: str, xs: list[float]) -> str:
    return (f"{name}: n={len(xs)} p50={pct(xs, 50) * 1000:.1f} ms p95={pct(xs, 95) * 1000:.1f} ms "
            f"p99={pct(xs, 99) * 1000:.1f} ms max={max(xs) * 1000:.1f} ms "
            f"mean={statistics.fmean(xs) * 1000:.1f} ms")


@dataclass
class LoadResult:
    submit: list[float]
    read: list[float]
    jobs: dict[int, dict]          # submission index -> final job document
    seconds: float                 # first submission to last job done (the server's records)
    anonymous: dict[int, dict] = field(default_factory=dict)   # admitted open uploads, final
    refused: dict[int, int] = field(default_factory=dict)      # HTTP status -> open uploads refused
    max_anonymous_queued: int = 0  # the most anonymous jobs seen waiting (sampled)
    max_storage: int = 0           # the most bytes seen stored (sampled)

    def p(self, which: str, q: float) -> float:
        return pct(getattr(self, which), q)


def _matrix(i: int) -> list[list[int]]:
    """A distinct 2 x 2 matrix per submission: rank 1 when i % 10 == 0, else 2."""
    return [[i + 1, i + 1], [1, 1]] if i % 10 == 0 else [[i + 2, 0], [0, 1]]


def _span(jobs) -> float:
    """Seconds from the first job's submission to the last one's end, as the server recorded them."""
    jobs = list(jobs)
    first = min(dt.datetime.fromisoformat(j["created_at"]) for j in jobs)
    last = max(dt.datetime.fromisoformat(j["finished_at"]) for j in jobs)
    return (last - first).total_seconds()


def run_load(servers: list[Server], submissions: int, reads: int, clients: int = 20,
             anonymous: int = 0) -> LoadResult:
    """Drive ``servers`` (clients spread over them) and check that nothing is
    lost or run twice; ``anonymous`` open verify uploads besides."""
    auth, base0 = servers[0].auth, servers[0].url
    with httpx.Client(timeout=120) as c:
        r = c.post(base0 + "/api/jobs", headers=auth, data={"command": "rank"},
                   files={"file": ("seed.json", "[[1,2],[3,4]]", "application/json")})
        seed_job = wait_job(c, base0, r.json()["id"])
        seed = seed_job["cert_sha256"]
    paths = ["/", "/api/certificates", f"/api/certificates/{seed}", f"/certificates/{seed}",
             f"/api/jobs/{seed_job['id']}", "/jobs"]

    with httpx.Client(timeout=120) as c:
        seed_text = c.get(f"{base0}/api/certificates/{seed}").text
    open_ids: dict[int, str] = {}
    refused: dict[int, int] = {}
    peaks = {"queued": 0, "storage": 0}

    async def open_upload(ac, base, i):
        r = await ac.post(base + "/api/verify", files={"file": (f"v{i}.json", seed_text,
                                                                "application/json")})
        if r.status_code == 201:
            open_ids[i] = r.json()["id"]
        else:
            assert r.status_code in (429, 507), (r.status_code, r.text)
            refused[r.status_code] = refused.get(r.status_code, 0) + 1

    async def sampler(stop: asyncio.Event):
        async with httpx.AsyncClient(timeout=120) as ac:
            while not stop.is_set():
                for s in servers:
                    h = (await ac.get(s.url + "/api/health")).json()
                    peaks["queued"] = max(peaks["queued"], h["queued_anonymous"])
                    peaks["storage"] = max(peaks["storage"], h["storage_bytes"])
                await asyncio.sleep(0.1)

    async def client(k: int, sub_t: list, read_t: list, ids: dict):
        base = servers[k % len(servers)].url
        mine_open = list(range(k, anonymous, clients))
        mine_sub = list(range(k, submissions, clients))
        mine_read = list(range(k, reads, clients))
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=1)) as ac:
            # interleave: the reads run while the jobs are queued and running
            per = max(1, len(mine_read) // max(1, len(mine_sub)))
            ri = 0
            for i in mine_sub:
                r = await ac.post(base + "/api/jobs", headers=auth, data={"command": "rank"},
                                  files={"file": (f"m{i}.json", json.dumps(_matrix(i)),
                                                  "application/json")})
                sub_t.append(r.elapsed.total_seconds())
                assert r.status_code == 201, r.text
                ids[i] = r.json()["id"]
                if mine_open:
                    await open_upload(ac, base, mine_open.pop())
                for _ in range(per):
                    if ri < len(mine_read):
                        await read(ac, base, mine_read[ri], read_t)
                        ri += 1
            while ri < len(mine_read):
                await read(ac, base, mine_read[ri], read_t)
                ri += 1

    async def read(ac, base, j, read_t):
        r = await ac.get(base + paths[j % len(paths)])
        read_t.append(r.elapsed.total_seconds())
        assert r.status_code == 200, (paths[j % len(paths)], r.status_code, r.text[:200])

    async def main():
        sub_t: list[float] = []
        read_t: list[float] = []
        ids: dict[int, str] = {}
        stop = asyncio.Event()
        watch = asyncio.create_task(sampler(stop))
        await asyncio.gather(*(client(k, sub_t, read_t, ids) for k in range(clients)))
        stop.set()
        await watch
        return sub_t, read_t, ids

    sub_t, read_t, ids = asyncio.run(main())
    assert len(ids) == submissions and len(set(ids.values())) == submissions
    done: dict[int, dict] = {}
    with httpx.Client(timeout=120) as c:
        for i, jid in ids.items():
            done[i] = wait_job(c, servers[i % len(servers)].url, jid)
        seconds = _span(done.values())
        bad = [j for j in done.values() if j["status"] != "done"]
        assert not bad, bad[:3]
        # nothing lost: every certificate is stored, readable anywhere, with the right rank
        for i, j in done.items():
            text = c.get(f"{servers[(i + 1) % len(servers)].url}/api/certificates/{j['cert_sha256']}").text
            ev = json.loads(text)["claims"][0]["evidence"]
            assert ev["rank_lower"] == ev["rank_upper"] == (1 if i % 10 == 0 else 2), (i, ev)
        listed = {r["sha256"] for r in c.get(base0 + "/api/certificates",
                                             params={"limit": 1000}).json()}
        assert {j["cert_sha256"] for j in done.values()} | {seed} <= listed
        assert len({j["cert_sha256"] for j in done.values()}) == submissions
        opened = {i: wait_job(c, servers[0].url, jid) for i, jid in open_ids.items()}
        assert all(j["status"] == "done" and j["anonymous"] for j in opened.values()), \
            [j for j in opened.values() if j["status"] != "done"][:3]
        assert len(set(open_ids.values())) == len(open_ids)
        assert len(open_ids) + sum(refused.values()) == anonymous
    res = LoadResult(sub_t, read_t, done, seconds, opened, refused, peaks["queued"], peaks["storage"])
    print()
    print(summary(f"{submissions} submissions from {clients} clients", sub_t))
    print(summary(f"{reads} reads of pages and API from {clients} clients (while jobs run)", read_t))
    print(f"all {submissions} jobs done {seconds:.1f} s after the first submission "
          f"({submissions / seconds:.2f} jobs/s on {len(servers)} server(s))")
    if anonymous:
        print(f"{anonymous} open verify uploads: {len(opened)} admitted and done, refused "
              f"{refused}; at most {res.max_anonymous_queued} anonymous jobs seen waiting, "
              f"at most {res.max_storage / (1 << 20):.2f} MB seen stored")
    return res
