"""Every checkpoint in a folder, one task each (``certify checkpoint --batch DIR``).

A folder of checkpoints is named with ``--batch`` so it is never confused with
one model's folder. A checkpoint is a pair ``X.json`` + ``X.safetensors`` whose
JSON has ``"format": "certify-attention/checkpoint/1"``; other files are
ignored (and listed). Every checkpoint is certified as by ``certify
checkpoint X`` (one task each; in process, or on Ray with ``--workers N`` /
``--ray-address``), results in the sorted order of the names. With ``--out
OUT`` each certificate and report goes to ``OUT/X/``. Exit code: the worst
over the checkpoints (0 only when every claim of every checkpoint is proved).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from certify.core.errors import InputError

if TYPE_CHECKING:
    from certify.checkpoints.run import CheckpointResult


def find_checkpoints(folder: str) -> tuple[list[Path], list[str]]:
    """``(checkpoint stems, ignored file names)``; bad input when none is found."""
    from models.checkpoint import FORMAT

    d = Path(folder)
    if not d.is_dir():
        raise InputError(f"--batch {folder}: not a folder")
    stems, ignored = [], []
    for js in sorted(d.glob("*.json")):
        st = js.with_suffix(".safetensors")
        try:
            fmt = json.loads(js.read_text()).get("format")
        except (OSError, ValueError, AttributeError):
            fmt = None
        if st.is_file() and fmt == FORMAT:
            stems.append(js.with_suffix(""))
        else:
            ignored.append(js.name)
    if not stems:
        raise InputError(f"--batch {folder}: no checkpoint (X.json with format {FORMAT!r} "
                         "and X.safetensors) in the folder")
    return stems, ignored


def _one(stem: str, families, eps, seed, command):
    from certify.checkpoints.run import certify_checkpoint

    return certify_checkpoint(stem, families=families, eps=eps, seed=seed,
                              command=[*command, "#", Path(stem).name])


@dataclass(frozen=True)
class BatchEntry:
    stem: Path
    result: "CheckpointResult"
    out: Path | None                      # the report folder, when one was written


def run_batch(folder: str, *, families: Sequence[str] = (), eps: Fraction, seed: int = 0,
              command: Sequence[str] = (), engine=None,
              out: str | None = None) -> tuple[list[BatchEntry], list[str]]:
    """Every checkpoint of ``folder`` (one task each on ``engine``), in the sorted
    order of their names, with ``OUT/X/`` report folders when ``out`` is given;
    ``(entries, ignored file names)``."""
    from certify.core.engine import Engine

    stems, ignored = find_checkpoints(folder)
    if out and Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"--out {out} exists and is not a folder")
    engine = engine if engine is not None else Engine(1, progress=False)
    results = engine.map(_one, [(str(s), tuple(families), eps, seed, tuple(command))
                                for s in stems], label="checkpoints")
    entries = []
    for stem, res in zip(stems, results):
        folder_out = None
        if out:
            from certify.report.build import build_with_certificate
            folder_out = build_with_certificate(res.certificate.dumps(), str(Path(out) / stem.name))
        entries.append(BatchEntry(stem, res, folder_out))
    return entries, ignored
