"""Re-make every committed certificate with its own command, and show that no verdict changed.

A certificate records the command that made it (``command``); a new certificate format
(``certificate/3``) means the committed ones are re-made by those commands, never edited.
This script groups the committed certificates (``tests/committed.py``) by the command
that writes them, runs each command once from the repository root with the project's
interpreter, and compares, claim by claim, the kinds and verdicts of the new file with
the old one. It prints a table and exits 1 if any verdict changed or any command failed
(the old file is then restored: a re-make may not change what the project says).

    .venv/bin/python reports/remake.py [--only PREFIX ...] [--dry-run]

``reports/reference/`` is written by ``certify demo --out reports/reference`` (``make
reports``), whatever single command each of its certificates records.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from committed import report_json  # noqa: E402

PY = sys.executable


def _argv(cmd: list[str]) -> list[str]:
    """The recorded command as this checkout runs it (``certify`` -> ``python -m certify``)."""
    if cmd[:1] == ["certify"]:
        return [PY, "-m", "certify", *cmd[1:]]
    if cmd[:1] == ["python"]:
        return [PY, *cmd[1:]]
    raise ValueError(f"unknown command {cmd[:2]}")


def _verdicts(path: Path) -> list[tuple[str, str]]:
    c = json.loads(path.read_text())
    return [(cl["kind"], cl["verdict"]) for cl in c["claims"]]


def plan(files: list[Path]) -> list[tuple[list[str], list[tuple[Path, Path | None]]]]:
    """``[(argv, [(committed file, where the command writes it or None: in place)])]``."""
    jobs: dict[str, tuple[list[str], list[tuple[Path, Path | None]]]] = {}
    for f in files:
        rel = f.relative_to(ROOT)
        if rel.parts[:2] == ("reports", "reference"):
            argv = [PY, "-m", "certify", "demo", "--out", "reports/reference"]
            written = None
        else:
            cmd = json.loads(f.read_text())["command"]
            argv = _argv(cmd)
            written = None
            if "--out" in argv:
                i = argv.index("--out") + 1
                out = Path(argv[i])
                if out.is_absolute() and not str(out).startswith(str(ROOT)):
                    argv[i] = str(rel)                                   # a scratch path: write in place
                elif out.suffix != ".json":
                    written = None                                       # an output folder
        key = json.dumps(argv)
        jobs.setdefault(key, (argv, []))[1].append((f, written))
    return list(jobs.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=[], help="only certificates under these path prefixes")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args(argv)
    files = [f for f in report_json() if '"certify-attention/certificate/' in f.read_text()[:300]
             and (not a.only or any(str(f.relative_to(ROOT)).startswith(p) for p in a.only))]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="certify-remake-") as keep:
        for argv_, members in plan(files):
            print("$", " ".join(argv_[1:] if argv_[0] == PY else argv_), flush=True)
            if a.dry_run:
                continue
            saved = {}
            for f, _ in members:
                saved[f] = Path(keep) / f.relative_to(ROOT).as_posix().replace("/", "__")
                shutil.copy2(f, saved[f])
            # the files and folders the command writes are moved aside (the tool never overwrites
            # what it did not write), and put back if the re-make fails
            aside = []
            for flag in ("--out", "--figure"):
                if flag in argv_:
                    target = ROOT / argv_[argv_.index(flag) + 1]
                    if target.exists():
                        moved = Path(keep) / ("aside-" + target.relative_to(ROOT).as_posix().replace("/", "__"))
                        shutil.move(str(target), moved)
                        aside.append((target, moved))
            t0 = time.perf_counter()
            run = subprocess.run(argv_, cwd=ROOT, capture_output=True, text=True)
            dt = time.perf_counter() - t0
            failed = run.returncode not in (0, 1, 4) or not all(f.exists() for f, _ in members)
            for target, moved in aside if failed else []:
                if target.exists():
                    shutil.rmtree(target) if target.is_dir() else target.unlink()
                shutil.move(str(moved), target)
            for f, _ in members:
                old, new = _verdicts(saved[f]), (_verdicts(f) if f.exists() else None)
                same = new == old and json.loads(f.read_text()).get("schema") != \
                    json.loads(saved[f].read_text()).get("schema")
                status = "same verdicts" if same else (
                    "NOT RE-MADE" if new is not None and json.loads(f.read_text()).get("schema") ==
                    json.loads(saved[f].read_text()).get("schema") else f"VERDICTS CHANGED {old} -> {new}")
                if not same:
                    bad += 1
                    shutil.copy2(saved[f], f)
                print(f"  {status:<14} {f.relative_to(ROOT)}  ({len(old)} claims, {dt:.0f} s, exit "
                      f"{run.returncode})", flush=True)
            if run.returncode not in (0, 1, 4):
                print("  " + (run.stderr.strip().splitlines() or ["(no stderr)"])[-1], flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
