"""The parsed sources that the suite's static scans share (tests/test_architecture.py,
tests/test_function_length.py, tests/test_docs_references.py): each file is parsed once per
test process (about 1.4 CPU s for the packages) instead of once per scan. The scans only read
the trees; ``tests/conftest.py`` runs their files on one worker."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path`` (UTF-8), parsed on first use."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))
