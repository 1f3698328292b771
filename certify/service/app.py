"""The web application of ``certify serve`` (FastAPI, Jinja2 pages, a JSON API).

Reading is open: the certificate list (filters), a certificate's page, its
JSON (verbatim), report and figures, a job's progress. Submitting a job and
deleting a certificate need the server's token; verifying an uploaded
certificate is open and runs as a job like any other (see :mod:`guard` for
the token, the rate limits and the body size).

Everything is validated at the edge: every query parameter (unknown ones
included) and every form field is checked before use, and a bad one is a 422
whose message names it. Admission is decided in the database, atomically
with the insert (:meth:`Queue.add`): a submission is refused with 507 when its
upload and result reservation do not fit under the storage cap
(``--max-storage-mb``), and an open one with 429 when too many anonymous jobs
wait (``--max-anonymous-queued``) or its client submitted too many in the last
minute (``--open-submit-rate``). The client is the socket's peer address
(a proxy's ``X-Forwarded-For`` counts only from ``--trusted-proxy``). An unexpected failure in a
handler is a 500 saying "internal error"; its traceback goes to the server's
log only. Text a certificate may hold that UTF-8 cannot encode (a lone
surrogate, valid in JSON) is shown as its JSON escape, never a 500.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
import re
import sys
import threading
import traceback
from collections import OrderedDict
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, AsyncIterator, Callable, overload
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from sqlalchemy import exc as sa_exc
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from certify.checkers import kinds as _declared_kinds
from certify.checkers.verify import VERDICT_WORDS
from certify.core.errors import EXIT_BAD_INPUT, InputError
from certify.service.config import ServiceConfig
from certify.service.dispatcher import Dispatcher
from certify.service.guard import Guard
from certify.service.health import RETRY_SECONDS, DatabaseUnavailable, is_outage
from certify.service.launcher import Launcher
from certify.service.options import check_options
from certify.service.queue import Queue, Quota, Refused, Upload
from certify.service.schema import CertificateRow, JobRow, aware
from certify.service.store import Filters, Store, as_dict
from certify.service.uploads import check_zip, safe_name

HERE = Path(__file__).resolve().parent
VERDICTS = ("proved", "refuted", "unknown")
#: the claim kinds, as declared (certify.checkers.kinds)
KINDS = tuple(_declared_kinds.BY_NAME)
SHA = re.compile(r"^[0-9a-f]{64}$")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
FILTER_PARAMS = ("kind", "verdict", "rank", "family", "model", "since", "until")
PAGE = 50                     # rows per list page (and the API's default limit)
STARTING = "starting its process"     # a claimed job whose worker has not said its stage yet
PAGE_CACHE = 256              # rendered certificate pages kept
REQUEST_THREADS = 6           # handlers running at once (the rest wait their turn)
MEDIA = {".png": "image/png", ".pdf": "application/pdf", ".md": "text/markdown; charset=utf-8",
         ".tex": "text/x-tex; charset=utf-8", ".json": "application/json"}
DATE_RANGE = (dt.date(1970, 1, 1), dt.date(2999, 12, 31))
_SURROGATE = re.compile("[\ud800-\udfff]")
_PHRASES = {s.value for s in HTTPStatus}


def _is_page(path: str) -> bool:
    """An HTML page's path (not the API, a download, a static file)."""
    return not (path.startswith(("/api/", "/static/")) or "/files/" in path
                or path.endswith(".json"))


def printable(v: Any) -> Any:
    """Strings with every lone surrogate shown as its JSON escape ``\\udXXX``
    (markup -- a macro's output -- is made of values already shown so)."""
    if isinstance(v, Markup):
        return v
    if isinstance(v, str):
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", v)
    return v


class SafeJSON(JSONResponse):
    """JSON with non-ASCII escaped (any string a certificate holds can be sent)
    and non-finite floats (a diagnostic's nan) as strings: always valid JSON."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=True, allow_nan=False,
                              separators=(",", ":")).encode()
        except ValueError:
            return json.dumps(_finite(content), ensure_ascii=True, allow_nan=False,
                              separators=(",", ":")).encode()


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def unprocessable(msg: str) -> HTTPException:
    return HTTPException(422, msg)


# ---------------------------------------------------------------- query parameters

def query(request: Request, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query parameters, each known and given once (else 422 naming it)."""
    out: dict[str, str] = {}
    for k, v in request.query_params.multi_items():
        if k not in allowed:
            raise unprocessable(f"unknown query parameter {k[:40]!r} "
                                f"(known: {', '.join(allowed) or 'none'})")
        if k in out:
            raise unprocessable(f"query parameter {k} is given more than once")
        out[k] = v
    return out


