"""``certify report CERT.json... --out DIR``: certificates -> ``report.md``,
``report.tex`` and figures (:mod:`certify.report.build`).

Its exit code says whether the certificates hold, as ``verify`` re-derives them,
not what they claim: a report renders verdicts (a refuted claim is a finding it
shows, with its counterexample), the command that made a certificate already
ended with 1 for it. 0 the report is written and every certificate holds
(or, with ``--no-verify``, was not re-checked); 1 the report is written and
some certificate fails its re-check (marked FAILS in it); 2 bad input."""

from __future__ import annotations

import json
from typing import Sequence

from certify.cli import common as cli
from certify.cli import log
from certify.core import outputs
from certify.report.build import build, load

REPORT_EPILOG = ("exit codes: 0 the report is written and every certificate holds when re-checked, whatever "
                 "its verdicts (proved, refuted or unknown: the report shows them; the command that made a "
                 "certificate ended with 1 for a refuted or unknown claim); 1 the report is written and some "
                 "certificate fails its re-check; 2 bad input")


def main(argv: Sequence[str] | None = None) -> int:
    p = cli.parser("report", "Certificates -> report.md, report.tex, figures.", epilog=REPORT_EPILOG)
    p.add_argument("certificates", nargs="+", metavar="CERT.json", help="certificates to report on")
    p.add_argument("--out", required=True, help=cli.OUT_DIR_HELP)
    p.add_argument("--no-verify", action="store_true",
                   help="do not re-check the certificates (report only)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = p.parse_args(argv)
    outputs.check_out_dir(args.out, "report")
    certs = load(args.certificates)
    rep = build(certs, args.out, command="report", check=not args.no_verify)
    if args.json:
        print(json.dumps({"folder": str(rep.folder), "files": list(rep.files),
                          "verified": rep.holds}))
    else:
        log.info(f"report: {rep.folder / 'report.md'} ({len(rep.files)} files"
              + ("" if rep.holds is None else f"; certificates {'hold' if rep.holds else 'FAIL'}")
              + ")")
    return 0 if rep.holds in (None, True) else 1
