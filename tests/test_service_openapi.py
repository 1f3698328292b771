"""The served OpenAPI document is the service's contract: every route is an
operation with its query parameters (exactly those the handler accepts), its
form body (exactly the fields a command takes), its security and every status
it answers, 4xx and 5xx included; ``OPTIONS`` says truly which methods a path
takes and a method it does not take is 405 before any token is asked for;
and a bounded schemathesis run over the application (in process, on SQLite,
no job processes) finds no server error and no response outside the schema.
A longer schemathesis run against a real ``certify serve``: ``--runslow``.
The client driven by this document alone: tests/test_service_api.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from certify.service import app as app_mod
from certify.service.app import create_app
from certify.service.config import ServiceConfig
from certify.service.options import COMMANDS, FIELDS
from certify.service.store import Store

TOKEN = "openapi-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def app(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    yield create_app(ServiceConfig(data=tmp_path, db="", token=TOKEN, dispatch=False, read_rate=0),
                     store)
    store.dispose()


@pytest.fixture
def client(app):
    from starlette.testclient import TestClient
    with TestClient(app) as c:
        yield c


def test_every_operation_declares_its_parameters_body_and_responses(app, client):
    from fastapi.routing import APIRoute
    doc = client.get("/openapi.json").json()
    routes = {(r.path, m.lower()) for r in app.routes if isinstance(r, APIRoute) and r.include_in_schema
              for m in r.methods}
    ops = {(p, m): op for p, item in doc["paths"].items() for m, op in item.items()}
    assert set(ops) == routes and len(ops) == 17
    for (path, _method), op in ops.items():
        codes = set(op["responses"])
        assert any(c.startswith("2") for c in codes), (path, codes)
        assert any(c.startswith("4") for c in codes) and ("503" in codes or path in ("/submit", "/verify")), \
            (path, codes)
        assert {p["name"] for p in op["parameters"] if p["in"] == "path"} == \
            {seg[1:-1] for seg in path.split("/") if seg.startswith("{")}, path
        for code, resp in op["responses"].items():
            assert resp.get("content") or (code == "303" and "Location" in resp["headers"]), (path, code)
            if code in ("429", "503"):
                assert "Retry-After" in resp["headers"], (path, code)
    query = lambda op_id: {p["name"] for (_, _), op in ops.items() if op["operationId"] == op_id  # noqa: E731
                           for p in op["parameters"] if p["in"] == "query"}
    assert query("list_certificates") == set(app_mod.FILTER_PARAMS) | {"limit", "offset"}
    assert query("list_page") == set(app_mod.FILTER_PARAMS) | {"offset"}
    form = doc["components"]["schemas"]["JobForm"]
    assert set(form["properties"]) == {"command", "file"} | {f for fs in FIELDS.values() for f in fs}
    assert form["properties"]["command"]["enum"] == list(COMMANDS) and form["required"] == ["command"]
    assert doc["components"]["schemas"]["VerifyForm"]["required"] == ["file"]
    sub = ops[("/api/jobs", "post")]
    assert sub["security"] == [{"bearer": []}] and {"401", "413", "422", "503", "507"} <= set(sub["responses"])
    assert sub["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"].endswith("/JobForm")
    assert sub["responses"]["201"]["links"]["job"]["operationId"] == "get_job"
    assert ops[("/api/certificates/{sha}", "delete")]["security"] == [{"bearer": []}]
    assert "security" not in ops[("/api/verify", "post")]
    # pages refuse with pages; the API with JSON
    assert "text/html" in ops[("/jobs/{job_id}", "get")]["responses"]["404"]["content"]
    assert "application/json" in ops[("/api/jobs/{job_id}", "get")]["responses"]["404"]["content"]


def test_options_says_which_methods_and_others_are_405_before_the_token(client):
    sha = "a" * 64
    cases = {f"/api/certificates/{sha}": "DELETE, GET, OPTIONS",
             f"/api/certificates/{sha}/verification": "GET, OPTIONS",
             "/api/jobs": "OPTIONS, POST", "/": "GET, OPTIONS", "/static/app.js": "GET, HEAD, OPTIONS"}
    for path, allow in cases.items():
        r = client.options(path)
        assert (r.status_code, r.headers["allow"]) == (204, allow), path
    for method, path in (("DELETE", f"/api/certificates/{sha}/verification"), ("DELETE", "/api/jobs"),
                         ("PUT", f"/api/certificates/{sha}"), ("POST", "/"), ("DELETE", "/jobs")):
        r = client.request(method, path)
        assert r.status_code == 405, (method, path, r.status_code, r.text)
        assert r.headers["allow"] == cases.get(path, r.headers["allow"])
        assert method in r.json()["detail"]
    # a method the path takes still needs the token; an unknown path is still 404
    assert client.delete(f"/api/certificates/{sha}").status_code == 401
    assert client.delete(f"/api/certificates/{sha}", headers=AUTH).status_code == 404
    assert client.options("/no/such/path").status_code == 404


CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance")


def _checks():
    from schemathesis import checks as base
    from schemathesis.specs.openapi import checks as oa
    return [getattr(oa, n, None) or getattr(base, n) for n in CHECKS]


#: cases per operation and mode in the default suite (the --runslow run: 40 per operation and phase)
EXAMPLES = 1


def test_a_bounded_schemathesis_run_finds_no_server_error_and_no_schema_violation(app):
    """Every operation, positive and negative cases (a few each), with the token."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis.generation import GenerationMode

    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    checks = _checks()
    ran = []
    for result in schema.get_all_operations():
        op = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode))
            def run(case):
                case.call_and_validate(headers=AUTH, checks=checks)
                ran.append((case.operation.label, mode))
            try:
                run()
            except Unsatisfiable:            # nothing to negate (no parameter, no body)
                assert mode is GenerationMode.NEGATIVE and not op.definition.raw.get("parameters") \
                    and "requestBody" not in op.definition.raw, op.label
    assert len({label for label, _ in ran}) == 17, sorted(set(ran))


@pytest.mark.slow             # a real server and about 1,500 requests (about 90 s)
def test_schemathesis_against_a_real_server(tmp_path):
    """schemathesis's own runner (examples, coverage, fuzzing and stateful phases, 40
    cases per operation and mode, fixed seed) against ``certify serve``: no
    5xx, every status, content type, header and body as documented, and
    methods the schema does not list are 405 with a truthful ``Allow``."""
    from service_support import Server, env
    with Server(tmp_path / "data", "--read-rate", "0", "--open-submit-rate", "0",
                "--max-anonymous-queued", "3", "--workers", "1", "--max-upload-mb", "1") as s:
        p = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "schemathesis"), "run",
             s.url + "/openapi.json", "--checks", ",".join(CHECKS + ("unsupported_method",
                                                                     "allow_header_conformance")),
             "--phases", "examples,coverage,fuzzing,stateful", "-n", "40", "--seed", "1", "--no-color",
             "--header", f"Authorization: Bearer {s.token}", "--request-timeout", "60",
             "--generation-database", "none"],
            cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=1200)
        out = p.stdout + p.stderr
        print(out[-3000:])
        assert p.returncode == 0, out[-6000:]
        assert "No issues found" in out or "0 failures" in out.lower() or "passed" in out.lower(), out
    assert "Traceback" not in s.output() and "internal error" not in s.output(), s.output()[-3000:]
