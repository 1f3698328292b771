"""Run independent tasks in process, in forked local processes or on Ray, with one
merge order.

An :class:`Engine` maps a module-level function over a list of argument
tuples and returns the results *in the order of the list*, whatever the
number of workers and whatever order the tasks finish in, so a merged
certificate does not depend on the worker count.

* ``workers <= 1`` and no address: plain in-process loop (nothing to start).
* ``workers = N``: the fastest of three, predicted before anything starts.
  :meth:`Engine.map` predicts the tasks' CPU seconds (the caller's ``cost_s``; without
  it, where forking is possible the tasks are forked at once -- that risks the
  processes' start-up, where timing a first task here would cost that task -- and
  elsewhere the first task is run here and timed) and compares one process (their
  sum), ``N`` local processes forked from this one (:data:`PROCESS_START_S` to
  start, :data:`PROCESS_TASK_S` a batch, the work spread over them) and a local
  Ray (:data:`RAY_START_S` to start, :data:`RAY_TASK_S` a task). One line on
  stderr says which runs, with the numbers. Forked processes start in tens of
  milliseconds and inherit the tasks (nothing is pickled to them; only results
  come back), so they win on one machine whenever parallel work pays at all;
  they are used where ``fork`` is the platform's (Linux) and no Ray runs in this
  process. A local Ray (``ray.init(num_cpus=N)``, shut down by
  :meth:`Engine.close`) is started when it is predicted faster, which with the
  default start-up needs ``CERTIFY_RAY_START_SECONDS`` below the processes' or a
  platform without ``fork``. Either way small tasks go in batches (a few per
  worker), each batch one task of the pool.
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
(``max_retries``; on the forked processes the batches without a result are run
again in a new pool); its result is taken once, from the attempt that finished,
so nothing is lost or counted twice. Progress (tasks done) is reported on
stderr as results arrive from any worker.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

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
#: wall seconds to fork the local worker processes and have a first result back:
#: 25-45 ms for two workers forked from a process holding torch, fla and the
#: feasibility stack (benchmarks/bench_parallel.py, the ``processes start-up`` row);
#: 0.25 s leaves room for a loaded machine and a large parent
PROCESS_START_S = 0.25
#: seconds one batch costs the forked pool beyond its own work (pickling its
#: results back, scheduling)
PROCESS_TASK_S = 0.01


def ray_start_seconds() -> float:
    """:data:`RAY_START_S`, or ``CERTIFY_RAY_START_SECONDS`` when set (>= 0)."""
    raw = os.environ.get("CERTIFY_RAY_START_SECONDS")
    try:
        return max(0.0, float(raw)) if raw is not None else RAY_START_S
    except ValueError:
        return RAY_START_S


def pays(costs: Sequence[float], workers: int, start_s: float,
         task_s: float = RAY_TASK_S) -> tuple[bool, float, float]:
    """``(worth it, one process s, parallel s)`` for tasks of ``costs`` CPU seconds:
    one process takes their sum; the parallel run ``start_s``, then the work and
    ``task_s`` a task spread over ``min(workers, cores, tasks)`` processes (never
    less than the largest task)."""
    n = len(costs)
    serial = float(sum(costs))
    w = max(1, min(workers, cores(), n))
    par = start_s + max(max(costs, default=0.0), (serial + n * task_s) / w)
    return par < serial, serial, par


def can_fork() -> bool:
    """Local worker processes can be forked: the platform's start method is
    ``fork`` (Linux; macOS and Windows spawn, which would re-import everything)
    and no Ray runs in this process (its threads and sockets must not be copied).
    The checker's own rule (:func:`certify.checkers.parallel.can_fork`)."""
    from certify.checkers.parallel import can_fork as checker_can_fork

    return checker_can_fork()


