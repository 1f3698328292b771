"""The shape of the house: one-way imports (import-linter contracts in
pyproject.toml), argument parsing only in the command package, and a
``python -m`` entry point for every command."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from source_trees import parsed

from certify.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("certify", "models", "solvers")


def _sources():
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(parsed(path)):
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
        tree = parsed(p)
        main_guard = set()
        for node in ast.walk(tree):      # `if __name__ == "__main__":` blocks are shims
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                main_guard |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) not in main_guard and _exits(node):
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == [], offenders


def _exits(node: ast.AST) -> bool:
    """``sys.exit(...)`` or ``raise SystemExit...`` (read from the tree, not unparsed)."""
    if isinstance(node, ast.Call):
        f = node.func
        return isinstance(f, ast.Attribute) and f.attr == "exit" and \
            isinstance(f.value, ast.Name) and f.value.id == "sys"
    if isinstance(node, ast.Raise) and node.exc is not None:
        e = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(e, ast.Name) and e.id.startswith("SystemExit")
    return False


def test_the_exit_scan_sees_planted_exits():
    planted = "import sys\ndef f():\n    sys.exit(2)\ndef g():\n    raise SystemExit(3)\n" \
              "def h():\n    raise SystemExit\ndef ok():\n    exit = sys.exit\n    raise ValueError\n"
    hits = sorted(n.lineno for n in ast.walk(ast.parse(planted)) if _exits(n))
    assert hits == [3, 5, 7]


def test_every_command_runs_through_the_one_command_line_and_no_shim_module_is_left():
    """``certify <command>`` / ``python -m certify <command>`` is the command line
    (certify/__main__.py -> certify.cli); a capability package that users call as
    a module keeps a ``__main__`` that delegates (``python -m certify.feasibility
    --rank 8``); no top-level ``certify/<command>.py`` exists only to forward."""
    root = Path(__file__).resolve().parent.parent / "certify"
    assert "from certify.cli import entry" in (root / "__main__.py").read_text()
    shims = [c for c in COMMANDS if (root / f"{c}.py").exists()]
    assert shims == [], shims
    for pkg in ("feasibility", "rank"):
        assert f'run("{pkg}")' in (root / pkg / "__main__.py").read_text()
    out = subprocess.run([sys.executable, "-m", "certify", "families", "show", "paper-5.1", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and '"paper-5.1"' in out.stdout


def test_import_contracts_hold():
    """lint-imports: the layers of docs/design.md, the checker's independence, no cycle."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (it is a test extra: make test installs it)")
    p = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "0 broken" in p.stdout
