"""The service's OpenAPI document: every operation's parameters, bodies and responses.

The handlers check their query parameters and form fields themselves (one
422 naming the field, unknown ones refused: :mod:`certify.service.app`), so
FastAPI cannot infer them from signatures; they are declared here, once per
operation (by its ``operationId``), and :func:`document` writes them into
the schema FastAPI builds. Each operation lists every status it can answer:
422 for a bad or unknown parameter, 404 for an unknown certificate or job,
401 without the token, 413 for an upload over the limit, 429 from the rate
limits (``--read-rate``, ``--open-submit-rate``, the anonymous queue), 503
while the database is not answering, 507 when the store is full. Pages
answer with HTML (a refusal too, except the rate limiter's 429, which is
JSON for every path); the API and downloads with JSON.

Links (OpenAPI ``links``) tie a submission to its job and a finished job to
its certificate, so a client driven by this document alone can submit, poll
and fetch (tests/test_service_api.py does).
"""

from __future__ import annotations

from typing import Any

from certify.checkers import kinds as _declared_kinds

SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "a sha256, 64 lowercase hex digits"}
JOB_ID = {"type": "string", "pattern": "^[0-9a-f]{32}$", "description": "a job id, 32 hex digits"}
KINDS = list(_declared_kinds.BY_NAME)         # the claim kinds, as declared
VERDICTS = ["proved", "refuted", "unknown"]
STATUSES = ["queued", "running", "done", "failed"]


def _null(schema: dict) -> dict:
    """``schema`` or null."""
    if "$ref" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    t = schema["type"]
    return {**schema, "type": [t, "null"] if isinstance(t, str) else [*t, "null"]}


def _obj(props: dict, required: list[str] | None = None, extra: bool = False) -> dict:
    return {"type": "object", "properties": props, "required": required if required is not None
            else list(props), "additionalProperties": extra}


STR, INT, NUM, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
TIME = {"type": "string", "description": "ISO 8601 date and time (UTC)"}

