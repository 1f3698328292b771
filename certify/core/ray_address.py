"""Checking a ``--ray-address`` before anything waits on it.

Ray itself retries an unreachable cluster for minutes, and its C++ client ends
the whole process when the GCS never answers. So an address is checked here
first, within a bounded time (:func:`connect_seconds`, default 10 s, the
environment variable ``CERTIFY_RAY_CONNECT_SECONDS``):

1. its form: ``HOST:PORT`` (a head node's GCS, ``ray start --head`` listens on
   6379), ``ray://HOST:PORT`` (the Ray client server, 10001; needs the
   ``ray[client]`` extra, installed with this package) or ``auto`` (the cluster
   Ray would join: ``RAY_ADDRESS``, as set for a ``ray job submit`` driver, else
   the one ``ray start --head`` recorded on this node);
2. the host resolves (a dotted quad must be a valid IPv4 address);
3. a TCP connection opens;
4. a Ray service answers a gRPC call: the GCS's ``GetClusterId`` for
   ``HOST:PORT``, the client server's ``ClusterInfo(PING)`` for ``ray://``;
   when it answers "unauthenticated" (Ray's token authentication) a token must
   be at hand (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
   ``~/.ray/auth_token``), and the driver then joins in token mode.

Any failure is one :class:`~certify.core.errors.InputError` line naming the
address and what went wrong (exit 2).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import socket
import time
from dataclasses import dataclass

from certify.core.errors import InputError

#: default bound on checking and joining a cluster, seconds
DEFAULT_CONNECT_SECONDS = 10.0
_FORM = ("expected HOST:PORT (a Ray head's GCS address, e.g. head:6379) or ray://HOST:PORT "
         "(the Ray client server, e.g. ray://head:10001)")
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)$")


@dataclass(frozen=True)
class RayAddress:
    text: str          # as the user gave it
    client: bool       # ray://: the Ray client server; otherwise the GCS
    host: str          # without IPv6 brackets
    port: int
    needs_token: bool = False     # the cluster answered "unauthenticated" (Ray token auth)

    @property
    def target(self) -> str:
        """``host:port`` for gRPC (IPv6 in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def connect_seconds() -> float:
    """The connect bound: ``CERTIFY_RAY_CONNECT_SECONDS`` (finite, 1..600) or 10."""
    raw = os.environ.get("CERTIFY_RAY_CONNECT_SECONDS", "")
    if not raw.strip():
        return DEFAULT_CONNECT_SECONDS
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 1 <= v <= 600):
        raise InputError(f"CERTIFY_RAY_CONNECT_SECONDS must be a number of seconds in 1..600, "
                         f"got {raw!r}")
    return v


#: where ``ray start --head`` records the running cluster's GCS address on its node
CURRENT_CLUSTER_FILE = "/tmp/ray/ray_current_cluster"


def _auto() -> str:
    """The address ``auto`` stands for, as Ray resolves it: ``RAY_ADDRESS`` (set
    for a ``ray job submit`` driver) or the cluster started on this node."""
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env and env != "auto":
        return env
    try:
        recorded = open(CURRENT_CLUSTER_FILE, encoding="utf-8").read().strip()
    except OSError:
        recorded = ""
    if not recorded:
        raise InputError("--ray-address auto: no Ray cluster on this node (RAY_ADDRESS is unset "
                         f"and {CURRENT_CLUSTER_FILE} is missing); start one with "
                         "'ray start --head' or give HOST:PORT")
    return recorded


def parse(text: str) -> RayAddress:
    """The address's form only (no network); ``auto`` is the cluster Ray would
    join (:func:`_auto`), checked like any other address."""
    raw = str(text)
    s = raw.strip()
    if s == "auto":
        import dataclasses
        return dataclasses.replace(parse(_auto()), text="auto")
    client = s.startswith("ray://")
    rest = s[len("ray://"):] if client else s
    if not rest or "/" in rest or "@" in rest or any(c.isspace() for c in rest) or len(rest) > 300:
        raise InputError(f"--ray-address {raw!r}: {_FORM}")
    host, sep, port_s = rest.rpartition(":")
    if not sep or not host or not port_s.isdigit() or len(port_s) > 5:
        raise InputError(f"--ray-address {raw!r}: {_FORM}")
    port = int(port_s)
    if not 1 <= port <= 65535:
        raise InputError(f"--ray-address {raw!r}: port {port} is outside 1..65535")
    if not _HOST.match(host):
        raise InputError(f"--ray-address {raw!r}: {host!r} is not a host name or IP address")
    if host.startswith("["):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InputError(f"--ray-address {raw!r}: {host!r} is not an IPv6 address") from None
    elif re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise InputError(f"--ray-address {raw!r}: {host!r} is not an IPv4 address") from None
    return RayAddress(raw, client, host, port)


