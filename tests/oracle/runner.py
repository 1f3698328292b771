"""The two checkers side by side: ``certify verify`` (the fast checker) and, where the
build has it, ``certify verify --reference`` (``certify.reference``), both run in this
process on certificate files, their exit codes compared.

Without the reference the fast checker's exit is compared with the exit a case must have
(:func:`expected_ok`): a genuine certificate its documented code (0 or 4), a mutation of what
a claim asserts anything but 0.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

#: the reference checker of this checkout (its own folder: an editable install elsewhere may
#: resolve ``certify.reference`` to another tree)
HAS_REFERENCE = (Path(__file__).resolve().parents[2] / "certify" / "reference" / "__init__.py").is_file()


#: reference-checker bugs found by this oracle, each pinned by an example in tests/test_oracle.py
#: (none is open: the matrix hash of certificate/3 was the last, fixed in the reference)
KNOWN_REFERENCE_BUGS: dict[str, str] = {}


def verify_exit(paths: Sequence[Path], reference: bool = False) -> int:
    """The exit code of ``certify verify [--reference] PATHS`` run in this process."""
    from certify.cli import run
    args = (["--reference"] if reference else []) + [str(p) for p in paths]
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        return run("verify", args)


def write(cert: dict, path: Path) -> Path:
    path.write_text(json.dumps(cert))
    return path


def combined(exits: Sequence[int]) -> int:
    """verify's exit for a batch: 2 if any is not a certificate, else 1 if any claim fails
    (1 outranks 4), else 4 if any holds under assumptions, else 0."""
    for code in (2, 1, 4):
        if code in exits:
            return code
    return 0


class Tally:
    """Cases run per kind, and the disagreements found (kind, case, fast, other)."""

    def __init__(self) -> None:
        self.cases: Counter[str] = Counter()
        self.documented: Counter[str] = Counter()
        self.disagreements: list[tuple[str, str, int, int]] = []

    def record(self, kind: str, case: str, fast: int, other: int, agree: bool) -> None:
        self.cases[kind] += 1
        if not agree:
            self.disagreements.append((kind, case, fast, other))

    def check(self, kind: str, case: str, paths: Sequence[Path], expected: int | None = None,
              nonzero: bool = False, documented: int | Callable[[], int] | None = None) -> int:
        """Run the fast checker on ``paths``; compare it with the reference when there is one,
        else with ``expected`` (an exact code) or ``nonzero``; returns the fast exit code.

        ``documented``: the case edits a field only the fast path reads (docs/trust.md, "The
        reviewer's slow path": a witness, a sentence), and this is the exit the reference must
        then give -- its exit without that edit (a genuine certificate's code, or a function
        computing it). Fast 1 with exactly that reference exit is a documented difference,
        counted apart; any other pair of codes is compared as usual. Where the case's code is
        known (``expected``, ``nonzero``) both checkers must give it."""
        fast = verify_exit(paths)
        if HAS_REFERENCE:
            ref = verify_exit(paths, reference=True)
            if documented is not None and fast == 1 and ref != fast \
                    and ref == (documented() if callable(documented) else documented):
                self.cases[kind] += 1
                self.documented[kind] += 1
            else:
                self.record(kind, case, fast, ref, fast == ref)
            if expected is not None or nonzero:       # and both must be right where it is known
                for who, code in (("fast", fast), ("reference", ref)):
                    if (code != expected) if expected is not None else code == 0:
                        self.disagreements.append((f"{kind} (expected, {who})", case, code,
                                                   -1 if expected is None else expected))
        elif expected is not None:
            self.record(kind, case, fast, expected, fast == expected)
        elif nonzero:
            self.record(kind, case, fast, -1, fast != 0)
        else:
            self.record(kind, case, fast, fast, True)
        return fast

    def summary(self) -> str:
        lines = [f"{k}: {n}" for k, n in sorted(self.cases.items())]
        lines.append(f"total: {sum(self.cases.values())}, disagreements: {len(self.disagreements)}, "
                     f"documented differences (a sentence or witness edit only the fast path reads, "
                     f"among the cases): {sum(self.documented.values())}")
        lines += [f"  {k} | {c} | fast {f} other {o}" for k, c, f, o in self.disagreements[:40]]
        return "\n".join(lines)
