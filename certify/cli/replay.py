"""``python -m certify.cli.replay``: the worker process of ``certify verify
--replay-extraction`` (:mod:`certify.checkpoints.replay`). Reads a JSON list of
jobs on stdin, prints one JSON object on stdout."""

from __future__ import annotations

import json
import sys

from certify.checkpoints.replay import replay


def main() -> int:
    jobs = json.loads(sys.stdin.read())
    print(json.dumps(replay(jobs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
