"""One job, run inside its own limited process (see :mod:`launcher`).

The job's work folder (``DATA/work/<claim id>/``, private to one claim) holds
``job.json`` (command, options, limits, the upload's file name there and the
user's name for it) and the upload. :func:`run_job` unpacks the upload into
``input/``, works there -- inputs are named relative to it, so certificates
and messages name the user's files, never a path on the server -- calls
:mod:`certify.api` (the same functions as the commands), verifies the
certificate with its input files present (replaying the extraction), builds
its report, and :func:`worker_main` writes ``result.json`` atomically.

A failure is classified where it happens: a problem with the upload or the
options is bad input (exit 2, the reason names the user's file); an input
outside what can be certified exits 3; anything else is an internal error
(exit 1): the result says "internal error" and carries the traceback for the
server's log only.
"""

from __future__ import annotations

import json
import os
import resource
import traceback
from pathlib import Path
from typing import Any, Mapping

from certify.checkers.common import NotACertificate
from certify.core.errors import InputError, UncertifiableError
from certify.service.config import Limits
from certify.service.uploads import safe_name, unpack_zip


class _Progress:
    """The job's progress, written atomically into ``workdir/progress`` as JSON:
    ``step`` of ``steps`` (the stages this job goes through), the ``stage``'s
    words, and the certificate's ``claims`` and how many are ``checked`` once
    they are known (None before). The server copies it into the job's row."""

    def __init__(self, workdir: Path, stages: list[str]):
        self.workdir, self.stages = workdir, stages
        self.claims: int | None = None
        self.checked: int | None = None

    def at(self, stage: str, detail: str = "") -> None:
        from certify.core.files import atomic_write_text
        atomic_write_text(self.workdir / "progress", json.dumps({
            "step": self.stages.index(stage) + 1, "steps": len(self.stages),
            "stage": stage + (f" ({detail})" if detail else ""),
            "claims": self.claims, "checked": self.checked}))


UNPACK, COMPUTE, VERIFY, REPORT = ("unpacking the upload", "computing the claims",
                                   "verifying the claims (exact arithmetic)", "building the report")


def _find_checkpoint(files: list[Path], root: Path) -> Path:
    from models.checkpoint import FORMAT
    found = []
    for f in files:
        if f.suffix == ".json":
            try:
                if json.loads(f.read_text(encoding="utf-8")).get("format") == FORMAT:
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

    job = json.loads((workdir / "job.json").read_text(encoding="utf-8"))
    command, opts = job["command"], job["options"]
    limits = Limits(**job["limits"])
    inp = workdir / "input"
    inp.mkdir(exist_ok=True)
    os.chdir(inp)          # inputs are named relative to here: the user's names, no server path
    upload = job.get("upload")          # {"file", "name", "sha256"}
    files: list[Path] = []
    local: Path | None = None
    stages = ([UNPACK] if upload and upload["file"].endswith(".zip") else []) + \
        ([VERIFY] if command == "verify" else [COMPUTE, VERIFY, REPORT])
    progress = _Progress(workdir, stages)
    if upload:
        if UNPACK in stages:
            progress.at(UNPACK)
        src = workdir / upload["file"]
        if src.suffix == ".zip":
            files = unpack_zip(src, inp, limits.unpacked_bytes)
        else:
            local = inp / safe_name(upload["name"])
            os.replace(src, local)
            files = [local]
    tag = ["certify serve", command] + ([upload["name"]] if upload else [])
    if command != "verify":
        progress.at(COMPUTE, f"certify {command}")
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
        try:
            text = local.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text (byte {exc.start})") from None
        progress.claims = _claim_count(text)
        progress.checked = 0 if progress.claims is not None else None
        progress.at(VERIFY)
        res = api.verify_text(text, base=None)
        return {"kind": "verification", "exit_code": int(res.exit_code()),
                "verification": api.verification_summary(res),
                "verify_mode": "certificate only: its input files are not on the server; "
                               "extraction not replayed"}
    if upload:
        cert.inputs[f"upload:{upload['name']}"] = upload["sha256"]
    text = cert.dumps()
    exit_code = status if command == "transcript" else cert.exit_code()
    progress.claims, progress.checked = len(cert.claims), 0
    progress.at(VERIFY, "replaying the extraction too" if command in ("checkpoint", "rank") else "")
    # the server's own check runs in a new process: it shares no memory with the producer above
    summary = api.verify_in_fresh_process(text, base=inp, replay_extraction=True)
    progress.checked = progress.claims           # every claim was checked
    for i in summary.get("inputs", []):
        i.pop("path", None)                     # never show a path on the server
    matched = [i for i in summary["inputs"] if i["status"] == "match"]
    left = [a for a in summary.get("open_assumptions", []) if a.startswith("extraction")]
    mode = (f"sources present ({len(matched)} input file(s) re-hashed and matching)" if matched
            else "certificate only (no input file present)") + \
        ("; extraction replayed bit for bit" if not left else "; extraction not replayed")
    progress.at(REPORT)
    report_dir = workdir / "report"
    files_out = api.report(text, report_dir)
    weights = [h for n, h in cert.inputs.items()
               if n.lower().endswith((".safetensors", ".pt", ".pth", ".npy", ".npz", ".csv", ".json"))
               and not n.startswith("upload:") and command in ("checkpoint", "rank")]
    return {"kind": "certificate", "exit_code": exit_code, "sha256": sha256_bytes(text.encode()),
            "model_sha256": weights[0] if weights else None,
            "certificate_file": "report/certificate.json", "report_files": files_out,
            "verification": summary, "verify_exit": int(summary["exit_code"]), "verify_mode": mode}


