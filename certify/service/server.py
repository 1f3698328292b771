"""Starting ``certify serve``: every check first, then the server.

In order, each failure one :class:`InputError` line (exit 2) before anything
is served: the options (:class:`ServiceConfig`); what can be checked without
writing -- the data folder (new, empty or the service's own by its manifest,
:mod:`datadir`), a given token file, the database URL's form; the address
(the host must resolve to an address of this machine and the port be free:
the socket is bound here and handed to uvicorn); then the data folder's
layout and lock, the token, the database (reachable, migrated; a SQLite file
also locked). A data folder laid out by a start that then fails is removed
again (only what it made).

Then the recovery of what a previous run of this node left: with SQLite the
lock proves every running job's server gone, so their leases end now; with
PostgreSQL the same holds for this node's own claims (its data folder is
locked), while other nodes' claims run out by themselves. Work folders of
this node's claims that are over are removed; nothing else in ``work/`` is
touched. The job dispatcher then starts with the server.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import socket
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from certify.core.errors import InputError
from certify.service import datadir
from certify.service.config import ServiceConfig, check_db_url, shown_url


@dataclass(frozen=True)
class Listen:
    host: str = "127.0.0.1"
    port: int = 8000


def bind(listen: Listen) -> socket.socket:
    """A listening socket on ``host:port``, or :class:`InputError`."""
    host, port = listen.host, listen.port
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InputError(f"--port must be in 1..65535, got {port!r}")
    if not host or len(host) > 253 or any(c.isspace() for c in host):
        raise InputError(f"--host {host!r} is not a host name or address")
    if re.fullmatch(r"[0-9.]+", host):
        import ipaddress
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise InputError(f"--host {host}: not an IPv4 address") from None
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, 0, socket.SOCK_STREAM, 0,
                                   socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else "not a valid name"
        raise InputError(f"--host {host}: cannot resolve it ({why})") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InputError(f"--port {port}: the address {host}:{port} is in use (another "
                             f"server listens there)") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise InputError(f"--host {host}: not an address of this machine") from None
        if exc.errno == errno.EACCES:
            raise InputError(f"--port {port}: permission denied (ports below 1024 need "
                             f"privileges)") from None
        raise InputError(f"--host {host} --port {port}: cannot listen ({exc.strerror})") from None
    sock.set_inheritable(False)
    return sock


def read_token(path: Path) -> str:
    """The token in ``path``: printable ASCII, no spaces, 16..4096 characters."""
    try:
        raw = path.read_bytes()[:8192]
    except OSError as exc:
        raise InputError(f"--token-file {path}: cannot read it ({exc.strerror})") from None
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise InputError(f"--token-file {path}: the token must be printable ASCII text") from None
    if not re.fullmatch(r"[\x21-\x7e]{16,4096}", token):
        if len(token) < 16:
            raise InputError(f"--token-file {path}: the token is shorter than 16 characters")
        raise InputError(f"--token-file {path}: the token must be one word of printable ASCII "
                         f"(16..4096 characters)")
    return token


def ensure_token(folder: datadir.DataFolder) -> Path:
    """``DATA/token`` (mode 0600), created with a random token when missing."""
    path = folder.path / datadir.TOKEN
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return path


def run(cfg: ServiceConfig, listen: Listen, token_file: str | None) -> int:
    """Check everything (see the module's docstring), then serve until stopped."""
    from certify.service import upgrade
    if upgrade.previous_layout(cfg.data, cfg.db or None):
        raise InputError(upgrade.refusal(str(cfg.data), cfg.db or None))
    datadir.inspect(cfg.data)                   # read-only checks first: nothing is made yet
    token = read_token(Path(token_file)) if token_file else None
    if cfg.db:
        check_db_url(cfg.db)
    sock = bind(listen)
    folder = None
    locks: list[datadir.Lock] = []
    try:
        folder = datadir.open_folder(cfg.data)
        url = f"http://{listen.host}:{listen.port}/"
        locks.append(datadir.lock_folder(folder, url))
        token_path = Path(token_file) if token_file else ensure_token(folder)
        token = token or read_token(token_path)
        db = cfg.db or f"sqlite:///{folder.path / datadir.DB}"
        if db.startswith("sqlite:///"):
            locks.append(datadir.lock_sqlite(Path(db[len("sqlite:///"):]).resolve()))
        from certify.service.store import open_store
        store = open_store(db)
    except BaseException:
        sock.close()
        for lock in locks:
            lock.release()
        if folder is not None:
            datadir.remove_new_layout(folder)
        raise
    cfg = replace(cfg, data=folder.path, db=db, token=token, node=folder.node)
    recover(store, folder, cfg, sqlite=db.startswith("sqlite"))

    import uvicorn

    from certify.service.app import create_app
    _Server = _server_class()
    app = create_app(cfg, store)
    print(f"certify serve: {url}  data {folder.path}  db {shown_url(db).split('://')[0]}  "
          f"node {folder.node[:12]}  token in {token_path}", file=sys.stderr, flush=True)
    server = _Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           timeout_graceful_shutdown=10,
                                           **proxy_settings(cfg.trusted_proxy)))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        for lock in locks:
            lock.release()
    return 0


def _server_class():
    from contextlib import contextmanager

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that a stop asked by SIGTERM or SIGINT is a
        clean exit (status 0): uvicorn re-raises the signal after its graceful
        shutdown, which made ``certify serve`` end with status -15."""

        @contextmanager
        def capture_signals(self):
            with super().capture_signals():
                yield
                self._captured_signals.clear()
    return Server


def proxy_settings(trusted: tuple[str, ...]) -> dict:
    """uvicorn's proxy options, set explicitly: the client's address is the
    socket's peer unless the peer is a ``--trusted-proxy`` (uvicorn's own
    defaults would trust ``X-Forwarded-For`` from 127.0.0.1, so any local
    client could name itself anyone)."""
    if not trusted:
        return {"proxy_headers": False, "forwarded_allow_ips": ""}
    return {"proxy_headers": True, "forwarded_allow_ips": ",".join(trusted)}


def recover(store, folder: datadir.DataFolder, cfg: ServiceConfig, *, sqlite: bool) -> None:
    """End the leases a lock proves dead, and remove this node's finished or
    interrupted work folders (see the module's docstring)."""
    from certify.service.queue import Queue

    queue = Queue(store, max_attempts=cfg.limits.max_attempts, keep_uploads=cfg.keep_uploads)
    gone = queue.expire(cfg.retention_days)
    if gone:
        print(f"certify serve: {gone} anonymous job(s) older than {cfg.retention_days:g} days "
              f"(--retention-days) deleted", file=sys.stderr, flush=True)
    ended = queue.expire_running(None if sqlite else folder.node)
    if ended:
        print(f"certify serve: {ended} job(s) interrupted by a previous stop will be re-queued",
              file=sys.stderr, flush=True)
    ours = queue.node_claims(folder.node)
    recorded = {c.claim_id for c in ours
                if not (cfg.keep_work and c.outcome in ("done", "failed"))}
    _, left = datadir.clean_work(folder, recorded)
    if left:
        print(f"certify serve: left alone in {folder.work}: {', '.join(left[:5])}"
              f"{'...' if len(left) > 5 else ''} (not recorded as this server's)",
              file=sys.stderr, flush=True)
