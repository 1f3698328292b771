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

#: the processes a check may use (:func:`workers`); a setting, not a result: no check writes it
_WORKERS: contextvars.ContextVar[int] = contextvars.ContextVar("certify_checker_workers", default=1)


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


def _worker(fn: Callable[[Any], list[str]], items: Sequence[Any], idx: Sequence[int], conn: Any) -> None:
    """In a forked process: ``fn`` of the pieces ``idx`` (inherited with the fork, nothing
    sent), ``[(i, result)]`` or ``("error", text)`` sent back once."""
    try:
        out: Any = [(i, fn(items[i])) for i in idx]
    except BaseException as exc:                              # noqa: BLE001 - reported to the parent
        out = ("error", f"{type(exc).__name__}: {exc}"[:500])
    conn.send(out)
    conn.close()


def first_problem(fn: Callable[[Any], list[str]], items: Sequence[Any]) -> list[str]:
    """The first non-empty ``fn(item)`` in the order of ``items``, or ``[]``. The
    plain loop stops there; on ``n`` forked processes (piece ``i`` on process ``i mod
    n``) every piece runs and the results are read in order, so the answer is the
    same. A process that dies or fails is an exception (the claim fails)."""
    n = min(_WORKERS.get(), os.cpu_count() or 1, len(items))
    if n <= 1 or not can_fork():
        for item in items:
            found = fn(item)
            if found:
                return found
        return []
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    procs, pipes = [], []
    try:
        for w in range(n):
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, args=(fn, items, range(w, len(items), n), send), daemon=True)
            p.start()
            send.close()
            procs.append(p)
            pipes.append(recv)
        results: dict[int, list[str]] = {}
        for p, recv in zip(procs, pipes):
            try:
                got = recv.recv()
            except EOFError:
                p.join()
                raise RuntimeError(f"a checker process died (exit code {p.exitcode})") from None
            if isinstance(got, tuple):
                raise RuntimeError(f"a checker process failed: {got[1]}")
            results.update(got)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
    for i in range(len(items)):
        if results[i]:
            return results[i]
    return []
