"""Run independent tasks in process or on Ray, with one merge order.

An :class:`Engine` maps a module-level function over a list of argument
tuples and returns the results *in the order of the list*, whatever the
number of workers and whatever order the tasks finish in, so a merged
certificate does not depend on the worker count.

* ``workers <= 1`` and no address: plain in-process loop (nothing to start).
* ``workers = N``: a local Ray started for the run (``ray.init(num_cpus=N)``),
  shut down by :meth:`Engine.close` -- only when it pays. Before starting it,
  :meth:`Engine.map` predicts the tasks' CPU seconds (the caller's ``cost_s``, or
  the first task run in this process and timed) and compares one process
  (their sum) with Ray (:data:`RAY_START_S` to start, :data:`RAY_TASK_S` a task,
  the work spread over the workers); when Ray would not be faster the tasks run
  in this process and one line on stderr says so, with the numbers. On Ray,
  small tasks go in batches (a few per worker), each batch one Ray task.
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


#: wall seconds to start a local Ray and its first workers (each imports this
#: package): measured 17 s for ``ray.init`` and 16 s for the first task on the
#: shared two-core machine at load average 12 (benchmarks/bench_parallel.py, the
#: ``ray_start`` row); an idle machine needs less, so this errs toward one process.
#: ``CERTIFY_RAY_START_SECONDS`` replaces it.
RAY_START_S = 30.0
#: seconds one Ray task costs beyond its own work (scheduling, argument and
#: result transfer): 2 ms for an empty task, more with a family or a model to ship
RAY_TASK_S = 0.05


def ray_start_seconds() -> float:
    """:data:`RAY_START_S`, or ``CERTIFY_RAY_START_SECONDS`` when set (>= 0)."""
    raw = os.environ.get("CERTIFY_RAY_START_SECONDS")
    try:
        return max(0.0, float(raw)) if raw is not None else RAY_START_S
    except ValueError:
        return RAY_START_S


def pays(costs: Sequence[float], workers: int, start_s: float) -> tuple[bool, float, float]:
    """``(worth it, one process s, Ray s)`` for tasks of ``costs`` CPU seconds:
    one process takes their sum; Ray ``start_s``, then the work and
    :data:`RAY_TASK_S` a task spread over ``min(workers, cores, tasks)`` processes
    (never less than the largest task)."""
    n = len(costs)
    serial = float(sum(costs))
    w = max(1, min(workers, cores(), n))
    par = start_s + max(max(costs, default=0.0), (serial + n * RAY_TASK_S) / w)
    return par < serial, serial, par


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


def _call_batch(fn: Callable, batch: Sequence[tuple]) -> list:
    """Several tasks in one Ray task (one thread each), results in order."""
    return [_call_one_thread(fn, tuple(a)) for a in batch]


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
        self.fallback: str | None = None       # why the last map ran in this process
        ray_mod = sys.modules.get("ray")
        if address or (workers > 1 and ray_mod is not None and ray_mod.is_initialized()):
            self._start()                      # a cluster, or a Ray already running here

    @property
    def uses_ray(self) -> bool:
        """Ray is running (a cluster joined, or a local Ray that :meth:`map` started)."""
        return self._ray is not None

    @property
    def parallel(self) -> bool:
        """More than one process was asked for: callers hand their tasks to :meth:`map`,
        which decides whether a local Ray pays."""
        return self._ray is not None or self.workers > 1

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
                                  retry_exceptions=False)(_call_batch)

    def prepare(self, costs: Sequence[float], *, label: str = "tasks") -> bool:
        """Start a local Ray when tasks of ``costs`` predicted CPU seconds (of this
        :meth:`map`, or of several later ones: a model's layers) are faster there
        (:func:`pays`); else say on stderr why they run in this process. True when Ray
        runs."""
        if self._ray is not None:
            return True
        if self.workers <= 1:
            return False
        worth, serial, par = pays(costs, self.workers, ray_start_seconds())
        if worth:
            self._start()
            return True
        self.fallback = (f"--workers {self.workers}: {len(costs)} task(s) of {label} "
                         f"predicted {serial:.3g} CPU s in this process, "
                         f"{par:.3g} s on a local Ray (start-up {ray_start_seconds():g} s, "
                         f"{RAY_TASK_S:g} s a task): running them here")
        print(self.fallback, file=sys.stderr)
        return False

    def map(self, fn: Callable, args_list: Sequence[tuple], *, label: str = "tasks",
            cost_s: Sequence[float] | None = None) -> list:
        """Results of ``fn(*args)`` for each tuple, in the order of ``args_list``.
        ``cost_s``: the predicted CPU seconds of each task (else the first task is
        run here and timed), which decide whether a local Ray pays (module
        docstring)."""
        import time

        from tqdm.auto import tqdm

        bar = tqdm(total=len(args_list), desc=label, unit="task", file=sys.stderr,
                   disable=not self.progress, leave=False)
        out: list = []
        try:
            if self._ray is None and self.workers > 1 and args_list:
                costs = list(cost_s) if cost_s is not None else None
                if costs is None:                        # measure the first task here
                    t = time.process_time()
                    out.append(_call_one_thread(fn, tuple(args_list[0])))
                    bar.update(1)
                    costs = [time.process_time() - t] * (len(args_list) - 1)
                rest = args_list[len(out):]
                if not self.prepare(costs[len(costs) - len(rest):], label=label):
                    for a in rest:
                        out.append(_call_one_thread(fn, tuple(a)))
                        bar.update(1)
                    return out
                return out + self._map_ray(fn, rest, bar)
            if self._ray is None:
                for a in args_list:
                    out.append(_call_one_thread(fn, tuple(a)))
                    bar.update(1)
                return out
            return self._map_ray(fn, args_list, bar)
        finally:
            bar.close()

    def _map_ray(self, fn: Callable, args_list: Sequence[tuple], bar: Any) -> list:
        """The tasks on Ray in batches: about four per worker, task ``i`` in batch
        ``i mod batches`` (neighbours, often of similar cost, spread out); results
        in the order of ``args_list``."""
        ray = self._ray
        assert ray is not None and self._remote is not None
        nb = max(1, min(len(args_list), 4 * self.workers))
        batches = [list(range(b, len(args_list), nb)) for b in range(nb)]
        fn_ref = ray.put(fn)
        refs = [self._remote.remote(fn_ref, [tuple(args_list[i]) for i in idx]) for idx in batches]
        index = {r.hex(): k for k, r in enumerate(refs)}
        results: list[Any] = [None] * len(args_list)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                idx = batches[index[r.hex()]]
                for i, v in zip(idx, ray.get(r)):
                    results[i] = v
                bar.update(len(idx))
        return results

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
