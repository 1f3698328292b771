"""``python -m models.train``: the command lives in :mod:`certify.cli.train`."""

from certify.cli.train import run

raise SystemExit(run())