@overload
def int_param(q: dict[str, str], name: str, lo: int, hi: int, default: int) -> int: ...


@overload
def int_param(q: dict[str, str], name: str, lo: int, hi: int, default: None) -> int | None: ...


def int_param(q: dict[str, str], name: str, lo: int, hi: int, default: int | None) -> int | None:
    v = q.get(name, "").strip()
    if not v:
        return default
    if not re.fullmatch(r"[+-]?\d{1,12}", v) or not lo <= int(v) <= hi:
        raise unprocessable(f"query parameter {name}: an integer in {lo}..{hi}, got {v[:40]!r}")
    return int(v)


def date_param(q: dict[str, str], name: str, end: bool = False) -> dt.datetime | None:
    """A date or time (UTC unless it says otherwise); a bare date as the end of
    a range includes that whole day."""
    v = q.get(name, "").strip()
    if not v:
        return None
    try:
        t = dt.datetime.fromisoformat(v) if len(v) <= 40 else None
    except ValueError:
        t = None
    if t is None:
        raise unprocessable(f"query parameter {name}: a date YYYY-MM-DD or an ISO time, "
                            f"got {v[:40]!r}")
    t = t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)
    if not DATE_RANGE[0] <= t.date() <= DATE_RANGE[1]:
        raise unprocessable(f"query parameter {name}: a date from {DATE_RANGE[0]} to "
                            f"{DATE_RANGE[1]}, got {v[:40]!r}")
    if end and len(v) == 10:
        t = t.replace(hour=23, minute=59, second=59, microsecond=999999)
    return t


def filters(q: dict[str, str]) -> Filters:
    kind, verdict = q.get("kind") or None, q.get("verdict") or None
    if kind is not None and kind not in KINDS:
        raise unprocessable(f"query parameter kind: one of {', '.join(KINDS)}, got {kind[:40]!r}")
    if verdict is not None and verdict not in VERDICTS:
        raise unprocessable(f"query parameter verdict: one of {', '.join(VERDICTS)}, "
                            f"got {verdict[:40]!r}")
    shas = {}
    for name in ("family", "model"):
        v = (q.get(name) or "").strip().lower() or None
        if v is not None and not SHA.match(v):
            raise unprocessable(f"query parameter {name}: a sha256 (64 hex digits), got {v[:70]!r}")
        shas[name] = v
    return Filters(kind=kind, verdict=verdict, family_sha256=shas["family"],
                   model_sha256=shas["model"], rank=int_param(q, "rank", 0, 1 << 20, None),
                   since=date_param(q, "since"), until=date_param(q, "until", end=True))


# ---------------------------------------------------------------- the app

def create_app(cfg: ServiceConfig, store: Store | None = None) -> FastAPI:
    """The service's application: its state, middleware and error handlers,
    then its routes (the pages, the health check, the certificates API, the
    jobs API and the favicon, in that order)."""
    svc = _Service.open(cfg, store)
    app = FastAPI(title="certify-attention", lifespan=_lifespan(svc), docs_url="/api/docs",
                  redoc_url=None, default_response_class=SafeJSON)
    app.state.store, app.state.queue, app.state.dispatcher, app.state.cfg = (
        svc.store, svc.queue, svc.dispatcher, cfg)
    # the request body is the upload plus a little multipart framing
    app.add_middleware(Guard, token=cfg.token, max_body=cfg.limits.upload_bytes + 64 * 1024,
                       open_submit_rate=cfg.open_submit_rate, read_rate=cfg.read_rate)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.add_middleware(Methods, routes=app.routes)        # outermost: 405 before 401
    _serve_openapi(app)
    _add_error_handlers(app, svc)
    _add_pages(app, svc)
    _add_health(app, svc)
    _add_certificates_api(app, svc)
    _add_jobs_api(app, svc)
    _add_favicon(app)
    return app


