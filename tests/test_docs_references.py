"""Words that stay true: every dotted reference to a module of the project
(``certify.x.y``, ``models.x``, ``solvers.x``, with an attribute after the module where
one is named) and every repository path (``certify/x/y.py``, ``docs/x.md``, ...) in the
packages' docstrings and comments, in ``docs/`` and in the README resolves to something
that exists. A planted stale reference is caught."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from source_trees import parsed

ROOT = Path(__file__).resolve().parent.parent

DOTTED = re.compile(r"(?<![\w./-])((?:certify|models|solvers)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?![\w*])")
PATHS = re.compile(r"(?<![\w./<-])((?:certify|models|solvers|tests|benchmarks|docs|reports)/"
                   r"[A-Za-z0-9_./-]+\.(?:py|c|md|json|toml))(?![\w])")
#: names that look like references and are not: a database file, placeholders in examples, and
#: the design card's names (``certify.verify``, ``certify/api.py``), which docs/design.md maps
#: to the packages that hold them
NOT_REFERENCES = {"certify.db", "tests/FILE.py", "models.constructions.NAME", "certify.verify", "certify/api.py"}


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        p = ROOT.joinpath(*parts[:i])
        if p.with_suffix(".c").exists():
            return True
        if p.with_suffix(".py").exists() or (p / "__init__.py").exists():
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:                         # an extra that is not installed: not judged
                return True
            for name in parts[i:]:
                if not hasattr(obj, name):
                    return False
                obj = getattr(obj, name)
            return True
    return False


def _prose(path: Path) -> str:
    """The docstrings and comments of a Python file; the whole text of anything else."""
    text = path.read_text()
    if path.suffix != ".py":
        return text
    chunks = [ast.get_docstring(n, clean=False) or "" for n in ast.walk(parsed(path))
              if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    chunks += [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]
    return "\n".join(chunks)


def stale(text: str) -> list[str]:
    """The references in ``text`` that resolve to nothing."""
    out = [m.group(1) for m in DOTTED.finditer(text)
           if m.group(1) not in NOT_REFERENCES and not _resolves(m.group(1))]
    out += [m.group(1) for m in PATHS.finditer(text)
            if m.group(1) not in NOT_REFERENCES and not (ROOT / m.group(1)).exists()]
    return out


def test_every_reference_in_docstrings_and_docs_resolves():
    files = [p for d in ("certify", "models", "solvers") for p in sorted((ROOT / d).rglob("*.py"))]
    files += sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    bad = [(str(f.relative_to(ROOT)), ref) for f in files for ref in stale(_prose(f))]
    assert not bad, bad


def test_a_planted_stale_reference_is_caught():
    assert stale("see :mod:`certify.parallel` and certify/old_module.py") == \
        ["certify.parallel", "certify/old_module.py"]
    assert stale(":func:`certify.checkers.verify.no_such_function`") == \
        ["certify.checkers.verify.no_such_function"]
    assert stale("see :func:`certify.checkers.verify.verify_many` in certify/checkers/verify.py") == []
