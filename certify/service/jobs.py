"""Jobs of the service: option checking, uploads, the worker process, the dispatcher.

A job is a row in the store's ``jobs`` table (the queue survives a restart).
The :class:`Dispatcher` (a thread of the server) claims queued jobs and runs
each in its own worker process, forked from a ``multiprocessing`` fork server
that has imported the library once (:data:`PRELOAD`), under a memory limit
(``RLIMIT_AS``), a CPU-time limit (``RLIMIT_CPU``) and a wall-clock limit; the
fork server exits with the service and the worker with it
(``PR_SET_PDEATHSIG``). ``python -m certify.service.jobs WORKDIR`` runs one
job the same way from the command line.
The worker calls :mod:`certify.api` -- the same functions as the commands --
then verifies the certificate with the input files present, builds its report,
and writes ``result.json`` atomically. The dispatcher stores the certificate
and marks the job done in one transaction.

Uploads are stored under generated names. A folder comes as a zip: member
names are checked (no absolute paths, no ``..``, no links, no devices) and the
unpacked size is capped, while unpacking, inside the limited worker. Weights
are read only with safetensors or ``torch.load(weights_only=True)`` (by the
library's loaders); pickles never run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import sys
import threading
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from certify.core.errors import InputError

COMMANDS = ("checkpoint", "rank", "feasibility", "transcript", "verify")
#: file suffixes a job may upload, per command
UPLOAD_SUFFIXES = {
    "checkpoint": (".zip",),
    "rank": (".zip", ".npy", ".npz", ".safetensors", ".csv", ".json"),
    "feasibility": (".json", ".npz"),
    "verify": (".json",),
    "transcript": (),
}
SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
BUILTIN_FAMILY = re.compile(r"^(paper-5\.1|ood-\d{1,2}-\d{1,2}-\d{1,2}-(train|test)"
                            r"|multilevel-\d{1,2}-\d{1,2}-\d{1,2}-\d{1,2})$")
EXACT = re.compile(r"^\d{1,12}(/\d{1,12})?$|^0?\.\d{1,12}$")
MAX_ZIP_MEMBERS = 256


@dataclass(frozen=True)
class Limits:
    time_seconds: float = 600.0        # wall clock and CPU time per job
    memory_bytes: int = 4 << 30        # address space per job
    unpacked_bytes: int = 256 << 20    # total unpacked size of a zip upload
    upload_bytes: int = 64 << 20       # request body size (checked by the app)
    max_attempts: int = 2              # runs of a job interrupted by a server stop


# ---------------------------------------------------------------- options

def _int(opts: Mapping[str, Any], key: str, lo: int, hi: int, default: int | None = None) -> int | None:
    v = opts.get(key, default)
    if v is None or v == "":
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise InputError(f"{key} must be an integer, got {v!r}") from None
    if not lo <= n <= hi:
        raise InputError(f"{key} must be in {lo}..{hi}, got {n}")
    return n


def _exact(opts: Mapping[str, Any], key: str) -> str | None:
    v = str(opts.get(key) or "").strip()
    if not v:
        return None
    if not EXACT.match(v):
        raise InputError(f"{key} must be an exact number like 1/1000 or 0.001, got {v!r}")
    return v


def _family(v: Any) -> str:
    name = str(v or "").strip()
    if not BUILTIN_FAMILY.match(name):
        raise InputError(f"family must be a built-in name (paper-5.1, ood-M-q-n-test, "
                         f"multilevel-M-s-h-q) or an uploaded file, got {name!r}")
    return name


def check_options(command: str, raw: Mapping[str, Any], filename: str | None,
                  limits: Limits) -> dict[str, Any]:
    """The job's options, checked and normalized before anything is stored;
    :class:`InputError` (one line) when they are not acceptable."""
    if command not in COMMANDS:
        raise InputError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    allowed = UPLOAD_SUFFIXES[command]
    if filename:
        suffix = Path(filename).suffix.lower()
        if suffix not in allowed:
            raise InputError(f"{command} accepts {', '.join(allowed) or 'no file'} uploads, "
                             f"not {suffix or 'a file without suffix'}"
                             + ("; pickles are never loaded" if suffix in (".pkl", ".pickle", ".pt",
                                                                          ".pth", ".bin", ".ckpt")
                                else ""))
    elif command in ("checkpoint", "rank", "verify"):
        raise InputError(f"{command} needs an uploaded file")
    o: dict[str, Any] = {}
    if command == "checkpoint":
        o["eps"] = _exact(raw, "eps") or "1/1000"
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
        fams = [f for f in str(raw.get("family") or "").replace(",", " ").split() if f]
        o["families"] = [_family(f) for f in fams]
    elif command == "rank":
        tokens = str(raw.get("tokens") or "").strip()
        if tokens and not re.match(r"^cube:\d{1,2}$", tokens):
            raise InputError(f"tokens must be cube:M, got {tokens!r}")
        o["tokens"] = tokens or None
        o["eps"] = _exact(raw, "eps")
        code = str(raw.get("code") or "").strip()
        if code and code != "paper-5.1":
            raise InputError(f"code must be paper-5.1 (or empty), got {code!r}")
        o["code"] = code or None
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
    elif command == "feasibility":
        o["family"] = None if filename else _family(raw.get("family") or "paper-5.1")
        o["rank"] = _int(raw, "rank", 1, 64)
        if o["rank"] is None:
            raise InputError("feasibility needs a rank")
        feats = str(raw.get("features") or "real")
        if feats not in ("real", "nonnegative"):
            raise InputError(f"features must be real or nonnegative, got {feats!r}")
        o["features"] = feats
        o["time_limit"] = _int(raw, "time_limit", 1, max(1, int(limits.time_seconds) - 5), 30)
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
    elif command == "transcript":
        for k in ("M", "s", "h", "q"):
            o[k] = _int(raw, k, 1, 64)
            if o[k] is None:
                raise InputError(f"transcript needs {k}")
        o["bits"] = _int(raw, "bits", 1, 32)
        fmt = str(raw.get("format") or "").strip()
        if fmt and fmt not in ("fp8-e4m3", "fp8-e5m2", "bf16", "fp16"):
            raise InputError(f"format must be fp8-e4m3, fp8-e5m2, bf16 or fp16, got {fmt!r}")
        o["format"] = fmt or None
        if (o["bits"] is None) == (o["format"] is None):
            raise InputError("transcript needs exactly one of bits or format")
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
        o["time_limit"] = _int(raw, "time_limit", 1, max(1, int(limits.time_seconds) - 5), 60)
    return o


def safe_name(name: str | None, default: str = "upload") -> str:
    """The base name of a user's file, reduced to ``[A-Za-z0-9._-]`` (for display
    and for the name inside the job's private folder)."""
    base = PurePosixPath(str(name or "").replace("\\", "/")).name
    base = SAFE_NAME.sub("_", base).lstrip(".") or default
    return base[:120]