@dataclass
class _Service:
    """What the routes of one app share: the configuration, the store, the
    queue (and the quota it admits by), the dispatcher, the page templates, and
    the rendered certificate pages (immutable per sha256, so kept)."""

    cfg: ServiceConfig
    store: Store
    queue: Queue
    quota: Quota
    dispatcher: Dispatcher
    templates: Jinja2Templates
    pages: OrderedDict[str, bytes] = field(default_factory=OrderedDict)
    pages_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, cfg: ServiceConfig, store: Store | None = None) -> _Service:
        store = store or Store(cfg.db)
        queue = Queue(store, max_attempts=cfg.limits.max_attempts, keep_uploads=cfg.keep_uploads,
                      max_storage_bytes=cfg.max_storage_bytes)
        quota = Quota(max_storage_bytes=cfg.max_storage_bytes,
                      max_anonymous_queued=cfg.max_anonymous_queued,
                      open_submit_rate=cfg.open_submit_rate)
        dispatcher = Dispatcher(queue, Path(cfg.data) / "work", cfg.node, cfg.limits,
                                workers=cfg.workers, lease=cfg.lease_seconds, keep_work=cfg.keep_work,
                                launcher=Launcher(nice=cfg.job_nice),
                                retention_days=cfg.retention_days)
        templates = Jinja2Templates(directory=str(HERE / "templates"))
        templates.env.filters["short"] = lambda s: (s or "")[:12]
        templates.env.finalize = printable
        return cls(cfg, store, queue, quota, dispatcher, templates)

    def page(self, request: Request, name: str, **ctx: Any) -> HTMLResponse:
        return self.templates.TemplateResponse(request, name, {"limits": self.cfg.limits, **ctx})

    def cert_or_404(self, sha: str) -> CertificateRow:
        row = self.store.certificate(sha) if SHA.match(sha) else None
        if row is None:
            raise HTTPException(404, f"no certificate {sha[:64]}")
        return row

    def job_or_404(self, job_id: str) -> JobRow:
        job = self.queue.job(job_id) if JOB_ID.match(job_id) else None
        if job is None:
            raise HTTPException(404, "no such job")
        return job

    def job_view(self, job: JobRow) -> dict[str, Any]:
        """What a job's page shows, from its row: the server renders it (the
        page, and the fragment the page's script refreshes) and the API
        returns the same facts."""
        prog = _progress_of(job)
        try:
            result = json.loads(job.result) if job.result else None
        except ValueError:
            result = None
        result = result if isinstance(result, dict) else None
        started, finished = aware(job.started_at), aware(job.finished_at)
        as_of = dt.datetime.now(dt.timezone.utc)
        end = finished or (as_of if job.status == "running" else None)
        elapsed = (end - started).total_seconds() if started and end else None
        live = job.status in ("queued", "running")
        steps = prog["steps"] if prog else None
        if not live:
            percent = 100
        else:
            done_steps = (prog["step"] - 1 if prog else 0) if job.status == "running" else 0
            percent = round(100 * done_steps / steps) if steps else 0
        return {
            "job": job, "progress": prog, "live": live, "started": started, "finished": finished,
            "as_of": as_of,
            "elapsed": elapsed, "position": self.queue.position(job.id) if job.status == "queued" else None,
            "here": job.node_id == self.cfg.node, "percent": percent,
            "exit_meaning": _exit_meaning(job), "result": result,
            "verified": shown_verification(result.get("verification")) if result else None,
            "cert": self.store.certificate_facts(job.cert_sha256) if job.cert_sha256 else None}


def _lifespan(svc: _Service) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's life: the dispatcher runs while it serves (unless told not to)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread
        # few request threads: under load they take turns instead of sharing the GIL
        anyio.to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
        if svc.cfg.dispatch:
            svc.dispatcher.start()
        yield
        svc.dispatcher.stop()
        svc.store.dispose()
    return lifespan


def _serve_openapi(app: FastAPI) -> None:
    """The app's OpenAPI document is :func:`certify.service.openapi.document`'s, made once."""
    schema: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not schema:
            from certify.service.openapi import document
            schema.update(document(app))
        return schema
    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to replace it


