"""``CERTIFY_VERDICT_EXIT=0``: a verdict is a result, not a failure (batch systems).

A scheduler marks a job failed by its exit code: a Ray job whose certificate
holds a refuted claim (``certify`` exit 1), or whose verify holds only under
named assumptions (exit 4), would show as FAILED although the command did its
work and printed the verdict. With ``CERTIFY_VERDICT_EXIT=0`` in its
environment, such a command exits 0 after one line on stderr naming the exit
code it stands for (``certify <command>: verdict: exit 1 (...)``); bad input
(2), input outside what can be certified (3) and internal errors still fail the
job. ``--json`` output is unchanged (it carries the verdict and ``exit_code``).
"""

from __future__ import annotations

import os
import sys

#: the exit codes that report a verdict rather than a failure to run
VERDICT_CODES = {1: "some claim refuted or unknown (verify: some claim fails its check)",
                 4: "every claim holds under the named assumptions printed"}
ENV = "CERTIFY_VERDICT_EXIT"


def verdict_exit(name: str, code: int) -> int:
    """``code``, or 0 for a verdict's exit code when ``CERTIFY_VERDICT_EXIT=0``."""
    if code not in VERDICT_CODES or os.environ.get(ENV) != "0":
        return code
    print(f"certify {name}: verdict: exit {code} ({VERDICT_CODES[code]}); exit status 0 ({ENV}=0)",
          file=sys.stderr)
    return 0
