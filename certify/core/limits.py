"""Documented input limits, checked before any work starts.

Every size a user can type or put in a file is bounded, so that no input makes
a command hang or exhaust memory: the check fails with one line on stderr and
exit 2. The defaults admit the paper's scale targets (q up to 24, m up to 24,
kernel matrices up to n = 8192). A user who legitimately needs more raises a
limit with an environment variable ``CERTIFY_LIMIT_<NAME>`` (upper case), e.g.
``CERTIFY_LIMIT_MATRIX_N=16384 certify rank big.npy``.

=================  =========  ===================================================
name               default    bounds
=================  =========  ===================================================
rank               1024       feasibility ``--rank`` and ``--sweep`` HI
cube_m             24         ``--tokens cube:M``
family_m           24         family parameters M (code length) and m (bits)
family_q           24         family parameters q (queries) and s, h
family_size        1000000    ``--size`` and inputs in a family
chain_n            10000      chain family length ``--n``
matrix_n           8192       rows and columns of a kernel matrix
vocab              262144     rows of a model's embedding (its vocabulary), from the header
sequence_tokens    262144     token ids of ``checkpoint --sequences`` (S x T; an ``.npy`` from its header)
number_chars       4000       characters of one number in a CSV/JSON/option
number_exponent    4000       decimal exponent of a number (``1e-4000``)
time_limit         604800     seconds for any ``--time-limit`` (one week)
=================  =========  ===================================================
"""

from __future__ import annotations

import math
import os
import re
from fractions import Fraction

from certify.core.errors import InputError

#: name -> (default, what it bounds)
DEFAULTS: dict[str, tuple[int, str]] = {
    "rank": (1024, "feature dimension (--rank, --sweep)"),
    "cube_m": (24, "cube dimension M in cube:M"),
    "family_m": (24, "family code length M / token bits m"),
    "family_q": (24, "family queries q (and levels s, weight h)"),
    "family_size": (1_000_000, "inputs in a family (--size)"),
    "chain_n": (10_000, "chain family length n"),
    "matrix_n": (8192, "rows/columns of a kernel matrix"),
    "vocab": (262_144, "rows of a model's embedding (its vocabulary)"),
    "sequence_tokens": (262_144, "token ids of checkpoint --sequences (S x T)"),
    "number_chars": (4000, "characters of one number"),
    "number_exponent": (4000, "decimal exponent of one number"),
    "time_limit": (604_800, "seconds of a time limit"),
}


def limit(name: str) -> int:
    """The limit ``name``: ``CERTIFY_LIMIT_<NAME>`` when set, else the default."""
    default, _ = DEFAULTS[name]
    raw = os.environ.get(f"CERTIFY_LIMIT_{name.upper()}")
    if raw is None:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise InputError(f"CERTIFY_LIMIT_{name.upper()} must be an integer, got {raw!r}") from None
    if v < 1:
        raise InputError(f"CERTIFY_LIMIT_{name.upper()} must be >= 1, got {v}")
    return v


def _hint(name: str) -> str:
    return f"limit {name} = {limit(name)}; raise it with CERTIFY_LIMIT_{name.upper()}"


def check_int(name: str, value: int, what: str, *, low: int = 1) -> int:
    """``low <= value <= limit(name)`` or :class:`InputError`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{what} must be an integer, got {value!r}")
    if value < low:
        raise InputError(f"{what} must be >= {low}, got {value}")
    if value > limit(name):
        raise InputError(f"{what} = {value} exceeds the {_hint(name)}")
    return value


def check_matrix_shape(rows: int, cols: int, what: str = "kernel matrix") -> None:
    n = limit("matrix_n")
    if rows > n or cols > n:
        raise InputError(f"{what} is {rows} x {cols}, over the {_hint('matrix_n')}")


_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
_RATIO = re.compile(r"^\s*[+-]?\d+\s*/\s*[+-]?\d+\s*$")


def parse_exact(text: str, what: str) -> Fraction:
    """An exact number from text (``3``, ``-1/7``, ``0.001``, ``1e-3``), with its
    length and exponent bounded first, so ``1e999999999`` is refused at once."""
    if not isinstance(text, str):
        raise InputError(f"{what} must be a number, got {text!r}")
    s = text.strip()
    if len(s) > limit("number_chars"):
        raise InputError(f"{what} has {len(s)} characters, over the {_hint('number_chars')}")
    m = _NUMBER.match(s)
    if m:
        if m.group(3):
            exp = m.group(3)[1:].lstrip("+-").lstrip("0") or "0"
            if len(exp) > 9 or int(exp) > limit("number_exponent"):
                raise InputError(f"{what} = {s[:40]!r} has an exponent over the "
                                 f"{_hint('number_exponent')}")
    elif not _RATIO.match(s):
        raise InputError(f"{what} must be an exact number like 3, -1/7, 0.001 or 1e-3, "
                         f"got {s[:40]!r}")
    try:
        return Fraction(s.replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        raise InputError(f"{what} must be a finite number, got {s[:40]!r}") from None


def parse_eps(text: str, what: str = "--eps") -> Fraction:
    """A positive exact eps."""
    v = parse_exact(text, what)
    if v <= 0:
        raise InputError(f"{what} must be > 0, got {text}")
    return v


def check_time_limit(value: float | None, what: str = "--time-limit") -> float | None:
    """Finite, positive and at most the ``time_limit`` limit (None passes)."""
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(f"{what} must be a finite number of seconds, got {value!r}")
    if value <= 0:
        raise InputError(f"{what} must be positive, got {value}")
    if value > limit("time_limit"):
        raise InputError(f"{what} = {value} exceeds the {_hint('time_limit')}")
    return float(value)


def table() -> list[tuple[str, int, str]]:
    """(name, current value, what it bounds) for ``--help`` and the README."""
    return [(k, limit(k), d) for k, (_, d) in DEFAULTS.items()]
