"""Claims, verdicts and the certificate container (JSON, hashed, written atomically).

A claim is a frozen record: what is claimed (``kind``, ``parameters``), the
``statement`` rendered from them by the one renderer,
:func:`certify.checkers.statements.render` (a producer passes ``None``; only a
claim read back from JSON keeps the text it was stored with, which ``verify``
then compares with the rendering), the ``verdict``, the ``evidence`` that lets an independent
checker (``certify verify``) re-derive the verdict without a solver, the
``method`` used and its ``timings``. Exact numbers in evidence are ints or
``"p/q"`` strings (see :func:`q_to_str`), never floats.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import os
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

from certify.checkers.statements import RENDERER, render
from certify.core import compiled
from certify.core.errors import InputError
from certify.core.files import atomic_write_text
from certify.core.jsontext import dumps_indent1
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict
from certify.core.versions import installed_versions

SCHEMA = "certify-attention/certificate/3"


class ClaimKind(str, enum.Enum):
    """Every kind of claim a certificate may hold. ``certify verify`` has one
    checker per kind; a kind it does not know is reported, not skipped."""

    BOUND = "bound"                          # closed-form bound, hypotheses checked exactly
    EXACT_RANK = "exact_rank"                # rank over Q, two-sided
    EPS_RANK = "eps_rank"                    # every matrix within eps has rank >= k
    NUMERICAL_RANK = "numerical_rank"        # singular values above a tolerance, counted two-sided
    CODE_RANK = "code_rank"                  # Lemma 4 / Thm 5 on B[S,U] of a kernel on a code
    FEASIBLE = "feasible"                    # a rank-r head solves the family (witness)
    INFEASIBLE = "infeasible"                # no rank-r head solves the family (derivation)
    CORRECTNESS = "correctness"              # a given model solves a family exactly
    GAP_DOMINATION = "gap_domination"        # Lemma 3 audit of a model's kernel
    TRANSCRIPT = "transcript"                # Thm 9 on a quantized sketch model
    NONNEGATIVE = "nonnegative"              # kernel >= 0 on a token set
    THEOREM = "theorem"                      # a paper theorem on a concrete object (Thm 1, 6, 8)


@dataclass(frozen=True)
class Claim:
    kind: ClaimKind
    statement: str | None          # None: rendered from kind, parameters and evidence
    verdict: Verdict
    parameters: Mapping[str, Any] = field(default_factory=dict)
    evidence: Mapping[str, Any] = field(default_factory=dict)
    method: str = ""
    reason: str | None = None          # required when the verdict is not proved
    timings: Mapping[str, float] = field(default_factory=dict)
    #: diagnostics for people (float margins, attempt counts, float accuracy):
    #: never evidence, never re-checked, shown in reports as uncertified.
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ClaimKind(self.kind))
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.verdict is not Verdict.PROVED and not self.reason:
            raise ValueError(f"a {self.verdict.value} claim needs a reason")
        if self.statement is None:
            object.__setattr__(self, "statement", render(
                self.kind.value, _jsonable(self.parameters), _jsonable(self.evidence)).text)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "statement": self.statement,
            "verdict": self.verdict.value,
            "parameters": _jsonable(self.parameters),
            "evidence": _jsonable(self.evidence),
            "method": self.method,
            "reason": self.reason,
            "timings": {k: float(v) for k, v in self.timings.items()},
            "info": _jsonable(self.info),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Claim":
        known = {"kind", "statement", "verdict", "parameters", "evidence",
                 "method", "reason", "timings", "info"}
        extra = set(obj) - known
        if extra:
            raise InputError(f"claim has unknown keys: {sorted(extra)}")
        try:
            return cls(kind=ClaimKind(obj["kind"]), statement=obj["statement"],
                       verdict=Verdict(obj["verdict"]),
                       parameters=obj.get("parameters", {}),
                       evidence=obj.get("evidence", {}), method=obj.get("method", ""),
                       reason=obj.get("reason"), timings=obj.get("timings", {}),
                       info=obj.get("info", {}))
        except (KeyError, ValueError) as exc:
            raise InputError(f"malformed claim: {exc}") from None


@dataclass
class Certificate:
    """A list of claims plus what is needed to reproduce them."""

    claims: list[Claim]
    command: list[str] = field(default_factory=list)
    inputs: dict[str, str] = field(default_factory=dict)       # name -> sha256
    seeds: dict[str, int] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=lambda: environment())
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc)
                         .replace(microsecond=0).isoformat())
    schema: str = SCHEMA
    renderer: str | None = RENDERER          # the statement renderer's version

    @property
    def all_proved(self) -> bool:
        return bool(self.claims) and all(c.verdict is Verdict.PROVED for c in self.claims)

    def exit_code(self) -> int:
        """0 when every claim is proved, 1 otherwise (docs/design.md)."""
        return 0 if self.all_proved else 1

    def bound_inputs(self) -> dict[str, str]:
        """``inputs`` plus every family and source hash the claims name
        (``family:NAME`` -> sha256, source path -> sha256): verify requires them."""
        out = dict(self.inputs)
        for c in self.claims:
            p = c.parameters
            if isinstance(p.get("family"), str) and isinstance(p.get("family_sha256"), str):
                out.setdefault(f"family:{p['family']}", p["family_sha256"])
            if isinstance(p.get("source"), str) and isinstance(p.get("source_sha256"), str):
                out.setdefault(p["source"], p["source_sha256"])
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "renderer": self.renderer,
            "created": self.created,
            "command": list(self.command),
            "inputs": self.bound_inputs(),
            "seeds": dict(self.seeds),
            "environment": self.environment,
            "claims": [c.to_json() for c in self.claims],
        }

    def _text(self) -> str:
        return dumps_indent1(self.to_json()) + "\n"           # json.dumps(..., indent=1), faster

    def dumps(self) -> str:
        """The certificate's JSON text, after the independent checker has accepted
        every claim (see :meth:`self_check`): the only way certificates leave a producer."""
        text = self._text()
        self.self_check(text=text)
        return text

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Certificate":
        if not isinstance(obj, Mapping) or obj.get("schema") != SCHEMA:
            raise InputError(f"not a certificate (schema must be {SCHEMA!r})")
        extra = set(obj) - {"schema", "renderer", "created", "command", "inputs", "seeds",
                            "environment", "claims"}
        if extra:
            raise InputError(f"certificate has unknown keys: {sorted(extra)}")
        claims = obj.get("claims")
        if not isinstance(claims, list):
            raise InputError("certificate has no claim list")
        return cls(claims=[Claim.from_json(c) for c in claims],
                   command=list(obj.get("command", [])), inputs=dict(obj.get("inputs", {})),
                   seeds=dict(obj.get("seeds", {})), environment=dict(obj.get("environment", {})),
                   created=obj.get("created", ""), schema=obj["schema"],
                   renderer=obj.get("renderer"))

    def checked_dumps(self, base: str | os.PathLike) -> tuple[str, Any]:
        """``(text, verification)``: :meth:`dumps` with the self-check run as the
        certificate will be read from folder ``base`` (input names relative to it),
        and the checker's result on that text returned. A report built from the same
        text in the same folder (:func:`certify.report.build.build`, ``verified=``)
        takes that result instead of running the same check a second time."""
        text = self._text()
        return text, self.self_check(base, text=text)

    def self_check(self, base: str | os.PathLike | None = None, *, text: str | None = None) -> Any:
        """Run the independent checker on this certificate before it leaves the
        producer: a claim the checker rejects is a producer bug, never written.
        Returns the checker's result (:class:`certify.checkers.verify.Verification`)."""
        from certify.checkers import scratch
        from certify.checkers.verify import verify_certificate
        # a producer that computed with the checker's functions in a scratch of its own
        # (certify rank) shares it with this check; certify verify never does
        result = verify_certificate(json.loads(text if text is not None else self._text()),
                                    base=Path(base) if base is not None else Path.cwd(),
                                    share=scratch.current())
        bad = [c for c in result.claims if not c.holds]
        if bad:
            c = bad[0]
            raise RuntimeError(f"internal error: the checker rejects claim {c.index} ({c.kind}) of "
                               f"the certificate being written: {'; '.join(c.problems)[:500]}")
        if result.problems:                      # outside any claim (e.g. a top-level field's shape)
            raise RuntimeError(f"internal error: the checker rejects the certificate being written: "
                               f"{'; '.join(result.problems)[:500]}")
        return result

    def write(self, path: str | os.PathLike) -> None:
        """Check, then write atomically."""
        atomic_write_text(path, self.dumps())

    @classmethod
    def read(cls, path: str | os.PathLike) -> "Certificate":
        if Path(path).exists() and not Path(path).is_file():
            raise InputError(f"{path} is not a regular file")
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise InputError(f"cannot read certificate {path}: {exc.strerror}") from None
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:     # JSONDecodeError, over-long integers
            why = f"{exc.msg} at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) \
                else " ".join(str(exc).split())[:80]
            raise InputError(f"certificate {path} is not JSON: {why}") from None
        return cls.from_json(obj)


