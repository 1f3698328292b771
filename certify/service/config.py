"""The service's configuration: every bound ``certify serve`` runs under.

One frozen record, checked when it is made (:meth:`ServiceConfig.check`), so a
``nan``, an ``inf`` or an absurd size is refused before anything starts; the
messages name the ``certify serve`` option that sets the value. The defaults
are documented in docs/service.md ("Bounds").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from certify.core.errors import InputError

MB = 1 << 20
#: the smallest --job-memory-mb: a job process starts with the library loaded
#: (numpy, python-flint, matplotlib, and torch once a model job ran: about 700 MB of
#: address space), so
#: below this no job could allocate anything and every one would fail
MIN_JOB_MEMORY_MB = 1024


@dataclass(frozen=True)
class Limits:
    """What one job may use, and how often a job is tried."""
    time_seconds: float = 600.0        # wall clock and CPU time per job (--job-seconds)
    memory_bytes: int = 4096 * MB      # address space per job (--job-memory-mb)
    unpacked_bytes: int = 256 * MB     # total unpacked size of a zip upload (--max-unpacked-mb)
    upload_bytes: int = 64 * MB        # one upload (--max-upload-mb)
    max_attempts: int = 2              # claims of a job before an interrupted one is failed

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ServiceConfig:
    data: Path                          # the node's data folder (scratch with PostgreSQL)
    db: str                             # sqlite:///PATH or postgresql://...
    token: str
    limits: Limits = field(default_factory=Limits)
    workers: int = 2                    # jobs running at once on this node
    job_nice: int = 10                  # the jobs' priority below the server's (nice)
    lease_seconds: float = 30.0         # a claim expires this long after its last renewal
    keep_uploads: bool = False          # keep an upload after its job ended
    keep_work: bool = False             # keep a job's work folder after it ended
    max_storage_bytes: int = 10240 * MB     # uploads + certificates + their files, in the store
    open_submit_rate: int = 20          # POST /api/verify per client per minute (0: no limit)
    read_rate: int = 1200               # open reads per client per minute (0: no limit)
    max_anonymous_queued: int = 20      # verify jobs without a token waiting at once
    retention_days: float = 30.0        # ended anonymous jobs are deleted this long after (--retention-days)
    trusted_proxy: tuple[str, ...] = () # addresses whose X-Forwarded-For names the client (--trusted-proxy)
    dispatch: bool = True               # run jobs in this process (tests may turn it off)
    node: str = "local"                 # this server's node id (from the data folder's manifest)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        lim = self.limits
        _number(lim.time_seconds, "--job-seconds", 1, 604800)
        _number(lim.memory_bytes / MB, "--job-memory-mb", MIN_JOB_MEMORY_MB, 1 << 20)
        _number(lim.unpacked_bytes / MB, "--max-unpacked-mb", 1 / 1024, 64 << 10)
        _number(lim.upload_bytes / MB, "--max-upload-mb", 1 / 1024, 4096)
        _number(lim.max_attempts, "--job-attempts", 1, 100, integer=True)
        from certify.core.engine import max_local_workers
        _number(self.workers, "--workers", 1, max_local_workers(), integer=True,
                why=" (4 per core of this machine: each job is a process)")
        _number(self.job_nice, "--job-nice", 0, 19, integer=True)
        _number(self.lease_seconds, "--lease-seconds", 2, 3600)
        _number(self.max_storage_bytes / MB, "--max-storage-mb", 1, 1 << 30)
        _number(self.open_submit_rate, "--open-submit-rate", 0, 1 << 20, integer=True)
        _number(self.read_rate, "--read-rate", 0, 1 << 24, integer=True)
        _number(self.max_anonymous_queued, "--max-anonymous-queued", 0, 1 << 20, integer=True)
        _number(self.retention_days, "--retention-days", 1 / 1440, 36500,
                why=" (days; 1/1440 is one minute)")
        for addr in self.trusted_proxy:
            check_proxy(addr)


def _number(v, option: str, lo: float, hi: float, *, integer: bool = False,
            why: str = "") -> None:
    """``v`` is a finite number in ``lo..hi`` (an integer when asked); the
    message states the true range (a fraction as a fraction: ``1/1440``)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and integer:
        ok = float(v).is_integer()
    if not ok or not lo <= v <= hi:
        kind = "an integer" if integer else "a finite number"
        raise InputError(f"{option} must be {kind} in {_plain(lo)}..{hi:g}{why}, "
                         f"got {v!r}")


def _plain(x: float) -> str:
    """``x`` as written by a reader: ``0``, ``2``, ``1/1024`` (exactly ``x``)."""
    from fractions import Fraction
    f = Fraction(x).limit_denominator(1 << 20)
    return str(f) if float(f) == x else repr(x)


def megabytes(v: float, option: str, lo: float, hi: float) -> int:
    """``v`` MB as bytes, after the finiteness and range check."""
    _number(v, option, lo, hi)
    return int(v * MB)


def check_proxy(addr: str) -> None:
    """``addr`` is an IP address or network (``10.0.0.0/8``): a proxy trusted
    to say the client's address (uvicorn's ``forwarded_allow_ips``)."""
    import ipaddress
    try:
        ipaddress.ip_network(str(addr), strict=False)
    except ValueError:
        raise InputError(f"--trusted-proxy must be an IP address or network, got {str(addr)[:60]!r}") from None


def shown_url(url: str) -> str:
    """A database URL without its password."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def check_db_url(url: str) -> None:
    if not url.startswith(("sqlite:///", "postgresql://", "postgresql+psycopg://")):
        raise InputError(f"--db must be sqlite:///PATH or postgresql://..., got "
                         f"{shown_url(url)[:60]!r}")
