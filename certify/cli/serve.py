"""``certify serve``: the certification service (FastAPI on uvicorn).

Argument parsing only; :func:`certify.service.server.run` checks everything
(options, address, data folder, token, database: one line and exit 2 for any
problem, before anything is served) and runs the server. ``certify serve
migrate --data OLD`` moves a data folder of the previous layout into the
current one (:mod:`certify.service.upgrade`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from certify.cli.common import parser


def main(argv: Sequence[str] | None = None) -> int:
    import sys
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["migrate"]:            # certify serve migrate --data OLD
        return migrate(argv[1:])
    p = parser("serve", "Run the certification service: submit jobs, store certificates in a "
                        "database, read and re-verify them in a browser. Every bound below is "
                        "checked at start (a nan, inf or absurd value ends with exit 2).",
               epilog="exit codes: 2 bad option, the port in use, a host that is not this "
                      "machine's, a data folder that is not the service's or is in use, an "
                      "unusable database or token file (one line, before anything is served). "
                      "Defaults and the data folder: docs/service.md.")
    g = p.add_argument_group("where")
    g.add_argument("--host", metavar="HOST", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    g.add_argument("--port", metavar="PORT", type=int, default=8000, help="port to listen on (default 8000)")
    g.add_argument("--data", metavar="DIR", default="certify-service",
                   help="the service's folder (default ./certify-service): created with a manifest "
                        "when new or empty, recognised by that manifest later; a folder holding "
                        "anything else is refused. With PostgreSQL it is this node's scratch only")
    g.add_argument("--db", metavar="URL", default="",
                   help="database URL: sqlite:///PATH (default DATA/certify.db; one server per "
                        "SQLite file) or postgresql://USER@HOST/DB (any number of servers share "
                        "its queue and store)")
    g.add_argument("--token-file", metavar="FILE", help="file holding the submit/delete token (default DATA/token, "
                                        "created with a random token)")
    g = p.add_argument_group("jobs")
    g.add_argument("--workers", metavar="N", type=int, default=2, help="jobs running at once on this server "
                                                          "(default 2)")
    g.add_argument("--job-nice", metavar="N", type=int, default=10,
                   help="how much lower the jobs' CPU priority is than the server's pages and API "
                        "(nice 0..19; default 10)")
    g.add_argument("--job-seconds", metavar="S", type=float, default=600.0,
                   help="time limit of one job, wall clock and CPU (default 600)")
    g.add_argument("--job-memory-mb", metavar="MB", type=float, default=4096,
                   help="memory (address space) limit of one job, the loaded library's ~700 MB "
                        "included (at least 1024; default 4096)")
    g.add_argument("--job-attempts", metavar="N", type=int, default=2,
                   help="claims of a job before an interrupted one is marked failed (default 2)")
    g.add_argument("--lease-seconds", metavar="S", type=float, default=30.0,
                   help="a running job's claim lapses this long after its server last renewed "
                        "it (it renews every quarter of it); then another server takes the job "
                        "over (default 30)")
    g = p.add_argument_group("bounds")
    g.add_argument("--max-upload-mb", metavar="MB", type=float, default=64.0,
                   help="largest upload (413 above it; default 64)")
    g.add_argument("--max-unpacked-mb", metavar="MB", type=float, default=256.0,
                   help="largest unpacked size of an uploaded zip (default 256)")
    g.add_argument("--max-storage-mb", metavar="MB", type=float, default=10240.0,
                   help="total size of uploads, certificates and their files in the store; a "
                        "submission above it is refused with 507 (default 10240)")
    g.add_argument("--open-submit-rate", metavar="N", type=int, default=20,
                   help="submissions without the token (verify) per client per minute; above "
                        "it 429 (default 20; 0: no limit)")
    g.add_argument("--read-rate", metavar="N", type=int, default=1200,
                   help="reads without the token per client per minute; above it 429 "
                        "(default 1200; 0: no limit)")
    g.add_argument("--max-anonymous-queued", metavar="N", type=int, default=20,
                   help="jobs submitted without the token that may wait at once; above it 429 "
                        "(default 20)")
    g.add_argument("--retention-days", metavar="D", type=float, default=30.0,
                   help="jobs submitted without the token are deleted D days after they ended, "
                        "with their uploads and results (default 30)")
    g.add_argument("--trusted-proxy", metavar="ADDR", action="append", default=[],
                   help="address or network of a reverse proxy whose X-Forwarded-For names the "
                        "client (repeatable; default none: the client is the socket's peer)")
    g.add_argument("--keep-uploads", action="store_true",
                   help="keep each upload after its job ended (default: deleted)")
    g.add_argument("--keep-work", action="store_true",
                   help="keep each job's work folder after it ended (default: deleted)")
    a = p.parse_args(argv)

    from certify.service.config import MIN_JOB_MEMORY_MB, Limits, ServiceConfig, megabytes
    from certify.service.server import Listen, run

    limits = Limits(time_seconds=a.job_seconds,
                    memory_bytes=megabytes(a.job_memory_mb, "--job-memory-mb", MIN_JOB_MEMORY_MB, 1 << 20),
                    unpacked_bytes=megabytes(a.max_unpacked_mb, "--max-unpacked-mb", 1 / 1024, 64 << 10),
                    upload_bytes=megabytes(a.max_upload_mb, "--max-upload-mb", 1 / 1024, 4096),
                    max_attempts=a.job_attempts)
    cfg = ServiceConfig(
        data=Path(a.data), db=a.db, token="", limits=limits, workers=a.workers, job_nice=a.job_nice,
        lease_seconds=a.lease_seconds, keep_uploads=a.keep_uploads, keep_work=a.keep_work,
        max_storage_bytes=megabytes(a.max_storage_mb, "--max-storage-mb", 1, 1 << 30),
        open_submit_rate=a.open_submit_rate, read_rate=a.read_rate,
        max_anonymous_queued=a.max_anonymous_queued, retention_days=a.retention_days,
        trusted_proxy=tuple(a.trusted_proxy))
    return run(cfg, Listen(a.host, a.port), a.token_file)


def migrate(argv: Sequence[str]) -> int:
    """``certify serve migrate --data OLD [--db URL]`` (:mod:`certify.service.upgrade`)."""
    import sys
    ap = parser("serve migrate", "Move a data folder of an earlier certify serve (database "
                                 "revision 0001 with uploads/ and certificates/ beside it) into "
                                 "the current layout: uploads and report files into the "
                                 "database, checked against their hashes and read back before "
                                 "the old files are removed.")
    ap.add_argument("--data", metavar="DIR", required=True, help="the old data folder")
    ap.add_argument("--db", metavar="URL", default="",
                    help="its database when not DATA/certify.db (postgresql://...)")
    a = ap.parse_args(argv)
    from certify.service.upgrade import command_line, migrate_folder
    m = migrate_folder(a.data, a.db or None)
    print(f"certify serve migrate: {a.data}: {m.jobs} job(s), {m.uploads} upload(s) and "
          f"{m.files} report file(s) of {m.certificates} certificate(s) moved into the database"
          + (f"; {m.requeued} running job(s) queued again" if m.requeued else "")
          + (f"; removed {', '.join(m.removed)}/" if m.removed else "")
          + f". Start it with: {command_line('serve', a.data, a.db or None)}", file=sys.stderr)
    return 0
