"""The library API that the command line and the service (``certify serve``) share.

Plain functions over the existing library, no argument parsing and no second
implementation: each returns the :class:`certify.certificate.Certificate` (or
the verification / report result) that the corresponding command writes.

- :func:`certify_checkpoint` -- :func:`certify.checkpoints.dispatch.certify_path`
- :func:`rank_of_matrix` -- :func:`certify.sources.load.load_kernel` (the one loader) +
  :func:`certify.rank.run.certify_rank`
- :func:`feasibility_at_rank` -- :func:`certify.feasibility.decide` (one claim)
- :func:`transcript_check` -- :func:`certify.transcript.run.run_transcript`
- :func:`verify_text` -- :func:`certify.checkers.verify.parse` + :func:`~certify.checkers.verify.verify_certificate`
- :func:`verify_in_fresh_process` -- ``certify verify --json`` in a new process (the service's own check)
- :func:`report` -- :func:`certify.report.build_with_certificate`

>>> cert = feasibility_at_rank("paper-5.1", 8, time_limit=5)   # doctest: +SKIP
>>> cert.claims[0].verdict.value                                # doctest: +SKIP
'proved'
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence

from certify.core.certificate import Certificate
from certify.core.errors import EXIT_BAD_INPUT, EXIT_NOT_PROVED, EXIT_PROVED, EXIT_UNCERTIFIABLE, InputError

#: What each exit status of ``certify verify`` means (docs/design.md, "Exit codes").
VERIFY_EXIT_MEANING = {
    EXIT_PROVED: "every claim's verdict is re-derived, with no assumption left",
    EXIT_NOT_PROVED: "some claim fails (or an input's hash differs)",
    EXIT_BAD_INPUT: "the file is not a certificate",
    EXIT_UNCERTIFIABLE: "input outside what can be certified",
    4: "every claim holds, but only under the named assumptions",
}


def certify_checkpoint(ckpt: str | os.PathLike, *, spec: str | None = None,
                       families: Sequence[str] = (), eps: Fraction | str = Fraction(1, 1000),
                       seed: int = 0, command: Sequence[str] = ()) -> Certificate:
    """End-to-end certificate of a trained model (``certify checkpoint``): a
    ``models/`` checkpoint, or every head of a third-party checkpoint."""
    from certify.checkpoints.dispatch import certify_path
    eps = _exact_positive(eps, "eps")
    return certify_path(str(ckpt), spec=spec, families=list(families), eps=eps, seed=seed,
                        command=list(command))[1].certificate


def rank_of_matrix(source: str | os.PathLike, *, tokens: str | None = None,
                   spec: str | None = None, eps: Fraction | str | None = None,
                   code: str | None = None, seed: int = 0,
                   require_nonnegative: bool = False, upper_bound: str = "auto",
                   command: Sequence[str] = ()) -> Certificate:
    """Exact two-sided rank (and eps-rank, code rank, nonnegativity) of a kernel
    file, matrix file or checkpoint (``certify rank``); ``upper_bound`` is
    ``--upper-bound`` (``auto``, ``exact`` or ``freivalds``)."""
    from certify.rank import run as _rank
    if upper_bound not in ("auto", "exact", "freivalds"):
        raise InputError(f"upper_bound must be auto, exact or freivalds, got {upper_bound!r:.40}")
    from certify.sources.load import annotate, load_kernel
    from certify.sources.paths import resolve_source

    kernel = load_kernel(str(source) if spec else str(resolve_source(source)), tokens=tokens, spec=spec,
                         seed=seed)
    words, code_name = _rank.load_code(code) if code else (None, None)
    opt = _rank.RankOptions(seed=seed, eps=None if eps is None else _exact_positive(eps, "eps"),
                            code=words, code_name=code_name,
                            require_nonnegative=require_nonnegative, upper_bound=upper_bound)
    cert = annotate(_rank.certify_rank(kernel, opt).certificate, kernel)
    cert.command = list(command)
    return cert


def feasibility_at_rank(family: str, rank: int, *, features: str = "real",
                        time_limit: float = 60.0, seed: int = 0,
                        command: Sequence[str] = ()) -> Certificate:
    """Is there a rank-``rank`` head solving ``family`` (``certify feasibility --rank``)?"""
    from certify.core.families import load_family
    from certify.feasibility.decide import decide
    from certify.feasibility.model import Features

    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise InputError(f"rank must be an integer >= 1, got {rank!r}")
    if not time_limit > 0:
        raise InputError(f"time limit must be positive, got {time_limit}")
    try:
        feats = Features(features)
    except ValueError:
        raise InputError(f"features must be one of {[f.value for f in Features]}, "
                         f"got {features!r}") from None
    fam = load_family(family)
    res = decide(fam, rank, feats, time_limit=time_limit, seed=seed, progress=False)
    return Certificate(claims=[res.to_claim()], command=list(command),
                       inputs={f"family:{fam.name}": fam.sha256}, seeds={"search": seed})


def transcript_check(M: int, s: int, h: int, q: int, *, bits: int | None = None,
                     format: str | None = None, model: str = "builtin-injective",
                     checkpoint: str | None = None, seed: int = 0,
                     time_limit: float | None = None, command: Sequence[str] = ()) -> Certificate:
    """Thm 9 against a quantized sketch model on the multilevel family
    ``(M, s, h, q)`` (``certify transcript``): a built-in model or a sketch
    checkpoint, a uniform quantizer of ``bits`` per coordinate or a float
    ``format``. Bad options raise :class:`InputError` before any work."""
    from certify.core.limits import check_time_limit
    from certify.transcript.model import ModelRequest
    from certify.transcript.run import run_transcript

    if (bits is None) == (format is None) and checkpoint is None:
        raise InputError("give exactly one of bits or format")
    check_time_limit(time_limit)
    req = ModelRequest(checkpoint=checkpoint, model=model, seed=seed, bits=bits, format=format)
    return run_transcript(req, M, s, h, q, time_limit=time_limit, command=list(command)).certificate


def verify_text(text: str, base: str | os.PathLike | None = None, *,
                replay_extraction: bool = False):
    """``certify verify`` on a certificate's JSON text: the
    :class:`certify.checkers.verify.Verification` result (``exit_code()``, ``to_json()``).
    ``base`` is the folder where the certificate's input files are looked up;
    ``replay_extraction`` re-runs the weights -> features step in a separate
    process (``certify verify --replay-extraction``)."""
    from certify.checkers import sources as _sources
    from certify.checkers import verify as _verify
    from certify.checkers.common import NotACertificate

    try:
        cert = _verify.parse(text)
    except NotACertificate as exc:
        raise InputError(str(exc)) from None
    folder = None if base is None else Path(base)
    replayed = _sources.replay_extraction([("certificate", cert, folder)]) \
        if replay_extraction else {}
    return _verify.verify_certificate(cert, base=folder, replayed=replayed)


def verify_in_fresh_process(text: str, base: str | os.PathLike | None = None, *,
                            replay_extraction: bool = False, timeout: float = 3600) -> dict[str, Any]:
    """``certify verify --json`` on a certificate's JSON text in a new process that shares no
    memory with the caller (a producer that just made the certificate): the summary of
    :func:`verification_summary`. The text is written to a private temporary file inside
    ``base`` (where its input files are looked up; a temporary folder when None) and removed
    after. A process that does not answer with a verification is exit 2, with its last line."""
    import json
    import subprocess
    import sys
    import tempfile

    folder = Path(base) if base is not None else None
    with tempfile.TemporaryDirectory(prefix="certify-verify-") as tmp:
        where = folder if folder is not None else Path(tmp)
        fd, path = tempfile.mkstemp(prefix=".certificate-under-check-", suffix=".json", dir=where)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            argv = [sys.executable, "-m", "certify", "verify", "--json", path] + \
                (["--replay-extraction"] if replay_extraction else [])
            run = subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=timeout,
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
        finally:
            os.unlink(path)
    try:
        doc = json.loads(run.stdout)
    except json.JSONDecodeError:
        line = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return {"holds": False, "exit_code": EXIT_BAD_INPUT, "exit_meaning": line[:300], "claims": [],
                "inputs": [], "problems": [line[:300]], "assumptions": [], "open_assumptions": []}
    doc.pop("certificate", None)
    doc["exit_code"] = int(run.returncode)
    doc["exit_meaning"] = VERIFY_EXIT_MEANING.get(run.returncode, f"exit status {run.returncode}")
    for i in doc.get("inputs", []):
        if isinstance(i, dict) and i.get("path") and Path(str(i["path"])).name.startswith(".certificate-under"):
            i["path"] = None
    return doc


def verification_summary(result) -> dict[str, Any]:
    """A verification result as JSON, with its exit status and what it means;
    everything is read from the result object."""
    code = int(result.exit_code())
    doc = dict(result.to_json())
    doc["exit_code"] = code
    doc["exit_meaning"] = VERIFY_EXIT_MEANING.get(code, f"exit status {code}")
    assumptions = getattr(result, "assumptions", None)
    if assumptions is not None and "assumptions" not in doc:
        doc["assumptions"] = [str(a) for a in assumptions]
    return doc


def report(text: str, out: str | os.PathLike) -> list[str]:
    """The certificate's report (``report.md``, ``report.tex``, figures) and the
    certificate itself, written atomically into the folder ``out`` (a folder of
    ``certify report``, by its manifest); the file names."""
    from certify.report import build as _report

    folder = _report.build_with_certificate(text, out, command="report")
    return sorted(p.name for p in Path(folder).iterdir()
                  if p.is_file() and not p.name.startswith("."))     # not the folder's manifest


def _exact_positive(value: Fraction | str | int, name: str) -> Fraction:
    try:
        v = Fraction(value) if not isinstance(value, str) else Fraction(value.strip())
    except (ValueError, ZeroDivisionError, TypeError):
        raise InputError(f"{name} must be an exact number like 1/1000, got {value!r}") from None
    if v <= 0:
        raise InputError(f"{name} must be > 0, got {value}")
    return v


def claim_index(cert: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-claim fields a store filters on: kind, verdict, rank, family hash."""
    out = []
    for c in cert.get("claims", []):
        p = c.get("parameters") or {}
        ev = c.get("evidence") or {}
        rank = p.get("rank")
        if rank is None and c.get("kind") == "exact_rank" and ev.get("rank_lower") == ev.get("rank_upper"):
            rank = ev.get("rank_lower")
        out.append({"kind": str(c.get("kind")), "verdict": str(c.get("verdict")),
                    "rank": rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
                    "family_sha256": p.get("family_sha256") if isinstance(p.get("family_sha256"), str) else None})
    return out
