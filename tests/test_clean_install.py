"""A reviewer installs only the checker: the wheel without extras, in a fresh venv.

The wheel is built from this checkout (``pip wheel --no-deps .``) and installed
with no extra into a new virtual environment (numpy, python-flint, jsonschema,
matplotlib: the base dependencies; pip's cache keeps it fast, and
``/opt/wheels`` is offered as on the project's machines). There, with the
``certify`` script of that venv and outside the checkout (so nothing of the
working tree is imported):

* torch, scipy, cvxpy, Ray, FastAPI and SQLAlchemy are not installed;
* ``certify verify`` re-derives a committed certificate (exit 0), and a
  committed checkpoint certificate holds under its extraction assumption
  (exit 4); ``--replay-extraction`` says that the replay needs ``[models]``
  for a ``models/`` checkpoint (a torch module) and ``[replay]`` for a
  safetensors checkpoint of a third-party layout;
* ``certify report`` writes the report and its figures (exit 0);
* a command that needs an extra (``rank``, ``feasibility``, ``serve``) says
  which one in one line, exit 2, no traceback.

With the ``[replay]`` extra (safetensors) in a second fresh venv, still without
torch, ``certify verify --replay-extraction`` of committed gallery certificates
of safetensors checkpoints (bf16 and fp16 weights) re-derives their features
bit for bit: exit 0, nothing assumed.

Marked slow: building the wheel (its C extensions) and installing the base
dependencies take about a minute even with a warm pip cache (docs/commands.md, "Checking
a certificate"). Run it with ``pytest --runslow tests/test_clean_install.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "reports" / "reference"
WHEELS = Path("/opt/wheels")

pytestmark = pytest.mark.slow


def _run(args, cwd, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CERTIFY_DEBUG")}
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


GALLERY = ROOT / "reports" / "gallery"
#: gallery certificates of safetensors checkpoints (bf16 fla LM, fp16 linear-attention-transformer)
GALLERY_CERTS = ("fla-sharded-bf16", "lat")
FIND = ["--find-links", str(WHEELS)] if WHEELS.is_dir() else []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from a clean copy of this checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"                  # a clean copy: no .so, venv or cache of the checkout is built in
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "*.so", "__pycache__", "*.egg-info", "build", ".pytest_cache", ".hypothesis",
        "reports", "benchmarks", "tests"))
    dist = tmp / "dist"
    r = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, *FIND, src], tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    return next(dist.glob("certify_attention-*.whl"))


def _venv(tmp: Path, requirement: str) -> Path:
    env = tmp / "venv"
    venv.create(env, with_pip=True)
    r = _run([env / "bin" / "python", "-m", "pip", "install", "-q", *FIND, requirement], tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    return env


def _gallery(work: Path) -> None:
    """The gallery certificates and the checkpoints they name (by path and sha256)."""
    for name in GALLERY_CERTS:
        shutil.copy(GALLERY / name / "certificate.json", work / f"gallery-{name}.json")
        shutil.copytree(GALLERY / "models" / name, work / "reports" / "gallery" / "models" / name)


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory, wheel):
    """``(venv, work folder)``: the wheel installed without extras."""
    tmp = tmp_path_factory.mktemp("clean")
    env = _venv(tmp, str(wheel))
    work = tmp / "work"
    work.mkdir()
    for name in ("feasibility-r8-real.json", "checkpoint-paper51-lookup-r8-s0.json"):
        shutil.copy(REFERENCE / name, work / name)
    # the checkpoint certificate names its weights by path and sha256: present them
    (work / "models" / "checkpoints").mkdir(parents=True)
    for f in (ROOT / "models" / "checkpoints").glob("paper51-lookup-r8-s0.*"):
        shutil.copy(f, work / "models" / "checkpoints" / f.name)
    _gallery(work)
    return env, work


@pytest.fixture(scope="module")
def replay_venv(tmp_path_factory, wheel):
    """``(venv, work folder)``: the wheel with the ``[replay]`` extra, no torch."""
    tmp = tmp_path_factory.mktemp("replay")
    env = _venv(tmp, f"{wheel}[replay]")
    work = tmp / "work"
    work.mkdir()
    shutil.copy(REFERENCE / "checkpoint-paper51-lookup-r8-s0.json", work / "checkpoint-paper51-lookup-r8-s0.json")
    (work / "models" / "checkpoints").mkdir(parents=True)
    for f in (ROOT / "models" / "checkpoints").glob("paper51-lookup-r8-s0.*"):
        shutil.copy(f, work / "models" / "checkpoints" / f.name)
    _gallery(work)
    return env, work


def test_base_install_has_no_producer_dependencies(base_venv):
    env, work = base_venv
    probe = ("import importlib.util as u, json; print(json.dumps({m: u.find_spec(m) is not None for m in "
             "('torch', 'scipy', 'cvxpy', 'ray', 'fastapi', 'sqlalchemy', 'safetensors', 'numpy', 'flint', "
             "'jsonschema', 'matplotlib', 'certify')}))")
    r = _run([env / "bin" / "python", "-c", probe], work)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert found == {"torch": False, "scipy": False, "cvxpy": False, "ray": False, "fastapi": False,
                     "sqlalchemy": False, "safetensors": False, "numpy": True, "flint": True,
                     "jsonschema": True, "matplotlib": True, "certify": True}
    r = _run([env / "bin" / "python", "-c", "import certify; print(certify.__file__)"], work)
    assert str(env) in r.stdout                  # the installed wheel, not the checkout


def test_verify_and_report_run_in_the_base_install(base_venv):
    env, work = base_venv
    certify = env / "bin" / "certify"
    r = _run([certify, "verify", "feasibility-r8-real.json"], work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PROVED: no rank-8 real-feature head" in r.stderr and "Traceback" not in r.stderr
    r = _run([certify, "verify", "checkpoint-paper51-lookup-r8-s0.json"], work)
    assert r.returncode == 4, r.stdout + r.stderr           # holds under the extraction assumption
    assert "assuming: extraction:models/checkpoints/paper51-lookup-r8-s0.safetensors" in r.stderr
    r = _run([certify, "verify", "--replay-extraction", "checkpoint-paper51-lookup-r8-s0.json"], work)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "the replay of extraction needs the [models] extra" in r.stderr and "Traceback" not in r.stderr
    r = _run([certify, "verify", "--replay-extraction", f"gallery-{GALLERY_CERTS[0]}.json"], work)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "the replay of extraction needs the [replay] extra" in r.stderr and "Traceback" not in r.stderr
    r = _run([certify, "report", "feasibility-r8-real.json", "checkpoint-paper51-lookup-r8-s0.json",
              "--out", "rep"], work)
    assert r.returncode == 0, r.stdout + r.stderr
    made = {p.name for p in (work / "rep").iterdir()}
    assert {"report.md", "report.tex"} <= made and any(n.endswith(".png") for n in made), made
    assert "rank-8" in (work / "rep" / "report.md").read_text()


@pytest.mark.parametrize("args, extra", [
    (["rank", "models/checkpoints/paper51-lookup-r8-s0"], "models"),
    (["feasibility", "--rank", "8"], "solvers"),
    (["serve"], "service"),
])
def test_a_command_needing_an_extra_names_it(base_venv, args, extra):
    env, work = base_venv
    r = _run([env / "bin" / "certify", *args], work)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"the [{extra}] extra is not installed" in lines[0], r.stderr
    assert f"pip install 'certify-attention[{extra}]'" in lines[0]


def test_the_replay_extra_replays_a_safetensors_certificate_without_torch(replay_venv):
    env, work = replay_venv
    probe = ("import importlib.util as u, json; print(json.dumps({m: u.find_spec(m) is not None for m in "
             "('torch', 'scipy', 'safetensors', 'certify')}))")
    r = _run([env / "bin" / "python", "-c", probe], work)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"torch": False, "scipy": False, "safetensors": True, "certify": True}
    certify = env / "bin" / "certify"
    certs = [f"gallery-{name}.json" for name in GALLERY_CERTS]
    r = _run([certify, "verify", *certs], work)
    assert r.returncode == 4, r.stdout + r.stderr            # the extraction, assumed
    r = _run([certify, "verify", "--replay-extraction", *certs], work)
    assert r.returncode == 0, r.stdout + r.stderr            # the extraction, replayed bit for bit
    assert "assuming" not in r.stderr and "Traceback" not in r.stderr
    # a models/ checkpoint is a torch module: its replay needs [models], and says so
    r = _run([certify, "verify", "--replay-extraction", "checkpoint-paper51-lookup-r8-s0.json"], work)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "the replay of extraction needs the [models] extra" in r.stderr and "Traceback" not in r.stderr
