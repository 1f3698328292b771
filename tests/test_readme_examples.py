"""Every command line of the README and of ``docs/*.md`` runs and ends with the exit
code it states.

A line in a ```` ```sh ```` block is either a ``.venv/bin/python -m certify...``
line that states its exit code (``# exit N``), a heredoc that writes a file a later
line reads, or a line that starts a server or a cluster or builds a fresh venv,
which this file does not run: each such line is listed in :data:`ELSEWHERE` with
the test that runs it. A line of none of these kinds fails the first test, so a
new command line cannot go unchecked.

The default suite runs every page's lines in order (later lines read earlier
outputs) through the command front in this process, from a scratch folder with
``models/`` and ``reports/`` linked in; ``--runslow`` runs them as printed, in a
shell, with ``.venv/bin/python`` = this interpreter."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = re.compile(r"^(\.venv/bin/python -m certify(?:\.\w+)? .*?)\s+# exit (\d)\b")
HEREDOC = re.compile(r"^cat > \S+ <<'(\w+)'$")
#: lines this file does not run, and the test that runs each kind
ELSEWHERE = {
    r"^make (demo|test)\b": "tests/test_reference_reports.py",       # demo's output; `make test` is the suite
    r"^python3 -m venv /tmp/review ": "tests/test_clean_install.py",
    r"^\.venv/bin/python -m certify serve\b": "tests/test_service_upgrade.py",
    r"^curl ": "tests/test_service_api.py",
    r"^ray (start|job submit) ": "tests/test_ray_job.py",
}


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def entries(page: Path) -> list[tuple[str, int | None, str]]:
    """``(shell text, stated exit code or None, kind)`` of one page, in order; kind is
    ``run``, ``heredoc`` (exit 0) or the test file that runs the line elsewhere.
    Continuation lines (ending in a backslash) are joined to their line."""
    out: list[tuple[str, int | None, str]] = []
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            ln = lines[i]
            while ln.endswith("\\") and i + 1 < len(lines):
                i += 1
                ln = ln[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            if not ln.strip() or ln.lstrip().startswith("#"):
                continue
            here = HEREDOC.match(ln)
            if here:
                end = lines.index(here.group(1), i)
                out.append(("\n".join([ln, *lines[i:end + 1]]), 0, "heredoc"))
                i = end + 1
                continue
            m = RUN.match(ln)
            if m:
                out.append((m.group(1), int(m.group(2)), "run"))
                continue
            where = next((t for rx, t in ELSEWHERE.items() if re.match(rx, ln)), None)
            out.append((ln, None, where or "unchecked"))
    return out


def every_entry() -> list[tuple[Path, str, int | None, str]]:
    return [(p, text, code, kind) for p in PAGES for text, code, kind in entries(p)]


def test_every_command_line_is_run_here_or_by_a_named_test():
    got = every_entry()
    unchecked = [(_rel(p), t) for p, t, _, kind in got if kind == "unchecked"]
    assert unchecked == [], "command lines that state no exit code and are run by no test"
    for _, _, _, kind in got:
        if kind not in ("run", "heredoc"):
            assert (ROOT / kind).is_file(), kind
    ran = [(p, code) for p, _, code, kind in got if kind == "run"]
    assert len(ran) >= 20 and {code for _, code in ran} >= {0, 1, 2, 3, 4}
    pages = {p.name for p, _ in ran}
    assert {"README.md", "commands.md", "trust.md", "layouts.md"} <= pages


def test_the_pages_name_paths_that_exist():
    """Every ``models/`` or ``reports/`` path a command line names is in the repository."""
    for p, text, _, kind in every_entry():
        if kind != "run":
            continue
        for tok in shlex.split(text):
            if tok.startswith(("models/", "reports/")):
                assert (ROOT / tok).exists() or (ROOT / (tok + ".json")).exists(), (_rel(p), text, tok)


def test_the_layouts_page_covers_every_outcome_of_a_third_party_checkpoint():
    ran = [(t, c) for t, c, kind in entries(ROOT / "docs" / "layouts.md") if kind == "run"]
    assert len(ran) >= 10 and {c for _, c in ran} >= {0, 2, 3}


#: the pages with lines to run (README.md and most of docs/)
RUN_PAGES = [p for p in PAGES if any(kind in ("run", "heredoc") for _, _, kind in entries(p))]


def _scratch(tmp_path: Path) -> Path:
    for name in ("models", "reports"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def _argv(line: str) -> list[str]:
    """``.venv/bin/python -m certify X ...`` or ``-m certify.X ...`` -> ``[X, ...]``."""
    words = shlex.split(line)
    module = words[2]
    return words[3:] if module == "certify" else [module.split(".", 1)[1], *words[3:]]


@pytest.mark.parametrize("page", RUN_PAGES, ids=[p.name for p in RUN_PAGES])
def test_command_lines_run_in_process(page, tmp_path, monkeypatch):
    """The page's lines, in order, through the command front in this process (a replay
    of extraction still spawns its separate process)."""
    from certify.cli import main
    got = [e for e in entries(page) if e[2] in ("run", "heredoc")]
    monkeypatch.chdir(_scratch(tmp_path))
    for text, code, kind in got:
        if kind == "heredoc":
            subprocess.run(["bash", "-c", text], check=True)
            continue
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rc = main(_argv(text))
        assert rc == code, f"{_rel(page)}: {text}: exit {rc}, the page says {code}\n{err.getvalue()[-800:]}"


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=[p.name for p in RUN_PAGES])
def test_command_lines_run_as_printed(page, tmp_path):
    """Every line, as printed, in a shell, with ``.venv/bin/python`` = this interpreter."""
    got = [e for e in entries(page) if e[2] in ("run", "heredoc")]
    d = _scratch(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for text, code, _ in got:
        cmd = text.replace(".venv/bin/python", shlex.quote(sys.executable), 1)
        p = subprocess.run(["bash", "-c", cmd], cwd=d, env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == code, f"{_rel(page)}: {text}: exit {p.returncode}, the page says {code}\n" \
                                     f"{p.stderr[-800:]}"
        assert "Traceback" not in p.stderr
