"""Re-check certificates exactly (``certify verify CERT.json... [--json] [--assume NAME]
[--replay-extraction]``, whose front is :mod:`certify.cli.verify`).

The part of the project a reader must trust, so it is small and plain. It
imports only the standard library, numpy and python-flint (through the
checker modules): never a solver, torch, or the code that produced the claims
(``--replay-extraction`` runs the extraction in a *separate* process).

For every claim it

1. checks the claim's shape (kind, verdict, statement, evidence; a reason for
   every verdict other than ``proved``);
2. renders the statement again from the claim's parameters with the
   certificate's renderer version (:mod:`certify.checkers.statements`): a
   stored statement that differs fails the claim;
3. binds what the claim names to content: a built-in family name to its pinned
   or rebuilt hash (:mod:`certify.checkers.families`), every family and source
   hash to the certificate's top-level ``inputs``, a matrix source file that is
   present to the embedded exact matrix or features (re-read here with numpy,
   :mod:`certify.checkers.sources`);
4. hands it to the checker of its kind, ``certify.checkers.<area>.check``,
   which re-derives the verdict from the evidence (rank minors modulo their
   primes, null-space products, witnesses re-evaluated on every input,
   counterexamples replayed, bound arithmetic). A kind without a checker
   *fails*; it is never passed silently.

Then it looks across all claims of all the certificates given: two claims
about the same family hash or the same matrix that contradict each other fail
both (feasible at r in a class inside another class that is infeasible at
r' >= r; two different exact ranks of one matrix).

What is not re-derived is a named **assumption**, never a silent "not
checked": ``extraction:<source>`` (features computed from a checkpoint's
weights by torch; re-derived by ``--replay-extraction``), ``source:<name>`` (a
named source file that is not present), ``family:<name>`` (a built-in family
too large to rebuild here), ``randomized:freivalds-error-2^-k`` (a randomized
test whose error bound 2^-k is above the fixed floor 2^-128,
:data:`certify.checkers.rank.freivalds.FLOOR`), ``trusted:<kind>:<fields>`` (summaries of data too
large to embed -- only above :data:`TRUSTED_MIN_ENTRIES` entries; below it the
data must be embedded; none is left when the summaries are re-derived from a present factor
file's features, :func:`certify.checkers.gram.source_summary_problems`, or from the features
``--replay-extraction`` wrote), and any ``assumptions`` a claim's evidence declares.
``--assume NAME`` accepts one (``--assume extraction`` accepts every
``extraction:...``).

What a check finds, its exit code and its text for people are
:mod:`certify.checkers.results`.

Exit codes: **0** every claim's verdict (proved, refuted, or an honest unknown)
is re-derived, with no assumption left; **1** some claim fails (printed with its
reasons; outranks 4); **2** a file is not a certificate (one line on stderr);
**4** every claim holds, but only under the listed assumptions.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Mapping, Sequence

from certify.checkers import binding as _binding_mod
from certify.checkers import families as _families
from certify.checkers import kinds as _kinds
from certify.checkers import schema as _schema
from certify.checkers import scratch as _scratch
from certify.checkers import sources as _sources
from certify.checkers.common import EXIT_ASSUMED, EXIT_BAD_INPUT, Bad, expand_grams
from certify.checkers.contradictions import contradictions
from certify.checkers.reading import (  # noqa: F401 (public names)
    NotACertificate,
    parse,
    read_certificate,
    release_refusal,
    remake_command,
)
from certify.checkers.results import (  # noqa: F401 (public names)
    VERDICT_WORDS,
    VERDICTS,
    ClaimCheck,
    InputCheck,
    Verification,
    accepted,
    claim_line,
    combined_exit,
    format_text,
)
from certify.checkers.statements import check_statement

SCHEMA = _schema.VERSIONS[-1]

#: below this many entries, data a claim summarises must be embedded, never trusted
TRUSTED_MIN_ENTRIES = 1 << 16

#: claim kind -> checker module under ``certify.checkers`` (from the kinds' declarations)
CHECKERS: dict[str, str] = dict(_kinds.CHECKERS)


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


def checker_for(kind: str) -> ModuleType | None:
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


def _binding(claim: Mapping[str, Any], cert: Mapping[str, Any], base: _sources.Base,
             replayed: Mapping[str, str]) -> tuple[list[str], list[str], Any, int | None]:
    """(problems, assumptions, exact matrix for the checker, the source's measured
    row count) of what the claim names. The claim's referent is bound by
    :func:`certify.checkers.binding.referent`; a claim it cannot bind fails."""
    problems: list[str] = []
    assumptions: list[str] = []
    matrix = rows = None
    p = claim.get("parameters") or {}
    inputs = cert.get("inputs") or {}
    ref = _binding_mod.referent(claim)
    if ref is None:
        return [f"nothing binds what this {claim.get('kind')} claim is about (no source, family, "
                "model or construction it names is tied to content)"], [], None, None
    if "family" in p or "family_sha256" in p:
        name, sha = p.get("family"), p.get("family_sha256")
        bad, assume = _families.bind(name, sha)
        problems += bad
        assumptions += assume
        key = f"family:{name}"
        if inputs.get(key) != sha:
            problems.append(f"the certificate's inputs do not list {key} with the claim's "
                            f"family_sha256 {str(sha)[:16]}... (inputs say "
                            f"{str(inputs.get(key))[:16]}...)")
    if "source" in p:
        bad, assume, matrix, rows = _sources.bind(claim, cert, base, replayed)
        problems += bad
        assumptions += assume
    ev = claim.get("evidence")
    kind = claim.get("kind")
    if kind == "transcript":
        bad, assume = _families.bind_transcript_code(p, ev)
        problems += bad
        assumptions += assume
    if kind in _binding_mod.KERNEL_KINDS:
        bad, assume = _binding_mod.bind_tokens(claim, cert, measured=rows)
        problems += bad
        assumptions += assume
    if kind == "code_rank":
        problems += _binding_mod.bind_code(claim)
    if kind in _binding_mod.MODEL_KINDS:
        bad, assume = _binding_mod.bind_model(claim, cert, base)
        problems += bad
        assumptions += assume
    if isinstance(p, dict) and "error_log2" in p:        # randomized evidence: a fixed floor
        from certify.checkers.rank.freivalds import assumptions as randomized
        assumptions += randomized(claim)
    declared = ev.get("assumptions") if isinstance(ev, dict) else None
    if declared is not None:
        if not isinstance(declared, list) or not all(isinstance(a, str) and a for a in declared):
            problems.append("evidence.assumptions must be a list of names")
        else:
            assumptions += declared
    return problems, assumptions, matrix, rows


def _trusted_problems(claim: Mapping[str, Any], cert: Mapping[str, Any],
                      fields: list[str], measured: int | None = None) -> tuple[list[str], list[str]]:
    """Trusted summaries are allowed only for data too large to embed, by a size
    re-derived here (:func:`certify.checkers.binding.measured_size`), never a
    declared one; a claim whose size cannot be re-derived cannot trust anything."""
    if not fields:
        return [], []
    size = _binding_mod.measured_size(claim, cert, measured=measured)
    if size is None:
        return [f"trusted summaries ({', '.join(fields)}) of data whose size cannot be "
                "re-derived from the evidence: the data must be embedded (nothing may be taken "
                "as stated)"], []
    if size < TRUSTED_MIN_ENTRIES:
        return [f"trusted summaries ({', '.join(fields)}) of data with {size} entries: below "
                f"{TRUSTED_MIN_ENTRIES} entries the data must be embedded and re-derived"], []
    return [], [f"trusted:{claim.get('kind')}:{','.join(f.split(' ')[0] for f in fields)}"]


def _replayed_summaries(claim: Mapping[str, Any], cert: Mapping[str, Any], base: _sources.Base,
                        replayed: Any, trusted: list[str]) -> tuple[list[str], list[str]]:
    """``(problems, fields still trusted)``: summaries of data too large to embed
    are re-derived from the features ``--replay-extraction`` wrote to a file
    (:func:`certify.checkers.gram.summary_problems`: a stated Gram by the kernel's
    exact random-product test at the 2^-128 floor, the rest recomputed); re-derived,
    they are no longer trusted."""
    from certify.checkers import gram
    path = (getattr(replayed, "features", None) or {}).get(_sources.features_key(claim, cert, base))
    if path is None:
        return [], trusted
    found = gram.summary_problems(dict(claim), path)
    return ([], trusted) if found is None else (found, [])


def check_claim(index: int, claim: Mapping[str, Any], cert: Mapping[str, Any],
                base: _sources.Base = None, replayed: Mapping[str, str] | None = None,
                schema_problems: Sequence[str] | None = None) -> ClaimCheck:
    """One claim: its schema violations (``schema_problems``; computed here when
    ``None``) fail it before any semantic check; then statement, binding, checker."""
    kind, verdict = str(claim.get("kind")), str(claim.get("verdict"))
    if schema_problems is None:
        schema_problems = _schema.claim_violations(claim, index)
    problems = list(schema_problems)
    if not problems:
        try:                                            # Grams packed or named by grams_claim: as rows
            claim = expand_grams(claim, cert)
        except Bad as exc:
            problems = [str(exc)]
    problems = problems or _shape_problems(claim)
    trusted: list[str] = []
    assumptions: list[str] = []
    rows = None
    if not problems:
        problems = check_statement(claim, cert.get("renderer"))
        try:
            bad, assumptions, matrix, rows = _binding(claim, cert, base, replayed or {})
        except Exception as exc:                        # a malformed binding is a failure
            bad, assumptions, matrix = [f"cannot bind the claim's inputs: {exc!r}"], [], None
        problems += bad
        try:
            module = checker_for(kind)
        except Exception as exc:                       # a checker that cannot load
            module = None
            problems.append(f"checker for {kind!r} failed to load: {exc!r}")
        if module is None and not any("failed to load" in p for p in problems):
            problems.append(f"no checker for claim kind {kind!r}")
        elif module is not None:
            # summaries of a present factor file's features re-derived before the check, so that
            # its stated Grams are PSD by construction there (gram.replayed_gram); only a claim
            # with features loads that module
            derived = None
            if not problems and isinstance((claim.get("evidence") or {}).get("features_sha256"), dict):
                from certify.checkers import gram
                derived = gram.source_summary_problems(dict(claim))
            try:
                found = module.check(dict(claim), dict(cert), **({"matrix": matrix}
                                                                if matrix is not None else {}))
            except Exception as exc:                   # missing or malformed evidence
                found = [f"checker raised {type(exc).__name__}: {exc}"]
            if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
                found = [f"checker for {kind!r} returned {type(found).__name__}, not a list of problems"]
            problems += found
            lister = getattr(module, "trusted", None)
            if callable(lister):
                try:
                    trusted = [str(t) for t in lister(dict(claim), dict(cert))]
                except Exception as exc:                # never hide a trusted field
                    problems.append(f"cannot list trusted fields: {exc!r}")
            if trusted and derived is not None and not _trusted_problems(claim, cert, trusted, rows)[0]:
                problems += derived                     # re-derived from the source file: not trusted
                trusted = []
            if trusted:
                bad, trusted = _replayed_summaries(claim, cert, base, replayed, trusted)
                problems += bad
            bad, assume = _trusted_problems(claim, cert, trusted, rows)
            problems += bad
            assumptions += assume
    return ClaimCheck(index=index, kind=kind, verdict=verdict,
                      statement=str(claim.get("statement", "")), problems=tuple(problems),
                      trusted=tuple(trusted), has_info=bool(claim.get("info")),
                      assumptions=tuple(dict.fromkeys(assumptions)))


# ---------------------------------------------------------------- input files

def check_inputs(inputs: Mapping[str, str], base: _sources.Base) -> tuple[InputCheck, ...]:
    """Compare the hash of every named input file that can be found; a family
    name (``family:...``) is bound per claim instead."""
    out = []
    for name, digest in inputs.items():
        if name.startswith("family:"):
            out.append(InputCheck(name, "bound per claim"))
            continue
        found = _sources.locate(name, digest.lower() if isinstance(digest, str) else None, base)
        if found is None:
            out.append(InputCheck(name, _sources.not_found(name, base)))
            continue
        status = "match" if _sources.sha256_file(found.path) == str(digest).lower() else "MISMATCH"
        out.append(InputCheck(name, status, str(found.path), found.how))
    return tuple(out)


# ---------------------------------------------------------------- front end

def verify_certificate(cert: Mapping[str, Any], base: _sources.Base = None, *,
                       assume: Iterable[str] = (), replayed: Mapping[str, str] | None = None,
                       label: str = "the certificate", share: _scratch.Scratch | None = None) -> Verification:
    """Check every claim of a parsed certificate (see :func:`parse`). ``share``: the
    scratch of a producer checking the certificate it just computed in the same process
    (:func:`certify.checkers.scratch.session`); by default the check starts a new one."""
    return verify_many([(label, cert, base)], assume=assume, replayed=replayed, share=share)[0]


def verify_many(certs: Sequence[tuple[str, Mapping[str, Any], _sources.Base]], *,
                assume: Iterable[str] = (), replayed: Mapping[str, str] | None = None,
                share: _scratch.Scratch | None = None) -> list[Verification]:
    """Check several certificates, including contradictions between their claims. Each
    certificate is checked in a scratch of its own (:mod:`certify.checkers.scratch`):
    nothing computed for one can change the answer for another."""
    checked = []
    for label, cert, base in certs:
        with _scratch.session(share):
            bad = _schema.violations(cert)
            checks = [check_claim(i, c, cert, base, replayed, schema_problems=bad.get(i, []))
                      for i, c in enumerate(cert["claims"])]
            inputs = check_inputs(cert.get("inputs", {}), base)
        checked.append((label, cert, base, checks, tuple(bad.get(None, [])), inputs))
    items = [(label, c.index, cert["claims"][c.index]) for label, cert, _, checks, _, _ in checked
             for c in checks if c.holds]
    conflicts = contradictions(items)
    out = []
    for label, _cert, _base, checks, cert_problems, inputs in checked:
        final = tuple(ClaimCheck(c.index, c.kind, c.verdict, c.statement,
                                 c.problems + tuple(conflicts.get((label, c.index), ())),
                                 c.trusted, c.has_info, c.assumptions, label) for c in checks)
        out.append(Verification(claims=final, inputs=inputs, accepted=frozenset(assume), problems=cert_problems))
    return out


def verify_file(path: str | os.PathLike, *, assume: Iterable[str] = ()) -> Verification:
    cert = read_certificate(path)
    return verify_certificate(cert, base=Path(path).resolve().parent, assume=assume,
                              label=str(path))


__all__ = ["CHECKERS", "ClaimCheck", "InputCheck", "Verification", "parse", "check_claim",
           "checker_for", "verify_certificate", "verify_many", "verify_file", "combined_exit",
           "contradictions", "EXIT_BAD_INPUT", "EXIT_ASSUMED", "TRUSTED_MIN_ENTRIES"]
