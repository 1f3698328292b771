"""Bad-input harness: every class of hostile input, run as real subprocesses.

    python tests/harness/run_cases.py [--filter TEXT] [--json]

Each case runs ``python -m certify <command> ...`` in a scratch folder and must
end with a documented exit code (0-3), print no traceback, say what went
wrong in one error line, stay within its CPU-time budget (2 CPU s; 5 CPU s for
commands that load torch: the process's own cost, which the machine's load does
not move), and leave every file it did not write in place (the scratch
folder holds sentinel files -- a ``thesis.tex`` among others -- that are
checked after each case). Prints a table: case, exit code, seconds (CPU seconds
of a command's process; for a request to a server, its time as the HTTP client
measured it, printed, never judged), first error line. Exit 0 when every case
passes; a run still going after 600 s (the hang guard) is a "hang".

Then the scenarios (:func:`scenario_cases`), each a row of its own:

* **ownership matrix**: every command that writes ``--out DIR`` (report;
  checkpoint of a models/ checkpoint, a torch.save file with its config, a
  safetensors folder, a state dict with an adapter spec; checkpoint --batch;
  demo) run twice into one folder (exit 0 or 1, the folder replaced, its
  manifest naming the command), then every other command into it (exit 2,
  every byte of the folder unchanged);
* **service under pressure**, against real ``certify serve`` processes: 20
  concurrent anonymous 2 MB uploads against ``--max-anonymous-queued 5``,
  verify uploads against the storage cap, a forged ``X-Forwarded-For``,
  every form field given twice, options a job would refuse, an unknown query
  parameter, a zip member name longer than a file system allows;
* **previous-version data folder**: ``serve`` refuses it naming ``serve
  migrate``, which moves it; the server then serves its old report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TORCH = {"rank", "extract", "checkpoint", "transcript", "demo"}
CKPT = ROOT / "models" / "checkpoints" / "paper51-lookup-r8-s0"


def make_files(d: Path) -> None:
    """The scratch folder: hostile inputs and the user's own files (sentinels)."""
    import numpy as np

    (d / "empty.csv").write_text("")
    for ext in ("npy", "npz", "json", "safetensors"):
        (d / f"empty.{ext}").write_bytes(b"")
        (d / f"junk.{ext}").write_bytes(os.urandom(64))
    (d / "junk.csv").write_bytes(b"\x00\xff\xfe garbage,\n\x01")
    (d / "junk.json").write_text("{not json")
    np.save(d / "ok.npy", np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.save(d / "nan.npy", np.array([[1.0, np.nan], [3.0, 4.0]]))
    np.save(d / "inf.npy", np.array([[1.0, np.inf], [3.0, 4.0]]))
    np.save(d / "cube3.npy", np.eye(3))
    np.save(d / "threed.npy", np.zeros((2, 2, 2)))
    np.save(d / "oned.npy", np.zeros(4))
    np.save(d / "strings.npy", np.array([["a", "b"], ["c", "d"]]))
    full = (d / "ok.npy").read_bytes()
    (d / "truncated.npy").write_bytes(full[: len(full) - 9])
    np.savez(d / "ok.npz", matrix=np.eye(4))
    z = (d / "ok.npz").read_bytes()
    (d / "truncated.npz").write_bytes(z[: len(z) // 2])
    (d / "nan.csv").write_text("1,nan\n2,3\n")
    (d / "inf.csv").write_text("1,inf\n2,3\n")
    (d / "bigexp.csv").write_text("1,1e999999999\n2,3\n")
    (d / "tinyexp.csv").write_text("1,1e-999999999\n2,3\n")
    (d / "longnum.csv").write_text("1," + "7" * 100000 + "\n2,3\n")
    (d / "ragged.csv").write_text("1,2\n3\n")
    (d / "wide.csv").write_text(",".join(["1"] * 9000) + "\n")
    big = np.lib.format.open_memmap(d / "huge.npy", mode="w+", dtype=np.float64, shape=(9000, 9000))
    del big                                     # a sparse 648 MB file: refused from its header
    (d / "ragged.json").write_text(json.dumps([["1", "2"], ["3"]]))
    (d / "bignum.json").write_text('[[1e999999999, 1], [1, 1]]')
    (d / "longint.json").write_text("[[" + "9" * 100000 + ", 1], [1, 1]]")
    (d / "notmatrix.json").write_text(json.dumps({"hello": 1}))
    (d / "deep.json").write_text("[" * 100000 + "]" * 100000)
    subprocess.run([sys.executable, "-m", "certify", "bounds", "--m", "8",
                    "--out", str(d / "bounds.json")], cwd=d, env=_env(), capture_output=True)
    cert = json.loads((d / "bounds.json").read_text())
    (d / "truncated-cert.json").write_text((d / "bounds.json").read_text()[:300])
    (d / "noclaims.json").write_text(json.dumps({**cert, "claims": []}))
    c2 = json.loads(json.dumps(cert))
    c2["claims"][0]["evidence"] = None
    (d / "evidence-null.json").write_text(json.dumps(c2))
    # a copy of a checkpoint with truncated weights, and one with junk config
    for suf in (".json", ".safetensors"):
        shutil.copy(str(CKPT) + suf, d / f"trunc-ckpt{suf}")
    w = (d / "trunc-ckpt.safetensors").read_bytes()
    (d / "trunc-ckpt.safetensors").write_bytes(w[: len(w) // 3])
    (d / "junk-ckpt.json").write_text('{"format": 3}')
    (d / "junk-ckpt.safetensors").write_bytes(os.urandom(128))
    # the user's own files (sentinels): never deleted or changed
    (d / "thesis").mkdir()
    (d / "thesis" / "thesis.tex").write_text("\\documentclass{article}% mine\n")
    (d / "notes.json").write_text('{"mine": true}\n')
    (d / "paper.tex").write_text("% mine\n")
    (d / "outdir").mkdir()
    (d / "outdir.npz").mkdir()
    (d / "emptydir").mkdir()
    # a folder whose README merely begins like certify's: ownership is by manifest only
    (d / "readme-only").mkdir()
    (d / "readme-only" / "README.md").write_text("# certify notes of mine\n")
    # a project folder with a work/ of its own, as certify serve --data would see it
    (d / "proj" / "work").mkdir(parents=True)
    (d / "proj" / "work" / "thesis.tex").write_text("% mine\n")
    (d / "binary.token").write_bytes(bytes(range(256)))
    # text a certificate may hold that UTF-8 cannot encode: verify and report agree
    c3 = json.loads(json.dumps(cert))
    c3["claims"][0]["reason"] = "\ud800"
    c3["command"] = ["certify", "x\udfff"]
    (d / "surrogate.json").write_text(json.dumps(c3))


SCENARIO_CLASSES = ("ownership matrix", "service caps", "repeated form field", "refused at submit",
                    "previous-version data folder")
SENTINELS = ("thesis/thesis.tex", "notes.json", "paper.tex", "ok.npy", "bounds.json",
             "readme-only/README.md", "proj/work/thesis.tex")


def cases() -> list[tuple[str, str, list[str]]]:
    """(class, command, arguments)."""
    ck = str(CKPT)
    C = []
    add = lambda cls, *a: C.append((cls, a[0], list(a[1:])))  # noqa: E731
    # missing files
    for cmd, args in (("rank", ["missing.npy"]), ("extract", ["missing", "--out", "k.npz"]),
                      ("verify", ["missing.json"]), ("report", ["missing.json", "--out", "r"]),
                      ("checkpoint", ["missing"]), ("families", ["show", "missing.npz"]),
                      ("feasibility", ["--rank", "3", "--family", "missing.json"]),
                      ("transcript", ["--checkpoint", "missing", "--M", "4", "--s", "1", "--h", "2",
                                      "--q", "2", "--bits", "2"]),
                      ("rank", ["ok.npy", "--code", "missing.json"])):
        add("missing file", cmd, *args)
    # empty and junk files
    for kind in ("empty", "junk"):
        for ext in ("npy", "npz", "json", "safetensors"):
            add(f"{kind} file", "rank", f"{kind}.{ext}")
        add(f"{kind} file", "rank", f"{kind}.csv" if kind == "empty" else "junk.csv")
        add(f"{kind} file", "families", "show", f"{kind}.npz")
        add(f"{kind} file", "families", "show", f"{kind}.json")
        add(f"{kind} file", "verify", f"{kind}.json")
        add(f"{kind} file", "report", f"{kind}.json", "--out", "r")
        add(f"{kind} file", "checkpoint", f"{kind}.json")
        add(f"{kind} file", "transcript", "--checkpoint", f"{kind}.json", "--M", "4", "--s", "1",
            "--h", "2", "--q", "2", "--bits", "2")
        add(f"{kind} file", "feasibility", "--rank", "2", "--family", f"{kind}.npz")
    add("junk file", "checkpoint", "junk-ckpt")
    add("junk file", "transcript", "--checkpoint", "junk-ckpt", "--M", "4", "--s", "1", "--h", "2",
        "--q", "2", "--bits", "2")
    add("junk file", "report", "noclaims.json", "--out", "r")
    add("junk file", "report", "evidence-null.json", "--out", "r")
    add("junk file", "verify", "evidence-null.json")
    add("junk file", "rank", "notmatrix.json")
    add("junk file", "rank", "deep.json")
    # truncated
    for a in (["rank", "truncated.npy"], ["rank", "truncated.npz"], ["verify", "truncated-cert.json"],
              ["report", "truncated-cert.json", "--out", "r"], ["checkpoint", "trunc-ckpt"],
              ["rank", "trunc-ckpt"], ["extract", "trunc-ckpt", "--out", "k.npz"]):
        add("truncated file", *a)
    # wrong shape
    for a in (["rank", "threed.npy"], ["rank", "oned.npy"], ["rank", "strings.npy"],
              ["rank", "cube3.npy", "--tokens", "cube:3"], ["rank", "ok.npy", "--tokens", "cube:3"],
              ["extract", "ok.npy", "--tokens", "cube:3", "--out", "k.npz"]):
        add("wrong shape", *a)
    # NaN / Inf / ragged / huge matrices and numbers
    for f in ("nan.npy", "inf.npy", "nan.csv", "inf.csv", "ragged.csv", "ragged.json", "wide.csv",
              "bigexp.csv", "tinyexp.csv", "longnum.csv", "bignum.json", "longint.json", "huge.npy"):
        add("bad matrix", "rank", f)
    add("bad matrix", "extract", "nan.npy", "--out", "k.npz")
    # absurd ranks
    for a in (["--rank", "1000000000"], ["--rank", "0"], ["--rank", "-5"],
              ["--sweep", "1:1000000000"], ["--sweep", "9:8"], ["--sweep", "x"],
              ["--rank", "13", "--sweep", "8:9"], ["--rank", "99999999999999999999999999"]):
        add("absurd rank", "feasibility", *a, "--no-progress")
    add("absurd rank", "transcript", "--model", "random", "--rank", "1000000000", "--M", "4",
        "--s", "1", "--h", "2", "--q", "2", "--bits", "2")
    add("absurd rank", "rank", "ok.npy", "--max-primes", "1000000000")
    # time limits
    for t in ("nan", "inf", "-inf", "-1", "0", "1e300"):
        add("absurd time limit", "feasibility", "--rank", "12", "--time-limit", t)
    add("absurd time limit", "transcript", "--M", "4", "--s", "1", "--h", "2", "--q", "2",
        "--bits", "2", "--time-limit", "nan")
    add("absurd time limit", "demo", "--time-limit", "nan", "--out", "d")
    # eps
    for e in ("1e-999999999", "1e999999999", "0", "-1", "nan", "abc", "1/0", "9" * 5000):
        add("absurd eps", "rank", "ok.npy", "--eps", e)
    add("absurd eps", "checkpoint", ck, "--eps", "1e-999999999")
    add("absurd eps", "bounds", "--m", "8", "--eps", "1e-999999999")
    add("absurd eps", "families", "build", "chain", "--code", "missing.json", "--eps",
        "1e-999999999", "--out", "f.json")
    # family sizes
    for fam in ("ood-100000-4-8-test", "ood-24-100000-200000-test", "multilevel-100000-2-6-4",
                "multilevel-12-2-6-100000", "ood-99999999999999999999-4-8-test"):
        add("absurd family", "families", "show", fam)
    add("absurd family", "feasibility", "--rank", "3", "--family", "ood-100000-4-8-test")
    add("absurd family", "families", "build", "ood", "--M", "100000", "--q", "4", "--out", "f.json")
    add("absurd family", "families", "build", "ood", "--M", "8", "--q", "4", "--size",
        "1000000000", "--out", "f.json")
    add("absurd family", "rank", "ok.npy", "--tokens", "cube:100")
    add("absurd family", "rank", ck, "--tokens", "cube:1000000000000000000000")
    add("absurd family", "transcript", "--M", "100000", "--s", "2", "--h", "6", "--q", "4",
        "--bits", "2")
    add("absurd family", "bounds", "--m", "9" * 5000)
    # read-only --out (a read-only file system: refused even for root)
    for cmd, a in (("feasibility", ["--rank", "8", "--out", "/proc/certify-x.json"]),
                   ("bounds", ["--m", "8", "--out", "/proc/certify-x.json"]),
                   ("rank", ["ok.npy", "--out", "/proc/certify-x.json"]),
                   ("extract", ["ok.npy", "--out", "/proc/certify-x.npz"]),
                   ("report", ["bounds.json", "--out", "/proc/certify-r"]),
                   ("checkpoint", [ck, "--out", "/proc/certify-r"]),
                   ("families", ["save", "paper-5.1", "--out", "/proc/certify-f.json"]),
                   ("transcript", ["--M", "4", "--s", "1", "--h", "2", "--q", "2", "--bits", "2",
                                   "--out", "/proc/certify-x.json"]),
                   ("demo", ["--out", "/proc/certify-d"])):
        add("read-only --out", cmd, *a)
    # an existing folder as --out FILE
    for cmd, a in (("feasibility", ["--rank", "8", "--out", "outdir"]),
                   ("rank", ["ok.npy", "--out", "outdir"]),
                   ("bounds", ["--m", "8", "--out", "outdir"]),
                   ("extract", ["ok.npy", "--out", "outdir.npz"]),
                   ("families", ["save", "paper-5.1", "--out", "outdir.npz"]),
                   ("transcript", ["--M", "4", "--s", "1", "--h", "2", "--q", "2", "--bits", "2",
                                   "--out", "outdir"])):
        add("existing folder as --out file", cmd, *a)
    # a folder holding the user's files as --out DIR, or the user's file as --out FILE
    for cmd, a in (("report", ["bounds.json", "--out", "thesis"]),
                   ("report", ["bounds.json", "--out", "."]),
                   ("report", ["bounds.json", "--out", "paper.tex"]),
                   ("checkpoint", [ck, "--out", "thesis"]),
                   ("demo", ["--out", "thesis"]),
                   ("feasibility", ["--rank", "8", "--out", "paper.tex"]),
                   ("bounds", ["--m", "8", "--out", "notes.json"]),
                   ("rank", ["ok.npy", "--out", "notes.json"]),
                   ("extract", ["ok.npy", "--out", "notes.json"]),
                   ("families", ["save", "paper-5.1", "--out", "notes.json"])):
        add("folder or file of the user's", cmd, *a)
    # device files, a file used as a folder
    for cmd, a in (("feasibility", ["--rank", "8", "--out", "/dev/null"]),
                   ("bounds", ["--m", "8", "--out", "notes.json/x.json"]),
                   ("report", ["bounds.json", "--out", "paper.tex/r"]),
                   ("rank", ["/dev/null"]), ("verify", ["/dev/zero"]),
                   ("families", ["show", "/dev/null"])):
        add("device or file as folder", cmd, *a)
    add("folder or file of the user's", "report", "bounds.json", "--out", "readme-only")
    # text a certificate may hold: report agrees with verify
    add("certificate text", "verify", "surrogate.json")
    add("certificate text", "report", "surrogate.json", "--out", "r")
    # unreachable or malformed Ray clusters: one line, exit 2, in bounded time
    for addr in ("nonsense", "127.0.0.1:1", "256.1.1.1:6379", "ray://127.0.0.1:1", "host:99999",
                 "ray://", "no-such-host.invalid:6379"):
        add("ray address", "feasibility", "--sweep", "8:9", "--ray-address", addr, "--no-progress")
    add("ray address", "transcript", "--M", "4", "--s", "1", "--h", "2", "--q", "2", "--bits", "2",
        "--workers", "2", "--ray-address", "127.0.0.1:1")
    return C


def serve_cases() -> list[tuple[str, str, list[str]]]:
    """``certify serve`` refused at start, before anything is served or written
    (run as subprocesses only: a case that wrongly passed would start serving)."""
    C = []
    for a in (["--job-seconds", "nan"], ["--job-seconds", "inf"], ["--max-upload-mb", "nan"],
              ["--max-storage-mb", "1e300"], ["--workers", "0"], ["--lease-seconds", "nan"],
              ["--data", "proj"], ["--data", "thesis"], ["--data", "paper.tex"],
              ["--data", "serve-new", "--token-file", "binary.token"],
              ["--data", "serve-new", "--db", "mysql://x"], ["--data", "serve-new", "--host", "256.1.1.1"],
              ["--port", "0"], ["--trusted-proxy", "not-an-address"], ["--retention-days", "nan"],
              ["--job-memory-mb", "256"]):
        C.append(("serve start-up", "serve", list(a)))
    return C


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CERTIFY_DEBUG", None)
    return env


def run_case(d: Path, cmd: str, args: list[str]) -> dict:
    _tests_dir_on_path()
    from waits import Hung
    before = {s: (d / s).read_bytes() for s in SENTINELS if (d / s).exists()}
    try:
        p, secs = _cli(d, [cmd, *args])
        rc, err = p.returncode, p.stderr
    except Hung as exc:
        rc, err, secs = None, str(exc), 600.0       # killed at the hang guard
    lost = [s for s, b in before.items() if not (d / s).exists() or (d / s).read_bytes() != b]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower() or "cannot certify" in ln]
    budget = 5.0 if cmd in TORCH else 2.0           # CPU seconds
    problems = []
    if rc is None:
        problems.append("hang")
    elif rc not in (0, 1, 2, 3):
        problems.append(f"exit {rc}")
    if "Traceback" in err:
        problems.append("traceback")
    if rc == 2 and len(errs) != 1:
        problems.append(f"{len(errs)} error lines")
    if "internal error" in err:
        problems.append("internal error")
    if ".stage." in err:
        problems.append("stage path")
    if rc in (2, 3) and secs > budget:
        problems.append(f"slow {secs:.1f} CPU s > {budget} CPU s")
    if lost:
        problems.append(f"LOST {lost}")
    return {"rc": rc, "seconds": round(secs, 2), "line": (errs or lines or [""])[-1][:110],
            "problems": problems}


# ---------------------------------------------------------------- scenarios

GALLERY = ROOT / "reports" / "gallery" / "models"
#: commands writing --out DIR: (label, manifest command, arguments before --out)
WRITERS = [
    ("report", "report", ["report", "bounds.json"]),
    ("checkpoint (models/ checkpoint)", "checkpoint", ["checkpoint", str(CKPT)]),
    ("checkpoint (torch.save + config.json)", "checkpoint",
     ["checkpoint", str(GALLERY / "performer" / "model.pt")]),
    ("checkpoint (safetensors folder)", "checkpoint", ["checkpoint", str(GALLERY / "lat")]),
    ("checkpoint (adapter spec)", "checkpoint",
     ["checkpoint", str(GALLERY / "custom" / "model.safetensors"), "--spec",
      str(GALLERY / "custom" / "spec.json")]),
    ("checkpoint --batch", "checkpoint --batch", ["checkpoint", "--batch", "batch-in"]),
    ("demo", "demo", ["demo", "--time-limit", "1", "--no-progress"]),
]


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(q.relative_to(folder)): q.read_bytes() for q in sorted(folder.rglob("*")) if q.is_file()}


def _cli(d: Path, args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """``certify ARGS`` in ``d``: the completed process and its CPU seconds (tests/waits.py;
    a run still going at the 600 s hang guard raises ``Hung``)."""
    _tests_dir_on_path()
    from waits import cpu_run
    return cpu_run([sys.executable, "-m", "certify", *args], cwd=d, env=_env(), guard_s=600)


def ownership_rows(d: Path):
    """The ownership matrix (see the module's docstring), one row per run."""
    batch = d / "batch-in"
    batch.mkdir(exist_ok=True)
    for suf in (".json", ".safetensors"):
        shutil.copy(str(CKPT) + suf, batch / f"one{suf}")
    for label, owner, args in WRITERS:
        out = d / f"own-{owner.replace(' ', '').replace('-', '')}-{len(label)}"
        inodes = []
        for run in (1, 2):
            p, secs = _cli(d, [*args, "--out", out.name])
            problems = []
            if p.returncode not in (0, 1):
                problems.append(f"exit {p.returncode}")
            if "Traceback" in p.stderr:
                problems.append("traceback")
            try:
                man = json.loads((out / ".certify-manifest.json").read_text())
                if man.get("command") != owner:
                    problems.append(f"manifest names {man.get('command')!r}")
                inodes.append(os.stat(out).st_ino)
            except (OSError, ValueError):
                problems.append("no manifest")
            if run == 2 and len(set(inodes)) != 2:
                problems.append("not replaced")
            yield ("ownership matrix", f"{label} run {run}", p.returncode,
                   secs, problems, (p.stderr.strip().splitlines() or [""])[-1])
        before = _tree(out) if out.is_dir() else {}
        for olabel, other, oargs in WRITERS:
            if other == owner or olabel.startswith("checkpoint (") and not olabel.endswith("checkpoint)"):
                continue                   # one writer per other command
            p, secs = _cli(d, [*oargs, "--out", out.name])
            problems = []
            if p.returncode != 2:
                problems.append(f"exit {p.returncode}, expected 2")
            if f"holds the output of 'certify {owner}'" not in p.stderr:
                problems.append("no ownership line")
            if _tree(out) != before:
                problems.append("FOLDER CHANGED")
            yield ("ownership matrix", f"{olabel} into {label}'s folder", p.returncode,
                   secs, problems, (p.stderr.strip().splitlines() or [""])[-1])


def _tests_dir_on_path() -> None:
    here = str(ROOT / "tests")
    if here not in sys.path:
        sys.path.insert(0, here)


def _total(responses) -> float:
    """Seconds of requests made one after another, as the HTTP client measured each."""
    return sum(r.elapsed.total_seconds() for r in responses)


def _slowest(responses) -> float:
    """Seconds of the slowest of requests made at once, as the HTTP client measured it."""
    return max(r.elapsed.total_seconds() for r in responses)


def service_rows(d: Path):
    """Service scenarios against real servers (see the module's docstring)."""
    import threading

    import httpx
    _tests_dir_on_path()
    from service_support import Server, wait_job

    def at_once(n, post):
        start, out = threading.Barrier(n), [None] * n

        def one(i):
            start.wait()
            out[i] = post(i)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    long_job = {"command": "feasibility", "family": "paper-5.1", "rank": "12", "time_limit": "30"}
    gate = Server(d / "svc-gate", "--workers", "1", "--read-rate", "0", "--open-submit-rate", "100",
                  "--max-anonymous-queued", "5", "--max-storage-mb", "18", "--max-upload-mb", "3")
    direct = Server(d / "svc-direct", "--read-rate", "0", "--open-submit-rate", "2")
    for s in (gate, direct):
        s.launch()
    try:
        for s in (gate, direct):
            s.wait_ready()
        with httpx.Client(timeout=120) as c:
            busy = c.post(gate.url + "/api/jobs", headers=gate.auth, data=long_job).json()["id"]
            wait_job(c, gate.url, busy, until=("running",))
            two = b"{" + b" " * (2 << 20) + b"}"
            rs = at_once(20, lambda i: httpx.post(
                gate.url + "/api/verify", files={"file": (f"c{i}.json", two, "application/json")},
                timeout=120))
            codes = sorted(r.status_code for r in rs)
            ok = codes == [201] * 5 + [429] * 15
            yield ("service caps", "20 concurrent anonymous 2 MB uploads, queue cap 5", None,
                   _slowest(rs), [] if ok else [f"codes {codes}"],
                   f"{codes.count(201)} admitted, {codes.count(429)} refused 429")
            three = b"{" + b" " * ((3 << 20) - 1026) + b"}"
            rs = at_once(4, lambda i: httpx.post(
                gate.url + "/api/verify", headers=gate.auth,
                files={"file": (f"t{i}.json", three, "application/json")}, timeout=120))
            codes = sorted(r.status_code for r in rs)
            h = c.get(gate.url + "/api/health").json()
            ok = codes == [201, 201, 507, 507] and h["storage_bytes"] <= h["max_storage_bytes"]
            yield ("service caps", "4 concurrent 3 MB verify uploads, storage cap 18 MB", None,
                   _slowest(rs), [] if ok else [f"codes {codes}, stored {h['storage_bytes']}"],
                   f"{codes.count(201)} admitted, {codes.count(507)} refused 507; "
                   f"{h['storage_bytes'] / (1 << 20):.1f} MB stored")
            cert = json.dumps({"schema": "x"})
            rs = [httpx.post(direct.url + "/api/verify", headers={"X-Forwarded-For": f"203.0.113.{i}"},
                             files={"file": ("c.json", cert, "application/json")}) for i in range(3)]
            codes = [r.status_code for r in rs]
            yield ("service caps", "forged X-Forwarded-For against --open-submit-rate 2", None,
                   _total(rs), [] if codes == [201, 201, 429] else [f"codes {codes}"],
                   f"codes {codes}")
            fields = {"command": "feasibility", "family": "paper-5.1", "rank": "3", "features": "real",
                      "time_limit": "5", "seed": "0"}
            per_command = [("feasibility", fields, None),
                           ("rank", {"command": "rank", "tokens": "cube:1", "eps": "1/1000",
                                     "code": "paper-5.1", "seed": "0"}, ("m.json", b"[[1,0],[0,1]]")),
                           ("transcript", {"command": "transcript", "M": "8", "s": "1", "h": "2",
                                           "q": "2", "bits": "2", "seed": "0", "time_limit": "5"}, None),
                           ("transcript", {"command": "transcript", "M": "8", "s": "1", "h": "2",
                                           "q": "2", "format": "bf16"}, None),
                           ("checkpoint", {"command": "checkpoint", "eps": "1/1000", "family": "paper-5.1",
                                           "seed": "0"}, ("m.zip", b"PK"))]
            seen = set()
            for cmd, form, upload in per_command:
                for name in [*form, "file"] if upload else list(form):
                    if (cmd, name) in seen:
                        continue
                    seen.add((cmd, name))
                    files = [("file", upload)] * (2 if name == "file" else 1) if upload else None
                    r = c.post(direct.url + "/api/jobs", headers=direct.auth, data=dict(
                        (k, [v, v] if k == name else v) for k, v in form.items()), files=files)
                    ok = r.status_code == 422 and "given 2 times" in r.text or \
                        (name == "file" and r.status_code == 422)
                    yield ("repeated form field", f"{cmd}: {name} twice", r.status_code,
                           _total([r]), [] if ok else [f"HTTP {r.status_code}"],
                           r.json().get("detail", "")[:110])
            refusals = [
                ("feasibility family=ood-99-99-99-test", {"command": "feasibility",
                                                          "family": "ood-99-99-99-test", "rank": "3"}, None),
                ("transcript h > M", {"command": "transcript", "M": "4", "s": "1", "h": "6", "q": "2",
                                      "bits": "2"}, None),
                ("rank tokens=cube:24 on a 1 x 1 matrix", {"command": "rank", "tokens": "cube:24"},
                 ("one.json", b"[[1]]")),
                ("zip member name of 255 characters", {"command": "checkpoint"}, ("z.zip", _zip_named("x" * 255)))]
            for label, form, upload in refusals:
                r = c.post(direct.url + "/api/jobs", headers=direct.auth, data=form,
                           files={"file": upload} if upload else None)
                yield ("refused at submit", label, r.status_code, _total([r]),
                       [] if r.status_code == 422 else [f"HTTP {r.status_code}"],
                       r.json().get("detail", "")[:110])
            r = c.post(direct.url + "/api/verify?x=1", headers=direct.auth,
                       files={"file": ("c.json", cert, "application/json")})
            yield ("refused at submit", "/api/verify?x=1", r.status_code, _total([r]),
                   [] if r.status_code == 422 else [f"HTTP {r.status_code}"], r.json().get("detail", "")[:110])
    finally:
        for s in (gate, direct):
            s.stop()


def _zip_named(name: str) -> bytes:
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(name, "{}")
    return buf.getvalue()


def upgrade_rows(d: Path):
    """A data folder of the previous layout: refused by serve, moved by serve migrate, served."""
    import importlib.util

    import httpx
    _tests_dir_on_path()
    from service_support import Server
    spec = importlib.util.spec_from_file_location("upgrade_test", ROOT / "tests" / "test_service_upgrade.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    old, scratch = d / "old-svc", d / "old-svc-scratch"
    scratch.mkdir()
    made = mod._old_folder(old, scratch)
    p, secs = _cli(d, ["serve", "--data", old.name, "--port", "1"])
    ok = p.returncode == 2 and "certify serve migrate --data" in p.stderr
    yield ("previous-version data folder", "serve --data OLD", p.returncode, secs,
           [] if ok else ["not refused naming the migration"], p.stderr.strip()[-110:])
    p, secs = _cli(d, ["serve", "migrate", "--data", old.name])
    yield ("previous-version data folder", "serve migrate --data OLD", p.returncode,
           secs, [] if p.returncode == 0 else [f"exit {p.returncode}"],
           p.stderr.strip()[:110])
    with Server(old, token="old-token-0123456789abcdef") as s:
        r = httpx.get(f"{s.url}/certificates/{made['sha']}/files/report.md", timeout=60)
    ok = r.status_code == 200 and r.content == made["report_md"]
    yield ("previous-version data folder", "the old report served after the migration",
           r.status_code, _total([r]), [] if ok else ["report not served"], f"HTTP {r.status_code}")


def scenario_cases():
    """(class, generator of rows) for the scenarios."""
    return [("ownership matrix", ownership_rows), ("service caps", service_rows),
            ("previous-version data folder", upgrade_rows)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--filter", default="", help="only cases whose class or command contains this")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="certify-harness-") as tmp:
        d = Path(tmp)
        make_files(d)
        rows = []
        for cls, cmd, args in cases() + serve_cases():
            if a.filter and a.filter not in cls and a.filter != cmd:
                continue
            r = run_case(d, cmd, args)
            rows.append({"class": cls, "case": f"{cmd} {' '.join(x if len(x) < 30 else x[:27] + '...' for x in args)}", **r})
            ok = "ok " if not r["problems"] else "BAD"
            print(f"{ok} {r['rc']!s:>4} {r['seconds']:6.2f}s  {rows[-1]['case'][:60]:<60} "
                  f"{'; '.join(r['problems']) + ' | ' if r['problems'] else ''}{r['line']}",
                  flush=True)
            for junk in ("r", "k.npz", "f.json", "d", "serve-new"):
                p = d / junk
                if p.is_dir():
                    shutil.rmtree(p)
                elif p.exists():
                    p.unlink()
        for cls, gen in scenario_cases():
            if a.filter and a.filter not in cls and a.filter not in ("repeated", "refused"):
                continue
            for cls_row, case, rc, secs, problems, line in gen(d):
                lost = [x for x in SENTINELS if not (d / x).exists()]
                if lost:
                    problems = [*problems, f"LOST {lost}"]
                rows.append({"class": cls_row, "case": case, "rc": rc, "seconds": round(secs, 2),
                             "line": line[:110], "problems": problems})
                ok = "ok " if not problems else "BAD"
                print(f"{ok} {rc!s:>4} {secs:6.2f}s  {case[:60]:<60} "
                      f"{'; '.join(problems) + ' | ' if problems else ''}{line[:110]}", flush=True)
    bad = [r for r in rows if r["problems"]]
    slow = max((r["seconds"] for r in rows if r["class"] not in SCENARIO_CLASSES), default=0)
    print(f"\n{len(rows)} cases, {len(rows) - len(bad)} pass, {len(bad)} fail; "
          f"slowest {slow:.2f} CPU s; classes: {len({r['class'] for r in rows})}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if a.json:
        print(json.dumps(rows))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
