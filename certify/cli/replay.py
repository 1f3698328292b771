"""``python -m certify.cli.replay``: the worker process of ``certify verify
--replay-extraction`` (:mod:`certify.checkpoints.replay`). Reads a JSON list of
jobs on stdin, prints one JSON object on stdout.

The canonical extraction of a safetensors checkpoint needs no torch: the base
install plus the ``[replay]`` extra (safetensors) replays it. A torch pickle
(``.pt``, ``.bin``) or a ``models/`` checkpoint (a torch module) needs the
``[models]`` extra: such a job's result names it. A module missing before any
job runs is one line on stderr naming its extra, which ``verify`` reports as the
reason the replay did not run."""

from __future__ import annotations

import json
import sys


def main() -> int:
    import gc
    # a process that ends when its work does: the collector as the command line tunes it
    # (certify/__main__.py; about 8% of a torch replay's CPU)
    gc.set_threshold(100_000, 10, 10)
    try:
        from certify.checkpoints.replay import replay
    except ModuleNotFoundError as exc:
        from certify.core.extras import extra_for
        extra = extra_for(exc)
        if extra is None:
            raise
        missing = (exc.name or "?").split(".")[0]
        print(f"the replay of extraction needs the [{extra}] extra (no module {missing}): "
              f"pip install 'certify-attention[{extra}]'", file=sys.stderr)
        return 2
    jobs = json.loads(sys.stdin.read())
    print(json.dumps(replay(jobs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
