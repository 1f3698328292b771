"""``certify report CERT.json... --out DIR``: certificates -> ``report.md``,
``report.tex`` and figures (:mod:`certify.report.build`)."""

from __future__ import annotations

import json
import sys
from typing import Sequence

from certify.cli import common as cli
from certify.core import outputs
from certify.report.build import build, load


def main(argv: Sequence[str] | None = None) -> int:
    p = cli.parser("report", "Certificates -> report.md, report.tex, figures.")
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
        print(f"report: {rep.folder / 'report.md'} ({len(rep.files)} files"
              + ("" if rep.holds is None else f"; certificates {'hold' if rep.holds else 'FAIL'}")
              + ")", file=sys.stderr)
    return 0 if rep.holds in (None, True) else 1
