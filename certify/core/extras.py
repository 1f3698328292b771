"""Which optional extra of the package provides a module.

The base install (``pip install certify-attention``) is what a reviewer needs:
``certify verify`` and ``certify report`` (numpy, python-flint, jsonschema,
matplotlib). Everything that produces a certificate needs an extra (the table
in ``pyproject.toml``): ``[solvers]`` (scipy, cvxpy, HiGHS, mpmath, ...),
``[replay]`` (safetensors: ``verify --replay-extraction`` of a safetensors
checkpoint, no torch), ``[models]`` (torch, ``[replay]`` and the solvers), ``[libraries]`` (the
third-party attention libraries that check an extracted kernel), ``[service]``
(``certify serve``), ``[ray]`` (a Ray cluster); ``[all]`` holds them all. A
command that reaches a module of a missing extra ends with one line naming
the extra to install (exit 2), never a traceback.
"""

from __future__ import annotations

#: top-level module -> the extra that installs it
EXTRA_OF: dict[str, str] = {
    **dict.fromkeys(("scipy", "cvxpy", "clarabel", "scs", "highspy", "mpmath", "tqdm", "threadpoolctl"),
                    "solvers"),
    "torch": "models",
    "safetensors": "replay",
    **dict.fromkeys(("performer_pytorch", "linear_attention_transformer", "fla", "einops"), "libraries"),
    **dict.fromkeys(("fastapi", "uvicorn", "httptools", "uvloop", "sqlalchemy", "alembic", "jinja2",
                     "multipart", "python_multipart", "psycopg", "starlette"), "service"),
    "ray": "ray",
}
DIST = "certify-attention"


def extra_for(exc: BaseException) -> str | None:
    """The extra whose absence raised ``exc`` (a ``ModuleNotFoundError``), or None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    return EXTRA_OF.get(exc.name.split(".")[0])


def missing_line(exc: BaseException) -> str | None:
    """One line saying which extra to install, or None when ``exc`` is not a
    module of an extra (a genuinely missing module stays an internal error)."""
    extra = extra_for(exc)
    if extra is None:
        return None
    import importlib.util
    import sys
    name = str(getattr(exc, "name", "") or "")
    top = name.split(".")[0]
    try:
        installed = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        installed = False
    if installed:        # the package is there: one of its own modules failed, not a missing extra
        return (f"{top} is installed for {sys.executable} but its module {name} cannot be imported (a broken or "
                f"partial install of the [{extra}] extra): pip install --force-reinstall '{DIST}[{extra}]'")
    where = (" (under `ray job submit`, name the Python of the environment that has it by its absolute path)"
             if extra == "ray" else "")
    return (f"the [{extra}] extra is not installed for this Python, {sys.executable} (no module {top}): "
            f"pip install '{DIST}[{extra}]' into it, or run the Python that has it{where}")
