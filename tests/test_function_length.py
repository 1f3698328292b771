"""No function of the packages (certify, models, solvers) is longer than
``MAX_LINES`` lines, from its first decorator to its last line: a function is
read in one sitting (issue 55, "smaller rooms"). Nested functions and
methods count on their own, and inside the function that holds them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from source_trees import parsed

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("certify", "models", "solvers")
MAX_LINES = 120

#: functions allowed over the limit, as (file, qualified name): none. A function that grows
#: past it is split along its steps; an entry added here while one is split elsewhere fails
#: a test below once the function is no longer over the limit, so the list only shrinks.
ALLOWED: set[tuple[str, str]] = set()


def long_functions(source: str | ast.Module, path: str, limit: int = MAX_LINES) -> dict[tuple[str, str], int]:
    """``{(path, qualified name): lines}`` of the functions of ``source`` (a text, or its parsed
    tree) longer than ``limit``."""
    out: dict[tuple[str, str], int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                lines = (child.end_lineno or child.lineno) - first + 1
                if lines > limit:
                    out[(path, name)] = lines
                visit(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(source if isinstance(source, ast.Module) else ast.parse(source, path), "")
    return out


@functools.cache
def package_long_functions() -> dict[tuple[str, str], int]:
    """Every function over the limit in the packages (parsed once per test process)."""
    found: dict[tuple[str, str], int] = {}
    for package in PACKAGES:
        for p in sorted((ROOT / package).rglob("*.py")):
            found.update(long_functions(parsed(p), p.relative_to(ROOT).as_posix()))
    return found


def test_no_function_is_longer_than_the_limit():
    over = {k: n for k, n in package_long_functions().items() if k not in ALLOWED}
    assert not over, "functions over {} lines (split them): {}".format(
        MAX_LINES, ", ".join(f"{p}::{name} ({n} lines)" for (p, name), n in sorted(over.items())))


def test_every_allowed_function_is_still_over_the_limit():
    found = package_long_functions()
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): remove from ALLOWED: {stale}"


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines - 1))
    return f"{indent}def {name}():\n{body}"


def test_a_planted_long_function_is_caught():
    # 121 lines: a def line and 120 of body; the 120-line ones pass
    source = (_function("fits", MAX_LINES) + "\n"
              + _function("too_long", MAX_LINES + 1) + "\n"
              + "class Holder:\n" + "    @staticmethod\n" + _function("method", MAX_LINES, "    ") + "\n"
              + "async def outer():\n" + _function("inner", MAX_LINES + 5, "    "))
    found = long_functions(source, "planted.py")
    assert found == {("planted.py", "too_long"): MAX_LINES + 1,
                     ("planted.py", "Holder.method"): MAX_LINES + 1,     # its decorator counts
                     ("planted.py", "outer"): MAX_LINES + 6,
                     ("planted.py", "outer.<locals>.inner"): MAX_LINES + 5}
