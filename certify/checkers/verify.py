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
data must be embedded), and any ``assumptions`` a claim's evidence declares.
``--assume NAME`` accepts one (``--assume extraction`` accepts every
``extraction:...``).

Exit codes: **0** every claim's verdict (proved, refuted, or an honest unknown)
is re-derived, with no assumption left; **1** some claim fails (printed with its
reasons; outranks 4); **2** a file is not a certificate (one line on stderr);
**4** every claim holds, but only under the listed assumptions.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from certify.checkers import binding as _binding_mod
from certify.checkers import families as _families
from certify.checkers import kinds as _kinds
from certify.checkers import schema as _schema
from certify.checkers import scratch as _scratch
from certify.checkers import sources as _sources
from certify.checkers.common import (
    EXIT_ASSUMED,
    EXIT_BAD_INPUT,
    EXIT_NOT_PROVED,
    EXIT_PROVED,
)
from certify.checkers.reading import NotACertificate, parse, read_certificate  # noqa: F401 (public names)
from certify.checkers.statements import check_statement

if TYPE_CHECKING:
    from fractions import Fraction

SCHEMA = _schema.VERSIONS[-1]
VERDICTS = ("proved", "refuted", "unknown")

#: below this many entries, data a claim summarises must be embedded, never trusted
TRUSTED_MIN_ENTRIES = 1 << 16

#: claim kind -> checker module under ``certify.checkers`` (from the kinds' declarations)
CHECKERS: dict[str, str] = dict(_kinds.CHECKERS)


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
    status: str            # "match", "MISMATCH", "built-in" or "absent"
    path: str | None = None

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
                "inputs": [{"name": i.name, "status": i.status, "path": i.path}
                           for i in self.inputs]}


def accepted(assumption: str, names: Iterable[str]) -> bool:
    """``--assume extraction`` accepts ``extraction:...``; a full name accepts itself."""
    return any(assumption == n or assumption.startswith(n + ":") for n in names)


# ---------------------------------------------------------------- parsing

# parse and read_certificate live in certify.checkers.reading (shared with certify.reference)


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


