"""The web application of ``certify serve`` (FastAPI, Jinja2 pages, a JSON API).

Reading is open: the certificate list (filters), a certificate's page, its
JSON (verbatim), report and figures, a job's progress. Submitting a job and
deleting a certificate need the server's token (``Authorization: Bearer``),
compared in constant time before the request body is read. Verifying an
uploaded certificate is open and runs as a job like any other. Request
bodies above the upload limit are refused with 413 before anything is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from certify.core.errors import InputError
from certify.service import jobs as _jobs
from certify.service.store import Filters, Store, as_dict

HERE = Path(__file__).resolve().parent
VERDICTS = ("proved", "refuted", "unknown")
KINDS = ("bound", "exact_rank", "eps_rank", "code_rank", "feasible", "infeasible", "correctness",
         "gap_domination", "transcript", "nonnegative")


@dataclass
class ServiceConfig:
    data: Path
    db: str
    token: str
    limits: _jobs.Limits = field(default_factory=_jobs.Limits)
    workers: int = 2
    dispatch: bool = True          # run the job dispatcher in this process


# ---------------------------------------------------------------- guard (ASGI)

class _TooLarge(Exception):
    pass


class Guard:
    """Token check for submit/delete and the body-size limit, before the app
    reads the body (so a refused request stores nothing)."""

    def __init__(self, app, token: str, max_body: int):
        self.app, self.token, self.max_body = app, token.encode(), max_body

    def _needs_token(self, method: str, path: str) -> bool:
        return (method == "POST" and path == "/api/jobs") or \
            (method == "DELETE" and path.startswith("/api/certificates/"))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method, path = scope["method"], scope["path"]
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        if self._needs_token(method, path):
            auth = headers.get("authorization", b"")
            given = auth[7:].strip() if auth[:7].lower() == b"bearer " else b""
            if not given or not hmac.compare_digest(given, self.token):
                return await _json(send, 401, {"detail": "a valid token is required "
                                                         "(Authorization: Bearer TOKEN)"})
        if method in ("POST", "PUT", "PATCH"):
            try:
                length = int(headers.get("content-length", b"-1"))
            except ValueError:
                return await _json(send, 400, {"detail": "bad Content-Length"})
            if length > self.max_body:
                return await _json(send, 413, {"detail": f"upload larger than the limit of "
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
                    return await _json(send, 413, {"detail": f"upload larger than the limit "
                                                             f"of {self.max_body} bytes"})
                raise
        return await self.app(scope, receive, send)


async def _json(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


# ---------------------------------------------------------------- app

def create_app(cfg: ServiceConfig) -> FastAPI:
    data = Path(cfg.data)
    for sub in ("uploads", "certificates", "work"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    store = Store(cfg.db)
    dispatcher = _jobs.Dispatcher(store, data, cfg.limits, workers=cfg.workers)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["short"] = lambda s: (s or "")[:12]

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app):
        if cfg.dispatch:
            dispatcher.start()
        yield
        dispatcher.stop()
        store.dispose()

    app = FastAPI(title="certify-attention", lifespan=lifespan, docs_url="/api/docs",
                  redoc_url=None)
    app.state.store, app.state.dispatcher, app.state.cfg = store, dispatcher, cfg
    # the request body is the upload plus a little multipart framing
    app.add_middleware(Guard, token=cfg.token, max_body=cfg.limits.upload_bytes + 64 * 1024)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    def page(request: Request, name: str, **ctx) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"limits": cfg.limits, **ctx})

    def cert_or_404(sha: str):
        row = store.certificate(sha) if len(sha) == 64 else None
        if row is None:
            raise HTTPException(404, f"no certificate {sha[:64]}")
        return row

    def filters(request: Request) -> Filters:
        q = request.query_params
        rank = q.get("rank") or None
        import datetime as dt
        def day(v, end=False):
            """A date or time (UTC); a bare date as ``until`` includes that whole day."""
            try:
                t = dt.datetime.fromisoformat(v).replace(tzinfo=dt.timezone.utc) if v else None
            except ValueError:
                raise HTTPException(400, f"bad date {v!r} (YYYY-MM-DD)") from None
            return t + dt.timedelta(days=1) - dt.timedelta(seconds=1) if t and end and len(v) == 10 else t
        try:
            rank_i = int(rank) if rank else None
        except ValueError:
            raise HTTPException(400, f"rank must be an integer, got {rank!r}") from None
        return Filters(kind=q.get("kind") or None, verdict=q.get("verdict") or None,
                       family_sha256=q.get("family") or None, model_sha256=q.get("model") or None,
                       rank=rank_i, since=day(q.get("since")), until=day(q.get("until"), end=True))

    # ------------------------------------------------------------ pages

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request):
        f = filters(request)
        rows = store.certificates(f)
        return page(request, "list.html", rows=rows, f=f, kinds=KINDS, verdicts=VERDICTS)

    @app.get("/certificates/{sha}", response_class=HTMLResponse)
    def certificate_page(request: Request, sha: str):
        row = cert_or_404(sha)
        cert = json.loads(row.json_text)
        ver = json.loads(row.verification) if row.verification else None
        folder = data / "certificates" / sha
        files = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        figures = [f for f in files if f.endswith(".png")]
        claims = []
        for i, c in enumerate(cert["claims"]):
            check = ver["claims"][i] if ver and i < len(ver["claims"]) else None
            claims.append({"c": c, "rendered": _rendered(c), "check": check,
                           "parameters": json.dumps(c.get("parameters", {}), indent=1)})
        report_md = (folder / "report.md").read_text() if (folder / "report.md").is_file() else None
        return page(request, "certificate.html", row=row, cert=cert, claims=claims, ver=ver,
                    files=files, figures=figures, report_md=report_md)

    @app.get("/certificates/{sha}/certificate.json")
    def certificate_download(sha: str):
        row = cert_or_404(sha)
        return Response(row.json_text, media_type="application/json", headers={
            "Content-Disposition": f'attachment; filename="certificate-{sha[:12]}.json"'})

    @app.get("/certificates/{sha}/files/{name}")
    def certificate_file(sha: str, name: str):
        cert_or_404(sha)
        folder = data / "certificates" / sha
        allowed = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        if name not in allowed:                    # only listed names: no path from the user
            raise HTTPException(404, "no such file")
        return FileResponse(folder / name)

    @app.get("/submit", response_class=HTMLResponse)
    def submit_page(request: Request):
        return page(request, "submit.html")

    @app.get("/verify", response_class=HTMLResponse)
    def verify_page(request: Request):
        return page(request, "verify.html")

    @app.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(request: Request, job_id: str):
        job = store.job(job_id)
        if job is None:
            raise HTTPException(404, "no such job")
        return page(request, "job.html", job=job)

    @app.get("/jobs", response_class=HTMLResponse)
    def jobs_page(request: Request):
        return page(request, "jobs.html", jobs=store.jobs(100))

    # ------------------------------------------------------------ API

    @app.get("/api/health")
    def health():
        return {"ok": True, "queued": store.count_jobs("queued"),
                "running": store.count_jobs("running")}

    @app.get("/api/certificates")
    def api_certificates(request: Request, limit: int = 200, offset: int = 0):
        rows = store.certificates(filters(request), limit=min(max(limit, 1), 1000), offset=offset)
        return [{k: v for k, v in as_dict(r).items() if k not in ("json_text", "verification")}
                for r in rows]

    @app.get("/api/certificates/{sha}")
    def api_certificate(sha: str):
        return Response(cert_or_404(sha).json_text, media_type="application/json")

    @app.get("/api/certificates/{sha}/verification")
    def api_verification(sha: str):
        row = cert_or_404(sha)
        return {"mode": row.verify_mode, "exit_code": row.verify_exit,
                "verification": json.loads(row.verification) if row.verification else None}

    @app.delete("/api/certificates/{sha}")
    def api_delete(sha: str):
        if not store.delete_certificate(sha):
            raise HTTPException(404, f"no certificate {sha[:64]}")
        import shutil
        shutil.rmtree(data / "certificates" / sha, ignore_errors=True)
        return {"deleted": sha}

    @app.get("/api/jobs/{job_id}")
    def api_job(job_id: str):
        job = store.job(job_id)
        if job is None:
            raise HTTPException(404, "no such job")
        doc = as_dict(job)
        doc["options"] = json.loads(job.options)
        doc["result"] = json.loads(job.result) if job.result else None
        doc.pop("upload_storage", None)
        stage = None
        if job.status == "running":
            try:
                stage = (data / "work" / job_id / "progress").read_text()
            except OSError:
                stage = "starting"
        doc["stage"] = stage
        return doc

    async def _submit(request: Request, forced_command: str | None):
        form = await request.form(max_files=1, max_fields=40)
        raw = {k: v for k, v in form.items() if isinstance(v, str)}
        upload = form.get("file")
        upload = upload if upload is not None and not isinstance(upload, str) and upload.filename else None
        command = forced_command or raw.get("command", "")
        if forced_command is None and command == "verify":
            command = "verify"
        name = _jobs.safe_name(upload.filename) if upload else None
        try:
            opts = _jobs.check_options(command, raw, name, cfg.limits)
        except InputError as exc:
            await form.close()
            return JSONResponse({"detail": str(exc)}, status_code=400)
        stored = sha = None
        if upload is not None:
            stored, sha, err = await _store_upload(upload, data / "uploads", cfg.limits,
                                                   Path(name).suffix.lower())
            if err is not None:
                await form.close()
                return JSONResponse({"detail": err[1]}, status_code=err[0])
        await form.close()
        try:
            job_id = store.add_job(command, opts, upload_name=name, upload_sha256=sha,
                                   upload_storage=stored)
        except Exception:
            if stored:
                (data / "uploads" / stored).unlink(missing_ok=True)
            raise
        dispatcher.wake()
        return JSONResponse({"id": job_id, "status": "queued", "page": f"/jobs/{job_id}",
                             "api": f"/api/jobs/{job_id}"}, status_code=201)

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


async def _store_upload(upload, folder: Path, limits: _jobs.Limits, suffix: str):
    """Copy the upload to a generated name, hashing it; zips are checked.
    ``(storage name, sha256, None)`` or ``(None, None, (status, message))``."""
    name = f"{uuid.uuid4().hex}{suffix}"
    tmp = folder / f".tmp-{name}"
    h, size = hashlib.sha256(), 0
    try:
        with open(tmp, "xb") as out:
            while chunk := await upload.read(1 << 20):
                size += len(chunk)
                if size > limits.upload_bytes:
                    raise _TooLarge
                h.update(chunk)
                out.write(chunk)
        if size == 0:
            tmp.unlink()
            return None, None, (400, "the uploaded file is empty")
        if suffix == ".zip":
            _jobs.check_zip(tmp, limits)
        os.replace(tmp, folder / name)
    except _TooLarge:
        tmp.unlink(missing_ok=True)
        return None, None, (413, f"upload larger than the limit of {limits.upload_bytes} bytes")
    except InputError as exc:
        tmp.unlink(missing_ok=True)
        return None, None, (400, str(exc))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return name, h.hexdigest(), None


def _rendered(claim: dict[str, Any]) -> str:
    """The claim's statement from the project's renderer when there is one
    (``certify.checkers.statements``), else the stored statement."""
    try:
        from certify.checkers import statements
    except ImportError:
        return claim.get("statement", "")
    try:
        return statements.render(claim["kind"], claim.get("parameters", {}),
                                 claim.get("evidence", {})).text
    except (statements.RenderError, KeyError, TypeError):
        return claim.get("statement", "")
