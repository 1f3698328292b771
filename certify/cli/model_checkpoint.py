"""``python -m models.checkpoint show CKPT [--json]``: a ``models/`` checkpoint's
config, tensor shapes and parameter count, validated (:mod:`models.checkpoint`)."""

from __future__ import annotations

import argparse
import json
from typing import Sequence

from certify.core.errors import run_command
from certify.sources.checkpoint import load_checkpoint
from models.checkpoint import build_model


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.checkpoint",
                                description="Inspect a certify-attention checkpoint.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sh = sub.add_parser("show", help="print the config and the tensor shapes (validates them)")
    sh.add_argument("checkpoint", help="stem, .json, .safetensors, .pt or .pth")
    sh.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = p.parse_args(argv)
    cfg, tensors = load_checkpoint(args.checkpoint)
    model = build_model(cfg, tensors)
    shapes = {k: list(v.shape) for k, v in tensors.items()}
    info = {"config": cfg, "tensors": shapes,
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "guarantee": getattr(getattr(model, "guarantee", None), "value", None)}
    if args.json:
        print(json.dumps(info))
    else:
        for k in sorted(cfg):
            print(f"{k:>13}: {json.dumps(cfg[k])}")
        print(f"{'guarantee':>13}: {info['guarantee']}")
        print(f"{'parameters':>13}: {info['parameters']}")
        for k, s in shapes.items():
            print(f"  {k}: {tuple(s)} {str(tensors[k].dtype).replace('torch.', '')}")
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """``main`` with the project's exit-code convention (``python -m models.checkpoint``)."""
    return run_command("models.checkpoint", main, argv)
