"""The checker's own parallelism, off unless asked: independent pieces of one
claim's check (the transcript replay's blocks of assignments) on processes forked
from this one, read in the pieces' order, so the answer -- the first problem
found, or none -- is the plain loop's, whatever the number of processes.

``certify verify --workers N`` and a producer's self-check under ``--workers N``
ask for it (:func:`workers`); anywhere else, and where ``fork`` is not the
platform's or a Ray runs in this process, :func:`first_problem` is the plain loop.
Only the standard library is used; a worker that dies is an exception, which
fails the claim (never a pass)."""

from __future__ import annotations

import contextvars
import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

_WORKERS: contextvars.ContextVar[int] = contextvars.ContextVar("certify_checker_workers", default=1)

#: the running map's function and items: set before the pool forks, so each worker
#: finds them in its copy of this module (nothing is sent to it)
_JOB: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


@contextmanager
def workers(n: int) -> Iterator[None]:
    """Checks inside the block may use ``n`` processes."""
    token = _WORKERS.set(max(1, int(n)))
    try:
        yield
    finally:
        _WORKERS.reset(token)


def can_fork() -> bool:
    """Processes can be forked from this one: Linux's ``fork`` is the start method
    and no Ray runs in this process (its threads and sockets must not be copied)."""
    import multiprocessing as mp

    if sys.platform != "linux" or "fork" not in mp.get_all_start_methods():
        return False
    if mp.get_start_method(allow_none=True) not in (None, "fork"):
        return False
    ray_mod = sys.modules.get("ray")
    return not (ray_mod is not None and ray_mod.is_initialized())


def _run(i: int) -> Any:
    assert _JOB is not None, "a forked piece outside a map"
    fn, items = _JOB
    return fn(items[i])


def first_problem(fn: Callable[[Any], list[str]], items: Sequence[Any]) -> list[str]:
    """The first non-empty ``fn(item)`` in the order of ``items``, or ``[]``. The
    plain loop stops there; on ``n`` forked processes every piece may run, and
    their results are read in order, so the answer is the same."""
    n = min(_WORKERS.get(), os.cpu_count() or 1, len(items))
    if n <= 1 or not can_fork():
        for item in items:
            found = fn(item)
            if found:
                return found
        return []
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    global _JOB
    prev, _JOB = _JOB, (fn, items)
    pool = ProcessPoolExecutor(n, mp_context=mp.get_context("fork"))
    try:
        for found in pool.map(_run, range(len(items))):
            if found:
                return found
        return []
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _JOB = prev
