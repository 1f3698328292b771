"""``python -m certify demo``: the main job on the built-in defaults."""

from __future__ import annotations

import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from certify import families

    print("certify-attention demo: the Sec. 5.1 family", file=sys.stderr)
    return families.main(["show", "paper-5.1"])


if __name__ == "__main__":
    from certify.errors import run_command
    sys.exit(run_command("certify.demo", main))
