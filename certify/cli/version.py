"""``certify --version``: the package's version, Python's, those of numpy,
python-flint and torch (read from their installed metadata, none imported), and
whether the compiled kernels are in use (:mod:`certify.core.compiled`); with
``--json`` one JSON object. Also the install's check that the kernels load
(``make install``)."""

from __future__ import annotations

import json
import sys

from certify.core import compiled
from certify.core.versions import installed_versions

PACKAGES = ("numpy", "python-flint", "torch")


def document() -> dict:
    v = installed_versions(("certify-attention", *PACKAGES))
    return {"certify-attention": v.pop("certify-attention"), "python": sys.version.split()[0],
            "packages": v, "compiled": compiled.status()}


def text(doc: dict) -> str:
    pk = ", ".join(f"{k} {v}" if v else f"{k} not installed" for k, v in doc["packages"].items())
    return "\n".join([f"certify-attention {doc['certify-attention']} (python {doc['python']})", pk,
                      f"compiled kernels: {compiled.summary(doc['compiled'])}"])


def main(as_json: bool) -> int:
    doc = document()
    print(json.dumps(doc) if as_json else text(doc))
    return 0


def install_check() -> int:
    """After ``pip install``: a warning on stderr for each compiled kernel that could
    not be built or loaded (exit 0 either way: the pure paths work)."""
    bad = compiled.unloadable()
    if bad:
        print("WARNING: the compiled kernels " + ", ".join(bad) + " could not be built or loaded "
              f"({next(iter(bad.values()))}); certify works without them on the pure paths, which give the "
              "same answers, slower (the exact rank about 1.2x, the canonical extraction's exp about 26x). "
              "Install a C compiler (e.g. apt-get install gcc python3-dev) and re-run make install.",
              file=sys.stderr)
    return 0
