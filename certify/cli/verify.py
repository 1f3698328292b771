"""``certify verify CERT.json... [--json] [--assume NAME] [--replay-extraction] [--reference]``:
re-check certificates with exact arithmetic only (:mod:`certify.checkers.verify`; with
``--reference`` the independent slow path :mod:`certify.reference`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from certify.checkers.common import NotACertificate
from certify.checkers.parallel import workers as checker_workers
from certify.checkers.sources import Places, Replayed, refused_source, replay_extraction
from certify.checkers.verify import accepted, combined_exit, format_text, read_certificate, verify_many
from certify.cli import common as cli
from certify.cli import log
from certify.core.errors import InputError

VERIFY_EPILOG = ("exit codes: 0 every verdict re-derived (proved, refuted or unknown), no "
                 "assumption left; 1 some claim fails its check (outranks 4); 2 not a certificate, "
                 "or bad usage (an --assume that names no assumption); 4 every claim holds, but "
                 "only under the named assumptions printed (accept one with --assume NAME, or "
                 "re-derive extraction with --replay-extraction)")


def main(argv: Sequence[str] | None = None) -> int:
    p = cli.parser(
        "verify", epilog=VERIFY_EPILOG,
        description="Re-check certificates with exact arithmetic only: every claim's verdict "
                    "(proved, refuted or unknown) is re-derived from its evidence, and every name "
                    "its sentence prints is bound to content.")
    p.add_argument("certificates", nargs="*", metavar="CERT.json", help="certificates to re-check")
    p.add_argument("--schema", action="store_true",
                   help="print the certificate format's JSON Schema (draft 2020-12) and exit; "
                        "verify validates every certificate against it before any other check")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--assume", action="append", default=[], metavar="NAME",
                   help="accept a named assumption (repeatable): 'extraction', 'source:NAME', "
                        "'family:NAME', 'trusted', or a full name as printed")
    p.add_argument("--replay-extraction", action="store_true",
                   help="re-run each checkpoint's weights -> features step in a separate process "
                        "(one thread) and compare bit for bit, instead of assuming it; the model's "
                        "files are found by their sha256: as named, beside the certificate, in the "
                        "local Hugging Face cache (hf://org/name@commit names), or under --weights")
    p.add_argument("--weights", action="append", default=[], metavar="DIR",
                   help="also look for the certificate's input files (weights, config, matrices) under "
                        "folder DIR, by their sha256, in any layout (repeatable; a moved Hugging Face "
                        "cache, a download folder)")
    p.add_argument("--reference", action="store_true",
                   help="the reviewer's slow path: re-derive every claim with the independent "
                        "reference checker (whole-matrix exact ranks, exact characteristic "
                        "polynomials, Fractions; no fast path, cache or randomized test); the "
                        "exit codes mean the same")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="check the pieces of a claim that split (a transcript's blocks of "
                        "assignments) on N processes forked from this one (Linux); the answer is "
                        "the one-process check's, in the same order (default 1)")
    args = p.parse_args(argv)
    if args.workers < 1 or args.workers > 4 * (os.cpu_count() or 1):
        raise InputError(f"--workers must be between 1 and {4 * (os.cpu_count() or 1)} "
                         f"(4 per core of this machine), got {args.workers}")
    if args.schema:
        from certify.checkers.schema import published
        print(json.dumps(published(), indent=1))
        return 0
    if not args.certificates:
        raise InputError("give at least one certificate (CERT.json), or --schema")
    for name in args.assume:
        if not name.strip():
            raise InputError("--assume needs the name of an assumption (as verify prints it)")
    for w in args.weights:
        if not Path(w).is_dir():
            raise InputError(f"--weights {w}: " + ("no such folder" if not Path(w).exists() else "not a folder"))
    try:
        certs = [(path, read_certificate(path), Places(Path(path).resolve().parent, args.weights))
                 for path in args.certificates]
    except NotACertificate as exc:
        raise InputError(str(exc)) from None
    if args.reference:
        if args.weights:
            raise InputError("--weights is read by the fast path only: --reference reads the input "
                             "files as named or beside the certificate")
        return _reference(args, [(path, cert, Path(path).resolve().parent) for path, cert, _ in certs])
    refused = refused_source(certs)             # numbers not read exactly: one line, exit 2
    if refused is not None:
        raise InputError(refused)
    replayed: dict[str, str] = {}
    if args.replay_extraction:
        replayed = replay_extraction(certs)
        _say_files(replayed)
    with checker_workers(args.workers):
        results = list(zip(args.certificates, verify_many(certs, assume=args.assume,
                                                          replayed=replayed)))
    named = sorted({a for _, r in results for a in r.assumptions})
    unknown = [n for n in args.assume if not any(accepted(a, [n]) for a in named)]
    if unknown:
        raise InputError(f"--assume {unknown[0]!r} matches no assumption of "
                         + ("these certificates" if len(results) > 1 else "the certificate")
                         + (f"; they hold under: {', '.join(named)}" if named
                            else "; it names none"))
    if args.json:
        doc = [{"certificate": path, **r.to_json()} for path, r in results]
        print(json.dumps(doc[0] if len(doc) == 1 else {
            "holds": all(r.holds for _, r in results),
            "exit_code": combined_exit(r for _, r in results), "certificates": doc}, indent=1))
    else:
        for path, r in results:
            log.info(format_text(r, path))
    return combined_exit(r for _, r in results)


def _reference(args: Any, certs: list) -> int:
    """``verify --reference``: the same arguments, exit codes and output shape, checked by
    :mod:`certify.reference` (a refused input is one line, exit 2)."""
    from certify.reference.check import accepted as ref_accepted
    from certify.reference.check import check_many
    from certify.reference.check import combined_exit as ref_exit
    from certify.reference.exact import Refused
    try:
        results = check_many(certs, assume=args.assume, replay=args.replay_extraction)
    except Refused as exc:
        raise InputError(f"--reference: {exc}") from None
    named = sorted({a for r in results for a in r.assumptions})
    unknown = [n for n in args.assume if not any(ref_accepted(a, [n]) for a in named)]
    if unknown:
        raise InputError(f"--assume {unknown[0]!r} matches no assumption of "
                         + ("these certificates" if len(results) > 1 else "the certificate")
                         + (f"; they hold under: {', '.join(named)}" if named else "; it names none"))
    if args.json:
        doc = [r.to_json() for r in results]
        print(json.dumps(doc[0] if len(doc) == 1 else {
            "holds": all(r.holds for r in results), "exit_code": ref_exit(results),
            "certificates": doc}, indent=1))
    else:
        for r in results:
            log.info(r.text())
    return ref_exit(results)


def _say_files(replayed: Replayed) -> None:
    """What the replay read (files found elsewhere than as named), and one line per
    model whose files are not found, saying what to pass."""
    moved = {n: f for n, f in replayed.used.items() if f.how != "as named"}
    for name, f in moved.items():
        log.info(f"certify verify: replay reads {name} from {f.path} ({f.how}, sha256 checked)")
    for hint in dict.fromkeys(replayed.missing.values()):
        log.warning(f"certify verify: {hint}")