def _resolve(addr: RayAddress, deadline: float) -> list[tuple]:
    import concurrent.futures as cf

    pool = cf.ThreadPoolExecutor(1)
    fut = pool.submit(socket.getaddrinfo, addr.host, addr.port, 0, socket.SOCK_STREAM)
    pool.shutdown(wait=False)
    try:
        return fut.result(timeout=max(0.1, deadline - time.monotonic()))
    except cf.TimeoutError:
        raise InputError(f"--ray-address {addr.text}: cannot resolve {addr.host!r} within "
                         f"{_budget_text()}") from None
    except OSError as exc:
        raise InputError(f"--ray-address {addr.text}: cannot resolve {addr.host!r} "
                         f"({exc.strerror or exc})") from None


def _budget_text() -> str:
    return f"{connect_seconds():g} s (CERTIFY_RAY_CONNECT_SECONDS)"


def _tcp(addr: RayAddress, infos: list[tuple], deadline: float) -> None:
    last: Exception | None = None
    for family, kind, proto, _canon, sockaddr in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(left)
                s.connect(sockaddr)
            return
        except OSError as exc:
            last = exc
    if isinstance(last, ConnectionRefusedError):
        why = "nothing listens there (connection refused)"
    elif last is None or isinstance(last, (socket.timeout, TimeoutError)):
        why = f"no answer within {_budget_text()}"
    else:
        why = f"cannot connect ({getattr(last, 'strerror', None) or last})"
    raise InputError(f"--ray-address {addr.text}: {why}")


def _grpc_ping(addr: RayAddress, deadline: float) -> bool:
    """A Ray service answers at the address (skipped when grpcio is missing and
    the address is a GCS one; the client protocol needs grpcio anyway). True
    when it asks for a token (Ray's token authentication)."""
    try:
        import grpc
    except ImportError:
        if addr.client:
            raise InputError(f"--ray-address {addr.text}: ray:// needs the Ray client "
                             f"(pip install 'ray[client]'; installed with certify-attention)"
                             ) from None
        return False
    left = max(0.2, deadline - time.monotonic())
    channel = grpc.insecure_channel(addr.target)
    try:
        if addr.client:
            from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc
            stub = ray_client_pb2_grpc.RayletDriverStub(channel)
            stub.ClusterInfo(ray_client_pb2.ClusterInfoRequest(
                type=ray_client_pb2.ClusterInfoType.PING), timeout=left)
        else:
            from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
            stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=left)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return True                 # a Ray service that wants a token: it is one
        what = "the Ray client server" if addr.client else "a Ray GCS"
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            raise InputError(f"--ray-address {addr.text}: {what} did not answer within "
                             f"{_budget_text()}") from None
        raise InputError(f"--ray-address {addr.text}: something listens there, but not "
                         f"{what} (gRPC {getattr(code, 'name', code)})") from None
    except ImportError:                 # generated stubs moved in another Ray version
        return False
    finally:
        channel.close()
    return False


def token_available() -> bool:
    """A Ray token this driver can send: ``RAY_AUTH_TOKEN``, the file named by
    ``RAY_AUTH_TOKEN_PATH``, or ``~/.ray/auth_token``."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    try:
        with open(path, "rb") as f:
            return bool(f.read(4096).strip())
    except OSError:
        return False


def check(text: str, timeout: float | None = None) -> RayAddress:
    """Parse ``text`` and check that a Ray service answers there, all within
    ``timeout`` seconds (default :func:`connect_seconds`)."""
    addr = parse(text)
    deadline = time.monotonic() + (connect_seconds() if timeout is None else timeout)
    _tcp(addr, _resolve(addr, deadline), deadline)
    if not _grpc_ping(addr, deadline):
        return addr
    if os.environ.get("RAY_AUTH_MODE", "token").lower() != "token" or not token_available():
        raise InputError(f"--ray-address {addr.text}: the cluster uses Ray's token "
                         f"authentication; give its token in RAY_AUTH_TOKEN (or a file named by "
                         f"RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token)")
    return RayAddress(addr.text, addr.client, addr.host, addr.port, needs_token=True)
