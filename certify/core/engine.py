"""Run independent tasks in process or on Ray, with one merge order.

An :class:`Engine` maps a module-level function over a list of argument
tuples and returns the results *in the order of the list*, whatever the
number of workers and whatever order the tasks finish in, so a merged
certificate does not depend on the worker count.

* ``workers <= 1`` and no address: plain in-process loop (nothing to start).
* ``workers = N``: a local Ray started for the run (``ray.init(num_cpus=N)``),
  shut down by :meth:`Engine.close`.
* ``address``: join an existing cluster (``ray.init(address=...)``): a head's
  GCS ``HOST:PORT`` or the Ray client server ``ray://HOST:PORT``. The address
  is checked first within a bounded time (:mod:`certify.core.ray_address`:
  form, name, TCP, a gRPC answer from Ray; ``CERTIFY_RAY_CONNECT_SECONDS``,
  default 10 s), and Ray's own connect timeouts are set to the same bound, so
  an unreachable or malformed address is one line (exit 2), never minutes of
  retries. The worker nodes need this package importable (``pip install`` it
  there, or a shared checkout on ``PYTHONPATH``).

Every task runs with one thread (``OMP/OPENBLAS/MKL_NUM_THREADS=1``, torch
and threadpoolctl limited to 1). Ray usage reporting is off
(``RAY_USAGE_STATS_ENABLED=0``). A task whose worker process dies is retried
(``max_retries``); its result is taken once, from the attempt that finished,
so nothing is lost or counted twice. Progress (tasks done) is reported on
stderr as results arrive from any worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "RAY_USAGE_STATS_ENABLED": "0"}
ROOT = str(Path(__file__).resolve().parent.parent.parent)
#: local workers per core at most (``--workers``): each is a process of its own,
#: so beyond a few per core they only wait, and start-up grows with their number
WORKERS_PER_CORE = 4


def cores() -> int:
    """The cores this process may run on (its CPU affinity, else the count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):                       # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def max_local_workers() -> int:
    """The largest ``--workers`` of a local run: :data:`WORKERS_PER_CORE` x the cores."""
    return WORKERS_PER_CORE * cores()


def _call_one_thread(fn: Callable, args: tuple) -> Any:
    """Run ``fn(*args)`` with every thread pool limited to one thread."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        try:
            import torch
            prev = torch.get_num_threads()
            torch.set_num_threads(1)
            stack.callback(torch.set_num_threads, prev)
        except ImportError:                                  # pragma: no cover
            pass
        try:
            from threadpoolctl import threadpool_limits
            stack.enter_context(threadpool_limits(1))
        except ImportError:                                  # pragma: no cover
            pass
        return fn(*args)


def _token_mode() -> None:
    """Join in Ray's token mode (the cluster asked for a token and one is at hand,
    see :func:`certify.core.ray_address.check`); Ray reads its mode when it is
    imported, so its configuration is refreshed as Ray's own set-up does."""
    os.environ["RAY_AUTH_MODE"] = "token"
    try:
        from ray._private.authentication.authentication_token_setup import _enable_token_auth
        _enable_token_auth()
    except (ImportError, AttributeError):           # pragma: no cover - another Ray layout
        pass


class Engine:
    """``map(fn, args_list)`` in process (default) or on Ray."""

    def __init__(self, workers: int = 1, address: str | None = None, *, max_retries: int = 3,
                 progress: bool = True) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        self.workers = workers
        self.address = address
        self.max_retries = max_retries
        self.progress = progress
        self._ray = None
        self._remote = None
        if address or workers > 1:
            self._start()

    @property
    def uses_ray(self) -> bool:
        return self._ray is not None

    def _start(self) -> None:
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        if self.address:
            from certify.core import ray_address
            needs_token = ray_address.check(self.address).needs_token
            bound = str(max(1, int(ray_address.connect_seconds())))
            for k in ("RAY_gcs_server_request_timeout_seconds", "RAY_gcs_rpc_server_reconnect_timeout_s",
                      "RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S", "RAY_CLIENT_MAX_CONNECTION_TIMEOUT_S"):
                os.environ.setdefault(k, bound)
        import ray

        if self.address and needs_token and "RAY_AUTH_MODE" not in os.environ:
            _token_mode()
        env = dict(_ONE_THREAD)
        pp = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = ROOT + (os.pathsep + pp if pp else "")
        kw: dict[str, Any] = {"runtime_env": {"env_vars": env}, "log_to_driver": False,
                              "configure_logging": False}
        self._owned = not ray.is_initialized()
        if not self._owned:                      # a Ray already running in this process
            pass
        elif self.address:
            try:
                ray.init(address=self.address.strip(), **kw)
            except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
                from certify.core.errors import InputError
                line = " ".join(str(exc).split())[:300] or type(exc).__name__
                raise InputError(f"--ray-address {self.address}: Ray could not join the "
                                 f"cluster ({line})") from None
            self.workers = max(self.workers, int(ray.cluster_resources().get("CPU", 1)))
        else:
            # a local Ray talks to itself over loopback only
            ray.init(num_cpus=self.workers, include_dashboard=False,
                     _node_ip_address="127.0.0.1", **kw)
        self._ray = ray
        self._remote = ray.remote(num_cpus=1, max_retries=self.max_retries,
                                  retry_exceptions=False)(_call_one_thread)

    def map(self, fn: Callable, args_list: Sequence[tuple], *, label: str = "tasks") -> list:
        """Results of ``fn(*args)`` for each tuple, in the order of ``args_list``."""
        from tqdm.auto import tqdm

        bar = tqdm(total=len(args_list), desc=label, unit="task", file=sys.stderr,
                   disable=not self.progress, leave=False)
        try:
            if self._ray is None:
                out = []
                for a in args_list:
                    out.append(_call_one_thread(fn, tuple(a)))
                    bar.update(1)
                return out
            ray = self._ray
            fn_ref = ray.put(fn)
            refs = [self._remote.remote(fn_ref, tuple(a)) for a in args_list]
            index = {r.hex(): i for i, r in enumerate(refs)}
            results: list[Any] = [None] * len(refs)
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for r in done:
                    results[index[r.hex()]] = ray.get(r)
                    bar.update(1)
            return results
        finally:
            bar.close()

    def close(self) -> None:
        if self._ray is not None:
            if self._owned:
                self._ray.shutdown()
            self._ray = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def init_local(workers: int) -> None:
    """Start a local Ray (one thread per task, usage reporting off) that later
    engines in this process reuse instead of starting their own."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    env = dict(_ONE_THREAD)
    pp = os.environ.get("PYTHONPATH", "")
    env["PYTHONPATH"] = ROOT + (os.pathsep + pp if pp else "")
    ray.init(num_cpus=workers, include_dashboard=False, _node_ip_address="127.0.0.1",
             runtime_env={"env_vars": env},
             log_to_driver=False, configure_logging=False)
