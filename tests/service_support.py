"""Shared set-up for the service tests: a real ``certify serve`` on loopback,
the committed kilobyte checkpoint as a zip, job polling, process trees, a
throwaway PostgreSQL cluster, and the reason a test needing an OS package
skips (``make service-deps`` installs them where it can; under ``CI`` a
missing one fails instead of skipping)."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from waits import HANG_GUARD_S, polls, wait_until

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "models" / "checkpoints" / "ood-6-4-8-elu1-r8-s0"
TOKEN = "test-token-0123456789abcdef"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "certifypg"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def need_os_package(present: bool, what: str, packages: str) -> None:
    """Skip (fail under CI) when an OS package the test needs is missing."""
    if present:
        return
    why = (f"{what} missing: install the Debian packages {packages} "
           f"('make service-deps' does, with root or passwordless sudo)")
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def need_postgres() -> None:
    need_os_package((PG_BIN / "initdb").is_file(), f"PostgreSQL 15 ({PG_BIN})", "postgresql-15")


def checkpoint_zip(stem: Path = CKPT) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for suffix in (".json", ".safetensors"):
            z.write(stem.with_suffix(suffix), stem.name + suffix)
    return buf.getvalue()


_POLL: httpx.Client | None = None


def answers(url: str) -> bool:
    """``GET url/api/health`` is 200 (one client for every poll: ``httpx.get`` builds a
    client and its SSL context on each call)."""
    global _POLL
    if _POLL is None:
        _POLL = httpx.Client(timeout=2)
    return _POLL.get(url + "/api/health").status_code == 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_exit(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``certify serve ARGS`` expected to stop by itself (a refusal at start; ``timeout``:
    a hang guard, 600 s at least)."""
    return subprocess.run([sys.executable, "-m", "certify", "serve", *args], cwd=cwd or ROOT,
                          env=env(), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


class Server:
    """``python -m certify serve`` in a subprocess (its own session). Its jobs
    run at the tests' own priority (``--job-nice 0``) unless ``extra`` says
    otherwise: beside a busy test run, a niced job would mostly wait."""

    def __init__(self, data: Path, *extra: str, port: int | None = None, token: str = TOKEN,
                 token_file: bool = True):
        extra = extra if "--job-nice" in extra else (*extra, "--job-nice", "0")
        self.data, self.port, self.extra = Path(data), port or free_port(), list(extra)
        self.token = token
        self.token_file = self.data.parent / f"{self.data.name}.token"
        if token_file:
            self.token_file.write_text(token + "\n")
        self.use_token_file = token_file
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data.parent / f"{self.data.name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def launch(self) -> "Server":
        """Start the process (without waiting for it to serve)."""
        self.log = open(self.log_path, "ab")
        args = ["--port", str(self.port), "--data", str(self.data), *self.extra]
        if self.use_token_file:
            args += ["--token-file", str(self.token_file)]
        self.proc = subprocess.Popen([sys.executable, "-m", "certify", "serve", *args],
                                     cwd=ROOT, env=env(), stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def wait_ready(self) -> "Server":
        """The server once /api/health answers 200; fails at once, with its log's
        tail, when the process exits first (waits.wait_until: no wall-clock bound)."""
        wait_until(lambda: answers(self.url),
                   "certify serve to answer", proc=self.proc, output=self.log_path, pause=0.05,
                   absent=(httpx.HTTPError,))
        return self

    def start(self) -> "Server":
        return self.launch().wait_ready()

    def kill(self) -> None:
        """SIGKILL the server process only (its workers must die with it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(HANG_GUARD_S)

    def stop(self) -> None:
        """SIGTERM, and wait for the graceful stop (a SIGKILL only past the hang guard,
        so that a loaded machine cannot turn a clean exit into a killed one)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(HANG_GUARD_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(HANG_GUARD_S)
        if getattr(self, "log", None):
            self.log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def wait_job(client, base: str, job_id: str, until=("done", "failed")) -> dict:
    """The job once its status is in ``until`` (polled until then; a server that
    went away fails the next poll; waits.wait_until's hang guard)."""
    def ended():
        j = client.get(f"{base}/api/jobs/{job_id}").json()
        return j if j["status"] in until else None
    return wait_until(ended, f"job {job_id} to be {' or '.join(until)}")


# ---------------------------------------------------------------- processes

def descendants(pid: int) -> set[int]:
    """Every living process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def job_processes(server_pid: int) -> set[int]:
    """The job processes of a server (and whatever they started): every process below
    its launcher, which forks one process per job (certify.service.launcher)."""
    launchers = [p for p in descendants(server_pid) if _ppid(p) == server_pid
                 and b"certify.service.launcher" in _cmdline(p)]
    return set().union(*(descendants(p) for p in launchers))


def hold_jobs(server) -> set[int]:
    """SIGSTOP the server's running job processes (each its own process group), so a
    job that only keeps a worker busy holds it without computing; the server's stop
    kills them as it kills any job. The stopped pids."""
    pids = wait_until(lambda: job_processes(server.proc.pid) or None, "a job process to start",
                      proc=server.proc, output=server.log_path, pause=0.05)
    for p in pids:
        try:
            os.killpg(p, signal.SIGSTOP) if os.getpgid(p) == p else os.kill(p, signal.SIGSTOP)
        except ProcessLookupError:
            pass
    return pids


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    """Running (a zombie does not compute)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cpu_ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(stat[11]) + int(stat[12])


#: CPU seconds that the processes of a killed or stopped server may still use all together
#: (signals delivered, a watcher thread woken, process groups killed): a job that computed
#: on to its own end would use tens of them
DYING_CPU_S = 2.0


def _ticks(pid: int) -> int | None:
    try:
        return cpu_ticks(pid)
    except (OSError, IndexError, ValueError):
        return None


def cpu_now(pids) -> dict[int, int | None]:
    """Each process's CPU ticks so far (None when it is gone): the start of :func:`cpu_until_gone`."""
    return {p: _ticks(p) for p in pids}


def cpu_until_gone(since: dict[int, int | None]) -> float:
    """CPU seconds that the processes of ``since`` (:func:`cpu_now`) used from then
    until every one has stopped (user + system ticks, polled until each is gone or a
    zombie, whose ticks are final); fails at the hang guard. "No process computes on",
    in CPU time: a wall-clock "gone within N s" would fail a correct server on a
    loaded machine, and pass a process that computed on for N s."""
    last = dict(since)
    for _ in polls(0.05):
        for p in since:
            t = _ticks(p)
            if t is not None:
                last[p] = t
        if not any(alive(p) for p in since):
            return sum(last[p] - t0 for p, t0 in since.items() if t0 is not None) / os.sysconf("SC_CLK_TCK")
        time.sleep(0.05)
    raise AssertionError(f"processes still alive at the hang guard: {[p for p in since if alive(p)]}")


def wait_gone(pids) -> list[int]:
    """``[]`` once every pid has stopped (polled; returned at once when they have),
    else the pids still alive when waits.polls' hang guard ends."""
    for _ in polls(0.05):
        if not any(alive(p) for p in pids):
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


# ---------------------------------------------------------------- PostgreSQL

class PostgresCluster:
    """A throwaway PostgreSQL 15 cluster on loopback: initdb + pg_ctl under a
    non-root user (PostgreSQL refuses root; the user is created with useradd when
    missing), removed afterwards."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.port = free_port()
        self.pgdata = None

    def _as_user(self, *cmd: str) -> list[str]:
        if os.geteuid() != 0:
            return list(cmd)
        return ["runuser", "-u", PG_USER, "--", *cmd]

    def start(self) -> str:
        import pwd

        need_postgres()
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(PG_USER)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                                "/usr/sbin/nologin", PG_USER], check=True)
            uid = pwd.getpwnam(PG_USER).pw_uid
        self.root.mkdir(parents=True, exist_ok=True)
        self.dir = Path(subprocess.run(["mktemp", "-d", "/tmp/certify-pg.XXXXXX"], check=True,
                                       capture_output=True, text=True).stdout.strip())
        if os.geteuid() == 0:
            os.chown(self.dir, uid, -1)
        self.pgdata, self.sock = self.dir / "data", self.dir
        subprocess.run(self._as_user(str(PG_BIN / "initdb"), "-D", str(self.pgdata), "-U", "postgres",
                                     "--auth=trust", "-E", "UTF8", "--no-sync"),
                       check=True, capture_output=True)
        subprocess.run(self._as_user(str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-w", "-l",
                                     str(self.dir / "log"), "-o",
                                     f"-h 127.0.0.1 -p {self.port} -k {self.sock} -c fsync=off "
                                     f"-c max_connections=300", "start"),
                       check=True, capture_output=True)
        return self.url()

    def _ctl(self, *args: str) -> None:
        subprocess.run(self._as_user(str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), *args),
                       check=True, capture_output=True)

    def pause(self) -> None:
        """Stop the server (a fast shutdown: every connection is cut), keeping its data."""
        self._ctl("-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server again on the same port and data."""
        self._ctl("-w", "-l", str(self.dir / "log"), "-o",
                  f"-h 127.0.0.1 -p {self.port} -k {self.sock} -c fsync=off -c max_connections=300",
                  "start")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def create_db(self, name: str) -> str:
        import psycopg
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.pgdata is None:
            return
        import shutil
        subprocess.run(self._as_user(str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-m", "immediate",
                                     "-w", "stop"), capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.pgdata = None


def postgres_cluster(tmp_path_factory):
    """A module fixture's body: a throwaway PostgreSQL cluster, started (a failure to
    start fails the test with its reason; a missing package skips), then stopped."""
    cluster = PostgresCluster(tmp_path_factory.mktemp("pg"))
    try:
        cluster.start()
    except Exception as exc:          # noqa: BLE001 - the reason is reported
        cluster.stop()
        if "Skipped" in type(exc).__name__:
            raise
        pytest.fail(f"could not start a throwaway PostgreSQL cluster: {exc}")
    yield cluster
    cluster.stop()
