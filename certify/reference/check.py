"""The reference path's front: every claim of every certificate given, its result
line, the exit code (the same table as ``certify verify``: 0 every claim's
verdict re-derived with no assumption left; 1 some claim fails, or an input file
differs, or the certificate breaks its schema; 2 refused input; 4 every claim
holds, but only under the named assumptions), text for people and ``--json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from certify.checkers import schema as _schema
from certify.reference import claims as _claims
from certify.reference.exact import Fails, Refused
from certify.reference.files import find, sha256_file
from certify.reference.replay import Replays
from certify.reference.replay import run as run_replay

EXIT_PROVED, EXIT_FAILS, EXIT_REFUSED, EXIT_ASSUMED = 0, 1, 2, 4
WORDS = {"proved": "PROVED", "refuted": "REFUTED (the sentence is false)", "unknown": "UNKNOWN (undecided)"}


@dataclass(frozen=True)
class ClaimResult:
    index: int
    kind: str
    verdict: str
    statement: str
    problems: tuple[str, ...]
    assumptions: tuple[str, ...]

    @property
    def holds(self) -> bool:
        return not self.problems

    def line(self) -> str:
        said = WORDS.get(self.verdict, str(self.verdict).upper())
        if self.holds:
            return f"claim {self.index} {self.kind}: re-derived (reference), {said}: {self.statement}"
        return f"claim {self.index} {self.kind}: CHECK FAILS (reference; stated {said}): {self.statement}"


@dataclass(frozen=True)
class Result:
    path: str
    claims: tuple[ClaimResult, ...]
    inputs: tuple[tuple[str, str], ...]           # (name, "match" | "MISMATCH" | "absent" | "family")
    problems: tuple[str, ...] = ()                # the certificate's own (schema)
    accepted: frozenset[str] = field(default_factory=frozenset)

    @property
    def holds(self) -> bool:
        return bool(self.claims) and all(c.holds for c in self.claims) and not self.problems \
            and all(s != "MISMATCH" for _, s in self.inputs)

    @property
    def assumptions(self) -> tuple[str, ...]:
        return tuple(sorted({a for c in self.claims for a in c.assumptions}))

    @property
    def open_assumptions(self) -> tuple[str, ...]:
        return tuple(a for a in self.assumptions if not accepted(a, self.accepted))

    def exit_code(self) -> int:
        if not self.holds:
            return EXIT_FAILS
        return EXIT_ASSUMED if self.open_assumptions else EXIT_PROVED

    def to_json(self) -> dict[str, Any]:
        return {"certificate": self.path, "checker": "reference", "holds": self.holds,
                "exit_code": self.exit_code(), "problems": list(self.problems),
                "assumptions": list(self.assumptions), "open_assumptions": list(self.open_assumptions),
                "claims": [{"index": c.index, "kind": c.kind, "verdict": c.verdict, "holds": c.holds,
                            "problems": list(c.problems), "assumptions": list(c.assumptions),
                            "statement": c.statement, "line": c.line()} for c in self.claims],
                "inputs": [{"name": n, "status": s} for n, s in self.inputs]}

    def text(self) -> str:
        lines = [f"certificate {self.path} (reference checker)"]
        for c in self.claims:
            lines.append("  " + c.line())
            lines += [f"         - {p}" for p in c.problems]
            if c.assumptions:
                lines.append(f"         assuming: {'; '.join(c.assumptions)}")
        lines += [f"  input {n}: {s}" for n, s in self.inputs]
        lines += [f"  certificate: {p}" for p in self.problems]
        if not self.holds:
            bad = [str(c.index) for c in self.claims if not c.holds]
            lines.append(f"FAILS (reference): {len(bad)} of {len(self.claims)} claims do not hold"
                         + (f" (claims {', '.join(bad)})" if bad else "")
                         + ("; the certificate breaks its schema" if self.problems else "")
                         + ("; an input file's hash differs"
                            if any(s == "MISMATCH" for _, s in self.inputs) else ""))
        elif self.open_assumptions:
            lines.append(f"holds (reference), assuming: {', '.join(self.open_assumptions)}")
        else:
            lines.append(f"holds (reference): all {len(self.claims)} claims re-derived")
        return "\n".join(lines)


def accepted(assumption: str, names: Iterable[str]) -> bool:
    """``--assume extraction`` accepts ``extraction:...``; a full name accepts itself."""
    return any(assumption == n or assumption.startswith(n + ":") for n in names)


def _inputs(cert: Mapping[str, Any], base: Path | None) -> tuple[tuple[str, str], ...]:
    out = []
    for name, digest in (cert.get("inputs") or {}).items():
        if name.startswith("family:"):
            out.append((name, "bound per claim"))
            continue
        path = find(name, base)
        if path is None:
            out.append((name, "absent"))
        else:
            out.append((name, "match" if sha256_file(path) == str(digest).lower() else "MISMATCH"))
    return tuple(out)


def check_certificate(label: str, cert: Mapping[str, Any], base: Path | None,
                      replays: Replays | None, assume: Iterable[str] = ()) -> Result:
    """Every claim of one parsed certificate. :class:`Refused` propagates (exit 2)."""
    bad = _schema.violations(cert)
    ctx = _claims.Context(cert, base, replays)
    out = []
    for i, c in enumerate(cert["claims"]):
        problems: list[str] = list(bad.get(i, []))
        assumptions: list[str] = []
        if not problems:
            try:
                problems, assumptions = _claims.check(c, ctx)
            except Refused:
                raise
            except Fails as exc:
                problems = [str(exc)]
            except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
                problems = [f"malformed evidence: {type(exc).__name__}: {exc}"[:300]]
        out.append(ClaimResult(i, str(c.get("kind")), str(c.get("verdict")), str(c.get("statement", "")),
                               tuple(problems), tuple(dict.fromkeys(assumptions))))
    return Result(label, tuple(out), _inputs(cert, base), tuple(bad.get(None, [])), frozenset(assume))


def check_many(certs: Sequence[tuple[str, Mapping[str, Any], Path | None]], *, assume: Iterable[str] = (),
               replay: bool = False) -> list[Result]:
    """Every certificate given; with ``replay`` the extractions are re-run first
    (:mod:`certify.reference.replay`)."""
    replays = run_replay(certs) if replay else None
    try:
        return [check_certificate(label, cert, base, replays, assume) for label, cert, base in certs]
    finally:
        if replays is not None and replays.folder is not None:
            replays.folder.cleanup()


def combined_exit(results: Iterable[Result]) -> int:
    codes = [r.exit_code() for r in results]
    if EXIT_FAILS in codes:
        return EXIT_FAILS
    return EXIT_ASSUMED if EXIT_ASSUMED in codes else EXIT_PROVED
