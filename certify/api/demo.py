"""``python -m certify demo`` (``make demo``): the main job on the built-in defaults.

Certifies, each claim re-checkable with ``python -m certify verify``:

1. the paper's closed-form bounds for the Sec. 5.1 code (Lemma 3, Thm 5) and
   Thm 6 at m = 200 (``bounds.json``);
2. feasibility on ``paper-5.1``: rank 8 infeasible (Lemma 3 chains +
   Lemma 4), rank 11 infeasible (the nonnegative refinement of Lemma 4; every
   smaller rank follows), rank 12 searched under a time limit, rank 13 (real
   features, alternating-LP search), 15 (nonnegative features) and 32 feasible
   with exactly verified witnesses (``feasibility-r*.json``): the bracket on
   the minimal rank;
3. the committed trained checkpoints on ``paper-5.1`` (``models/checkpoints/``):
   kernel rank, exact correctness and the Lemma 3 audit, naming the input a
   failing model gets wrong (``checkpoint-*.json``);
4. the Thm 2 cube kernel ``[[1,1],[1,c]]^{kron m}`` at m = 6: exact rank
   2^6 = 64 and its eps-rank with certified singular-value enclosures
   (``cube-kernel.json``);
5. the theorems about concrete objects (``theorems.json``): Thm 1's dense
   softmin head and Thm 6's rank-1 head decided at every position of every
   sequence over {0,1}^3, and Thm 8 on a head with position-dependent key
   maps on ``paper-5.1`` with positions.

Writes the certificates and their report into ``--out`` (default
``reports/demo``) in one atomic step and prints where the report is. Exit 0
when every certificate re-checks (refuted and unknown claims are results, not
failures of the demo), 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from certify.core import outputs
from certify.core.certificate import Certificate

ROOT = Path(__file__).resolve().parent.parent.parent
CHECKPOINT_DIR = ROOT / "models" / "checkpoints"
DEFAULT_OUT = ROOT / "reports" / "demo"


def _log(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


def bounds_certificate() -> Certificate:
    from certify.core import bounds
    results = [bounds.lemma3(3, "1/2", 3), bounds.thm5(15, 6, 3), bounds.lemma4(15, 4, strict=True),
               bounds.thm6(200)]
    return Certificate(claims=[bounds.bound_claim(r) for r in results],
                       command=["python", "-m", "certify", "demo", "(bounds)"])


def feasibility_certificates(stage: Path, time_limit: float, seed: int,
                             progress: bool = False) -> list[Path]:
    """The paper-5.1 bracket, one certificate per (rank, features), each as
    ``certify feasibility --rank R --features F`` writes it."""
    from certify.core.families import load_family
    from certify.feasibility.decide import decide
    from certify.feasibility.model import Features

    family = load_family("paper-5.1")
    runs = [(8, "real"), (11, "real"), (12, "real"), (13, "real"), (15, "real"),
            (15, "nonnegative"), (32, "real")]
    paths = []
    for rank, feats in runs:
        name = f"feasibility-r{rank}-{feats}.json"
        args = ["--family", "paper-5.1", "--time-limit", str(time_limit), "--seed", str(seed),
                "--out", str(stage / name)] + ([] if progress else ["--no-progress"])
        args += ["--rank", str(rank), "--features", feats]
        _log(f"feasibility on paper-5.1, rank {rank} {feats}")
        res = decide(family, rank, Features(feats), time_limit=time_limit, seed=seed,
                     progress=progress)
        Certificate(claims=[res.to_claim()], command=["certify", "feasibility", *args],
                    inputs={f"family:{family.name}": family.sha256},
                    seeds={"search": seed}).write(stage / name)
        paths.append(stage / name)
    return paths


def committed_checkpoints() -> list[Path]:
    """Committed checkpoints trained on paper-5.1 (config ``family.name``)."""
    out = []
    for cfg in sorted(CHECKPOINT_DIR.glob("*.json")) if CHECKPOINT_DIR.is_dir() else []:
        try:
            obj = json.loads(cfg.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        fam = obj.get("family") if isinstance(obj, dict) else None
        if isinstance(fam, dict) and fam.get("name") == "paper-5.1" \
                and obj.get("architecture") in ("lookup_head", "kernel_head"):
            out.append(cfg)
    return out


def checkpoint_certificates(stage: Path, seed: int) -> tuple[list[Path], list[str]]:
    from certify.checkpoints.run import certify_checkpoint
    paths, notes = [], []
    found = committed_checkpoints()
    if not found:
        notes.append("no committed paper-5.1 checkpoint under models/checkpoints/: step skipped")
        _log(notes[-1])
    for cfg in found:
        _log(f"checkpoint {cfg.relative_to(ROOT)}")
        rel = str(cfg.relative_to(ROOT))
        res = certify_checkpoint(
            rel if Path(rel).exists() else str(cfg), families=["paper-5.1"], seed=seed,
            command=["python", "-m", "certify", "checkpoint", rel])
        p = stage / f"checkpoint-{cfg.stem}.json"
        res.certificate.write(p)
        paths.append(p)
        for f in res.failing[:1]:
            notes.append(f"{cfg.stem} fails paper-5.1 input {f['input']} ({f['claim']}): "
                         f"t_hat = {f['t_hat']}, target {f['target']}")
            _log(notes[-1])
    return paths, notes


def cube_kernel_certificate(m: int = 6) -> Certificate:
    """Thm 2 exact positive features over {0,1}^m: rank exactly 2^m."""
    import numpy as np

    from certify.core.kernel import Provenance, from_features
    from certify.rank.options import RankOptions
    from certify.rank.run import certify_rank
    from models.constructions import thm2_exact_features

    con = thm2_exact_features(m, 3)
    phi_q = np.array([[float(v) for v in row] for row in con.phi_q])      # exact dyadics
    phi_k = np.array([[float(v) for v in row] for row in con.phi_k])
    assert all(Fraction(a) == b for a, b in zip(phi_k.ravel(), con.phi_k.ravel()))
    kernel = from_features(phi_q, phi_k, Provenance(f"models.constructions.thm2_exact_features({m}, 3)",
                                                    None, "construction", "float64",
                                                    details=dict(con.params)),
                           tokens=con.tokens, token_set=f"cube:{m}")
    rep = certify_rank(kernel, RankOptions(eps=Fraction(1, 100)))
    cert = rep.certificate
    cert.command = ["python", "-m", "certify", "demo", f"(Thm 2 cube kernel, m = {m})"]
    return cert


def theorem_certificate(m: int = 3) -> Certificate:
    """The paper's theorems on concrete objects (``theorem`` claims): Thm 1's dense softmin head at
    ``tau = log 6`` (exact weights) and ``tau = 2`` (arb balls) and Thm 6's rank-1 head, each at
    every position of every sequence over ``{0,1}^m`` (lengths <= 3 and <= 2), and Thm 8 on
    ``paper-5.1`` with positions (``certify bounds --m 3 --constructions --positional paper-5.1``
    makes the same claims beside the closed-form bounds)."""
    from certify.audit.theorems import cube_claim, positional_claim
    from certify.core.families import load_family
    from certify.core.families.positional import causal_family
    from models.constructions import thm8_positional_lookup

    fam = causal_family(load_family("paper-5.1"))
    claims = [cube_claim("thm1", m, 3), cube_claim("thm1", m, 3, tau="2"), cube_claim("thm6", m, 2),
              positional_claim(fam, thm8_positional_lookup(fam))]
    return Certificate(claims=claims, inputs={f"family:{fam.name}": fam.sha256},
                       command=["python", "-m", "certify", "demo",
                                f"(Thm 1 and Thm 6 part 1 at m = {m}, Thm 8 on paper-5.1 with positions)"])


def readme(out: Path, notes: list[str]) -> str:
    try:
        where = out.resolve().relative_to(ROOT)
    except ValueError:
        where = out
    lines = ["# certify-attention demo certificates", "",
             "Made by the project's own commands; regenerate this folder with", "",
             f"    python -m certify demo --out {where}", "",
             "Re-check any certificate with `python -m certify verify FILE.json` (exact arithmetic "
             "only); `report.md` / `report.tex` and the figures are made from these files alone.", ""]
    if notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def run(out: Path, *, time_limit: float = 20.0, seed: int = 0, cube_m: int = 6,
        progress: bool = False) -> dict[str, Any]:
    from certify.report import build as report

    t0 = time.perf_counter()
    out = outputs.check_out_dir(out, "demo")
    with outputs.Stage(out, "demo") as st:
        assert st.root is not None          # made on entering
        stage = st.root / "certificates"
        stage.mkdir()
        _log("bounds")
        bounds_certificate().write(stage / "bounds.json")
        paths = [stage / "bounds.json"]
        paths += feasibility_certificates(stage, time_limit, seed, progress)
        ck_paths, notes = checkpoint_certificates(stage, seed)
        paths += ck_paths
        _log(f"Thm 2 cube kernel at m = {cube_m}")
        cube_kernel_certificate(cube_m).write(stage / "cube-kernel.json")
        paths.append(stage / "cube-kernel.json")
        _log("Thm 1, Thm 6 part 1 and Thm 8 on concrete objects")
        theorem_certificate().write(stage / "theorems.json")
        paths.append(stage / "theorems.json")
        _log("report")
        for p in paths:     # commands name the user's folder, never the stage
            text = p.read_text()
            if str(stage) in text:
                p.write_text(text.replace(str(stage), str(out)))
        # each certificate is labelled by the path it ends up at, never the stage
        certs = [report.loaded_from_text(p.read_text(), out / p.name) for p in paths]
        extra = {p.name: p.read_text() for p in paths}
        extra["README.md"] = readme(out, notes)
        rep = report.build(certs, out, extra=extra, command="demo")
    return {"out": str(out), "report": str(out / "report.md"), "verified": rep.holds,
            "certificates": [p.name for p in paths], "notes": notes,
            "seconds": round(time.perf_counter() - t0, 1)}