def check_zip(path: Path, limits: Limits) -> list[str]:
    """The member names of a zip upload after the checks (or :class:`InputError`)."""
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"not a readable zip file ({exc})") from None
    if len(infos) > MAX_ZIP_MEMBERS:
        raise InputError(f"the zip holds {len(infos)} members (limit {MAX_ZIP_MEMBERS})")
    total, names = 0, []
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name).parts
        mode = info.external_attr >> 16
        if (name.startswith("/") or "\\" in name or ".." in parts or re.match(r"^[A-Za-z]:", name)
                or "\x00" in name):
            raise InputError(f"zip member {name!r} has an unsafe path")
        ftype = stat.S_IFMT(mode)          # 0 when the zip records no file type
        if ftype and ftype not in (stat.S_IFREG, stat.S_IFDIR):
            raise InputError(f"zip member {name!r} is not a plain file")
        if info.is_dir():
            continue
        if any(SAFE_NAME.search(p) or p.startswith(".") for p in parts):
            raise InputError(f"zip member {name!r}: names may use only letters, digits, . _ -")
        total += info.file_size
        if total > limits.unpacked_bytes:
            raise InputError(f"the zip unpacks to more than {limits.unpacked_bytes} bytes")
        names.append(name)
    if not names:
        raise InputError("the zip holds no files")
    return names


