"""Every README command line about checkpoints runs as printed and ends with the exit
code it states (the sections on third-party checkpoints and adapter specs, and
every other line that certifies or verifies a checkpoint)."""

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
OURS = ("## Supported layouts (third-party checkpoints)", "## Families and choices the paper leaves open")


def lines() -> list[tuple[str, int, bool]]:
    """``(shell text, stated exit code, in the third-party sections)``, in README order;
    a heredoc (``cat > F <<'X' ... X``) is one entry with exit 0."""
    text = (ROOT / "README.md").read_text()
    a, b = text.index(OURS[0]), text.index(OURS[1])
    out = []
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        ours = a <= m.start() < b
        block = m.group(1).splitlines()
        i = 0
        while i < len(block):
            ln = block[i]
            here = re.match(r"^cat > \S+ <<'(\w+)'$", ln)
            if here:
                end = block.index(here.group(1), i + 1)
                out.append(("\n".join(block[i:end + 1]), 0, ours))
                i = end + 1
                continue
            m2 = re.match(r"^(\.venv/bin/python -m certify .*?)\s+# exit (\d)", ln)
            if m2 and (ours or re.search(r"certify (checkpoint|verify .*checkpoint)", m2.group(1))):
                out.append((m2.group(1), int(m2.group(2)), ours))
            i += 1
    return out


def _scratch(tmp_path: Path) -> Path:
    for name in ("models", "reports"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def test_readme_states_checkpoint_lines_and_their_paths_exist():
    got = lines()
    ours = [ln for ln, _, o in got if o]
    assert len(ours) >= 10 and {c for _, c, o in got if o} >= {0, 2, 3}
    for ln, _, _ in got:
        for tok in shlex.split(ln.splitlines()[0]) if not ln.startswith("cat") else []:
            if tok.startswith(("models/", "reports/")):
                assert (ROOT / tok).exists() or (ROOT / (tok + ".json")).exists(), (ln, tok)


def test_third_party_readme_lines_run_in_process(tmp_path, monkeypatch):
    """The third-party sections' lines, in order, through the command front in this
    process (the replay line still spawns its separate process)."""
    from certify.cli import main
    monkeypatch.chdir(_scratch(tmp_path))
    for ln, code, ours in lines():
        if not ours:
            continue
        if ln.startswith("cat"):
            subprocess.run(["bash", "-c", ln], check=True)
            continue
        argv = shlex.split(ln)[3:]                  # after ".venv/bin/python -m certify"
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rc = main(argv)
        assert rc == code, f"{ln}: exit {rc}, README says {code}\n{err.getvalue()[-800:]}"


@pytest.mark.slow
def test_readme_checkpoint_lines_run_as_printed(tmp_path):
    """Every line, as printed, in a shell, with ``.venv/bin/python`` = this interpreter."""
    d = _scratch(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for ln, code, _ in lines():
        cmd = ln.replace(".venv/bin/python", shlex.quote(sys.executable), 1)
        p = subprocess.run(["bash", "-c", cmd], cwd=d, env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == code, f"{ln}: exit {p.returncode}, README says {code}\n{p.stderr[-800:]}"
        assert "Traceback" not in p.stderr
