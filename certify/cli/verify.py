"""``certify verify CERT.json... [--json] [--assume NAME] [--replay-extraction]``:
re-check certificates with exact arithmetic only (:mod:`certify.checkers.verify`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from certify.checkers.common import NotACertificate
from certify.checkers.sources import replay_extraction
from certify.checkers.verify import combined_exit, format_text, read_certificate, verify_many
from certify.cli import common as cli
from certify.core.errors import InputError


def main(argv: Sequence[str] | None = None) -> int:
    p = cli.parser(
        "verify", epilog=None, description="Re-check certificates with exact arithmetic only. Exit 0: every claim "
                    "re-derived with no assumption left; 1: some claim fails; 2: not a "
                    "certificate; 4: every claim holds, but only under the named assumptions "
                    "printed (accept them with --assume).")
    p.add_argument("certificates", nargs="+", metavar="CERT.json", help="certificates to re-check")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--assume", action="append", default=[], metavar="NAME",
                   help="accept a named assumption (repeatable): 'extraction', 'source:NAME', "
                        "'family:NAME', 'trusted', or a full name as printed")
    p.add_argument("--replay-extraction", action="store_true",
                   help="re-run each checkpoint's weights -> features step in a separate process "
                        "(one thread) and compare bit for bit, instead of assuming it")
    args = p.parse_args(argv)
    try:
        certs = [(path, read_certificate(path), Path(path).resolve().parent)
                 for path in args.certificates]
    except NotACertificate as exc:
        raise InputError(str(exc)) from None
    replayed: dict[str, str] = {}
    if args.replay_extraction:
        replayed = replay_extraction(certs)
    results = list(zip(args.certificates, verify_many(certs, assume=args.assume,
                                                      replayed=replayed)))
    if args.json:
        doc = [{"certificate": path, **r.to_json()} for path, r in results]
        print(json.dumps(doc[0] if len(doc) == 1 else {
            "holds": all(r.holds for _, r in results),
            "exit_code": combined_exit(r for _, r in results), "certificates": doc}, indent=1))
    else:
        for path, r in results:
            print(format_text(r, path), file=sys.stderr)
    return combined_exit(r for _, r in results)
