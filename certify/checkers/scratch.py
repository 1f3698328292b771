"""Results computed once within one certificate's check, and nowhere else.

The checker keeps no state at module level: nothing it computed for one
certificate can change the answer for another (``verify A B`` gives each the exit
it gets alone). What a check may reuse between the claims of one certificate (the
span check and minor of a matrix that two claims share, a stated Gram found equal
to the Gram of replayed features, a file's sha256 while it is unchanged) lives in
a :class:`Scratch` created when that certificate's check starts and dropped when
it ends (:func:`session`), and every entry is keyed by complete content: an
array's dtype, shape and the sha256 of its bytes (:func:`array_key`), never a
name or a hash of part of it.

Outside a session (a direct call of a checker function) nothing is kept: each
call computes. ``tests/test_check_isolation.py`` verifies certificates and then
inspects every checker module's globals: no mutable global may have changed, no
``functools`` cache may exist, and the session variable is back at its default.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import hashlib
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterator, TypeVar

if TYPE_CHECKING:                       # numpy is loaded where an array is keyed, not at import
    import numpy as np

T = TypeVar("T")

#: how many large shared values (:meth:`Scratch.recent`) a check keeps at once
RECENT = 4

#: the scratch of the certificate being checked (None outside a check)
_CURRENT: contextvars.ContextVar[Scratch | None] = contextvars.ContextVar("certify_checker_scratch",
                                                                          default=None)


class Scratch:
    """The results one certificate's check shares between its claims (module docstring)."""

    def __init__(self) -> None:
        self._store: dict[Hashable, Any] = {}
        self._recent: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value kept under ``key``, computed by ``compute()`` the first time."""
        if key not in self._store:
            self._store[key] = compute()
        return self._store[key]

    def recent(self, key: Hashable, compute: Callable[[], T], keep: int = RECENT) -> T:
        """:meth:`get` for a large value that neighbouring claims share (the features file
        of one head, a Gram as an exact matrix: the head's exact rank, eps rank and
        nonnegativity are consecutive claims): the ``keep`` most recently used such values
        are kept, not every one the certificate has (384 heads' features are gigabytes).
        The value is the same either way (recomputed when it was let go)."""
        if key in self._recent:
            self._recent.move_to_end(key)
            return self._recent[key]
        value = self._recent[key] = compute()
        while len(self._recent) > keep:
            self._recent.popitem(last=False)
        return value

    def lookup(self, key: Hashable, default: Any = None) -> Any:
        return self._store.get(key, default)

    def put(self, key: Hashable, value: Any) -> None:
        self._store[key] = value

    def __len__(self) -> int:
        return len(self._store) + len(self._recent)


@contextlib.contextmanager
def session(scratch: Scratch | None = None) -> Iterator[Scratch]:
    """A check's scratch for the duration of the ``with`` block: a new one unless the
    caller passes its own (a producer that computes with the checker's functions and
    then checks its own certificate in the same process shares one with that check)."""
    s = scratch if scratch is not None else Scratch()
    token = _CURRENT.set(s)
    try:
        yield s
    finally:
        _CURRENT.reset(token)


def current() -> Scratch | None:
    """The scratch of the check in progress, or None (then nothing may be kept)."""
    return _CURRENT.get()


def remember(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, kept for the rest of the current check under ``key`` (complete
    content, :func:`array_key`); computed afresh outside a check."""
    s = _CURRENT.get()
    return compute() if s is None else s.get(key, compute)


def recent(key: Hashable, compute: Callable[[], T], keep: int = RECENT) -> T:
    """``compute()``, kept while it is among the ``keep`` most recently used large values of
    the current check (:meth:`Scratch.recent`); computed afresh outside a check."""
    s = _CURRENT.get()
    return compute() if s is None else s.recent(key, compute, keep)


def content_key(obj: Any) -> str:
    """The complete content of a JSON value (a certificate's integer rows, say) as a key:
    the sha256 of its compact JSON text. A key the size of a hash, where the text itself
    (hundreds of kB for a 128 x 128 Gram) kept for every claim of a large certificate was
    more memory than the certificate."""
    import json
    return hashlib.sha256(json.dumps(obj, separators=(",", ":")).encode()).hexdigest()


def array_key(A: np.ndarray) -> tuple[str, tuple[int, ...], str]:
    """The complete content of an array: its dtype, its shape and the sha256 of its
    bytes in row-major order (little-endian)."""
    import numpy as np
    a = np.ascontiguousarray(A)
    a = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return a.dtype.str, tuple(int(n) for n in a.shape), hashlib.sha256(a.data.cast("B")).hexdigest()
