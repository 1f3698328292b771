"""The README's examples run as printed and end with the exit code they state."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def examples() -> list[tuple[str, int]]:
    text = (ROOT / "README.md").read_text()
    block = text.split("Examples (from the repository root", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    out = []
    for line in block.strip().splitlines():
        m = re.match(r"^(\.venv/bin/python .*?)\s+# exit (\d)", line)
        assert m, f"README example without a stated exit code: {line}"
        out.append((m.group(1), int(m.group(2))))
    return out


def test_every_example_states_its_exit_code():
    ex = examples()
    assert len(ex) >= 6 and {code for _, code in ex} >= {0, 1, 2}


@pytest.mark.slow
def test_readme_examples_run_as_printed(tmp_path):
    """In order (later lines read earlier outputs), from a copy of the layout:
    ``models/`` linked in, ``.venv/bin/python`` = this interpreter."""
    (tmp_path / "models").symlink_to(ROOT / "models")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for line, code in examples():
        argv = line.split()
        argv[0] = sys.executable
        p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == code, f"{line}: exit {p.returncode}, README says {code}\n{p.stderr[-800:]}"
        assert "Traceback" not in p.stderr
