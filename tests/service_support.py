"""Shared set-up for the service tests: a real ``certify serve`` on loopback,
the committed kilobyte checkpoint as a zip, job polling."""

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

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "models" / "checkpoints" / "ood-6-4-8-elu1-r8-s0"
TOKEN = "test-token-0123456789abcdef"


def checkpoint_zip(stem: Path = CKPT) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for suffix in (".json", ".safetensors"):
            z.write(stem.with_suffix(suffix), stem.name + suffix)
    return buf.getvalue()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m certify serve`` in a subprocess (its own process group)."""

    def __init__(self, data: Path, *extra: str, port: int | None = None, token: str = TOKEN):
        self.data, self.port, self.extra = Path(data), port or free_port(), list(extra)
        self.data.mkdir(parents=True, exist_ok=True)
        self.token_file = self.data.parent / f"{self.data.name}.token"
        self.token_file.write_text(token + "\n")
        self.token = token
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self, timeout: float = 60.0) -> "Server":
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        self.log = open(self.data.parent / f"{self.data.name}.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "certify", "serve", "--port", str(self.port), "--data",
             str(self.data), "--token-file", str(self.token_file), *self.extra],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"certify serve exited with {self.proc.returncode}: "
                                   + (self.data.parent / f"{self.data.name}.log").read_text()[-2000:])
            try:
                if httpx.get(self.url + "/api/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("certify serve did not start")

    def kill(self) -> None:
        """SIGKILL the server process only (its workers must die with it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if getattr(self, "log", None):
            self.log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def wait_job(client, base: str, job_id: str, timeout: float = 240.0, until=("done", "failed")) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        j = client.get(f"{base}/api/jobs/{job_id}").json()
        if j["status"] in until:
            return j
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} still {j['status']} after {timeout} s")


PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "certifypg"


class PostgresCluster:
    """A throwaway PostgreSQL 15 cluster on loopback: initdb + pg_ctl under a
    non-root user (PostgreSQL refuses root; the user is created with useradd when
    missing), removed afterwards."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.port = free_port()

    def _as_user(self, *cmd: str) -> list[str]:
        if os.geteuid() != 0:
            return list(cmd)
        return ["runuser", "-u", PG_USER, "--", *cmd]

    def start(self) -> str:
        import pwd
        import shutil

        if not (PG_BIN / "initdb").is_file():
            raise RuntimeError(f"PostgreSQL 15 is not installed ({PG_BIN}); run 'make service-deps'")
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
                                     f"-h 127.0.0.1 -p {self.port} -k {self.sock} -c fsync=off",
                                     "start"), check=True, capture_output=True)
        self._shutil = shutil
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        if getattr(self, "pgdata", None) is None:
            return
        subprocess.run(self._as_user(str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-m", "immediate",
                                     "-w", "stop"), capture_output=True)
        self._shutil.rmtree(self.dir, ignore_errors=True)
        self.pgdata = None
