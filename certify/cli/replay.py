"""``python -m certify.cli.replay``: the worker process of ``certify verify
--replay-extraction`` (:mod:`certify.checkpoints.replay`). Reads a JSON list of
jobs on stdin, prints one JSON object on stdout. In an install without the
``[models]`` extra (torch) it prints one line naming the extra on stderr, which
``verify`` reports as the reason the replay did not run."""

from __future__ import annotations

import json
import sys


def main() -> int:
    try:
        import torch  # noqa: F401 - every replayed extraction runs in torch

        from certify.checkpoints.replay import replay
    except ModuleNotFoundError as exc:
        from certify.core.extras import extra_for
        if extra_for(exc) is None:
            raise
        print(f"the replay of extraction needs the [models] extra (no module {exc.name.split('.')[0]}): "
              f"pip install 'certify-attention[models]'", file=sys.stderr)
        return 2
    jobs = json.loads(sys.stdin.read())
    print(json.dumps(replay(jobs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
