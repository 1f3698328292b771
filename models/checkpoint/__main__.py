"""``python -m models.checkpoint``: the command is :mod:`certify.cli.model_checkpoint`."""

from certify.cli.model_checkpoint import run

raise SystemExit(run())
