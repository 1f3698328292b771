"""``certify checkpoint --batch DIR``: every checkpoint in a folder, one task each.

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
import sys
from pathlib import Path
from typing import Sequence

from certify.errors import InputError


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
    from certify.checkpoint_cmd import certify_checkpoint

    return certify_checkpoint(stem, families=families, eps=eps, seed=seed,
                              command=[*command, "#", Path(stem).name])


def run_batch(args, eps, command: Sequence[str]) -> int:
    from certify.checkpoint_cmd import _overall, _print
    from certify.parallel import engine_from_args

    if args.checkpoint or args.spec:
        raise InputError("--batch DIR certifies a folder; give no CKPT and no --spec with it")
    stems, ignored = find_checkpoints(args.batch)
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out} exists and is not a folder")
    with engine_from_args(args, progress=not getattr(args, "json", False)) as engine:
        results = engine.map(_one, [(str(s), tuple(args.family), eps, args.seed, tuple(command))
                                    for s in stems], label="checkpoints")
    summary, worst = [], 0
    for stem, res in zip(stems, results):
        entry = {"checkpoint": stem.name, "verdict": _overall(res.certificate.claims).value,
                 "exit_code": res.certificate.exit_code()}
        if args.out:
            from certify import report
            folder = report.build_with_certificate(res.certificate.dumps(),
                                                   str(Path(args.out) / stem.name))
            entry["out"] = str(folder)
        _print(res, str(stem))
        summary.append(entry)
        worst = max(worst, entry["exit_code"])
    for name in ignored:
        print(f"ignored {name} (not a head checkpoint)", file=sys.stderr)
    if args.json:
        print(json.dumps({"batch": args.batch, "checkpoints": summary, "ignored": ignored}))
    return worst