def unpack_zip(path: Path, dest: Path, limits: Limits) -> list[Path]:
    """Unpack the checked members into ``dest``, counting the bytes actually
    written (a member that lies about its size is caught)."""
    names = check_zip(path, limits)
    dest_root = dest.resolve()
    written, out = 0, []
    with zipfile.ZipFile(path) as z:
        for name in names:
            target = (dest / name).resolve()
            if dest_root not in target.parents:
                raise InputError(f"zip member {name!r} leaves the upload folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(name) as src, open(target, "xb") as dst:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > limits.unpacked_bytes:
                        raise InputError(f"the zip unpacks to more than {limits.unpacked_bytes} bytes")
                    dst.write(chunk)
            out.append(target)
    return out


# ---------------------------------------------------------------- the worker process

def _progress(workdir: Path, stage: str) -> None:
    from certify.core.files import atomic_write_text
    atomic_write_text(workdir / "progress", stage)


def _find_checkpoint(files: list[Path], root: Path) -> Path:
    from models.checkpoint import FORMAT
    found = []
    for f in files:
        if f.suffix == ".json":
            try:
                if json.loads(f.read_text()).get("format") == FORMAT:
                    found.append(f)
            except (ValueError, UnicodeDecodeError, AttributeError):
                pass
    if not found:            # a third-party checkpoint: the folder of its weights, read by the one loader
        dirs = {f.parent for f in files if f.suffix in (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
                or f.name.endswith(".index.json")}
        if len(dirs) == 1:
            return dirs.pop().relative_to(root)
    if len(found) != 1:
        raise InputError(f"the zip must hold exactly one checkpoint config (X.json next to "
                         f"X.safetensors) or one model folder, found {len(found)}")
    return found[0].relative_to(root)


def run_job(workdir: Path) -> dict[str, Any]:
    """Run the job described by ``workdir/job.json`` (in the current, limited
    process); the result document (certificate text, verification, report files)."""
    from certify import api
    from certify.core.files import sha256_bytes

    job = json.loads((workdir / "job.json").read_text())
    command, opts = job["command"], job["options"]
    limits = Limits(**job["limits"])
    inp = workdir / "input"
    inp.mkdir(exist_ok=True)
    os.chdir(inp)          # inputs are named relative to here: the user's names, no server path
    upload = job.get("upload")          # {"path", "name", "sha256"}
    files: list[Path] = []
    local: Path | None = None
    if upload:
        _progress(workdir, "unpacking the upload")
        src = Path(upload["path"])
        if src.suffix == ".zip":
            files = unpack_zip(src, inp, limits)
        else:
            local = inp / safe_name(upload["name"])
            shutil.copyfile(src, local)
            files = [local]
    tag = ["certify serve", command] + ([upload["name"]] if upload else [])
    _progress(workdir, f"running {command}")
    status, cert = 0, None
    if command == "checkpoint":
        ck = _find_checkpoint(files, inp)
        cert = api.certify_checkpoint(str(ck.with_suffix("") if ck.suffix == ".json" else ck),
                                      families=opts["families"], eps=opts["eps"], seed=opts["seed"],
                                      command=tag)
    elif command == "rank":
        src = local if local is not None else _find_checkpoint(files, inp)
        cert = api.rank_of_matrix(str(src.relative_to(inp) if src.is_absolute() else src),
                                  tokens=opts["tokens"], eps=opts["eps"], code=opts["code"],
                                  seed=opts["seed"], command=tag)
    elif command == "feasibility":
        fam = local.name if local is not None else opts["family"]
        cert = api.feasibility_at_rank(fam, opts["rank"], features=opts["features"],
                                       time_limit=opts["time_limit"], seed=opts["seed"], command=tag)
    elif command == "transcript":
        argv = ["--M", str(opts["M"]), "--s", str(opts["s"]), "--h", str(opts["h"]),
                "--q", str(opts["q"]), "--seed", str(opts["seed"]),
                "--time-limit", str(opts["time_limit"])]
        argv += ["--bits", str(opts["bits"])] if opts["bits"] else ["--format", opts["format"]]
        cert = api.transcript_check(opts["M"], opts["s"], opts["h"], opts["q"], bits=opts["bits"],
                                    format=opts["format"], seed=opts["seed"],
                                    time_limit=opts["time_limit"], command=tag + argv)
        status = cert.exit_code()
    elif command == "verify":
        _progress(workdir, "verifying")
        text = local.read_text()
        res = api.verify_text(text, base=None)
        return {"kind": "verification", "exit_code": int(res.exit_code()),
                "verification": api.verification_summary(res),
                "verify_mode": "certificate only: its input files are not on the server; "
                               "extraction not replayed"}
    if upload:
        cert.inputs[f"upload:{upload['name']}"] = upload["sha256"]
    text = cert.dumps()
    exit_code = status if command == "transcript" else cert.exit_code()
    _progress(workdir, "verifying the certificate (exact arithmetic)")
    ver = api.verify_text(text, base=inp, replay_extraction=True)
    summary = api.verification_summary(ver)
    for i in summary.get("inputs", []):
        i.pop("path", None)                     # never show a path on the server
    matched = [i for i in summary["inputs"] if i["status"] == "match"]
    left = [a for a in summary.get("open_assumptions", []) if a.startswith("extraction")]
    mode = (f"sources present ({len(matched)} input file(s) re-hashed and matching)" if matched
            else "certificate only (no input file present)") + \
        ("; extraction replayed bit for bit" if not left else "; extraction not replayed")
    _progress(workdir, "building the report")
    report_dir = workdir / "report"
    files_out = api.report(text, report_dir)
    weights = [h for n, h in cert.inputs.items()
               if n.lower().endswith((".safetensors", ".pt", ".pth", ".npy", ".npz", ".csv", ".json"))
               and not n.startswith("upload:") and command in ("checkpoint", "rank")]
    return {"kind": "certificate", "exit_code": exit_code, "sha256": sha256_bytes(text.encode()),
            "model_sha256": weights[0] if weights else None,
            "certificate_file": "report/certificate.json", "report_files": files_out,
            "verification": summary, "verify_exit": int(ver.exit_code()), "verify_mode": mode}


def _limit_self(limits: Mapping[str, Any]) -> None:
    import resource
    mem = int(limits["memory_bytes"])
    cpu = int(limits["time_seconds"]) + 1
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def worker_main(argv: list[str]) -> int:
    """``python -m certify.service.jobs WORKDIR``: one job, then exit."""
    from certify.core.files import atomic_write_text
    workdir = Path(argv[0]).resolve()
    job = json.loads((workdir / "job.json").read_text())
    _limit_self(job["limits"])
    try:
        doc = run_job(workdir)
        code = 0
    except InputError as exc:
        doc, code = {"kind": "error", "error": f"bad input: {exc}", "exit_code": 2}, 2
    except MemoryError:
        doc, code = {"kind": "error", "error": "the job exceeded its memory limit", "exit_code": 1}, 1
    except Exception as exc:       # a crash of the job is a failed job with its reason
        from certify.core.errors import UncertifiableError
        if isinstance(exc, UncertifiableError):
            doc, code = {"kind": "error", "error": f"cannot certify: {exc}", "exit_code": 3}, 3
        else:
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            doc, code = {"kind": "error", "error": f"job crashed: {last}", "exit_code": 1}, 1
    atomic_write_text(workdir / "result.json", json.dumps(doc))
    return code


# ---------------------------------------------------------------- the dispatcher

#: modules the fork server imports once, so that a job starts in milliseconds
#: instead of re-importing torch, numpy, python-flint and matplotlib
PRELOAD = ["certify.service.jobs", "certify.api", "certify.kernel", "certify.rank",
           "certify.checkpoint_cmd", "certify.audit", "certify.feasibility", "certify.transcript",
           "certify.report", "certify.verify", "certify.checkers.rank", "certify.checkers.audit",
           "certify.checkers.feasibility", "models.checkpoint", "matplotlib.pyplot"]


def _die_with_parent() -> None:
    """SIGKILL this process when its parent (the fork server, which exits with
    the service) dies; its own process group, so a limit kills all of it."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass
    if os.getppid() == 1:            # the parent is already gone
        os._exit(1)
    os.setpgrp()


def _forked_worker(workdir: str) -> None:
    """Entry point of a job's process, forked from the fork server."""
    _die_with_parent()
    fd = os.open(os.path.join(workdir, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(workdir)
    code = worker_main([workdir])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class _Child:
    """A job process (``multiprocessing`` fork-server child) with a Popen-like face."""

    def __init__(self, proc):
        self.proc, self.pid = proc, proc.pid

    def poll(self) -> int | None:
        return self.proc.exitcode

    def wait(self) -> int | None:
        self.proc.join()
        return self.proc.exitcode


_CONTEXT = None


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        import multiprocessing
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ.setdefault(k, "1")
        os.environ.setdefault("MPLBACKEND", "Agg")
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(PRELOAD)
    return _CONTEXT


@dataclass
class _Running:
    job_id: str
    proc: _Child
    workdir: Path
    started: float


class Dispatcher:
    """Claims queued jobs and runs up to ``workers`` worker processes at a time."""

    def __init__(self, store, data: Path, limits: Limits, workers: int = 2, poll: float = 0.1):
        self.store, self.data, self.limits = store, Path(data), limits
        self.workers, self.poll = max(1, workers), poll
        self.running: dict[str, _Running] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        requeued, failed = self.store.recover(self.limits.max_attempts)
        for jid in requeued:
            print(f"certify serve: job {jid} re-queued (interrupted by a server stop)", file=sys.stderr)
        for jid in failed:
            print(f"certify serve: job {jid} failed (interrupted too often)", file=sys.stderr)
        self._sweep()
        self._thread = threading.Thread(target=self._loop, name="certify-dispatcher", daemon=True)
        self._thread.start()

    def _sweep(self) -> None:
        """Remove what an interrupted run left behind: job folders, partial uploads,
        and report folders whose certificate row was never committed."""
        shutil.rmtree(self.data / "work", ignore_errors=True)
        (self.data / "work").mkdir(parents=True, exist_ok=True)
        for p in (self.data / "uploads").glob(".tmp-*"):
            p.unlink(missing_ok=True)
        certs = self.data / "certificates"
        if certs.is_dir():
            for d in certs.iterdir():
                if self.store.certificate(d.name) is None:
                    shutil.rmtree(d, ignore_errors=True)

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:           # keep serving; the job's row says what failed
                traceback.print_exc()
            self._wake.wait(self.poll)
            self._wake.clear()
        for r in list(self.running.values()):       # stopping: leave the rows running,
            _kill(r.proc)                           # so the next start re-queues them

    def _tick(self) -> None:
        for jid, r in list(self.running.items()):
            rc = r.proc.poll()
            if rc is None and time.monotonic() - r.started > self.limits.time_seconds:
                _kill(r.proc)
                r.proc.wait()
                del self.running[jid]
                self.store.fail_job(jid, f"time limit: the job ran longer than "
                                         f"{self.limits.time_seconds:g} s and was stopped")
                self._cleanup(r)
            elif rc is not None:
                del self.running[jid]
                try:
                    self._finish(r, rc)
                except Exception as exc:     # e.g. the database refused the commit
                    traceback.print_exc()
                    try:
                        self.store.fail_job(jid, f"could not store the result: {exc!r}")
                    finally:
                        self._cleanup(r)
        while len(self.running) < self.workers and not self._stop.is_set():
            job = self.store.claim_next_job()
            if job is None:
                break
            try:
                self.running[job.id] = self._spawn(job)
            except Exception as exc:
                self.store.fail_job(job.id, f"could not start the worker: {exc}")

    def _spawn(self, job) -> _Running:
        workdir = self.data / "work" / job.id
        if workdir.exists():                         # an interrupted earlier attempt
            shutil.rmtree(workdir)
        workdir.mkdir(parents=True)
        upload = None
        if job.upload_storage:
            upload = {"path": str(self.data / "uploads" / job.upload_storage),
                      "name": job.upload_name, "sha256": job.upload_sha256}
        lim = {k: getattr(self.limits, k) for k in Limits.__dataclass_fields__}
        (workdir / "job.json").write_text(json.dumps({
            "id": job.id, "command": job.command, "options": json.loads(job.options),
            "upload": upload, "limits": lim}))
        proc = _context().Process(target=_forked_worker, args=(str(workdir),),
                                  name=f"certify-job-{job.id}", daemon=False)
        proc.start()
        (workdir / "worker.pid").write_text(str(proc.pid))
        return _Running(job.id, _Child(proc), workdir, time.monotonic())

    def _finish(self, r: _Running, rc: int) -> None:
        res_path = r.workdir / "result.json"
        if not res_path.is_file():
            why = (f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}")
            if rc in (-signal.SIGKILL, -signal.SIGXCPU) or rc == -9:
                why += " (time or memory limit)"
            tail = _tail(r.workdir / "worker.log")
            self.store.fail_job(r.job_id, f"the worker stopped without a result: {why}"
                                + (f"; {tail}" if tail else ""))
            self._cleanup(r)
            return
        doc = json.loads(res_path.read_text())
        if doc["kind"] == "error":
            self.store.fail_job(r.job_id, doc["error"], exit_code=doc.get("exit_code"))
        elif doc["kind"] == "verification":
            self.store.finish_job(r.job_id, exit_code=doc["exit_code"], result=doc)
        else:
            sha = doc["sha256"]
            text = (r.workdir / doc["certificate_file"]).read_text()
            from certify.core.files import sha256_bytes
            if sha256_bytes(text.encode()) != sha:
                self.store.fail_job(r.job_id, "the worker's certificate does not match its hash")
                self._cleanup(r)
                return
            dest = self.data / "certificates" / sha
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(r.workdir / "report", dest)
            job = self.store.job(r.job_id)
            self.store.finish_job(r.job_id, exit_code=doc["exit_code"], result={
                "report_files": doc["report_files"]}, certificate={
                "sha256": sha, "text": text, "command": job.command,
                "source_name": job.upload_name, "source_sha256": job.upload_sha256,
                "model_sha256": doc.get("model_sha256"),
                "verification": doc["verification"], "verify_exit": doc["verify_exit"],
                "verify_mode": doc["verify_mode"]})
        self._cleanup(r)

    def _cleanup(self, r: _Running) -> None:
        shutil.rmtree(r.workdir, ignore_errors=True)


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _kill(proc: _Child) -> None:
    for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), lambda: os.kill(proc.pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