def _binding(claim: Mapping[str, Any], cert: Mapping[str, Any], base: Path | None,
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


def _replayed_summaries(claim: Mapping[str, Any], cert: Mapping[str, Any], base: Path | None,
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
                base: Path | None = None, replayed: Mapping[str, str] | None = None,
                schema_problems: Sequence[str] | None = None) -> ClaimCheck:
    """One claim: its schema violations (``schema_problems``; computed here when
    ``None``) fail it before any semantic check; then statement, binding, checker."""
    kind, verdict = str(claim.get("kind")), str(claim.get("verdict"))
    if schema_problems is None:
        schema_problems = _schema.claim_violations(claim, index)
    problems = list(schema_problems) or _shape_problems(claim)
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

def check_inputs(inputs: Mapping[str, str], base: Path | None) -> tuple[InputCheck, ...]:
    """Compare the hash of every named input file that can be found; a family
    name (``family:...``) is bound per claim instead."""
    out = []
    for name, digest in inputs.items():
        if name.startswith("family:"):
            out.append(InputCheck(name, "bound per claim"))
            continue
        path = _sources.find(name, base)
        if path is None:
            out.append(InputCheck(name, "absent"))
            continue
        status = "match" if _sources.sha256_file(path) == digest.lower() else "MISMATCH"
        out.append(InputCheck(name, status, str(path)))
    return tuple(out)


# ---------------------------------------------------------------- contradictions

_FEATURE_ORDER = {"nonnegative": 0, "real": 1}
_CLASS_ORDER = {"paper": 0, "used-pairs": 1}
_SCOPE_ORDER = {"cube": 0, "family": 1}


def _within(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Every head of class ``a`` is a head of class ``b`` (same family)."""
    try:
        return (_FEATURE_ORDER[a["features"]] <= _FEATURE_ORDER[b["features"]]
                and _CLASS_ORDER[a["class"]] <= _CLASS_ORDER[b["class"]]
                and _SCOPE_ORDER[a.get("scope", "family")] <= _SCOPE_ORDER[b.get("scope", "family")])
    except (KeyError, TypeError):
        return False


def _matrix_key(claim: Mapping[str, Any]) -> tuple | None:
    """The kernel a claim is about (:func:`certify.checkers.binding.kernel_identity`)."""
    return _binding_mod.kernel_identity(claim)


def _model_key(p: Mapping[str, Any]) -> str | None:
    """A head's identity: its weights' canonical hash, else its exact tables' hash."""
    for k in ("weights_sha256", "head_sha256"):
        if isinstance(p.get(k), str):
            return f"{k}:{p[k]}"
    return None


def _kernel_source(p: Mapping[str, Any]) -> tuple | None:
    src = p.get("source_sha256") or p.get("source")
    return ((src, p.get("adapter"), p.get("layer"), p.get("head"),
             json.dumps(p.get("stated"), sort_keys=True)) if isinstance(src, str) else None)


def _token_of(ts: Any, ev: Mapping[str, Any], i: Any) -> str | None:
    """Token ``i`` of a claim's token set as a bit string, when the claim shows it."""
    if not isinstance(i, int) or isinstance(i, bool) or i < 0:
        return None
    if isinstance(ts, str) and ts.startswith("cube:") and ts[5:].isdigit():
        m = int(ts[5:])
        return "".join(str(i >> b & 1) for b in range(m)) if i < 1 << m else None
    toks = ev.get("tokens")
    return toks[i] if isinstance(toks, list) and i < len(toks) else None


def _has_token(p: Mapping[str, Any], ev: Mapping[str, Any], tok: str) -> bool | None:
    """Whether a claim's token set holds ``tok`` (None: the claim does not show it)."""
    ts = p.get("token_set")
    if isinstance(ts, str) and ts.startswith("cube:") and ts[5:].isdigit():
        return len(tok) == int(ts[5:])
    toks = ev.get("tokens")
    return tok in toks if isinstance(toks, list) else None


def _pair(ev: Mapping[str, Any]) -> Any:
    if isinstance(ev.get("pair"), list):
        return ev["pair"]
    return ev.get("argmin")


def contradictions(items: Sequence[tuple[str, int, Mapping[str, Any]]]) -> dict[tuple[str, int], list[str]]:
    """Problems per (certificate, claim index) for claims that contradict each other.
    ``items`` are (certificate label, claim index, claim) of claims that hold alone.

    Checked, each naming both claims: one sentence proved and refuted; feasible at
    rank r in a class inside a class proved infeasible at r' >= r; two exact ranks
    of one matrix that do not overlap; an eps-rank above the exact rank of the same
    matrix; correctness of one head on one family proved at eps and refuted at
    eps' >= eps (gap domination: proved and refuted); a transcript claim of one
    model (weights and quantizer) on one family proved and refuted; nonnegativity
    of one kernel proved on a token set and refuted at a pair of its tokens (token
    sets compared through the tokens themselves)."""
    out: dict[tuple[str, int], list[str]] = {}
    feas, infeas, ranks, eps = [], [], [], []
    by_sentence: dict[str, list] = {}
    by_kind: dict[str, list] = {}
    for label, i, c in items:
        p = c.get("parameters") or {}
        ev = c.get("evidence") or {}
        verdict, kind = c.get("verdict"), c.get("kind")
        if verdict in ("proved", "refuted") and isinstance(c.get("statement"), str):
            by_sentence.setdefault(c["statement"], []).append((label, i, verdict))
        by_kind.setdefault(str(kind), []).append((label, i, verdict, p, ev))
        if verdict != "proved":
            continue
        if kind == "feasible":
            feas.append((label, i, p))
        elif kind == "infeasible":
            infeas.append((label, i, p))
        elif kind in ("exact_rank", "eps_rank"):
            key = _matrix_key(c)
            if key is None:
                continue
            if kind == "exact_rank" and isinstance(ev.get("rank_lower"), int) \
                    and isinstance(ev.get("rank_upper"), int):
                ranks.append((label, i, key, ev["rank_lower"], ev["rank_upper"]))
            elif kind == "eps_rank" and isinstance(ev.get("k"), int):
                eps.append((label, i, key, ev["k"], p.get("eps"), ev.get("exact") is True))

    def where(label: str, i: int) -> str:
        return f"claim {i} of {label}"

    def both(a: tuple[Any, ...], b: tuple[Any, ...], msg: str) -> None:
        out.setdefault((a[0], a[1]), []).append(msg)
        out.setdefault((b[0], b[1]), []).append(msg)

    for sentence, group in by_sentence.items():
        pro = [g for g in group if g[2] == "proved"]
        ref = [g for g in group if g[2] == "refuted"]
        for a in pro:
            for b in ref:
                both(a, b, f"contradiction: {where(a[0], a[1])} proves and {where(b[0], b[1])} "
                           f"refutes the same sentence: {sentence[:160]}")
    for fl, fi, fp in feas:
        for il, ii, ip in infeas:
            if fp.get("family_sha256") != ip.get("family_sha256"):
                continue
            r, r2 = fp.get("rank"), ip.get("rank")
            if isinstance(r, int) and isinstance(r2, int) and r <= r2 and _within(fp, ip):
                both((fl, fi), (il, ii),
                     f"contradiction: {where(fl, fi)} proves a rank-{r} {fp.get('features')} "
                     f"head ({fp.get('class')}) solves the family, {where(il, ii)} proves none of "
                     f"rank {r2} >= {r} ({ip.get('features')}, {ip.get('class')}) does")
    for a in range(len(ranks)):
        for b in range(a + 1, len(ranks)):
            la, ia, ka, loa, hia = ranks[a]
            lb, ib, kb, lob, hib = ranks[b]
            if ka == kb and (hia < lob or hib < loa):
                both((la, ia), (lb, ib),
                     f"contradiction: {where(la, ia)} puts the rank of the same matrix in "
                     f"[{loa}, {hia}], {where(lb, ib)} in [{lob}, {hib}]")
    for a in eps:
        for b in eps:
            # at one eps: a proves k_a values above eps; b, when exact, proves exactly k_b
            if a is not b and a[2] == b[2] and a[4] == b[4] and b[5] and a[3] > b[3]:
                both((a[0], a[1]), (b[0], b[1]),
                     f"contradiction: {where(a[0], a[1])} proves {a[3]} singular values above "
                     f"eps = {a[4]}, {where(b[0], b[1])} proves exactly {b[3]} of the same kernel")
    for el, ei, ek, k, _, _ in eps:
        for rl, ri, rk, _lo, hi in ranks:
            if ek == rk and k > hi:
                both((el, ei), (rl, ri),
                     f"contradiction: {where(el, ei)} proves {k} singular values above eps, "
                     f"{where(rl, ri)} proves the same matrix has rank <= {hi}")
    for kind in ("correctness", "gap_domination"):
        group = by_kind.get(kind, [])
        for a in group:
            for b in group:
                if a[2] != "proved" or b[2] != "refuted":
                    continue
                ma, mb = _model_key(a[3]), _model_key(b[3])
                if ma is None or ma != mb or a[3].get("family_sha256") != b[3].get("family_sha256"):
                    continue
                try:
                    ea, eb = _fraction(a[3].get("eps")), _fraction(b[3].get("eps"))
                except (ValueError, ZeroDivisionError, TypeError):
                    continue
                if eb >= ea if kind == "correctness" else eb == ea:
                    both(a, b, f"contradiction: {where(a[0], a[1])} proves and {where(b[0], b[1])} "
                               f"refutes {kind} of the same head ({ma[:40]}...) on the same "
                               f"family (eps {ea} and {eb})")
    group = by_kind.get("transcript", [])
    for a in group:
        for b in group:
            if a[2] != "proved" or b[2] != "refuted":
                continue
            if _transcript_key(a[3], a[4]) is not None and \
                    _transcript_key(a[3], a[4]) == _transcript_key(b[3], b[4]):
                both(a, b, f"contradiction: {where(a[0], a[1])} proves the transcript claim of a "
                           f"model that {where(b[0], b[1])} refutes (the same weights, quantizer "
                           "and family)")
    group = by_kind.get("nonnegative", [])
    for a in group:
        for b in group:
            if a[2] != "proved" or b[2] != "refuted":
                continue
            na = _binding_mod.kernel_identity({"kind": "nonnegative", "parameters": a[3],
                                               "evidence": a[4]})
            nb = _binding_mod.kernel_identity({"kind": "nonnegative", "parameters": b[3],
                                               "evidence": b[4]})
            if na is not None and na == nb:
                both(a, b, f"contradiction: {where(a[0], a[1])} proves and {where(b[0], b[1])} "
                           "refutes nonnegativity of the same kernel")
                continue
            if _kernel_source(a[3]) is None or _kernel_source(a[3]) != _kernel_source(b[3]):
                continue
            pair = _pair(b[4])
            if not isinstance(pair, list) or len(pair) != 2:
                continue
            toks = [_token_of(b[3].get("token_set"), b[4], j) for j in pair]
            same_set = _binding_mod.token_content(a[3]) == _binding_mod.token_content(b[3])
            inside = same_set or all(t is not None and _has_token(a[3], a[4], t) for t in toks)
            if inside:
                both(a, b, f"contradiction: {where(a[0], a[1])} proves alpha >= 0 on a token set "
                           f"that holds the pair where {where(b[0], b[1])} finds alpha < 0 "
                           "(the same kernel)")
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def _fraction(v: Any) -> Fraction:
    from fractions import Fraction
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError
    return Fraction(v)


def _transcript_key(p: Mapping[str, Any], ev: Mapping[str, Any]) -> tuple | None:
    model = ev.get("model") if isinstance(ev, Mapping) else None
    w = model.get("weights_sha256") if isinstance(model, Mapping) else None
    if not isinstance(w, str):
        return None
    fam = tuple(p.get(k) for k in ("M", "s", "h", "q"))
    return (w, json.dumps(p.get("quantizer"), sort_keys=True), fam)


# ---------------------------------------------------------------- front end

def verify_certificate(cert: Mapping[str, Any], base: Path | None = None, *,
                       assume: Iterable[str] = (), replayed: Mapping[str, str] | None = None,
                       label: str = "the certificate", share: _scratch.Scratch | None = None) -> Verification:
    """Check every claim of a parsed certificate (see :func:`parse`). ``share``: the
    scratch of a producer checking the certificate it just computed in the same process
    (:func:`certify.checkers.scratch.session`); by default the check starts a new one."""
    return verify_many([(label, cert, base)], assume=assume, replayed=replayed, share=share)[0]


def verify_many(certs: Sequence[tuple[str, Mapping[str, Any], Path | None]], *,
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
        lines.append(f"  input {i.name}: {i.status}")
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


__all__ = ["CHECKERS", "ClaimCheck", "InputCheck", "Verification", "parse", "check_claim",
           "checker_for", "verify_certificate", "verify_many", "verify_file", "combined_exit",
           "contradictions", "EXIT_BAD_INPUT", "EXIT_ASSUMED", "TRUSTED_MIN_ENTRIES"]
