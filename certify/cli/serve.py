"""``certify serve``: the certification service (FastAPI on uvicorn).

``certify serve [--host 127.0.0.1] [--port 8000] [--data DIR] [--db URL]
[--token-file FILE] [--workers N] [--max-upload-mb MB] [--job-seconds S]
[--job-memory-mb MB] [--job-attempts N]``

Everything lives in ``--data`` (default ``./certify-service``): the SQLite
database (unless ``--db postgresql://...``), uploads under generated names,
certificates' reports. Without ``--token-file`` a random token is created in
``DATA/token`` (mode 0600) and its path printed; submitting and deleting need it.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path
from typing import Sequence

from certify.core.errors import InputError


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise InputError(f"cannot read the token file {path}: {exc.strerror}") from None
    if len(token) < 16:
        raise InputError(f"the token in {path} is shorter than 16 characters")
    return token


def ensure_token(data: Path) -> Path:
    path = data / "token"
    if not path.exists():
        import os
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="certify serve", description="Run the certification service: "
                                "submit jobs, store certificates in a database, read and re-verify "
                                "them in a browser.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--data", default="certify-service", help="folder for the database, uploads and reports")
    p.add_argument("--db", help="database URL (default sqlite:///DATA/certify.db; or postgresql://...)")
    p.add_argument("--token-file", help="file holding the submit/delete token (default DATA/token, created)")
    p.add_argument("--workers", type=int, default=2, help="jobs running at once")
    p.add_argument("--max-upload-mb", type=float, default=64.0,
                   help="largest upload accepted, in MB (larger: 413; default 64)")
    p.add_argument("--max-unpacked-mb", type=float, default=256.0,
                   help="largest unpacked size of an uploaded zip, in MB (default 256)")
    p.add_argument("--job-seconds", type=float, default=600.0, help="time limit of one job")
    p.add_argument("--job-memory-mb", type=int, default=4096, help="memory limit of one job")
    p.add_argument("--job-attempts", type=int, default=2,
                   help="runs of a job that a server stop interrupted before it is marked failed")
    a = p.parse_args(argv)
    if not 0 < a.port < 65536:
        raise InputError(f"--port must be in 1..65535, got {a.port}")
    if a.workers < 1 or a.max_upload_mb <= 0 or a.job_seconds <= 0 or a.job_memory_mb < 256 \
            or a.max_unpacked_mb <= 0 or a.job_attempts < 1:
        raise InputError("--workers >= 1, --max-upload-mb, --max-unpacked-mb and --job-seconds > 0, "
                         "--job-memory-mb >= 256, --job-attempts >= 1")
    data = Path(a.data).resolve()
    if data.exists() and not data.is_dir():
        raise InputError(f"--data {a.data} is not a folder")
    data.mkdir(parents=True, exist_ok=True)
    token_path = Path(a.token_file) if a.token_file else ensure_token(data)
    token = read_token(token_path)
    db = a.db or f"sqlite:///{data / 'certify.db'}"
    if not db.startswith(("sqlite:///", "postgresql://", "postgresql+psycopg://")):
        raise InputError(f"--db must be sqlite:///PATH or postgresql://..., got {db.split(':')[0]}:...")

    import uvicorn

    from certify.service.app import ServiceConfig, create_app
    from certify.service.jobs import Limits

    limits = Limits(time_seconds=a.job_seconds, memory_bytes=a.job_memory_mb << 20,
                    unpacked_bytes=int(a.max_unpacked_mb * (1 << 20)),
                    upload_bytes=int(a.max_upload_mb * (1 << 20)), max_attempts=a.job_attempts)
    app = create_app(ServiceConfig(data=data, db=db, token=token, limits=limits, workers=a.workers))
    print(f"certify serve: http://{a.host}:{a.port}/  data {data}  db {db.split('://')[0]}  "
          f"token in {token_path}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning", access_log=False)
    return 0
