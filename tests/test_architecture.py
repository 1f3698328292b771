"""The shape of the house: one-way imports (import-linter contracts in
pyproject.toml), argument parsing only in the command package, and a
``python -m`` entry point for every command."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from certify.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("certify", "models", "solvers")


def _sources():
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_argparse_only_in_the_command_package():
    """No library module parses arguments: argparse is imported only under
    certify/cli/ (and __main__ modules, which delegate there)."""
    offenders = [str(p.relative_to(ROOT)) for p in _sources()
                 if "argparse" in _imports(p)
                 and p.relative_to(ROOT).parts[:2] != ("certify", "cli")
                 and p.name != "__main__.py"]
    assert offenders == [], f"argparse imported outside certify/cli: {offenders}"


def test_no_library_module_exits():
    """sys.exit / SystemExit only in command fronts and ``python -m`` shims."""
    fronts = {"__main__.py"}
    offenders = []
    for p in _sources():
        rel = p.relative_to(ROOT)
        if rel.parts[:2] == ("certify", "cli") or p.name in fronts:
            continue
        tree = ast.parse(p.read_text())
        main_guard = set()
        for node in ast.walk(tree):      # `if __name__ == "__main__":` blocks are shims
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                main_guard |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in main_guard:
                continue
            text = ast.unparse(node) if isinstance(node, (ast.Call, ast.Raise)) else ""
            if text.startswith(("sys.exit(", "raise SystemExit")):
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == [], offenders


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_runs_as_python_dash_m(command):
    """``python -m certify.<command>`` exists for every command and delegates."""
    assert importlib.util.find_spec(f"certify.{command}") is not None
    spec = importlib.util.find_spec(f"certify.{command}")
    main = Path(spec.origin)
    if main.name == "__init__.py":
        main = main.with_name("__main__.py")
    assert main.is_file() and f'run("{command}")' in main.read_text()


def test_import_contracts_hold():
    """lint-imports: the layers of docs/design.md, the checker's independence, no cycle."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (it is a test extra: make test installs it)")
    p = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "0 broken" in p.stdout
