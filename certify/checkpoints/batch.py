"""Every checkpoint in a folder, one task each (``certify checkpoint --batch DIR``).

A folder of checkpoints is named with ``--batch`` so it is never confused with
one model's folder. A checkpoint is a pair ``X.json`` + ``X.safetensors`` whose
JSON has ``"format": "certify-attention/checkpoint/1"``; other files are
ignored (and listed). Every checkpoint is certified as by ``certify
checkpoint X`` (one task each; in process, or on Ray with ``--workers N`` /
``--ray-address``), results in the sorted order of the names. A checkpoint
that cannot be read (corrupt weights, a bad config) is reported with its
one-line reason and the others are certified all the same. With ``--out OUT``
each certificate and report goes to ``OUT/X/``; ``OUT`` is one output folder of
``certify checkpoint --batch`` (its manifest names the command and the
subfolders), checked before any work and replaced in one atomic step. Exit
code: the worst over the checkpoints (0 only when every claim of every
checkpoint is proved; 2 when one could not be read).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from certify.core.errors import InputError

#: the command named by the manifest of a batch's ``--out`` folder
BATCH = "checkpoint --batch"

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
    """One checkpoint's result, or the one-line reason it cannot be read (a
    string: one bad checkpoint never stops the others)."""
    from certify.checkpoints.run import certify_checkpoint

    try:
        return certify_checkpoint(stem, families=families, eps=eps, seed=seed,
                                  command=[*command, "#", Path(stem).name])
    except InputError as exc:
        return str(exc)


@dataclass(frozen=True)
class BatchEntry:
    stem: Path
    result: "CheckpointResult | None"     # None: the checkpoint could not be read
    out: Path | None                      # the report folder, when one was written
    error: str | None = None              # why it could not be read

    def exit_code(self) -> int:
        return 2 if self.result is None else self.result.certificate.exit_code()


def run_batch(folder: str, *, families: Sequence[str] = (), eps: Fraction, seed: int = 0,
              command: Sequence[str] = (), engine=None,
              out: str | None = None) -> tuple[list[BatchEntry], list[str]]:
    """Every checkpoint of ``folder`` (one task each on ``engine``), in the sorted
    order of their names, with ``OUT/X/`` report folders when ``out`` is given;
    ``(entries, ignored file names)``."""
    from certify.core import outputs
    from certify.core.engine import Engine

    stems, ignored = find_checkpoints(folder)
    if out:
        outputs.check_out_dir(out, BATCH)
    engine = engine if engine is not None else Engine(1, progress=False)
    results = engine.map(_one, [(str(s), tuple(families), eps, seed, tuple(command))
                                for s in stems], label="checkpoints")
    entries = [BatchEntry(stem, None, None, res) if isinstance(res, str)
               else BatchEntry(stem, res, Path(out) / stem.name if out else None)
               for stem, res in zip(stems, results)]
    if out:
        from certify.report.build import build_with_certificate

        def fill(new: Path) -> None:
            for e in entries:
                if e.result is not None:
                    build_with_certificate(e.result.certificate.dumps(), new / e.stem.name,
                                           command="checkpoint")
        outputs.write_dir(out, BATCH, fill)
    return entries, ignored
