"""Bad-input harness: every class of hostile input, run as real subprocesses.

    python tests/harness/run_cases.py [--filter TEXT] [--json]

Each case runs ``python -m certify <command> ...`` in a scratch folder and must
end with a documented exit code (0-3), print no traceback, say what went
wrong in one error line, stay within its time budget (2 s; 5 s for commands
that load torch), and leave every file it did not write in place (the scratch
folder holds sentinel files -- a ``thesis.tex`` among others -- that are
checked after each case). Prints a table: case, exit code, seconds, first
error line. Exit 0 when every case passes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
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
              ["--port", "0"]):
        C.append(("serve start-up", "serve", list(a)))
    return C


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CERTIFY_DEBUG", None)
    return env


def run_case(d: Path, cmd: str, args: list[str], timeout: float = 60.0) -> dict:
    before = {s: (d / s).read_bytes() for s in SENTINELS if (d / s).exists()}
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "certify", cmd, *args], cwd=d, env=_env(),
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, err = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) \
            else (exc.stderr or "")
    secs = time.perf_counter() - t0
    lost = [s for s, b in before.items() if not (d / s).exists() or (d / s).read_bytes() != b]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower() or "cannot certify" in ln]
    budget = 5.0 if cmd in TORCH else 2.0
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
        problems.append(f"slow {secs:.1f}s > {budget}s")
    if lost:
        problems.append(f"LOST {lost}")
    return {"rc": rc, "seconds": round(secs, 2), "line": (errs or lines or [""])[-1][:110],
            "problems": problems}


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
    bad = [r for r in rows if r["problems"]]
    slow = max((r["seconds"] for r in rows), default=0)
    print(f"\n{len(rows)} cases, {len(rows) - len(bad)} pass, {len(bad)} fail; "
          f"slowest {slow:.2f} s; classes: {len({r['class'] for r in rows})}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if a.json:
        print(json.dumps(rows))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