def _add_error_handlers(app: FastAPI, svc: _Service) -> None:
    """A bad request is a 422 naming the field; a refusal is a page for a page
    and JSON elsewhere; a database outage is a 503; anything else a logged 500."""
    cfg, store = svc.cfg, svc.store

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errs = exc.errors()
        where = ".".join(str(x) for x in errs[0].get("loc", ())) if errs else "request"
        return SafeJSON({"detail": f"{where}: {errs[0].get('msg') if errs else 'invalid'}"}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        """Pages answer a refusal with a page; the API (and downloads) with JSON."""
        if _is_page(request.url.path):
            return svc.templates.TemplateResponse(request, "error.html", {
                "limits": cfg.limits, "status": exc.status_code, "detail": printable(str(exc.detail)),
                "title": HTTPStatus(exc.status_code).phrase if exc.status_code in _PHRASES else "error"},
                status_code=exc.status_code, headers=getattr(exc, "headers", None))
        return SafeJSON({"detail": exc.detail}, exc.status_code, headers=getattr(exc, "headers", None))

    def _unavailable(request: Request, exc: Exception) -> Response:
        """The database is not answering: 503 with the reason, a page for a page
        (one log line per outage: :class:`certify.service.health.Health`)."""
        store.health.failed(exc)
        detail = printable(store.health.refusing())
        headers = {"Retry-After": str(max(1, math.ceil(RETRY_SECONDS)) + 1)}
        if _is_page(request.url.path):
            return svc.templates.TemplateResponse(request, "error.html", {
                "limits": cfg.limits, "status": 503, "title": "Service Unavailable",
                "detail": detail, "retry": True}, status_code=503, headers=headers)
        return SafeJSON({"detail": detail}, 503, headers=headers)

    async def _outage_or_internal(request: Request, exc: Exception):
        if is_outage(exc):
            return _unavailable(request, exc)
        return await _internal(request, exc)

    for kind in (DatabaseUnavailable, sa_exc.DBAPIError, sa_exc.TimeoutError):
        app.add_exception_handler(kind, _outage_or_internal)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        if is_outage(exc):
            return _unavailable(request, exc)
        print(f"certify serve: internal error on {request.method} {request.url.path}\n"
              + "".join(traceback.format_exception(exc)).rstrip(), file=sys.stderr, flush=True)
        return SafeJSON({"detail": "internal error (logged on the server)"}, 500)


def _add_pages(app: FastAPI, svc: _Service) -> None:
    """The HTML pages: the certificate list, a certificate (its JSON and report
    files too), the submit and verify forms, a job, its state, the job list."""
    store, queue = svc.store, svc.queue

    @app.get("/", response_class=HTMLResponse, operation_id="list_page")
    def index(request: Request):
        q = query(request, FILTER_PARAMS + ("offset",))
        f = filters(q)
        offset = int_param(q, "offset", 0, 10**9, 0)
        rows = store.certificates(f, limit=PAGE + 1, offset=offset)
        keep = {k: v for k, v in q.items() if k != "offset" and v}
        nav = {"prev": urlencode({**keep, "offset": max(0, offset - PAGE)}) if offset else None,
               "next": urlencode({**keep, "offset": offset + PAGE}) if len(rows) > PAGE else None,
               "first": offset + 1, "last": offset + min(PAGE, len(rows))}
        return svc.page(request, "list.html", rows=rows[:PAGE], f=f, kinds=KINDS, verdicts=VERDICTS,
                        nav=nav)

    @app.get("/certificates/{sha}", response_class=HTMLResponse, operation_id="certificate_page")
    def certificate_page(request: Request, sha: str):
        query(request, ())
        with svc.pages_lock:
            cached = svc.pages.get(sha)
        if cached is not None and store.exists(sha):
            return HTMLResponse(cached)
        body = bytes(_render_certificate(svc, request, sha).body)
        with svc.pages_lock:
            svc.pages[sha] = body
            while len(svc.pages) > PAGE_CACHE:
                svc.pages.popitem(last=False)
        return HTMLResponse(body)

    @app.get("/certificates/{sha}/certificate.json", operation_id="certificate_download")
    def certificate_download(request: Request, sha: str):
        query(request, ())
        row = svc.cert_or_404(sha)
        return Response(row.json_text.encode("utf-8", "backslashreplace"),
                        media_type="application/json", headers={
                            "Content-Disposition": f'attachment; filename="certificate-{sha[:12]}.json"'})

    @app.get("/certificates/{sha}/files/{name}", operation_id="certificate_file")
    def certificate_file(request: Request, sha: str, name: str):
        query(request, ())
        svc.cert_or_404(sha)
        data = store.file(sha, name)              # only stored names: no path from the user
        if data is None:
            raise HTTPException(404, "no such file")
        return Response(data, media_type=MEDIA.get(Path(name).suffix, "application/octet-stream"))

    @app.get("/submit", response_class=HTMLResponse, operation_id="submit_page")
    def submit_page(request: Request):
        query(request, ())
        return svc.page(request, "submit.html")

    @app.get("/verify", response_class=HTMLResponse, operation_id="verify_page")
    def verify_page(request: Request):
        query(request, ())
        return svc.page(request, "verify.html")

    @app.get("/jobs/{job_id}", response_class=HTMLResponse, operation_id="job_page")
    def job_page(request: Request, job_id: str):
        query(request, ())
        return svc.page(request, "job.html", **svc.job_view(svc.job_or_404(job_id)))

    @app.get("/jobs/{job_id}/state", response_class=HTMLResponse, operation_id="job_state")
    def job_state(request: Request, job_id: str):
        """The job's state as its page renders it (what the page's script
        refreshes: it never computes anything of its own)."""
        query(request, ())
        return svc.page(request, "job_state.html", **svc.job_view(svc.job_or_404(job_id)))

    @app.get("/jobs", response_class=HTMLResponse, operation_id="jobs_page")
    def jobs_page(request: Request):
        query(request, ())
        return svc.page(request, "jobs.html", jobs=queue.jobs(PAGE))


def _render_certificate(svc: _Service, request: Request, sha: str) -> HTMLResponse:
    """A certificate's page: its claims (each rendered by the certificate's own
    renderer), the server's verification, its inputs, figures and report."""
    row = svc.cert_or_404(sha)
    cert = json.loads(row.json_text)
    ver = json.loads(row.verification) if row.verification else None
    files = [n for n, _ in svc.store.files(sha)]
    figures = [f for f in files if f.endswith(".png")]
    shown = shown_verification(ver) if ver else None
    checks = shown["claims"] if shown else []
    claims = []
    raw = cert.get("claims") if isinstance(cert.get("claims"), list) else []
    for i, c in enumerate(x if isinstance(x, dict) else {} for x in raw):
        said: Any = c.get("verdict")          # any JSON value
        verdict = said if said in VERDICTS else "unknown"
        claims.append({"c": c, "rendered": _rendered(c, cert.get("renderer")),
                       "check": checks[i] if i < len(checks) else None, "verdict": verdict,
                       "kind_label": kind_label(c.get("kind")),
                       "said": VERDICT_WORDS.get(said, str(said).upper()),
                       "parameters": json.dumps(c.get("parameters", {}), indent=1)})
    md = svc.store.file(sha, "report.md") if "report.md" in files else None
    report_md = md.decode("utf-8", errors="replace") if md is not None else None
    command = cert.get("command")
    inputs = cert.get("inputs") if isinstance(cert.get("inputs"), dict) else {}
    from certify.checkers.verify import release_refusal, remake_command
    refused = release_refusal(cert)       # a version this release no longer reads (after an upgrade)
    return svc.page(request, "certificate.html", row=row, cert=cert, claims=claims, ver=shown,
                    refused=refused, remake=remake_command(cert) if refused else None,
                    files=files, figures=figures, report_md=report_md,
                    command=" ".join(map(str, command)) if isinstance(command, list) else str(command or ""),
                    created=str(cert.get("created", "")),
                    named_inputs=[{"label": input_label(n), "sha256": str(h)} for n, h in inputs.items()],
                    inputs=_shown_inputs(ver, row))


def _add_health(app: FastAPI, svc: _Service) -> None:
    """``/api/health``: the queue's and the store's figures, as this node sees them."""
    cfg, store, queue = svc.cfg, svc.store, svc.queue

    @app.get("/api/health", operation_id="health")
    def health(request: Request):
        query(request, ())
        return {"ok": True, "node": cfg.node, "queued": queue.count("queued"),
                "queued_anonymous": queue.count("queued", anonymous=True),
                "running": queue.count("running"), "running_here": len(svc.dispatcher.running),
                "storage_bytes": store.storage_used(1.0), "max_storage_bytes": cfg.max_storage_bytes}


def _add_certificates_api(app: FastAPI, svc: _Service) -> None:
    """The certificates API: the list (filters), one certificate's JSON, its
    verification, and deleting one (which the token guards)."""
    store = svc.store

    @app.get("/api/certificates", operation_id="list_certificates")
    def api_certificates(request: Request):
        q = query(request, FILTER_PARAMS + ("limit", "offset"))
        limit = int_param(q, "limit", 1, 1000, PAGE)
        offset = int_param(q, "offset", 0, 10**9, 0)
        rows = store.certificates(filters(q), limit=limit, offset=offset)
        return [as_dict(r) for r in rows]

    @app.get("/api/certificates/{sha}", operation_id="get_certificate")
    def api_certificate(request: Request, sha: str):
        query(request, ())
        return Response(svc.cert_or_404(sha).json_text.encode("utf-8", "backslashreplace"),
                        media_type="application/json")

    @app.get("/api/certificates/{sha}/verification", operation_id="get_verification")
    def api_verification(request: Request, sha: str):
        query(request, ())
        row = svc.cert_or_404(sha)
        from certify.checkers.verify import release_refusal, remake_command
        cert = json.loads(row.json_text)
        refused = release_refusal(cert)
        if refused is not None:               # made by an earlier release; this one refuses its version
            return {"mode": row.verify_mode, "exit_code": EXIT_BAD_INPUT, "refused": refused,
                    "remake": remake_command(cert), "made_with_exit_code": row.verify_exit,
                    "verification": json.loads(row.verification) if row.verification else None}
        return {"mode": row.verify_mode, "exit_code": row.verify_exit,
                "verification": json.loads(row.verification) if row.verification else None}

    @app.delete("/api/certificates/{sha}", operation_id="delete_certificate")
    def api_delete(request: Request, sha: str):
        query(request, ())
        if not SHA.match(sha) or not store.delete_certificate(sha):
            raise HTTPException(404, f"no certificate {sha[:64]}")
        with svc.pages_lock:
            svc.pages.pop(sha, None)
        return {"deleted": sha}


def _add_jobs_api(app: FastAPI, svc: _Service) -> None:
    """The jobs API: a job's state, and submitting a job (the token's) or a
    certificate to verify (open to all, within the anonymous limits)."""

    @app.get("/api/jobs/{job_id}", operation_id="get_job")
    def api_job(request: Request, job_id: str):
        query(request, ())
        job = svc.job_or_404(job_id)
        doc = as_dict(job)
        doc["options"] = json.loads(job.options)
        doc["result"] = json.loads(job.result) if job.result else None
        for k in ("upload_storage", "claim_id", "lease_until", "client", "created_epoch",
                  "reserved_bytes", "result_bytes"):
            doc.pop(k, None)                  # internal: leases, accounting, the client's address
        view = svc.job_view(job)
        doc["progress"] = view["progress"]
        doc["stage"] = (view["progress"] or {}).get("stage", STARTING) \
            if job.status == "running" else None
        doc["elapsed_seconds"] = None if view["elapsed"] is None else round(view["elapsed"], 1)
        doc["queue_position"] = view["position"]
        doc["exit_meaning"] = view["exit_meaning"]
        doc["certificate_page"] = f"/certificates/{job.cert_sha256}" if job.cert_sha256 else None
        return doc

    @app.post("/api/jobs", operation_id="submit_job")
    async def api_submit(request: Request):
        return await _submit(svc, request, None)

    @app.post("/api/verify", operation_id="submit_verify")
    async def api_verify(request: Request):
        return await _submit(svc, request, "verify")


def _admission(svc: _Service, anonymous: bool) -> tuple[int, int]:
    """(anonymous jobs waiting, bytes stored), a second old at most: an early
    refusal that spares reading the body; the decision is :meth:`Queue.add`'s."""
    waiting = svc.queue.count("queued", anonymous=True) if anonymous else 0
    return waiting, svc.store.storage_used(1.0)


def _enqueue(svc: _Service, command: str, opts: dict, name: str | None, data: bytes | None,
             anonymous: bool, client: str | None) -> str | SafeJSON:
    """Hash and check the upload, then admit and queue the job in one
    transaction: the blocking part of a submission, in one worker thread."""
    up = None
    if data is not None:
        assert name is not None             # the bytes come only with an upload, which is named
        suffix = Path(name).suffix.lower()
        if suffix == ".zip":
            try:
                check_zip(io.BytesIO(data), svc.cfg.limits.unpacked_bytes)
            except InputError as exc:
                return SafeJSON({"detail": printable(f"file: {name}: {exc}")}, 422)
        up = Upload(name=name, sha256=hashlib.sha256(data).hexdigest(), suffix=suffix, data=data)
    try:
        return svc.queue.add(command, opts, upload=up, anonymous=anonymous, client=client,
                             quota=svc.quota)
    except Refused as no:
        return SafeJSON({"detail": no.detail}, no.status, headers=(
            {"Retry-After": str(no.retry_after)} if no.retry_after else None))


async def _submit(svc: _Service, request: Request, forced_command: str | None) -> Response:
    """A submission (``forced_command`` for ``/api/verify``): its form checked
    field by field before the body is read, then queued (or refused)."""
    cfg = svc.cfg
    query(request, ())
    anonymous = forced_command == "verify" and not _has_token(request, cfg.token)
    client = request.client.host if request.client else None
    waiting, used = await run_in_threadpool(_admission, svc, anonymous)
    if anonymous and waiting >= cfg.max_anonymous_queued:
        return SafeJSON({"detail": f"{cfg.max_anonymous_queued} jobs submitted without the "
                                   f"token are waiting (--max-anonymous-queued); try again "
                                   f"later"}, 429, headers={"Retry-After": "30"})
    if used >= cfg.max_storage_bytes:
        return _storage_full(used, cfg)
    form = await request.form(max_files=2, max_fields=40)     # a second file: refused below, 422
    try:
        names = [k for k, _ in form.multi_items()]
        twice = sorted({k for k in names if names.count(k) > 1})
        if twice:
            raise InputError(f"{twice[0][:40]}: the field is given {names.count(twice[0])} "
                             f"times; give it once")
        raw = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        files = [v for k, v in form.multi_items() if not isinstance(v, str)]
        if any(k != "file" for k, v in form.multi_items() if not isinstance(v, str)):
            raise InputError("file: the upload's field must be named 'file'")
        upload = files[0] if files and files[0].filename else None
        command = forced_command or raw.get("command", "")
        if forced_command is not None:
            raw.pop("command", None)
        name = safe_name(upload.filename) if upload else None
        # before the body is read (off the event loop: a family's code is searched)
        await run_in_threadpool(check_options, command, raw, name, cfg.limits.time_seconds)
        data = None
        if upload is not None:
            data = await upload.read(cfg.limits.upload_bytes + 1)
            if len(data) > cfg.limits.upload_bytes:
                return SafeJSON({"detail": f"upload larger than the limit of "
                                           f"{cfg.limits.upload_bytes} bytes"}, 413)
            if not data:
                raise InputError(f"file: {name} is empty")
        # again with the upload: what depends on it (a family's code, a matrix's
        # shape against the token set) is checked as the job would, off the event loop
        opts = await run_in_threadpool(check_options, command, raw, name,
                                       cfg.limits.time_seconds, data)
    except InputError as exc:
        return SafeJSON({"detail": printable(str(exc))}, 422)
    finally:
        await form.close()
    job_id = await run_in_threadpool(_enqueue, svc, command, opts, name, data, anonymous, client)
    if not isinstance(job_id, str):
        return job_id                                    # a refusal
    svc.dispatcher.wake()
    if _wants_page(request):             # a form sent by a browser without the script
        return RedirectResponse(f"/jobs/{job_id}", 303)
    return SafeJSON({"id": job_id, "status": "queued", "page": f"/jobs/{job_id}",
                     "api": f"/api/jobs/{job_id}"}, 201)


def _add_favicon(app: FastAPI) -> None:
    """``/favicon.ico``: the static folder's icon (that folder is mounted at ``/static``)."""

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return RedirectResponse("/static/favicon.svg")


class Methods:
    """Every path's methods, said truly (ASGI middleware, outside the token
    check): ``OPTIONS`` answers 204 with ``Allow`` listing every method some
    route of the path takes; a method none of them takes is 405 with the same
    ``Allow``, before any token is asked for. An unknown path goes on to 404."""

    def __init__(self, app, routes):
        self.app, self.routes = app, routes

    def allowed(self, path: str) -> set[str] | None:
        from starlette.routing import Mount
        methods: set[str] | None = None
        for r in self.routes:
            if isinstance(r, Mount):
                hit = path.startswith(r.path + "/")
                ms = {"GET", "HEAD"}
            else:
                hit = bool(getattr(r, "path_regex", None) and r.path_regex.match(path))
                ms = set(getattr(r, "methods", None) or ())
            if hit:
                methods = (methods or set()) | ms
        return methods

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        allowed = self.allowed(scope["path"])
        method = scope["method"]
        if allowed is None or (method in allowed and method != "OPTIONS"):
            return await self.app(scope, receive, send)
        allow = ", ".join(sorted(allowed | {"OPTIONS"})).encode()
        if method == "OPTIONS":
            await send({"type": "http.response.start", "status": 204,
                        "headers": [(b"allow", allow), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        from certify.service.guard import send_json
        await send_json(send, 405, {"detail": f"{method[:16]} is not a method of this path "
                                              f"(it takes {allow.decode()})"},
                        headers=[(b"allow", allow)])


def _wants_page(request: Request) -> bool:
    """A browser's own form submission (it asks for HTML first), not a script's
    or a client's: it is sent on to the job's page."""
    accept = request.headers.get("accept", "")
    return accept.startswith("text/html")


def _has_token(request: Request, token: str) -> bool:
    import hmac
    auth = request.headers.get("authorization", "")
    given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _storage_full(used: int, cfg: ServiceConfig) -> SafeJSON:
    from certify.service.queue import storage_full
    return SafeJSON({"detail": storage_full(used, cfg.max_storage_bytes)}, 507)


#: what a finished job's exit status means (the commands' exit codes, docs/design.md)
JOB_EXIT = {0: "every claim is proved", 1: "a claim is refuted or unknown (see its reason)",
            2: "bad input", 3: "the input is outside what can be certified"}


def _exit_meaning(job) -> str | None:
    if job.exit_code is None or job.status not in ("done", "failed"):
        return None
    if job.command == "verify" and job.status == "done":
        from certify.api import VERIFY_EXIT_MEANING
        return VERIFY_EXIT_MEANING.get(job.exit_code, f"exit status {job.exit_code}")
    return JOB_EXIT.get(job.exit_code, f"exit status {job.exit_code}")


def _progress_of(job) -> dict[str, Any] | None:
    """A running job's progress (the worker's JSON, read defensively)."""
    if job.status != "running" or not job.progress:
        return None
    try:
        p = json.loads(job.progress)
        step, steps = int(p["step"]), int(p["steps"])
    except (ValueError, KeyError, TypeError):
        return None
    if not 1 <= step <= steps <= 10:
        return None
    num = lambda v: v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None  # noqa: E731
    return {"step": step, "steps": steps, "stage": str(p.get("stage", ""))[:200],
            "claims": num(p.get("claims")), "checked": num(p.get("checked"))}


#: the claim kinds in words (the kind's own name follows in parentheses)
KIND_LABELS = {"bound": "closed-form bound", "exact_rank": "exact rank", "eps_rank": "eps-rank",
               "numerical_rank": "numerical rank of a float matrix",
               "code_rank": "rank on a code", "feasible": "feasibility (a head exists)",
               "infeasible": "infeasibility (no head exists)", "correctness": "correctness on the family",
               "gap_domination": "gap domination", "transcript": "transcript bound (Theorem 9)",
               "nonnegative": "nonnegative features", "theorem": "a theorem on a concrete object"}

#: what ``certify verify`` found for an input, in words
INPUT_STATUS = {
    "match": "present; its sha256 matches the certificate's (re-hashed by the server's verify)",
    "MISMATCH": "present, but its sha256 differs from the certificate's: the claims are not about this file",
    "absent": "not found beside the certificate, so not re-hashed",
    "bound per claim": "built in, not a file: each claim that uses it names the family's sha256, "
                       "checked with that claim",
    "built-in": "built in, not a file: each claim that uses it names the family's sha256, "
                "checked with that claim"}


def kind_label(kind: Any) -> str:
    k = str(kind)
    return f"{KIND_LABELS[k]} ({k})" if k in KIND_LABELS else k


def input_label(name: str) -> str:
    """An input's name as the page says it: ``family:paper-5.1`` is the built-in
    family paper-5.1, ``upload:m.zip`` the file submitted to the server."""
    name = str(name)
    if name.startswith("family:"):
        return f"built-in family {name[len('family:'):]}"
    if name.startswith("upload:"):
        return f"the upload {name[len('upload:'):]}"
    return f"file {name}"


def shown_verification(ver: Any) -> dict[str, Any] | None:
    """A verification summary with every field a page shows, read defensively
    (a missing field is shown as missing, never as a pass)."""
    if not isinstance(ver, dict):
        return None
    num = lambda v: v if isinstance(v, int) and not isinstance(v, bool) else "?"  # noqa: E731
    given, listed = ver.get("counts"), ver.get("claims")
    counts: dict[Any, Any] = given if isinstance(given, dict) else {}
    claims = []
    for c in listed if isinstance(listed, list) else []:
        c = c if isinstance(c, dict) else {}
        claims.append({"holds": c.get("holds") is True, "line": str(c.get("line", "")),
                       "problems": [str(p) for p in c.get("problems") or []],
                       "trusted": [str(t) for t in c.get("trusted") or []]})
    lst = lambda v: [str(a) for a in v] if isinstance(v, list) else []  # noqa: E731
    return {"exit_code": num(ver.get("exit_code")), "exit_meaning": str(ver.get("exit_meaning", "")),
            "counts": {k: num(counts.get(k)) for k in ("proved", "refuted", "unknown", "failed")},
            "open_assumptions": lst(ver.get("open_assumptions")), "claims": claims}


def _shown_inputs(ver: dict | None, row) -> list[dict]:
    """The verification's inputs as the page lists them, in words: the server's
    own upload (``upload:NAME``, hashed by the server when it arrived, then
    unpacked or deleted) is said to be that, never "absent"."""
    out = []
    given = (ver or {}).get("inputs")
    inputs: list[Any] = given if isinstance(given, list) else []
    for i in inputs:
        i = i if isinstance(i, dict) else {}
        name, status = str(i.get("name", "")), str(i.get("status", ""))
        if name.startswith("upload:") and status == "absent":
            status = (f"the file submitted to this server (sha256 {row.source_sha256 or '?'} computed "
                      f"when it arrived; not kept after the job)")
        else:
            status = INPUT_STATUS.get(status, status)
        out.append({"name": name, "label": input_label(name), "status": status})
    return out


def _rendered(claim: dict[str, Any], version: str | None) -> str:
    """The claim's statement rendered by the certificate's own renderer version
    (``certify.checkers.statements``), else the stored statement."""
    from certify.checkers import statements
    if version is None:
        return claim.get("statement", "")
    try:
        return statements.render(claim["kind"], claim.get("parameters", {}),
                                 claim.get("evidence", {}), version=version).text
    except (statements.RenderError, KeyError, TypeError):
        return claim.get("statement", "")
