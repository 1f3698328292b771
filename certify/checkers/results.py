"""What a check of certificates found, and how it reads: per claim (:class:`ClaimCheck`),
per input file (:class:`InputCheck`) and per certificate (:class:`Verification`), the exit
code of ``certify verify`` (:func:`combined_exit`) and its text for people
(:func:`format_text`). Computing them is :mod:`certify.checkers.verify`'s job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from certify.checkers.common import EXIT_ASSUMED, EXIT_NOT_PROVED, EXIT_PROVED

VERDICTS = ("proved", "refuted", "unknown")


@dataclass(frozen=True)
class ClaimCheck:
    index: int
    kind: str
    verdict: str
    statement: str
    problems: tuple[str, ...]
    trusted: tuple[str, ...] = ()           # evidence fields taken as stated (declared by the claim)
    has_info: bool = False                  # the claim carries unchecked diagnostics
    assumptions: tuple[str, ...] = ()       # named assumptions the claim holds under
    certificate: str = ""                   # the file it came from (cross-certificate messages)

    @property
    def holds(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "verdict": self.verdict,
                "holds": self.holds, "problems": list(self.problems),
                "statement": self.statement, "line": claim_line(self), "trusted": list(self.trusted),
                "assumptions": list(self.assumptions),
                "info": "unchecked" if self.has_info else None}


@dataclass(frozen=True)
class InputCheck:
    name: str
    status: str            # "match", "MISMATCH", "built-in", "absent" or "not read: <path> is <what>"
    path: str | None = None
    how: str | None = None  # where it was found (certify.checkers.sources.locate)

    @property
    def holds(self) -> bool:
        return self.status != "MISMATCH"


@dataclass(frozen=True)
class Verification:
    claims: tuple[ClaimCheck, ...]
    inputs: tuple[InputCheck, ...] = field(default_factory=tuple)
    accepted: frozenset[str] = frozenset()  # assumptions the user accepted by name
    problems: tuple[str, ...] = ()          # the certificate's own (outside any claim): schema

    @property
    def holds(self) -> bool:
        """Every claim holds (possibly under assumptions), every input matches, and
        the certificate itself is well formed."""
        return (bool(self.claims) and all(c.holds for c in self.claims)
                and all(i.holds for i in self.inputs) and not self.problems)

    @property
    def assumptions(self) -> tuple[str, ...]:
        return tuple(sorted({a for c in self.claims for a in c.assumptions}))

    @property
    def open_assumptions(self) -> tuple[str, ...]:
        return tuple(a for a in self.assumptions if not accepted(a, self.accepted))

    def exit_code(self) -> int:
        if not self.holds:
            return EXIT_NOT_PROVED
        return EXIT_ASSUMED if self.open_assumptions else EXIT_PROVED

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for c in self.claims:
            if c.holds and c.verdict in out:
                out[c.verdict] += 1
        out["failed"] = sum(not c.holds for c in self.claims)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"holds": self.holds, "exit_code": self.exit_code(), "counts": self.counts(),
                "problems": list(self.problems),
                "assumptions": list(self.assumptions),
                "open_assumptions": list(self.open_assumptions),
                "claims": [c.to_json() for c in self.claims],
                "inputs": [{"name": i.name, "status": i.status, "path": i.path,
                            **({"found": i.how} if i.how is not None else {})}
                           for i in self.inputs]}


def accepted(assumption: str, names: Iterable[str]) -> bool:
    """``--assume extraction`` accepts ``extraction:...``; a full name accepts itself."""
    return any(assumption == n or assumption.startswith(n + ":") for n in names)


#: how a verdict reads in front of its sentence: never a mark of approval in
#: front of a sentence that is false
VERDICT_WORDS = {"proved": "PROVED", "refuted": "REFUTED (the sentence is false)",
                 "unknown": "UNKNOWN (undecided)"}


def claim_line(c: "ClaimCheck") -> str:
    """One claim for people, verdict first: ``claim 4 correctness: re-derived,
    REFUTED (the sentence is false): ...``; a claim that fails the check says so
    before its stated verdict."""
    said = VERDICT_WORDS.get(c.verdict, c.verdict.upper())
    if c.holds:
        return f"claim {c.index} {c.kind}: verdict re-derived, {said}: {c.statement}"
    return f"claim {c.index} {c.kind}: CHECK FAILS (stated {said}): {c.statement}"


def format_text(result: Verification, path: str) -> str:
    lines = [f"certificate {path}"]
    for c in result.claims:
        lines.append("  " + claim_line(c))
        lines += [f"         - {p}" for p in c.problems]
        if c.assumptions:
            lines.append(f"         assuming: {'; '.join(c.assumptions)}")
        if c.has_info:
            lines.append("         info: unchecked diagnostics (not evidence)")
    for i in result.inputs:
        where = f" ({i.path}, {i.how})" if i.path is not None and i.how not in (None, "as named") else ""
        lines.append(f"  input {i.name}: {i.status}{where}")
    lines += [f"  certificate: {p}" for p in result.problems]
    n = result.counts()
    if not result.holds:
        bad = [str(c.index) for c in result.claims if not c.holds]
        lines.append((f"FAILS: {len(bad)} of {len(result.claims)} claims do not hold"
                      + f" (claims {', '.join(bad)})" if bad else "FAILS")
                     + ("; the certificate is not well formed" if result.problems else "")
                     + ("; an input file's hash differs" if not all(i.holds for i in result.inputs) else ""))
    elif result.open_assumptions:
        lines.append(f"holds, assuming: {', '.join(result.open_assumptions)} "
                     f"({len(result.claims)} claims: {n['proved']} proved, {n['refuted']} refuted, "
                     f"{n['unknown']} unknown; accept with --assume NAME, or re-derive: "
                     "--replay-extraction for extraction)")
    else:
        acc = f"; accepted: {', '.join(result.assumptions)}" if result.assumptions else ""
        lines.append(f"holds: all {len(result.claims)} claims re-derived ({n['proved']} proved, "
                     f"{n['refuted']} refuted, {n['unknown']} unknown){acc}")
    return "\n".join(lines)


def combined_exit(results: Iterable[Verification]) -> int:
    codes = [r.exit_code() for r in results]
    if EXIT_NOT_PROVED in codes:
        return EXIT_NOT_PROVED
    return EXIT_ASSUMED if EXIT_ASSUMED in codes else EXIT_PROVED
