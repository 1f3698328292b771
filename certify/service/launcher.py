"""Job processes, tied to the server so that none outlives it.

The server starts one *launcher* process (``python -m certify.service.launcher``)
that imports the library once (:data:`PRELOAD`: numpy, python-flint, the solvers,
matplotlib; torch, :data:`PRELOAD_MODELS`, before it forks the first job that reads a
model, :data:`MODEL_COMMANDS`) and then forks one process per job, so a job starts in
milliseconds. A server that only verifies never loads torch. The tree is tied to the server three ways:

* a pipe whose only write end the server holds (``alive``): when the server
  dies -- however it dies, SIGKILL included -- the kernel closes it; the
  launcher sees end-of-file, kills every job's process group and exits, and
  every job process has a thread blocked on the same pipe that kills its own
  process group (the job and anything it started) on end-of-file;
* ``PR_SET_PDEATHSIG``: the launcher gets SIGKILL when the server's thread
  that started it ends, each job when the launcher ends;
* each job is its own process group, so a time limit or a stop kills the
  job and its children together (``killpg``).

Jobs run at a lower priority (``nice``, :data:`JOB_NICE` by default,
``--job-nice``) so that pages and the API stay responsive while they compute. The launcher reports each job's
pid when it starts and its exit status when it ends, as JSON lines on a
second pipe. No ``multiprocessing`` machinery (fork server, resource
tracker) is involved.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

#: modules the launcher imports once, so that a job starts without re-importing numpy,
#: python-flint, the solvers and matplotlib
PRELOAD = ["certify.service.worker", "certify.api", "certify.checkers.verify", "certify.report.build",
           "certify.checkpoints.run", "certify.rank.run", "certify.feasibility.decide",
           "certify.transcript.run", "certify.audit.run", "matplotlib.pyplot"]
#: modules (torch) the launcher imports before it forks the first job of :data:`MODEL_COMMANDS`
PRELOAD_MODELS = ["models.checkpoint", "safetensors.torch"]
#: commands whose jobs read a model with torch (a job of another command that does imports it
#: itself: the preload only saves time)
MODEL_COMMANDS = frozenset({"checkpoint", "rank", "transcript"})
JOB_NICE = 10
#: exit status reported for a job whose launcher vanished
LAUNCHER_GONE = -int(signal.SIGKILL)


def _pdeathsig() -> None:
    """SIGKILL this process when its parent (thread) ends."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):          # pragma: no cover - not Linux
        pass


# ---------------------------------------------------------------- the server's side

class Launcher:
    """The server's handle on the launcher process (started on first use)."""

    def __init__(self, nice: int = JOB_NICE):
        self.nice = nice
        self._cv = threading.Condition()
        self._proc: subprocess.Popen | None = None
        self._cmd_w = self._alive_w = -1
        self._pids: dict[str, int] = {}
        self._exits: dict[str, int] = {}
        self._errors: dict[str, str] = {}
        self._stopped = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        with self._cv:
            if self._stopped:
                raise RuntimeError("the job launcher was stopped")
            if self._proc is not None and self._proc.poll() is None:
                return
            alive_r, alive_w = os.pipe()
            cmd_r, cmd_w = os.pipe()
            evt_r, evt_w = os.pipe()
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
            root = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "certify.service.launcher", str(os.getpid()),
                     str(alive_r), str(cmd_r), str(evt_w), str(self.nice)],
                    pass_fds=(alive_r, cmd_r, evt_w), stdin=subprocess.DEVNULL, env=env,
                    start_new_session=True)
            finally:
                for fd in (alive_r, cmd_r, evt_w):
                    os.close(fd)
            self._proc, self._cmd_w, self._alive_w = proc, cmd_w, alive_w
            threading.Thread(target=self._events, args=(evt_r, proc), daemon=True,
                             name="certify-launcher-events").start()

    def _events(self, fd: int, proc: subprocess.Popen) -> None:
        with os.fdopen(fd, "rb", buffering=0) as f:
            for line in iter(f.readline, b""):
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                with self._cv:
                    if "started" in ev:
                        self._pids[ev["started"]] = int(ev["pid"])
                    elif "exited" in ev:
                        self._exits[ev["exited"]] = int(ev["status"])
                    elif "failed" in ev:
                        self._errors[ev["failed"]] = str(ev.get("error", ""))
                        self._exits[ev["failed"]] = 1
                    self._cv.notify_all()
        proc.wait()
        with self._cv:                  # the launcher is gone, and its jobs with it
            for key in self._pids:
                self._exits.setdefault(key, LAUNCHER_GONE)
            if self._proc is proc:
                self._proc = None
                for fd in (self._cmd_w, self._alive_w):
                    _close(fd)
                self._cmd_w = self._alive_w = -1
            self._cv.notify_all()

    def launch(self, key: str, workdir: Path, timeout: float = 300.0) -> int:
        """Fork a job process for ``workdir``; its pid."""
        msg = (json.dumps({"run": str(workdir), "key": key}) + "\n").encode()
        for _ in range(2):
            self.start()                                # raises once stopped
            try:
                with self._cv:
                    os.write(self._cmd_w, msg)          # < PIPE_BUF: one atomic write
                break
            except OSError:                             # the launcher just died: start another
                time.sleep(0.1)
        else:
            raise RuntimeError("the job launcher does not accept jobs")
        deadline = time.monotonic() + timeout
        with self._cv:
            proc = self._proc
            while key not in self._pids and key not in self._exits:
                if self._proc is not proc or self._cmd_w < 0:
                    raise RuntimeError("the job launcher stopped before it started the job")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"the job launcher did not start the job within {timeout:g} s")
                self._cv.wait(min(left, 0.5))
            if key not in self._pids:
                raise RuntimeError(f"the job launcher could not start the job: "
                                   f"{self._errors.get(key, 'it stopped')}")
            return self._pids[key]

    def status(self, key: str) -> int | None:
        """The job's exit status (negative: killed by that signal), or None while it runs."""
        with self._cv:
            return self._exits.get(key)

    def kill(self, key: str) -> None:
        with self._cv:
            pid = self._pids.get(key)
        if pid is not None and self.status(key) is None:
            _killpg(pid)

    def wait(self, key: str, timeout: float = 10.0) -> int | None:
        deadline = time.monotonic() + timeout
        with self._cv:
            while key not in self._exits and time.monotonic() < deadline:
                self._cv.wait(max(0.01, deadline - time.monotonic()))
            return self._exits.get(key)

    def forget(self, key: str) -> None:
        with self._cv:
            self._pids.pop(key, None)
            self._exits.pop(key, None)
            self._errors.pop(key, None)

    def stop(self, timeout: float = 10.0) -> None:
        """Kill every job, then let the launcher exit (for good)."""
        with self._cv:
            self._stopped = True
            running = [(k, p) for k, p in self._pids.items() if k not in self._exits]
            proc = self._proc
        for _, pid in running:
            _killpg(pid)
        with self._cv:
            for fd in (self._cmd_w, self._alive_w):
                _close(fd)
            self._cmd_w = self._alive_w = -1
            self._cv.notify_all()
        if proc is not None:
            try:
                proc.wait(min(timeout, 0.5))
            except subprocess.TimeoutExpired:      # e.g. still importing the library
                _killpg(proc.pid)
                proc.wait(5)