def _claim_count(text: str) -> int | None:
    """How many claims an uploaded certificate lists (for the progress only)."""
    try:
        claims = json.loads(text).get("claims")
    except (ValueError, AttributeError):
        return None
    return len(claims) if isinstance(claims, list) else None


def limit_self(limits: Mapping[str, Any]) -> None:
    """The job's own resource limits: address space, CPU time, no core files."""
    mem = int(limits["memory_bytes"])
    cpu = int(limits["time_seconds"]) + 1
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def scrub(text: str, workdir: Path) -> str:
    """``text`` without any path of the server: the work folder's prefix is cut
    off (what remains is the user's own name for a file inside their upload)."""
    for prefix in (str(workdir / "input") + os.sep, str(workdir) + os.sep, str(workdir),
                   str(workdir.parent) + os.sep, str(workdir.parent)):
        text = text.replace(prefix, "")
    return text


def _bad_input_reason(exc: BaseException, upload: Mapping[str, Any] | None, workdir: Path) -> str:
    line = scrub(" ".join(str(exc).split()) or type(exc).__name__, workdir)
    name = upload["name"] if upload else None
    if name and not line.startswith(name):
        line = f"{name}: {line}"
    return f"bad input: {line}"


_NO_MEMORY = ("can't allocate memory", "cannot allocate memory", "not enough memory",
              "failed to map segment", "out of memory")


def _out_of_memory(exc: BaseException) -> bool:
    """An exception that the address-space limit causes (an allocation, or a
    shared library that cannot be mapped)."""
    import errno
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    text = str(exc).lower()
    return any(t in text for t in _NO_MEMORY)


def worker_main(workdir: str | os.PathLike) -> int:
    """One job in this process, then its exit code; ``result.json`` says why."""
    from certify.core.files import atomic_write_text
    workdir = Path(workdir).resolve()
    job = json.loads((workdir / "job.json").read_text(encoding="utf-8"))
    limit_self(job["limits"])
    upload = job.get("upload")
    try:
        doc = run_job(workdir)
        code = 0
    except (InputError, NotACertificate) as exc:
        doc = {"kind": "error", "error": _bad_input_reason(exc, upload, workdir), "exit_code": 2}
    except UncertifiableError as exc:
        line = scrub(" ".join(str(exc).split()), workdir)
        doc = {"kind": "error", "error": f"cannot certify: {line}", "exit_code": 3}
    except MemoryError:
        mb = int(job["limits"]["memory_bytes"]) >> 20
        doc = {"kind": "error", "exit_code": 1,
               "error": f"the job exceeded its memory limit ({mb} MB, --job-memory-mb)"}
    except Exception as exc:       # noqa: BLE001 - an internal failure: logged, never shown
        if _out_of_memory(exc):
            mb = int(job["limits"]["memory_bytes"]) >> 20
            doc = {"kind": "error", "exit_code": 1,
                   "error": f"the job exceeded its memory limit ({mb} MB, --job-memory-mb)"}
            atomic_write_text(workdir / "result.json", json.dumps(doc))
            return 1
        doc = {"kind": "error", "exit_code": 1,
               "error": f"internal error ({type(exc).__name__}); the server's log has the details",
               "traceback": traceback.format_exc()}
    code = doc["exit_code"] if doc["kind"] == "error" else 0
    atomic_write_text(workdir / "result.json", json.dumps(doc))
    return code