# ---------------------------------------------------------------- environment

_PACKAGES = ("numpy", "scipy", "python-flint", "mpmath", "highspy", "cvxpy", "torch",
             "safetensors")


def environment() -> dict[str, Any]:
    """Package versions, Python, platform, git commit (when there is one) and which
    compiled kernels were in use (:func:`certify.core.compiled.status`)."""
    versions = installed_versions((*_PACKAGES, "certify-attention"))
    out: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": _platform(),
        "packages": versions,
        "git_commit": _git_commit(),
        "compiled": compiled.status(),
    }
    if "torch" in sys.modules:          # the extraction step's arithmetic depends on these
        torch = sys.modules["torch"]
        out["torch_threads"] = int(torch.get_num_threads())
    return out


def _platform() -> str:
    """``platform.platform()``; on Linux without its processor field, which costs a
    ``uname -p`` child process and which that function drops anyway when it is
    ``unknown`` or the machine's name (the usual answers there)."""
    import platform
    u = os.uname()
    if u.sysname != "Linux":
        return platform.platform()
    lib, version = platform.libc_ver()
    return "-".join(x for x in (u.sysname, u.release, u.machine, "with", lib + version) if x)


def _git_commit() -> str | None:
    """The checkout's commit (``git rev-parse HEAD``), read from its ``.git`` files when
    they name it plainly (a branch's loose or packed ref, or a detached head; a worktree's
    ``.git`` file), else from git itself."""
    here = Path(__file__).resolve().parent.parent.parent
    found = _head_from_files(here)
    if found:
        return found
    import subprocess
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _head_from_files(here: Path) -> str | None:
    """The commit ``here/.git`` names (:func:`_git_commit`), or None when it does not name
    one plainly."""
    try:
        dot = here / ".git"
        gitdir = Path(dot.read_text().split("gitdir:", 1)[1].strip()) if dot.is_file() else dot
        gitdir = gitdir if gitdir.is_absolute() else here / gitdir
        common = gitdir / (gitdir / "commondir").read_text().strip() if (gitdir / "commondir").is_file() \
            else gitdir
        head = (gitdir / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            loose = common / ref
            head = loose.read_text().strip() if loose.is_file() else next(
                (line.split()[0] for line in (common / "packed-refs").read_text().splitlines()
                 if line.endswith(" " + ref) and not line.startswith(("#", "^"))), "")
        if len(head) in (40, 64) and all(ch in "0123456789abcdef" for ch in head):
            return head
    except (OSError, IndexError, ValueError):
        pass
    return None


#: types that are JSON as they are (exact type: an IntEnum or a numpy scalar is converted below)
_PLAIN = frozenset({int, str, float, bool, type(None)})


def _jsonable(obj: Any) -> Any:
    """Convert evidence to JSON: Fractions to "p/q", numpy scalars/arrays to ints or
    lists, enums to values. Floats pass through (they are allowed in
    parameters and timings, never as exact evidence). A list of plain ints (a
    Gram row, a token) is copied as it is: the common case, kept off the general path."""
    import numpy as np

    t = type(obj)
    if t in _PLAIN:
        return obj
    if (t is list or t is tuple) and all(type(v) is int for v in obj):
        return list(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Fraction):
        return q_to_str(obj)
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj))
    return obj
