"""Installed versions of distributions, read without importing them (``certify
--version`` and every certificate's environment)."""

from __future__ import annotations

import os
import sys


def installed_versions(names: tuple[str, ...]) -> dict[str, str | None]:
    """The installed version of each distribution (None when absent): the version in the
    name of the first ``NAME-VERSION.dist-info`` folder on ``sys.path`` (the wheel format's
    name, what ``importlib.metadata`` reads first), else ``importlib.metadata.version`` (an
    egg or another layout). One directory listing per path entry instead of a metadata
    search per name: about 1 ms instead of 25 in every command's start."""
    import re

    def key(name: str) -> str:
        return re.sub(r"[-_.]+", "_", name).lower()

    want = {key(n): n for n in names}
    out: dict[str, str | None] = {}
    for entry in sys.path:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in listing:
            stem, ext = os.path.splitext(folder)
            name, _, version = stem.partition("-")
            if ext == ".dist-info" and version and want.get(key(name)) not in (None, *out):
                out[want[key(name)]] = version
    for name in names:
        if name not in out:
            from importlib import metadata
            try:
                out[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                out[name] = None
    return {n: out[n] for n in names}
