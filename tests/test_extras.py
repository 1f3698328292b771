"""The base install is what verify and report need; a missing extra is one line.

Fast checks for the default suite (the slow one, ``tests/test_clean_install.py``,
installs the wheel without extras into a fresh venv): ``certify verify`` and
``certify report`` run without importing any module of an extra; a command that
reaches a module of a missing extra ends with one line naming the extra (exit
2); the extras of ``pyproject.toml`` hold what :mod:`certify.core.extras` says.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from certify.core.errors import run_command
from certify.core.extras import EXTRA_OF

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(req: str) -> str:
    return req.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()


def test_base_dependencies_are_the_checker_and_the_report():
    assert sorted(_name(r) for r in PROJECT["dependencies"]) == ["jsonschema", "matplotlib", "numpy",
                                                                  "python-flint"]


def test_every_extra_named_for_a_module_exists_and_all_holds_them():
    extras = PROJECT["optional-dependencies"]
    assert set(EXTRA_OF.values()) <= set(extras)
    everything = extras["all"][0]
    assert everything.startswith("certify-attention[")
    assert set(everything[len("certify-attention["):-1].split(",")) == set(extras) - {"all", "test"}
    assert "torch==2.13.0" in extras["models"]
    dists = {_name(r) for k, v in extras.items() for r in v}
    for dist in ("torch", "cvxpy", "highspy", "scipy", "mpmath", "fastapi", "sqlalchemy", "ray", "safetensors",
                 "performer-pytorch", "flash-linear-attention"):
        assert dist in dists, dist


@pytest.mark.parametrize("module, extra", [("torch", "models"), ("cvxpy", "solvers"), ("sqlalchemy.orm", "service"),
                                           ("ray", "ray"), ("fla.layers", "libraries")])
def test_a_missing_extra_is_one_line_exit_2(capsys, monkeypatch, module, extra):
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)   # not installed
    def main(argv):
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)
    assert run_command("certify rank", main, []) == 2
    err = capsys.readouterr().err.strip().splitlines()
    hint = " (under `ray job submit`, name the Python of the environment that has it by its absolute path)" \
        if extra == "ray" else ""
    assert err == [f"certify rank: error: the [{extra}] extra is not installed for this Python, {sys.executable} "
                   f"(no module {module.split('.')[0]}): pip install 'certify-attention[{extra}]' into it, or run "
                   f"the Python that has it{hint}"]


def test_a_broken_module_of_an_installed_extra_is_not_called_missing(capsys):
    """ray installed, one of its own modules failing (a partial install): the line says so,
    never that the [ray] extra is not installed."""
    pytest.importorskip("ray")
    def main(argv):
        raise ModuleNotFoundError("No module named 'ray._private.gone'", name="ray._private.gone")
    assert run_command("certify checkpoint", main, []) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "not installed" not in line and "ray is installed for" in line and "ray._private.gone" in line


def test_a_module_of_no_extra_stays_an_internal_error(capsys):
    def main(argv):
        raise ModuleNotFoundError("No module named 'nonesuch'", name="nonesuch")
    assert run_command("certify rank", main, []) == 1
    assert "internal error" in capsys.readouterr().err


def test_verify_and_report_import_no_module_of_an_extra(tmp_path):
    """In one process: verify a committed checkpoint certificate and report it; then no
    module of an extra (torch, scipy, cvxpy, ray, fastapi, sqlalchemy, ...) is loaded."""
    cert = ROOT / "reports" / "reference" / "checkpoint-paper51-lookup-r8-s0.json"
    code = (
        "import sys, json\n"
        "from certify.cli import main\n"
        f"rv = main(['verify', {str(cert)!r}])\n"
        f"rr = main(['report', {str(cert)!r}, '--out', {str(tmp_path / 'rep')!r}])\n"
        f"extras = {sorted(EXTRA_OF)!r}\n"
        "print(json.dumps([rv, rr, sorted({m.split('.')[0] for m in sys.modules} & set(extras))]))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                            "MPLBACKEND": "Agg"})
    assert r.returncode == 0, r.stderr[-2000:]
    rv, rr, loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert (rv, rr) == (4, 0)                    # holds under its extraction assumption; report written
    assert loaded == []
    assert (tmp_path / "rep" / "report.md").is_file()
