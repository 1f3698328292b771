"""``json.dumps(obj, indent=1)``, the same text, faster on long lists of numbers.

Certificates are written with one item per line (``indent=1``), which makes the
standard library use its pure-Python encoder: a certificate with exact Gram
matrices (hundreds of thousands of integers) takes seconds. :func:`dumps_indent1`
writes the same bytes (a list whose items are all ``int`` or all ``str`` is
joined in one step; strings go through the standard library's C escaper) and falls
back to ``json.dumps`` for anything outside plain JSON types (other key types,
subclasses, tuples), so its output is always ``json.dumps(obj, indent=1)``.

>>> dumps_indent1({"a": [1, -2], "b": {"c": "x\\u00e9", "d": [1.5, None, True]}, "e": []}) == \\
...     json.dumps({"a": [1, -2], "b": {"c": "x\\u00e9", "d": [1.5, None, True]}, "e": []}, indent=1)
True
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _esc
from typing import Any

__all__ = ["dumps_indent1"]


class _Fallback(Exception):
    pass


def _float(v: float) -> str:
    if v != v:
        return "NaN"
    if v == float("inf"):
        return "Infinity"
    if v == float("-inf"):
        return "-Infinity"
    return float.__repr__(v)


def _scalar(v: Any) -> str:
    t = type(v)
    if t is str:
        return _esc(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if t is int:
        return int.__repr__(v)
    if t is float:
        return _float(v)
    raise _Fallback


def _encode(o: Any, level: int, out: list[str]) -> None:
    t = type(o)
    if t is dict:
        if not o:
            out.append("{}")
            return
        inner = "\n" + " " * (level + 1)
        out.append("{")
        first = True
        for k, v in o.items():
            if type(k) is not str:
                raise _Fallback
            out.append(inner if first else "," + inner)
            first = False
            out.append(_esc(k))
            out.append(": ")
            _encode(v, level + 1, out)
        out.append("\n" + " " * level + "}")
    elif t is list:
        if not o:
            out.append("[]")
            return
        inner = "\n" + " " * (level + 1)
        kinds = set(map(type, o))
        if kinds == {int}:
            out.append("[" + inner + ("," + inner).join(map(int.__repr__, o)) + "\n" + " " * level + "]")
            return
        if kinds == {str}:
            out.append("[" + inner + ("," + inner).join(map(_esc, o)) + "\n" + " " * level + "]")
            return
        out.append("[")
        for i, v in enumerate(o):
            out.append(inner if i == 0 else "," + inner)
            _encode(v, level + 1, out)
        out.append("\n" + " " * level + "]")
    else:
        out.append(_scalar(o))


def dumps_indent1(obj: Any) -> str:
    """Exactly ``json.dumps(obj, indent=1)`` (module docstring)."""
    out: list[str] = []
    try:
        _encode(obj, 0, out)
    except _Fallback:
        return json.dumps(obj, indent=1)
    return "".join(out)