SCHEMAS: dict[str, Any] = {
    "Error": _obj({"detail": {"type": "string", "description": "why, in one line"}}),
    "Health": _obj({
        "ok": BOOL, "node": {"type": "string", "description": "this server's node id"},
        "queued": INT, "queued_anonymous": INT, "running": INT,
        "running_here": {"type": "integer", "description": "jobs running on this server"},
        "storage_bytes": INT, "max_storage_bytes": INT}),
    "CertificateSummary": _obj({
        "sha256": SHA, "kind": {"type": "string", "description": "the claims' kinds, comma-separated"},
        "verdict": {"type": "string", "enum": VERDICTS,
                    "description": "refuted if a claim is, else unknown if a claim is, else proved"},
        "family_sha256": _null(SHA), "model_sha256": _null(SHA), "rank": _null(INT),
        "created_at": _null(TIME), "stored_at": TIME, "source_name": _null(STR),
        "source_sha256": _null(SHA), "command": STR, "job_id": _null(STR),
        "verify_exit": _null({"type": "integer", "description": "the server's certify verify exit "
                                                                 "status (0, 1 or 4)"}),
        "verify_mode": _null(STR), "size": _null(INT)}),
    "Certificate": {"type": "object", "required": ["claims"],
                    "description": "the certificate's JSON, verbatim (its own JSON Schema: "
                                   "certify/checkers/certificate.schema.json)",
                    "properties": {"claims": {"type": "array", "items": {"type": "object"}}}},
    "Verification": _obj({
        "mode": _null({"type": "string", "description": "sources present or certificate only; "
                                                        "extraction replayed or not"}),
        "exit_code": _null(INT),
        "verification": _null({"type": "object", "description": "certify verify's result as JSON"})}),
    "Deleted": _obj({"deleted": SHA}),
    "Submitted": _obj({"id": JOB_ID, "status": {"type": "string", "enum": ["queued"]},
                       "page": {"type": "string", "description": "the job's page"},
                       "api": {"type": "string", "description": "the job's JSON"}}),
    "Progress": _obj({
        "step": {"type": "integer", "minimum": 1}, "steps": {"type": "integer", "minimum": 1},
        "stage": STR, "claims": _null({"type": "integer", "description": "the certificate's claims, "
                                                                         "once made"}),
        "checked": _null({"type": "integer", "description": "claims verified so far"})}),
    "Job": _obj({
        "id": JOB_ID, "command": {"type": "string", "enum": ["checkpoint", "rank", "feasibility",
                                                            "transcript", "verify"]},
        "options": {"type": "object", "description": "the job's options, checked and normalized"},
        "status": {"type": "string", "enum": STATUSES, "x-final": ["done", "failed"],
                   "description": "queued and running are live; done and failed are final"},
        "reason": _null({"type": "string", "description": "why it failed, or a note while it lives"}),
        "created_at": TIME, "started_at": _null(TIME), "finished_at": _null(TIME),
        "attempts": INT, "upload_name": _null(STR), "upload_sha256": _null(SHA),
        "upload_size": _null(INT), "exit_code": _null(INT),
        "exit_meaning": _null({"type": "string", "description": "what the exit status means"}),
        "cert_sha256": _null({**SHA, "description": "the certificate, once the job is done"}),
        "certificate_page": _null(STR),
        "result": _null({"type": "object", "description": "a verify job's result (verification)"}),
        "node_id": _null({"type": "string", "description": "the server running it"}),
        "anonymous": {"type": "boolean", "description": "submitted without the token"},
        "progress": _null({"$ref": "#/components/schemas/Progress"}),
        "stage": _null({"type": "string", "description": "the running job's stage"}),
        "elapsed_seconds": _null({"type": "number", "description": "since it started (to its end "
                                                                   "once finished)"}),
        "queue_position": _null({"type": "integer", "description": "queued jobs ahead of it"})}),
    "JobForm": {
        "type": "object", "required": ["command"], "additionalProperties": False,
        "description": "the command and its options as form fields (each field once); which "
                       "options each command takes: docs/service.md",
        "properties": {
            "command": {"type": "string", "enum": ["checkpoint", "rank", "feasibility", "transcript",
                                                   "verify"]},
            "file": {"type": "string", "format": "binary",
                     "description": "checkpoint: a .zip; rank: .npy .npz .safetensors .csv .json "
                                    "or a .zip; feasibility: a family file (.json .npz); verify: "
                                    "a certificate (.json)"},
            **{k: {"type": "string", "description": d} for k, d in (
                ("eps", "checkpoint, rank: an exact number like 1/1000"),
                ("seed", "an integer in 0..2^31"),
                ("family", "checkpoint: up to 8 built-in families; feasibility: one (default "
                           "paper-5.1)"),
                ("tokens", "rank: cube:M"), ("code", "rank: paper-5.1"),
                ("rank", "feasibility: the rank, 1..64"), ("features", "feasibility: real or "
                                                                       "nonnegative"),
                ("time_limit", "feasibility, transcript: CPU seconds of the search"),
                ("M", "transcript"), ("s", "transcript"), ("h", "transcript"), ("q", "transcript"),
                ("bits", "transcript: bits per coordinate (or format)"),
                ("format", "transcript: fp8-e4m3, fp8-e5m2, bf16 or fp16 (or bits)"))}}},
    "VerifyForm": {"type": "object", "required": ["file"], "additionalProperties": False,
                   "properties": {"file": {"type": "string", "format": "binary",
                                           "description": "a certificate (.json)"}}},
}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


HTML = {"text/html": {"schema": {"type": "string"}}}


def _errors(codes: dict[int, str], page: bool) -> dict[str, Any]:
    """Error responses: a page's refusals are pages, except the rate limiter's
    429 (JSON on every path); the API's are JSON ``{"detail": ...}``."""
    out = {}
    for code, why in codes.items():
        if page and code != 429:
            out[str(code)] = {"description": why, "content": HTML}
        else:
            out[str(code)] = _json("Error", why)
        if code in (429, 503):
            out[str(code)]["headers"] = {"Retry-After": {"schema": {"type": "string"},
                                                         "description": "seconds to wait"}}
    return out