def _close(fd: int) -> None:
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


def _killpg(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
            return
        except (ProcessLookupError, PermissionError):
            continue


# ---------------------------------------------------------------- the launcher process

def _write(fd: int, obj: dict) -> None:
    os.write(fd, (json.dumps(obj) + "\n").encode())


def _watch(alive_r: int) -> None:
    """In a job: block on the server's pipe; at end-of-file kill the job's group."""
    try:
        while os.read(alive_r, 1):
            pass
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)


def _job(workdir: str, alive_r: int, cmd_r: int, evt_w: int, launcher_pid: int) -> None:
    """The forked job process: never returns."""
    code = 70
    try:
        os.setpgid(0, 0)
        _pdeathsig()
        if os.getppid() != launcher_pid:         # the launcher died in between
            os._exit(code)
        os.close(cmd_r)
        os.close(evt_w)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        threading.Thread(target=_watch, args=(alive_r,), daemon=True).start()
        fd = os.open(os.path.join(workdir, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.chdir(workdir)
        from certify.service.worker import worker_main
        code = worker_main(workdir)
    except BaseException:                          # noqa: BLE001 - reported in worker.log
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def launcher_main(argv: list[str]) -> int:
    """``python -m certify.service.launcher SERVER_PID ALIVE_R CMD_R EVT_W NICE``."""
    server_pid, alive_r, cmd_r, evt_w, nice = (int(a) for a in argv)
    _pdeathsig()
    if os.getppid() != server_pid:
        return 0
    if nice:
        os.nice(nice)
    _preload(PRELOAD)
    models_loaded = False
    me = os.getpid()
    children: dict[int, str] = {}
    buf = b""
    stopping = False
    while not stopping:
        ready, _, _ = select.select([alive_r, cmd_r], [], [], 0.2)
        if alive_r in ready and not os.read(alive_r, 1):
            stopping = True                      # the server is gone
        if cmd_r in ready and not stopping:
            data = os.read(cmd_r, 65536)
            if not data:
                stopping = True                  # the server stopped us
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    req = json.loads(line)
                    if not models_loaded and _command(req["run"]) in MODEL_COMMANDS:
                        _preload(PRELOAD_MODELS)
                        models_loaded = True
                    pid = os.fork()
                except (ValueError, OSError) as exc:
                    key = req.get("key", "") if isinstance(req, dict) else ""
                    _write(evt_w, {"failed": key, "error": str(exc)})
                    continue
                if pid == 0:
                    _job(req["run"], alive_r, cmd_r, evt_w, me)
                children[pid] = req["key"]
                _write(evt_w, {"started": req["key"], "pid": pid})
        _reap(children, evt_w, block=False)
    for pid in list(children):
        _killpg(pid)
    t0 = time.monotonic()
    while children and time.monotonic() - t0 < 5:
        _reap(children, evt_w, block=False)
        time.sleep(0.02)
    return 0


def _preload(modules: list[str]) -> None:
    """Import ``modules`` (a failure is printed: the job that needs the module reports it)."""
    for mod in modules:
        try:
            __import__(mod)
        except Exception as exc:                 # noqa: BLE001 - a job will report it properly
            print(f"certify serve: job launcher could not preload {mod}: {exc}", file=sys.stderr)
    import gc
    gc.collect()
    gc.freeze()                                  # shared pages stay shared in the forks


def _command(workdir: str) -> str | None:
    """The command of the job in ``workdir`` (its ``job.json``), or None when unreadable."""
    try:
        job = json.loads((Path(workdir) / "job.json").read_text())
        return job.get("command") if isinstance(job, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def _reap(children: dict[int, str], evt_w: int, block: bool) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        key = children.pop(pid, None)
        if key is not None:
            try:
                _write(evt_w, {"exited": key, "status": os.waitstatus_to_exitcode(status)})
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(launcher_main(sys.argv[1:]))
