"""The optional compiled kernels (``[[tool.setuptools.ext-modules]]`` in
``pyproject.toml``): which are built, and which are in use.

Each is optional: without a C compiler the install builds none of them, and
every import site falls back to a pure path (numpy, python-flint, arb) that
gives the same answers, slower (the exact rank about 1.2x, the correctly
rounded exp about 26x). ``CERTIFY_NO_COMPILED=1`` switches all four off at
their import sites (read once, when the module is imported), so that the pure
paths can be run and compared on a machine where the kernels are built;
``CERTIFY_CANONICAL_KERNEL=0`` switches off the canonical extraction's alone.

:func:`status` looks for the built files without importing them (``certify
--version`` stays fast); :func:`unloadable` imports each, for the install's
check (``make install``).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
from pathlib import Path

#: module -> what it computes (the pure path named after the semicolon)
KERNELS = {
    "solvers.exact._modkernel": "residues mod p of the exact rank; numpy and python-flint otherwise",
    "certify.checkers.kernel._spankernel": "the checker's column-span steps mod p; its general exact path otherwise",
    "certify.transcript._ballkernel": "the transcript enumeration's fused passes; numpy otherwise",
    "models.canonical._crkernel": "correctly rounded exp, softmax, ... of the canonical extraction; arb and "
                                  "numpy otherwise",
}

#: the switch honoured at every import site
ENV = "CERTIFY_NO_COMPILED"


def disabled() -> bool:
    """Whether ``CERTIFY_NO_COMPILED`` switches the compiled kernels off (any value but
    empty or ``0``)."""
    return os.environ.get(ENV, "") not in ("", "0")


def _file(module: str) -> Path | None:
    """The built extension file of ``module``, found without importing its package."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        folder = Path(root, *rest[:-1])
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            f = folder / (rest[-1] + suffix)
            if f.is_file():
                return f
    return None


def status() -> dict[str, str]:
    """Module -> ``in use``, ``not built`` or ``switched off (CERTIFY_NO_COMPILED)``
    (``... (CERTIFY_CANONICAL_KERNEL=0)`` for the canonical extraction's)."""
    out = {}
    for module in KERNELS:
        if _file(module) is None:
            out[module] = "not built"
        elif disabled():
            out[module] = f"switched off ({ENV})"
        elif module == "models.canonical._crkernel" and os.environ.get("CERTIFY_CANONICAL_KERNEL", "1") == "0":
            out[module] = "switched off (CERTIFY_CANONICAL_KERNEL=0)"
        else:
            out[module] = "in use"
    return out


def summary(st: dict[str, str] | None = None) -> str:
    """One line: ``in use (4 of 4)``, or which are not and why."""
    st = status() if st is None else st
    used = [m for m, s in st.items() if s == "in use"]
    if len(used) == len(st):
        return f"in use ({len(used)} of {len(st)})"
    others = "; ".join(f"{m.rsplit('.', 1)[-1]} {s}" for m, s in st.items() if s != "in use")
    return f"{len(used)} of {len(st)} in use ({others}; the pure paths give the same answers, slower)"


def unloadable() -> dict[str, str]:
    """Module -> why it cannot be imported, for each kernel that is not importable
    (importing each: the install's check)."""
    out = {}
    for module in KERNELS:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            out[module] = " ".join(str(exc).split()) or type(exc).__name__
    return out
