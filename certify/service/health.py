"""Whether the service's database answers, and what the server does when it does not.

A database that stops answering (PostgreSQL stopped or restarting, the network
to it cut, a SQLite file that cannot be opened) is an *outage*, not an
internal error: every page answers 503 with one clear reason (an HTML page for
pages, JSON for the API) and ``Retry-After``; the server's log gets one line
when the outage begins and one when it ends, never a traceback per request;
running jobs go on, and a result that could not be stored waits in its work
folder until the database returns (:mod:`certify.service.dispatcher`).

While the database is down, at most one attempt per :data:`RETRY_SECONDS`
reaches it (whichever request or dispatcher tick comes first); the others are
answered at once from the last failure (:meth:`Health.gate`), so a hung
connection attempt never ties up every request thread. The first connection
checked out after the outage ends it (the pool's ``checkout`` event), and the
server carries on by itself: SQLAlchemy's pool pings a pooled connection
before use (``pool_pre_ping``) and replaces the ones the outage broke.
"""

from __future__ import annotations

import sys
import threading
import time

from sqlalchemy import exc as sa_exc

#: seconds between two attempts to reach a database that is down
RETRY_SECONDS = 1.0


class DatabaseUnavailable(Exception):
    """The database did not answer (the reason is the driver's, on one line)."""


def is_outage(exc: BaseException) -> bool:
    """Is ``exc`` the database not answering (rather than a bug or bad data)?"""
    if isinstance(exc, (DatabaseUnavailable, sa_exc.OperationalError, sa_exc.InterfaceError,
                        sa_exc.TimeoutError)):
        return True
    return isinstance(exc, sa_exc.DBAPIError) and bool(exc.connection_invalidated)


def reason_of(exc: BaseException) -> str:
    """The driver's message on one line (no SQL, no background link)."""
    if isinstance(exc, DatabaseUnavailable):
        return str(exc)
    line = " ".join(str(getattr(exc, "orig", None) or exc).split())
    return line.split(" (Background on this error")[0].split(" [SQL: ")[0][:200] \
        or type(exc).__name__


def log(msg: str) -> None:
    print(f"certify serve: {msg}", file=sys.stderr, flush=True)


class Health:
    """The database's state as this server last saw it (thread-safe)."""

    def __init__(self, shown: str):
        self.shown = shown                      # the URL without its password
        self.down_since: float | None = None
        self.reason = ""
        self.refused = 0                        # requests answered 503 during this outage
        self.last = ""
        self._tried = 0.0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def message(self) -> str:
        """What a refused request is told."""
        return (f"the database is not answering ({self.last or self.reason}); this server retries by itself "
                f"every {RETRY_SECONDS:g} s: try again in a few seconds")

    def gate(self) -> None:
        """Before a use of the database: while it is down, only one attempt per
        :data:`RETRY_SECONDS` goes through; the others raise at once."""
        if self.down_since is None:
            return
        with self._lock:
            now = time.monotonic()
            if self.down_since is not None and now - self._tried < RETRY_SECONDS:
                raise DatabaseUnavailable(self.reason)
            self._tried = now

    def failed(self, exc: BaseException) -> None:
        """Note a failure to reach the database; the first of an outage is logged."""
        with self._lock:
            if not isinstance(exc, DatabaseUnavailable):     # an attempt that reached out
                self._tried = time.monotonic()
                self.last = reason_of(exc)           # the latest attempt's reason
            if self.down_since is None:
                self.down_since, self.reason, self.refused = time.monotonic(), reason_of(exc), 0
                log(f"the database ({self.shown}) is not answering: {self.reason}; pages and the "
                    f"API answer 503 until it returns, running jobs go on, and this server "
                    f"retries every {RETRY_SECONDS:g} s")

    def answered(self) -> None:
        """A connection was checked out: the outage, if any, is over (logged)."""
        if self.down_since is None:
            return
        with self._lock:
            if self.down_since is None:
                return
            took = time.monotonic() - self.down_since
            self.down_since = None
            log(f"the database ({self.shown}) answers again after {took:.1f} s "
                f"({self.refused} request(s) were answered 503)")

    def refusing(self) -> str:
        """Count one request answered 503; the message it gets."""
        with self._lock:
            self.refused += 1
        return self.message()
