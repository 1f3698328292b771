"""``python -m certify.verify CERT.json [--json]``: re-check a certificate exactly.

The part of the project a reader must trust, so it is small and plain. It
imports only the standard library, numpy and python-flint (through the
checker modules): never a solver, torch, or the code that produced the claims.

For every claim it

1. checks the claim's shape (kind, verdict, statement, evidence; a reason for
   every verdict other than ``proved``);
2. hands it to the checker of its kind, ``certify.checkers.<area>.check``,
   which re-derives the verdict from the evidence in the file alone (rank
   minors modulo their primes, null-space products, witnesses re-evaluated on
   every input, counterexamples replayed, bound arithmetic). A kind without a
   checker module *fails* with "no checker"; it is never passed silently.

Two things are printed but not re-derived, and said so: the evidence fields a
claim declares ``trusted`` (summaries of features too large to embed,
identified by their sha256; each checker documents which fields may be
trusted and lists them through its ``trusted`` function), and a claim's
``info`` (diagnostics for people -- float margins, counts -- which is never
evidence and is not read at all).

It also compares the sha256 of every input file the certificate names
(``inputs``: name -> sha256) that can be found, relative to the certificate's
folder or the working directory; names that are not files (a built-in family,
a model built in code) are listed as not checked.

What "holds" means: a ``proved`` claim holds when its checker re-derives the
proof; a ``refuted`` claim holds when its counterexample replays exactly; an
``unknown`` claim holds when its evidence is consistent with its statement
(an honest ``unknown`` is not a defect of the certificate).

Exit codes: 0 every claim holds as stated and every present input matches its
hash; 1 some claim fails (each failure printed with its reasons) or an input's
hash differs; 2 the file is not a certificate (one line on stderr).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from certify.errors import EXIT_BAD_INPUT, EXIT_NOT_PROVED, EXIT_PROVED, InputError, run_command

SCHEMA = "certify-attention/certificate/1"
VERDICTS = ("proved", "refuted", "unknown")

#: claim kind -> checker module under ``certify.checkers``.
CHECKERS: dict[str, str] = {
    "bound": "bounds",
    "exact_rank": "rank",
    "eps_rank": "rank",
    "code_rank": "rank",
    "nonnegative": "rank",
    "feasible": "feasibility",
    "infeasible": "feasibility",
    "transcript": "transcript",
    "correctness": "audit",
    "gap_domination": "audit",
}


@dataclass(frozen=True)
class ClaimCheck:
    index: int
    kind: str
    verdict: str
    statement: str
    problems: tuple[str, ...]
    trusted: tuple[str, ...] = ()           # evidence fields taken as stated (declared by the claim)
    has_info: bool = False                  # the claim carries unchecked diagnostics

    @property
    def holds(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "verdict": self.verdict,
                "holds": self.holds, "problems": list(self.problems),
                "statement": self.statement, "trusted": list(self.trusted),
                "info": "unchecked" if self.has_info else None}


@dataclass(frozen=True)
class InputCheck:
    name: str
    status: str            # "match", "MISMATCH" or "not checked (...)"
    path: str | None = None

    @property
    def holds(self) -> bool:
        return self.status != "MISMATCH"


@dataclass(frozen=True)
class Verification:
    claims: tuple[ClaimCheck, ...]
    inputs: tuple[InputCheck, ...] = field(default_factory=tuple)

    @property
    def holds(self) -> bool:
        return (bool(self.claims) and all(c.holds for c in self.claims)
                and all(i.holds for i in self.inputs))

    def exit_code(self) -> int:
        return EXIT_PROVED if self.holds else EXIT_NOT_PROVED

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for c in self.claims:
            if c.holds and c.verdict in out:
                out[c.verdict] += 1
        out["failed"] = sum(not c.holds for c in self.claims)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"holds": self.holds, "counts": self.counts(),
                "claims": [c.to_json() for c in self.claims],
                "inputs": [{"name": i.name, "status": i.status, "path": i.path}
                           for i in self.inputs]}


# ---------------------------------------------------------------- parsing

def parse(text: str) -> dict[str, Any]:
    """JSON text -> certificate object; :class:`InputError` when it is not one."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:      # over-long integers, nesting too deep
        raise InputError(f"not a usable JSON document ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:80]})") from None
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA:
        raise InputError(f"not a certificate (schema must be {SCHEMA!r})")
    claims = obj.get("claims")
    if not isinstance(claims, list) or not claims:
        raise InputError("certificate has no claims")
    for i, c in enumerate(claims):
        if not isinstance(c, dict) or not isinstance(c.get("kind"), str) \
                or not isinstance(c.get("verdict"), str):
            raise InputError(f"claim {i} is not an object with a kind and a verdict")
    inputs = obj.get("inputs", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise InputError("certificate inputs must map names to sha256 strings")
    return obj


# ---------------------------------------------------------------- claims

def _shape_problems(claim: Mapping[str, Any]) -> list[str]:
    out = []
    if claim["verdict"] not in VERDICTS:
        out.append(f"verdict {claim['verdict']!r} is not one of {', '.join(VERDICTS)}")
    if not isinstance(claim.get("statement"), str) or not claim["statement"].strip():
        out.append("no statement")
    for key in ("parameters", "evidence"):
        if not isinstance(claim.get(key, {}), dict):
            out.append(f"{key} is not an object")
    if claim["verdict"] != "proved":
        reason = claim.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            out.append(f"a {claim['verdict']} claim needs a reason")
    return out


def checker_for(kind: str):
    """The checker module of a claim kind, or ``None`` when there is none."""
    area = CHECKERS.get(kind)
    if area is None:
        return None
    name = f"certify.checkers.{area}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise
    return module if callable(getattr(module, "check", None)) else None


def check_claim(index: int, claim: Mapping[str, Any], cert: Mapping[str, Any]) -> ClaimCheck:
    kind, verdict = claim["kind"], claim["verdict"]
    problems = _shape_problems(claim)
    trusted: list[str] = []
    if not problems:
        try:
            module = checker_for(kind)
        except Exception as exc:                       # a checker that cannot load
            module, problems = None, [f"checker for {kind!r} failed to load: {exc!r}"]
        if module is None and not problems:
            problems = [f"no checker for claim kind {kind!r}"]
        elif module is not None:
            try:
                found = module.check(dict(claim), dict(cert))
            except Exception as exc:                   # missing or malformed evidence
                found = [f"checker raised {type(exc).__name__}: {exc}"]
            if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
                found = [f"checker for {kind!r} returned {type(found).__name__}, not a list of problems"]
            problems = found
            lister = getattr(module, "trusted", None)
            if callable(lister):
                try:
                    trusted = [str(t) for t in lister(dict(claim), dict(cert))]
                except Exception as exc:                # never hide a trusted field
                    problems = list(problems) + [f"cannot list trusted fields: {exc!r}"]
    return ClaimCheck(index=index, kind=kind, verdict=verdict,
                      statement=str(claim.get("statement", "")), problems=tuple(problems),
                      trusted=tuple(trusted), has_info=bool(claim.get("info")))


# ---------------------------------------------------------------- input files

def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_inputs(inputs: Mapping[str, str], base: Path | None) -> tuple[InputCheck, ...]:
    """Compare the hash of every named input that is a file we can find."""
    out = []
    for name, digest in inputs.items():
        candidates = [Path(name)] if os.path.isabs(name) else \
            [p for p in ((base / name) if base else None, Path.cwd() / name) if p is not None]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            out.append(InputCheck(name, "not checked (no such file)"))
            continue
        status = "match" if _sha256_file(path) == digest.lower() else "MISMATCH"
        out.append(InputCheck(name, status, str(path)))
    return tuple(out)


# ---------------------------------------------------------------- front end

def verify_certificate(cert: Mapping[str, Any], base: Path | None = None) -> Verification:
    """Check every claim of a parsed certificate (see :func:`parse`)."""
    checks = tuple(check_claim(i, c, cert) for i, c in enumerate(cert["claims"]))
    return Verification(claims=checks, inputs=check_inputs(cert.get("inputs", {}), base))


def verify_file(path: str | os.PathLike) -> Verification:
    path = Path(path)
    if path.exists() and not path.is_file():
        raise InputError(f"{path} is not a regular file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        cert = parse(text)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    return verify_certificate(cert, base=path.resolve().parent)


def format_text(result: Verification, path: str) -> str:
    lines = [f"certificate {path}"]
    for c in result.claims:
        mark = "ok  " if c.holds else "FAIL"
        lines.append(f"  [{mark}] claim {c.index} {c.kind} {c.verdict}: {c.statement}")
        lines += [f"         - {p}" for p in c.problems]
        if c.trusted:
            lines.append(f"         trusted, not re-derived: {'; '.join(c.trusted)}")
        if c.has_info:
            lines.append("         info: unchecked diagnostics (not evidence)")
    for i in result.inputs:
        lines.append(f"  input {i.name}: {i.status}")
    n = result.counts()
    if result.holds:
        lines.append(f"holds: all {len(result.claims)} claims re-checked ({n['proved']} proved, "
                     f"{n['refuted']} refuted, {n['unknown']} unknown)")
    else:
        bad = [str(c.index) for c in result.claims if not c.holds]
        lines.append(f"FAILS: {len(bad)} of {len(result.claims)} claims do not hold"
                     + (f" (claims {', '.join(bad)})" if bad else "")
                     + ("; an input file's hash differs" if not all(i.holds for i in result.inputs) else ""))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="certify verify",
                                description="Re-check a certificate with exact arithmetic only.")
    p.add_argument("certificates", nargs="+", metavar="CERT.json", help="certificates to re-check")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = p.parse_args(argv)
    results = [(path, verify_file(path)) for path in args.certificates]
    if args.json:
        doc = [{"certificate": path, **r.to_json()} for path, r in results]
        print(json.dumps(doc[0] if len(doc) == 1 else {"holds": all(r.holds for _, r in results),
                                                       "certificates": doc}, indent=1))
    else:
        for path, r in results:
            print(format_text(r, path), file=sys.stderr)
    return EXIT_PROVED if all(r.holds for _, r in results) else EXIT_NOT_PROVED


if __name__ == "__main__":
    sys.exit(run_command("certify.verify", main))


__all__ = ["CHECKERS", "ClaimCheck", "InputCheck", "Verification", "parse", "check_claim",
           "checker_for", "verify_certificate", "verify_file", "main", "EXIT_BAD_INPUT"]
