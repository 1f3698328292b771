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
from contextlib import asynccontextmanager
from http import HTTPStatus
from urllib.parse import urlencode
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy import exc as sa_exc
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from certify.checkers.verify import VERDICT_WORDS
from certify.core.errors import InputError
from certify.service.config import ServiceConfig
from certify.service.dispatcher import Dispatcher
from certify.service.guard import Guard
from certify.service.health import RETRY_SECONDS, DatabaseUnavailable, is_outage
from certify.service.launcher import Launcher
from certify.service.options import check_options
from certify.service.queue import Queue, Quota, Refused, Upload
from certify.service.store import Filters, Store, as_dict
from certify.service.uploads import check_zip, safe_name

HERE = Path(__file__).resolve().parent
VERDICTS = ("proved", "refuted", "unknown")
KINDS = ("bound", "exact_rank", "eps_rank", "code_rank", "feasible", "infeasible", "correctness",
         "gap_domination", "transcript", "nonnegative")
SHA = re.compile(r"^[0-9a-f]{64}$")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
FILTER_PARAMS = ("kind", "verdict", "rank", "family", "model", "since", "until")
PAGE = 50                     # rows per list page (and the API's default limit)
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
    """Strings with every lone surrogate shown as its JSON escape ``\\udXXX``."""
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

    @asynccontextmanager
    async def lifespan(app):
        import anyio.to_thread
        # few request threads: under load they take turns instead of sharing the GIL
        anyio.to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
        if cfg.dispatch:
            dispatcher.start()
        yield
        dispatcher.stop()
        store.dispose()

    app = FastAPI(title="certify-attention", lifespan=lifespan, docs_url="/api/docs",
                  redoc_url=None, default_response_class=SafeJSON)
    app.state.store, app.state.queue, app.state.dispatcher, app.state.cfg = store, queue, dispatcher, cfg
    # the request body is the upload plus a little multipart framing
    app.add_middleware(Guard, token=cfg.token, max_body=cfg.limits.upload_bytes + 64 * 1024,
                       open_submit_rate=cfg.open_submit_rate, read_rate=cfg.read_rate)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errs = exc.errors()
        where = ".".join(str(x) for x in errs[0].get("loc", ())) if errs else "request"
        return SafeJSON({"detail": f"{where}: {errs[0].get('msg') if errs else 'invalid'}"}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        """Pages answer a refusal with a page; the API (and downloads) with JSON."""
        if _is_page(request.url.path):
            return templates.TemplateResponse(request, "error.html", {
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
            return templates.TemplateResponse(request, "error.html", {
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

    def page(request: Request, name: str, **ctx) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"limits": cfg.limits, **ctx})

    def cert_or_404(sha: str):
        row = store.certificate(sha) if SHA.match(sha) else None
        if row is None:
            raise HTTPException(404, f"no certificate {sha[:64]}")
        return row

    def job_or_404(job_id: str):
        job = queue.job(job_id) if JOB_ID.match(job_id) else None
        if job is None:
            raise HTTPException(404, "no such job")
        return job

    # ------------------------------------------------------------ pages

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request):
        q = query(request, FILTER_PARAMS + ("offset",))
        f = filters(q)
        offset = int_param(q, "offset", 0, 10**9, 0)
        rows = store.certificates(f, limit=PAGE + 1, offset=offset)
        keep = {k: v for k, v in q.items() if k != "offset" and v}
        nav = {"prev": urlencode({**keep, "offset": max(0, offset - PAGE)}) if offset else None,
               "next": urlencode({**keep, "offset": offset + PAGE}) if len(rows) > PAGE else None,
               "first": offset + 1, "last": offset + min(PAGE, len(rows))}
        return page(request, "list.html", rows=rows[:PAGE], f=f, kinds=KINDS, verdicts=VERDICTS,
                    nav=nav)

    pages: OrderedDict[str, bytes] = OrderedDict()    # certificate pages: immutable per sha256
    pages_lock = threading.Lock()

    @app.get("/certificates/{sha}", response_class=HTMLResponse)
    def certificate_page(request: Request, sha: str):
        query(request, ())
        with pages_lock:
            cached = pages.get(sha)
        if cached is not None and store.exists(sha):
            return HTMLResponse(cached)
        body = render_certificate(request, sha).body
        with pages_lock:
            pages[sha] = body
            while len(pages) > PAGE_CACHE:
                pages.popitem(last=False)
        return HTMLResponse(body)

    def render_certificate(request: Request, sha: str) -> HTMLResponse:
        row = cert_or_404(sha)
        cert = json.loads(row.json_text)
        ver = json.loads(row.verification) if row.verification else None
        files = [n for n, _ in store.files(sha)]
        figures = [f for f in files if f.endswith(".png")]
        claims = []
        for i, c in enumerate(cert["claims"]):
            check = ver["claims"][i] if ver and i < len(ver["claims"]) else None
            claims.append({"c": c, "rendered": _rendered(c, cert.get("renderer")), "check": check,
                           "said": VERDICT_WORDS.get(c.get("verdict"), str(c.get("verdict")).upper()),
                           "parameters": json.dumps(c.get("parameters", {}), indent=1)})
        md = store.file(sha, "report.md") if "report.md" in files else None
        report_md = md.decode("utf-8", errors="replace") if md is not None else None
        return page(request, "certificate.html", row=row, cert=cert, claims=claims, ver=ver,
                    files=files, figures=figures, report_md=report_md,
                    inputs=_shown_inputs(ver, row))

    @app.get("/certificates/{sha}/certificate.json")
    def certificate_download(request: Request, sha: str):
        query(request, ())
        row = cert_or_404(sha)
        return Response(row.json_text.encode("utf-8", "backslashreplace"),
                        media_type="application/json", headers={
                            "Content-Disposition": f'attachment; filename="certificate-{sha[:12]}.json"'})

    @app.get("/certificates/{sha}/files/{name}")
    def certificate_file(request: Request, sha: str, name: str):
        query(request, ())
        cert_or_404(sha)
        data = store.file(sha, name)              # only stored names: no path from the user
        if data is None:
            raise HTTPException(404, "no such file")
        return Response(data, media_type=MEDIA.get(Path(name).suffix, "application/octet-stream"))

    @app.get("/submit", response_class=HTMLResponse)
    def submit_page(request: Request):
        query(request, ())
        return page(request, "submit.html")

    @app.get("/verify", response_class=HTMLResponse)
    def verify_page(request: Request):
        query(request, ())
        return page(request, "verify.html")

    @app.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(request: Request, job_id: str):
        query(request, ())
        return page(request, "job.html", job=job_or_404(job_id))

    @app.get("/jobs", response_class=HTMLResponse)
    def jobs_page(request: Request):
        query(request, ())
        return page(request, "jobs.html", jobs=queue.jobs(PAGE))

    # ------------------------------------------------------------ API

    @app.get("/api/health")
    def health():
        return {"ok": True, "node": cfg.node, "queued": queue.count("queued"),
                "queued_anonymous": queue.count("queued", anonymous=True),
                "running": queue.count("running"), "running_here": len(dispatcher.running),
                "storage_bytes": store.storage_used(1.0), "max_storage_bytes": cfg.max_storage_bytes}

    @app.get("/api/certificates")
    def api_certificates(request: Request):
        q = query(request, FILTER_PARAMS + ("limit", "offset"))
        limit = int_param(q, "limit", 1, 1000, PAGE)
        offset = int_param(q, "offset", 0, 10**9, 0)
        rows = store.certificates(filters(q), limit=limit, offset=offset)
        return [as_dict(r) for r in rows]

    @app.get("/api/certificates/{sha}")
    def api_certificate(request: Request, sha: str):
        query(request, ())
        return Response(cert_or_404(sha).json_text.encode("utf-8", "backslashreplace"),
                        media_type="application/json")

    @app.get("/api/certificates/{sha}/verification")
    def api_verification(request: Request, sha: str):
        query(request, ())
        row = cert_or_404(sha)
        return {"mode": row.verify_mode, "exit_code": row.verify_exit,
                "verification": json.loads(row.verification) if row.verification else None}

    @app.delete("/api/certificates/{sha}")
    def api_delete(request: Request, sha: str):
        query(request, ())
        if not SHA.match(sha) or not store.delete_certificate(sha):
            raise HTTPException(404, f"no certificate {sha[:64]}")
        with pages_lock:
            pages.pop(sha, None)
        return {"deleted": sha}

    @app.get("/api/jobs/{job_id}")
    def api_job(request: Request, job_id: str):
        query(request, ())
        job = job_or_404(job_id)
        doc = as_dict(job)
        doc["options"] = json.loads(job.options)
        doc["result"] = json.loads(job.result) if job.result else None
        for k in ("upload_storage", "claim_id", "lease_until"):
            doc.pop(k, None)
        doc["stage"] = None
        if job.status == "running":
            doc["stage"] = dispatcher.stage(job.id) or "running on another server"
        return doc

    def admission(anonymous: bool) -> tuple[int, int]:
        """(anonymous jobs waiting, bytes stored), a second old at most: an early
        refusal that spares reading the body; the decision is :meth:`Queue.add`'s."""
        waiting = queue.count("queued", anonymous=True) if anonymous else 0
        return waiting, store.storage_used(1.0)

    def enqueue(command: str, opts: dict, name: str | None, data: bytes | None,
                anonymous: bool, client: str | None) -> str | SafeJSON:
        """Hash and check the upload, then admit and queue the job in one
        transaction: the blocking part of a submission, in one worker thread."""
        up = None
        if data is not None:
            suffix = Path(name).suffix.lower()
            if suffix == ".zip":
                try:
                    check_zip(io.BytesIO(data), cfg.limits.unpacked_bytes)
                except InputError as exc:
                    return SafeJSON({"detail": printable(f"file: {name}: {exc}")}, 422)
            up = Upload(name=name, sha256=hashlib.sha256(data).hexdigest(), suffix=suffix, data=data)
        try:
            return queue.add(command, opts, upload=up, anonymous=anonymous, client=client,
                             quota=quota)
        except Refused as no:
            return SafeJSON({"detail": no.detail}, no.status, headers=(
                {"Retry-After": str(no.retry_after)} if no.retry_after else None))

    async def _submit(request: Request, forced_command: str | None):
        query(request, ())
        anonymous = forced_command == "verify" and not _has_token(request, cfg.token)
        client = request.client.host if request.client else None
        waiting, used = await run_in_threadpool(admission, anonymous)
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
        job_id = await run_in_threadpool(enqueue, command, opts, name, data, anonymous, client)
        if not isinstance(job_id, str):
            return job_id                                    # a refusal
        dispatcher.wake()
        return SafeJSON({"id": job_id, "status": "queued", "page": f"/jobs/{job_id}",
                         "api": f"/api/jobs/{job_id}"}, 201)

    @app.post("/api/jobs")
    async def api_submit(request: Request):
        return await _submit(request, None)

    @app.post("/api/verify")
    async def api_verify(request: Request):
        return await _submit(request, "verify")

    @app.get("/favicon.ico")
    def favicon():
        return RedirectResponse("/static/favicon.svg")

    return app


def _has_token(request: Request, token: str) -> bool:
    import hmac
    auth = request.headers.get("authorization", "")
    given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _storage_full(used: int, cfg: ServiceConfig) -> SafeJSON:
    from certify.service.queue import storage_full
    return SafeJSON({"detail": storage_full(used, cfg.max_storage_bytes)}, 507)


def _shown_inputs(ver: dict | None, row) -> list[dict]:
    """The verification's inputs as the page lists them: the server's own
    upload (``upload:NAME``, hashed by the server when it arrived, then
    unpacked or deleted) is said to be that, never "absent"."""
    out = []
    for i in (ver or {}).get("inputs", []):
        name, status = str(i.get("name", "")), str(i.get("status", ""))
        if name.startswith("upload:") and status == "absent":
            status = (f"the file submitted to this server (sha256 {row.source_sha256 or '?'} computed "
                      f"when it arrived; not kept after the job)")
        out.append({"name": name, "status": status})
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
