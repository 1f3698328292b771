"""How long the default test suite takes: ``make suite-times``.

Runs pytest the way ``make test`` does (two workers, the slow profile left out)
with ``--durations``, and writes what it measured to
``reports/suite-times.json`` and ``reports/suite-times.md``: the tests passed,
failed and skipped, the seconds pytest reports for the session, the CPU seconds
of the run (pytest and every worker it started, user + system), the machine's
cores and load average before and after, the 15 slowest test phases and the 15
tests that use the most CPU seconds (`--cpu-report`). The
README quotes the suite's time only from that file (``benchmarks/report.py``
renders it).

    python benchmarks/suite_times.py [TESTS ...]     # default: tests

A subset (``make suite-times TESTS=tests/test_codes.py``) writes the same files
and says which tests it ran. Both files are written only when pytest ran to its
summary line; a failing suite is recorded with its counts and exit status.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports"
SLOWEST = 15
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*)$")
_SUMMARY = re.compile(r"^(?:=+ )?(\d+ \w+(?:, \d+ \w+)*) in (\d+(?:\.\d+)?)s(?: \([0-9:]+\))?(?: =+)?$")
_CPU = re.compile(r"^\s*(\d+\.\d+)\s+(tests/\S+)$")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)")


def parse(output: str) -> dict:
    """The counts, pytest's own seconds and the slowest phases from pytest's output."""
    summary = None
    slowest, cpu, in_cpu = [], [], False
    for line in output.splitlines():
        if "CPU seconds per test" in line:
            in_cpu = True
            continue
        m = _CPU.match(line) if in_cpu else None
        if m:
            cpu.append({"cpu_s": float(m.group(1)), "test": m.group(2)})
            continue
        in_cpu = False
        m = _DURATION.match(line.strip())
        if m:
            slowest.append({"seconds": float(m.group(1)), "phase": m.group(2), "test": m.group(3)})
        m = _SUMMARY.match(line.strip())
        if m:
            summary = m
    if summary is None:
        raise ValueError("pytest printed no summary line")
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    for n, what in _COUNT.findall(summary.group(1)):
        key = {"error": "errors", "warning": "warnings"}.get(what, what)
        counts[key] = counts.get(key, 0) + int(n)
    slowest.sort(key=lambda d: -d["seconds"])
    return {**counts, "pytest_s": float(summary.group(2)), "slowest": slowest[:SLOWEST],
            "most_cpu": cpu[:SLOWEST]}


def markdown(res: dict) -> str:
    scope = "the default suite (`tests`)" if res["tests"] == ["tests"] else \
        "the tests " + ", ".join(f"`{t}`" for t in res["tests"])
    L = ["# Time of the test suite", "",
         f"Made by `make suite-times` ({scope}) on {res['date']} at commit `{res['commit']}`: "
         f"`{res['command']}`.", "",
         "| tests passed | failed | skipped | errors | pytest s | CPU s (pytest and its workers) | wall s | "
         "cores | load average at the start / end |", "|---|---|---|---|---|---|---|---|---|",
         f"| {res['passed']:,} | {res['failed']} | {res['skipped']} | {res['errors']} | {res['pytest_s']:.1f} | "
         f"{res['cpu_s']:.1f} | {res['wall_s']:.1f} | {res['cores']} | "
         f"{', '.join(f'{x:.2f}' for x in res['loadavg_start'])} / "
         f"{', '.join(f'{x:.2f}' for x in res['loadavg_end'])} |", "",
         f"The {len(res['slowest'])} slowest test phases (pytest `--durations`, wall seconds):", "",
         "| seconds | phase | test |", "|---|---|---|"]
    L += [f"| {d['seconds']:.2f} | {d['phase']} | `{d['test']}` |" for d in res["slowest"]]
    if res.get("most_cpu"):
        L += ["", f"The {len(res['most_cpu'])} tests that use the most CPU seconds (`--cpu-report`: setup, call "
                  "and teardown, the test's process and the children it waited for; read on a loaded machine "
                  "too):", "", "| CPU s | test |", "|---|---|"]
        L += [f"| {d['cpu_s']:.2f} | `{d['test']}` |" for d in res["most_cpu"]]
    return "\n".join(L) + "\n"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _commit() -> str:
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def main(argv: list[str]) -> int:
    tests = argv or ["tests"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
           f"--durations={SLOWEST}", "--durations-min=0", f"--cpu-report={SLOWEST}", *tests]
    load0 = list(os.getloadavg())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys.stdout.write(p.stdout[-4000:])
    try:
        res = parse(p.stdout)
    except ValueError as e:
        print(f"suite_times: {e} (exit {p.returncode}); nothing written\n{p.stderr[-2000:]}", file=sys.stderr)
        return 2
    res = {"tests": tests, "exit": p.returncode, **res,
           "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
           "wall_s": wall, "cores": os.cpu_count(), "loadavg_start": load0, "loadavg_end": list(os.getloadavg()),
           "date": time.strftime("%Y-%m-%d %H:%M %Z"), "commit": _commit(),
           "command": "python -m pytest " + " ".join(cmd[3:])}
    OUT.mkdir(exist_ok=True)
    _write(OUT / "suite-times.json", json.dumps(res, indent=1) + "\n")
    _write(OUT / "suite-times.md", markdown(res))
    print(f"wrote reports/suite-times.json and reports/suite-times.md: {res['passed']} passed in "
          f"{res['pytest_s']:.1f} s of pytest time, {res['cpu_s']:.1f} CPU s")
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