def cores() -> int:
    """The cores this process may run on (its CPU affinity, else the count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):                       # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def max_local_workers() -> int:
    """The largest ``--workers`` of a local run: :data:`WORKERS_PER_CORE` x the cores."""
    return WORKERS_PER_CORE * cores()


@contextmanager
def _one_thread() -> Iterator[None]:
    """Every thread pool (torch's, the BLAS libraries' through threadpoolctl) limited to
    one thread inside the block. torch is limited when it is loaded (importing it only
    to limit it costs a second); one a task imports later reads ``OMP_NUM_THREADS``,
    which a worker process sets (:data:`_ONE_THREAD`)."""
    with ExitStack() as stack:
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "set_num_threads"):
            prev = torch.get_num_threads()
            torch.set_num_threads(1)
            stack.callback(torch.set_num_threads, prev)
        try:
            from threadpoolctl import threadpool_limits
            stack.enter_context(threadpool_limits(1))
        except ImportError:                                  # pragma: no cover
            pass
        yield


def _call_one_thread(fn: Callable, args: tuple) -> Any:
    """Run ``fn(*args)`` with every thread pool limited to one thread."""
    with _one_thread():
        return fn(*args)


def _call_batch(fn: Callable, batch: Sequence[tuple]) -> list:
    """Several tasks in one Ray task (one thread each), results in order."""
    with _one_thread():
        return [fn(*tuple(a)) for a in batch]


#: the function and argument tuples of the running forked map: set before the pool
#: forks, so each worker finds them in its copy of this module (nothing is sent)
_FORKED: tuple[Callable, Sequence[tuple]] | None = None


def _call_forked(idx: Sequence[int]) -> list:
    """Tasks ``idx`` of the forked map (one thread each), results in order."""
    assert _FORKED is not None, "a forked batch outside a forked map"
    os.environ.update(_ONE_THREAD)             # this worker's own libraries loaded later
    fn, args_list = _FORKED
    with _one_thread():
        return [fn(*tuple(args_list[i])) for i in idx]


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
    """``map(fn, args_list)`` in process (default), on forked processes or on Ray."""

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
        self._forks = False                    # maps run on forked local processes
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
        which decides where they run (:meth:`prepare`)."""
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

    @property
    def forks(self) -> bool:
        """:meth:`map` runs its tasks on forked local processes (chosen by :meth:`prepare`)."""
        return self._forks

    @property
    def distributes(self) -> bool:
        """Tasks handed to :meth:`map` run in other processes (Ray, or forked ones)."""
        return self._ray is not None or self._forks

    def prepare(self, costs: Sequence[float], *, label: str = "tasks") -> bool:
        """Choose where tasks of ``costs`` predicted CPU seconds (of this :meth:`map`,
        or of several later ones: a model's layers) run: the fastest predicted of this
        process, forked local processes and a local Ray (:func:`pays`; the module
        docstring), and say on stderr which, with the numbers. True when they run in
        other processes (a Ray started, or forked processes from now on)."""
        if self._ray is not None:
            return True
        if self.workers <= 1:
            return False
        worth_ray, serial, par_ray = pays(costs, self.workers, ray_start_seconds())
        fork = can_fork()
        par_proc = pays(costs, self.workers, PROCESS_START_S, PROCESS_TASK_S)[2] if fork else float("inf")
        said = (f"--workers {self.workers}: {len(costs)} task(s) of {label} "
                f"predicted {serial:.3g} CPU s in this process, "
                + (f"{par_proc:.3g} s on {self.workers} forked processes (start-up "
                   f"{PROCESS_START_S:g} s), " if fork else "")
                + f"{par_ray:.3g} s on a local Ray (start-up {ray_start_seconds():g} s, "
                f"{RAY_TASK_S:g} s a task)")
        if fork and par_proc < serial and par_proc <= par_ray:
            self._forks = True
            self.fallback = None
            print(said + ": forking local processes", file=sys.stderr)
            return True
        if worth_ray:
            self.fallback = None
            print(said + ": starting a local Ray", file=sys.stderr)
            self._start()
            return True
        self.fallback = said + ": running them here"
        print(self.fallback, file=sys.stderr)
        return False

    def map(self, fn: Callable, args_list: Sequence[tuple], *, label: str = "tasks",
            cost_s: Sequence[float] | None = None) -> list:
        """Results of ``fn(*args)`` for each tuple, in the order of ``args_list``.
        ``cost_s``: the predicted CPU seconds of each task (else the first task is
        run here and timed), which decide where they run (:meth:`prepare`, the
        module docstring)."""
        import time

        from tqdm.auto import tqdm

        bar = tqdm(total=len(args_list), desc=label, unit="task", file=sys.stderr,
                   disable=not self.progress, leave=False)
        out: list = []
        try:
            if self._ray is None and self.workers > 1 and args_list:
                costs = list(cost_s) if cost_s is not None else None
                if costs is None and not self._forks and len(args_list) > 1 and can_fork():
                    # unpredicted: forking risks its start-up, timing a task here costs that task
                    print(f"--workers {self.workers}: {len(args_list)} task(s) of {label} without a "
                          f"predicted cost: forking local processes (start-up at most about "
                          f"{PROCESS_START_S:g} s)", file=sys.stderr)
                    return self._map_forked(fn, args_list, bar)
                if costs is None and not self._forks:    # measure the first task here
                    t = time.process_time()
                    out.append(_call_one_thread(fn, tuple(args_list[0])))
                    bar.update(1)
                    costs = [time.process_time() - t] * (len(args_list) - 1)
                rest = args_list[len(out):]
                if not rest:
                    return out
                if not self._forks and not self.prepare(costs[len(costs) - len(rest):] if costs else [],
                                                        label=label):
                    for a in rest:
                        out.append(_call_one_thread(fn, tuple(a)))
                        bar.update(1)
                    return out
                if self._forks:
                    return out + self._map_forked(fn, rest, bar)
                return out + self._map_ray(fn, rest, bar)
            if self._ray is None:
                for a in args_list:
                    out.append(_call_one_thread(fn, tuple(a)))
                    bar.update(1)
                return out
            return self._map_ray(fn, args_list, bar)
        finally:
            bar.close()

    def _batches(self, n: int) -> list[list[int]]:
        """Task indices in about four batches per worker, task ``i`` in batch ``i mod
        batches`` (neighbours, often of similar cost, spread out)."""
        nb = max(1, min(n, 4 * self.workers))
        return [list(range(b, n, nb)) for b in range(nb)]

    def _map_forked(self, fn: Callable, args_list: Sequence[tuple], bar: Any) -> list:
        """The tasks on ``min(workers, cores)`` processes forked from this one, in
        batches (:meth:`_batches`); a pool whose worker died is replaced and the
        batches without a result run again, at most ``max_retries`` times."""
        import multiprocessing as mp
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        global _FORKED
        batches = self._batches(len(args_list))
        results: list[Any] = [None] * len(args_list)
        todo = list(range(len(batches)))
        w = max(1, min(self.workers, cores(), len(batches)))
        prev, _FORKED = _FORKED, (fn, args_list)
        try:
            for _attempt in range(self.max_retries + 1):
                pool = ProcessPoolExecutor(w, mp_context=mp.get_context("fork"))
                broken = False
                try:
                    futs = {pool.submit(_call_forked, batches[b]): b for b in todo}
                    pending = set(futs)
                    while pending:
                        done, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for f in done:
                            try:
                                vals = f.result()
                            except BrokenProcessPool:
                                broken = True
                                continue
                            b = futs[f]
                            for i, v in zip(batches[b], vals):
                                results[i] = v
                            todo.remove(b)
                            bar.update(len(batches[b]))
                finally:                    # a task's error: the rest is not waited for
                    pool.shutdown(wait=True, cancel_futures=True)
                if not broken or not todo:
                    return results
            raise RuntimeError(f"a forked worker died {self.max_retries + 1} times; "
                               f"{len(todo)} batch(es) of tasks left without a result")
        finally:
            _FORKED = prev

    def _map_ray(self, fn: Callable, args_list: Sequence[tuple], bar: Any) -> list:
        """The tasks on Ray in batches: about four per worker, task ``i`` in batch
        ``i mod batches`` (neighbours, often of similar cost, spread out); results
        in the order of ``args_list``."""
        ray = self._ray
        assert ray is not None and self._remote is not None
        batches = self._batches(len(args_list))
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
