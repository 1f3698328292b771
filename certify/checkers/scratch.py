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
call computes. ``tests/test_checker_state.py`` verifies certificates and then
inspects every checker module's globals: no mutable global may have changed, no
``functools`` cache may exist, and the session variable is back at its default.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from typing import Any, Callable, Hashable, Iterator, TypeVar

import numpy as np

T = TypeVar("T")

#: the scratch of the certificate being checked (None outside a check)
_CURRENT: contextvars.ContextVar[Scratch | None] = contextvars.ContextVar("certify_checker_scratch",
                                                                          default=None)


class Scratch:
    """The results one certificate's check shares between its claims (module docstring)."""

    def __init__(self) -> None:
        self._store: dict[Hashable, Any] = {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value kept under ``key``, computed by ``compute()`` the first time."""
        if key not in self._store:
            self._store[key] = compute()
        return self._store[key]  # type: ignore[no-any-return]

    def lookup(self, key: Hashable, default: Any = None) -> Any:
        return self._store.get(key, default)

    def put(self, key: Hashable, value: Any) -> None:
        self._store[key] = value

    def __len__(self) -> int:
        return len(self._store)


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


def array_key(A: np.ndarray) -> tuple[str, tuple[int, ...], str]:
    """The complete content of an array: its dtype, its shape and the sha256 of its
    bytes in row-major order (little-endian)."""
    a = np.ascontiguousarray(A)
    a = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return a.dtype.str, tuple(int(n) for n in a.shape), hashlib.sha256(a.data.cast("B")).hexdigest()
