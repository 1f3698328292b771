"""The service's gate (ASGI middleware), before any route reads a body.

* **Token**: submitting a job and deleting a certificate need the server's
  token (``Authorization: Bearer``), compared in constant time; 401 otherwise,
  and nothing is read or stored.
* **Rate limits** (per client address, token buckets refilled every minute):
  the open submission endpoint (``POST /api/verify``, ``--open-submit-rate``)
  and open reads (``--read-rate``); a request with the valid token is not
  limited, and neither are ``/api/health`` and ``/static``. Over the limit:
  429 with ``Retry-After`` and a message saying which limit. The client is
  the address uvicorn gives (the socket's peer; a forwarded address only from
  a ``--trusted-proxy``, see :func:`certify.service.server.proxy_settings`).
  These buckets refuse early, before a body is read; the open-submission
  limit is enforced again in the database at admission
  (:meth:`certify.service.queue.Queue.add`), where every server counts the
  same jobs.
* **Body size**: a request body above the upload limit is refused with 413,
  by its ``Content-Length`` or while it streams in.
"""

from __future__ import annotations

import hmac
import json
import math
import threading
import time
from collections import OrderedDict


class _TooLarge(Exception):
    pass


class RateLimiter:
    """Token buckets of ``per_minute`` requests per key (burst: the same
    number), for at most ``max_keys`` keys (the least recently seen dropped)."""

    def __init__(self, per_minute: int, max_keys: int = 100_000):
        self.per_minute, self.max_keys = per_minute, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, now: float | None = None) -> float:
        """0 when allowed (one token taken), else the seconds until the next token."""
        if self.per_minute <= 0:
            return 0.0
        now = time.monotonic() if now is None else now
        rate = self.per_minute / 60.0
        with self._lock:
            tokens, last = self._buckets.pop(key, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - last) * rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                wait = 0.0
            else:
                self._buckets[key] = (tokens, now)
                wait = (1 - tokens) / rate
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        return wait


async def send_json(send, status: int, body: dict, headers: list | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": data})


class Guard:
    def __init__(self, app, token: str, max_body: int, open_submit_rate: int = 0, read_rate: int = 0):
        self.app, self.token, self.max_body = app, token.encode(), max_body
        self.submit_limit = RateLimiter(open_submit_rate)
        self.read_limit = RateLimiter(read_rate)

    @staticmethod
    def _needs_token(method: str, path: str) -> bool:
        return (method == "POST" and path == "/api/jobs") or \
            (method == "DELETE" and path.startswith("/api/certificates/"))

    def _has_token(self, headers: dict) -> bool:
        auth = headers.get("authorization", b"")
        given = auth[7:].strip() if auth[:7].lower() == b"bearer " else b""
        return bool(given) and hmac.compare_digest(given, self.token)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method, path = scope["method"], scope["path"]
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        authed = self._has_token(headers)
        if self._needs_token(method, path) and not authed:
            return await send_json(send, 401, {"detail": "a valid token is required "
                                                         "(Authorization: Bearer TOKEN)"})
        if not authed and path != "/api/health" and not path.startswith("/static/"):
            client = (scope.get("client") or ("?", 0))[0]
            if method == "POST" and path == "/api/verify":
                limiter, what = self.submit_limit, ("open submissions", "--open-submit-rate")
            else:
                limiter, what = self.read_limit, ("reads", "--read-rate")
            wait = limiter.take(client)
            if wait > 0:
                return await send_json(send, 429, {"detail": (
                    f"rate limit: at most {limiter.per_minute} {what[0]} per minute from one "
                    f"client ({what[1]}); retry in {math.ceil(wait)} s")},
                    headers=[(b"retry-after", str(math.ceil(wait)).encode())])
        if method in ("POST", "PUT", "PATCH"):
            try:
                length = int(headers.get("content-length", b"-1"))
            except ValueError:
                return await send_json(send, 400, {"detail": "bad Content-Length"})
            if length > self.max_body:
                return await send_json(send, 413, {"detail": f"upload larger than the limit of "
                                                             f"{self.max_body} bytes"})
            seen = 0
            started = False

            async def limited_receive():
                nonlocal seen
                msg = await receive()
                if msg["type"] == "http.request":
                    seen += len(msg.get("body", b""))
                    if seen > self.max_body:
                        raise _TooLarge
                return msg

            async def tracking_send(msg):
                nonlocal started
                if msg["type"] == "http.response.start":
                    started = True
                await send(msg)
            try:
                return await self.app(scope, limited_receive, tracking_send)
            except _TooLarge:
                if not started:
                    return await send_json(send, 413, {"detail": f"upload larger than the limit "
                                                                 f"of {self.max_body} bytes"})
                raise
        return await self.app(scope, receive, send)
