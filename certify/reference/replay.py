"""``--replay-extraction`` for the reference checker: the weights -> features step
of every checkpoint or construction a claim names, re-run in a separate process
(``python -m certify.cli.replay``; its protocol: a JSON list of jobs on stdin,
one JSON object on stdout). Every job asks for the features to be written to a
file (``features_out``); this checker reads that file itself
(:func:`certify.reference.files.read_features_file`), hashes the features
against the claim's ``features_sha256`` and re-derives the claim from them. A
head's tables and the weights' canonical hash (correctness and gap claims) are
compared as the replay reports them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from certify.reference.files import locate

#: adapters whose features are canonical or exact: the torch version does not decide them
CANONICAL = ("layout:", "adapter:", "models.checkpoint", "construction")


@dataclass
class Replays:
    """What the replay returned, per job key: the result object, and the folder
    holding the features files (removed with this object)."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    folder: Any = None
    torch: dict[str, Any] = field(default_factory=dict)


def job_key(p: Mapping[str, Any], features: bool, cert: Mapping[str, Any], base: Path | None) -> str:
    """The extraction a claim names, by content: the source's sha256 (a construction by its
    spec), the file it resolves to from the certificate's folder, the hashes of the
    certificate's inputs (the files read beside the source), the adapter, the token set
    (kernel claims) and the stated kernel arguments. Never the source's name alone: two
    certificates whose models share a relative path are two replays."""
    import hashlib
    sha = p.get("source_sha256")
    path = locate(p["source"], sha, base) if isinstance(sha, str) and isinstance(p.get("source"), str) else None
    stated = cert.get("inputs")
    inputs = stated if isinstance(stated, dict) else {}
    ident = [sha if isinstance(sha, str) else None, None if isinstance(sha, str) else p.get("source"),
             os.path.realpath(path) if path is not None else None, sorted(str(v) for v in inputs.values()),
             p.get("adapter"), p.get("token_set") if features else None, p.get("stated"),
             p.get("sequences_sha256")]
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def replayable(claim: Mapping[str, Any]) -> bool:
    p = claim.get("parameters")
    return isinstance(p, dict) and isinstance(p.get("source"), str) \
        and p.get("adapter") not in (None, "matrix-file", "memory")


def _sequences(p: Mapping[str, Any], inputs: Mapping[str, Any], base: Path | None) -> dict[str, Any]:
    name = p.get("sequences")
    if not isinstance(name, str):
        return {}
    path = None if name.startswith("random:") else locate(name, inputs.get(name), base)
    return {"sequences": name, "sequences_path": str(path) if path is not None else None,
            "sequences_sha256": p.get("sequences_sha256")}


def run(certs: Sequence[tuple[str, Mapping[str, Any], Path | None]]) -> Replays:
    jobs: dict[str, dict[str, Any]] = {}
    out = Replays()
    for _, cert, base in certs:
        env: Any = (cert.get("environment") or {}).get("packages") or {}
        inputs: Any = cert.get("inputs") if isinstance(cert.get("inputs"), dict) else {}
        for c in cert["claims"]:
            if not replayable(c):
                continue
            p, ev = c["parameters"], c.get("evidence") or {}
            fs: Any = ev.get("features_sha256") if isinstance(ev, dict) else None
            feats = isinstance(fs, dict) and isinstance(fs.get("phi_q"), str)
            key = job_key(p, feats, cert, base)
            sha = p.get("source_sha256")
            path = locate(p["source"], sha, base)
            job = jobs.setdefault(key, {
                "key": key, "source": p["source"], "path": str(path) if path else None,
                "source_sha256": sha if isinstance(sha, str) else None,
                "adapter": p.get("adapter"), "token_set": p.get("token_set") if feats else None,
                "dtype": fs.get("dtype") if feats else None, "torch": env.get("torch"),
                "stated": p.get("stated"), "want": [], "heads": [], "weights": [],
                # a positions:SxT token set: the sequences (a file found by the sha256 the
                # certificate's inputs give it, or the seeded probe) and the ids' content hash,
                # which the worker re-derives
                **_sequences(p, inputs, base),
                "specs": [str(f) for f in (locate(n, inputs[n], base) for n in inputs if str(n).endswith(".json"))
                          if f]
                if str(p.get("adapter")).startswith("adapter:") else []})
            out.torch[key] = env.get("torch")
            # whether a head has a denominator is re-derived by the replay from its config: every
            # value its claims give (absent: normalized) is sent to be compared
            norm = p.get("normalized", True)
            if norm not in job.setdefault("normalized", []):
                job["normalized"].append(norm)
            if feats:
                job["want"].append([fs["phi_q"], fs.get("phi_k")])
            if isinstance(p.get("head_sha256"), str) and isinstance(p.get("family"), str):
                job["heads"].append([p["family"], p["head_sha256"]])
            if isinstance(p.get("weights_sha256"), str):
                job["weights"].append(p["weights_sha256"])
    jobs = {k: j for k, j in jobs.items() if j["want"] or j["heads"] or j["weights"]}
    if not jobs:
        return out
    out.folder = tempfile.TemporaryDirectory(prefix="certify-reference-replay-")
    for i, job in enumerate(jobs.values()):
        if job["want"]:
            job["features_out"] = str(Path(out.folder.name) / f"job{i}.features")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        done = subprocess.run([sys.executable, "-m", "certify.cli.replay"], input=json.dumps(list(jobs.values())),
                              capture_output=True, text=True, timeout=600, env=env)
        got = json.loads(done.stdout)
        if not isinstance(got, dict):
            raise ValueError("not an object")
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        line = ""
        if isinstance(exc, ValueError) and "done" in locals():
            line = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
        why = f"replay could not run: {line or type(exc).__name__}"
        out.results = {k: {"error": why} for k in jobs}
        return out
    for k, job in jobs.items():
        r = got.get(k)
        r = r if isinstance(r, dict) else {"error": "no result for this job"}
        if "error" not in r and job.get("features_out") and r.get("features_file") != job["features_out"]:
            r = {**r, "features_file": None}
        if "error" not in r and not str(job["adapter"]).startswith(CANONICAL) \
                and r.get("torch") != job["torch"]:
            r = {"error": f"torch {r.get('torch')} here, {job['torch']} in the certificate"}
        out.results[k] = r
    return out