BAD = {422: "a bad or unknown query parameter (named in the message)"}
LIMITED = {429: "over the read rate limit (--read-rate)"}
DOWN = {503: "the database is not answering; retry after Retry-After seconds"}
MISSING = {404: "no such certificate or job"}


def _q(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


def _p(name: str, schema: dict) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema}


DATE = {"type": "string", "description": "YYYY-MM-DD or an ISO time; 1970 to 2999"}
FILTERS = [
    _q("kind", {"type": "string", "enum": KINDS}, "certificates with a claim of this kind"),
    _q("verdict", {"type": "string", "enum": VERDICTS}, "the overall verdict"),
    _q("rank", {"type": "integer", "minimum": 0, "maximum": 1 << 20}, "a claim at this rank"),
    _q("family", SHA, "a claim about the family with this sha256"),
    _q("model", SHA, "the model (source file) with this sha256"),
    _q("since", DATE, "stored on or after"),
    _q("until", DATE, "stored on or before (a date: that whole day)"),
]
OFFSET = _q("offset", {"type": "integer", "minimum": 0, "maximum": 10**9}, "rows to skip")
LIMIT = _q("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "rows (default 50)")
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def _page(summary: str, params: list | None = None, missing: bool = False, db: bool = True) -> dict:
    codes = {**BAD, **LIMITED, **(MISSING if missing else {}), **(DOWN if db else {})}
    return {"summary": summary, "tags": ["pages"], "parameters": params or [],
            "responses": {"200": {"description": "the page", "content": HTML}, **_errors(codes, True)}}


FILE_MEDIA = ["image/png", "application/pdf", "text/markdown; charset=utf-8",
              "text/x-tex; charset=utf-8", "application/json", "application/octet-stream"]

OPERATIONS: dict[str, dict[str, Any]] = {
    "list_page": _page("The certificate list (50 a page), with filters", [*FILTERS, OFFSET]),
    "certificate_page": _page("A certificate: its claims, the server's verification, figures",
                              [_p("sha", SHA)], missing=True),
    "certificate_download": {
        "summary": "A certificate's JSON, verbatim, as a download", "tags": ["pages"],
        "parameters": [_p("sha", SHA)],
        "responses": {"200": {"description": "certificate.json", "content": {
            "application/json": {"schema": _ref("Certificate")}}},
            **_errors({**BAD, **MISSING, **LIMITED, **DOWN}, False)}},
    "certificate_file": {
        "summary": "One of a certificate's report files (report.md, report.tex, figures)",
        "tags": ["pages"], "parameters": [_p("sha", SHA), _p("name", {"type": "string"})],
        "responses": {"200": {"description": "the file", "content": {
            m: {"schema": {"type": "string", "format": "binary"}} for m in FILE_MEDIA}},
            **_errors({**BAD, 404: "no such certificate or file", **LIMITED, **DOWN}, False)}},
    "submit_page": _page("The submit form (submitting needs the token)", db=False),
    "verify_page": _page("The form to verify an uploaded certificate", db=False),
    "jobs_page": _page("The newest jobs"),
    "job_page": _page("A job: its state as the server records it; reloads itself while it lives",
                      [_p("job_id", JOB_ID)], missing=True),
    "job_state": _page("A job's state, the fragment its page shows (what the page's script "
                       "refreshes)", [_p("job_id", JOB_ID)], missing=True),
    "health": {
        "summary": "Is the server up, and what it holds", "tags": ["api"], "parameters": [],
        "responses": {"200": _json("Health", "the server and its database answer"),
                      **_errors({**BAD, **DOWN}, False)}},
    "list_certificates": {
        "summary": "Certificates, newest first, with filters", "tags": ["api"],
        "parameters": [*FILTERS, LIMIT, OFFSET],
        "responses": {"200": {"description": "the certificates' columns", "content": {
            "application/json": {"schema": {"type": "array", "items": _ref("CertificateSummary")}}}},
            **_errors({**BAD, **LIMITED, **DOWN}, False)}},
    "get_certificate": {
        "summary": "A certificate's JSON, verbatim", "tags": ["api"], "parameters": [_p("sha", SHA)],
        "responses": {"200": _json("Certificate", "the certificate"),
                      **_errors({**BAD, **MISSING, **LIMITED, **DOWN}, False)}},
    "get_verification": {
        "summary": "The server's certify verify result for a certificate", "tags": ["api"],
        "parameters": [_p("sha", SHA)],
        "responses": {"200": _json("Verification", "the verification"),
                      **_errors({**BAD, **MISSING, **LIMITED, **DOWN}, False)}},
    "delete_certificate": {
        "summary": "Delete a certificate and its files (needs the token)", "tags": ["api"],
        "parameters": [_p("sha", SHA)], "security": BEARER,
        "responses": {"200": _json("Deleted", "deleted"),
                      **_errors({401: "the token is missing or wrong", **BAD, **MISSING, **DOWN},
                                False)}},
    "get_job": {
        "summary": "A job's state and, once it ended, its outcome", "tags": ["api"],
        "parameters": [_p("job_id", JOB_ID)],
        "responses": {"200": {**_json("Job", "the job"), "links": {"certificate": {
            "operationId": "get_certificate", "parameters": {"sha": "$response.body#/cert_sha256"},
            "description": "the certificate of a done job (cert_sha256 is null before)"}}},
            **_errors({**BAD, **MISSING, **LIMITED, **DOWN}, False)}},
    "submit_job": {
        "summary": "Submit a job (needs the token)", "tags": ["api"], "parameters": [],
        "security": BEARER,
        "requestBody": {"required": True, "content": {"multipart/form-data": {
            "schema": _ref("JobForm")}}},
        "responses": {"201": {**_json("Submitted", "queued"), "links": {"job": {
            "operationId": "get_job", "parameters": {"job_id": "$response.body#/id"},
            "description": "poll the job until its status is done or failed"}}},
            "303": {"description": "queued; a browser's form (Accept: text/html first) is sent "
                                   "on to the job's page", "headers": {"Location": {
                                       "schema": {"type": "string"}}}},
            **_errors({400: "a Content-Length that is not a number",
                       401: "the token is missing or wrong", 413: "the upload is over the limit",
                       422: "a bad or unknown field, or a file the command does not take (named)",
                       **DOWN, 507: "the store is full (--max-storage-mb)"}, False)}},
    "submit_verify": {
        "summary": "Verify an uploaded certificate as a job (open: no token)", "tags": ["api"],
        "parameters": [],
        "requestBody": {"required": True, "content": {"multipart/form-data": {
            "schema": _ref("VerifyForm")}}},
        "responses": {"201": {**_json("Submitted", "queued"), "links": {"job": {
            "operationId": "get_job", "parameters": {"job_id": "$response.body#/id"}}}},
            "303": {"description": "queued; a browser's form (Accept: text/html first) is sent "
                                   "on to the job's page", "headers": {"Location": {
                                       "schema": {"type": "string"}}}},
            **_errors({400: "a Content-Length that is not a number",
                       413: "the upload is over the limit", 422: "a bad field or file (named)",
                       429: "too many open submissions (--open-submit-rate, "
                            "--max-anonymous-queued)",
                       **DOWN, 507: "the store is full (--max-storage-mb)"}, False)}},
}


def document(app) -> dict[str, Any]:
    """The OpenAPI document of ``app``: FastAPI's, with every operation's
    parameters, bodies, responses and security from :data:`OPERATIONS`."""
    from fastapi.openapi.utils import get_openapi

    doc = get_openapi(title=app.title, version=app.version, routes=app.routes,
                      description="certify serve: submit jobs, read and re-verify certificates. "
                                  "Reading is open; submitting a job and deleting need the token "
                                  "(Authorization: Bearer TOKEN).")
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            op_id = op.get("operationId")
            if op_id not in OPERATIONS:
                raise RuntimeError(f"{method.upper()} {path}: no OpenAPI declaration "
                                   f"(certify/service/openapi.py)")
            op.clear()
            op.update({"operationId": op_id, **OPERATIONS[op_id]})
    comp = doc.setdefault("components", {})
    comp["schemas"] = dict(SCHEMAS)
    comp["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer",
                                          "description": "the server's token (DATA/token or "
                                                         "--token-file)"}}
    return doc
