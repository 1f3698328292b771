"""``certify checkpoint CKPT``: end-to-end certification of a trained head.

``certify checkpoint CKPT [--spec SPEC] [--layer L] [--head H] [--family NAME|FILE ...]
[--eps E] [--out DIR] [--json] [--seed N]``; ``--batch DIR`` certifies every model
of a folder (:mod:`certify.checkpoints.batch`). Which certification a path gets is decided by
:mod:`certify.checkpoints.dispatch` (the one loader's classification).

``--out DIR`` writes ``DIR/certificate.json`` and its report (``certify.report``)
in one atomic step. Exit 0 when every claim is proved, 1 when some claim is
refuted or unknown, 2 bad input, 3 not a kernel head (dense softmax,
position-dependent keys).
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Sequence

from certify.checkpoints import heads as ch
from certify.checkpoints.batch import BATCH, run_batch, summary_table
from certify.checkpoints.dispatch import certify_path
from certify.checkpoints.run import DEFAULT_EPS, CheckpointResult
from certify.cli import common as cli
from certify.cli import log
from certify.core import limits, outputs
from certify.core.errors import InputError
from certify.core.progress import show_progress
from certify.core.verdict import Verdict, overall
from certify.report.build import build_with_certificate
from certify.sources.hub import hub_lines


def _print(res: CheckpointResult, ckpt: str) -> None:
    p = lambda s: log.info(s)  # noqa: E731
    p(f"checkpoint {ckpt}")
    for c in res.certificate.claims:
        p(f"  [{c.verdict.value}] {c.kind.value}: {c.statement}")
        if c.reason and c.verdict is not Verdict.PROVED:
            p(f"      {c.reason}")
    for family, why in res.skipped.items():
        p(f"  skipped {family}: {why}")
    for f in res.failing:
        p(f"  FAILING INPUT ({f['family']}, {f['claim']}"
          + (f", jump {f['jump']} input {f['role']}" if "jump" in f else "")
          + f"): input {f['input']} = {f['tokens']} position {f['position']}: "
            f"t_hat = {f['t_hat']}, target {f['target']}")
    p(f"verdict: {overall(c.verdict for c in res.certificate.claims).value}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = cli.parser("checkpoint", 'End-to-end certification of a trained head: kernel extraction, exact and approximate rank, exact correctness on the families it applies to, and the Lemma 3 audit naming inputs the model gets wrong. Writes one certificate and its report.')
    ap.add_argument("checkpoint", metavar="CKPT", nargs="?", help="models/ checkpoint (X, X.json, "
                    "X.safetensors, or a folder holding one) or a third-party checkpoint; "
                    "resolved as given, then a folder with a config and safetensors, then with "
                    "a known suffix")
    ap.add_argument("--spec", help="adapter spec (JSON) for a custom third-party layout "
                    "(known libraries are recognised without one)")
    ap.add_argument("--layer", type=int, help="third-party checkpoints: certify only this layer")
    ap.add_argument("--head", type=int, help="third-party checkpoints: certify only this head")
    cli.add_assume_default(ap)
    ap.add_argument("--sequences", metavar="FILE|random:S,T,SEED",
                    help="fla linear_attn, performer-pytorch PerformerLM and linear-attention-transformer "
                         "LinearAttentionTransformerLM models (learned absolute positions): certify every head of "
                         "every layer on the inputs to its "
                         "layer at every position of these token sequences (.npy int array (S, T), .jsonl "
                         "lists of ids of one length, or the seeded probe random:S,T,SEED)")
    ap.add_argument("--text", metavar="FILE",
                    help="the models of --sequences: as --sequences, on the ids of this UTF-8 text under the model "
                         "folder's tokenizer.json (the tokenizers library, no special tokens), one stream cut into "
                         "sequences of --text-length ids (the tail dropped); the ids are written to "
                         "OUT/sequences.jsonl, which the certificate names by its sha256 (needs --out)")
    ap.add_argument("--text-length", type=int, default=512, metavar="T",
                    help="--text: ids per sequence (default 512; fewer ids than T make one sequence)")
    ap.add_argument("--family", action="append", default=[],
                    help="also check this family (built-in name or file); repeatable")
    ap.add_argument("--eps", default=str(DEFAULT_EPS),
                    help="eps-rank threshold (exact, e.g. 1/1000; > 0; default 1/1000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random primes")
    ap.add_argument("--out", metavar="DIR", help="folder for certificate.json and its report; "
                    + cli.OUT_DIR_HELP)
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    # a folder of checkpoints (certify.checkpoints.batch), optionally on Ray
    ap.add_argument("--batch", metavar="DIR", help="certify every model in folder DIR: models/ checkpoints, "
                    "model sub-folders (Hugging Face style, a weights file with its config or adapter spec, "
                    "a Hugging Face cache's models--org--name) and weights files; one certificate each and "
                    "one summary table (with --out OUT: OUT/NAME/ per model and OUT/summary.md); "
                    "--workers N certifies N at a time (of one model: each layer's heads compute "
                    "their claims on N workers)")
    cli.add_progress(ap)
    cli.add_engine_arguments(ap)
    args = ap.parse_args(argv)
    if not args.batch and not args.checkpoint:
        raise InputError("give a checkpoint CKPT or --batch DIR")
    if args.batch and args.checkpoint:
        raise InputError("give either a checkpoint CKPT or --batch DIR, not both")
    eps = limits.parse_eps(args.eps, "--eps")
    if args.text is not None:
        if args.sequences is not None:
            raise InputError("give either --sequences or --text, not both")
        if not args.out:
            raise InputError("--text writes the token ids it certifies to OUT/sequences.jsonl (the certificate "
                             "names them by their sha256): give --out DIR")
        if args.text_length < 1:
            raise InputError(f"--text-length {args.text_length}: give T >= 1 (ids per sequence)")
    command = ["certify", "checkpoint", *(sys.argv[1:] if argv is None else list(argv))]
    if args.batch:
        return _batch(args, eps, command)
    if args.out:
        outputs.check_out_dir(args.out, "checkpoint")
    with cli.engine_from_args(args, progress=not args.json and show_progress(args.no_progress)) as engine:
        kind, res = certify_path(args.checkpoint, spec=args.spec, families=args.family, eps=eps,
                                 seed=args.seed, layer=args.layer, head=args.head, command=command,
                                 assume=args.assume_default,
                                 progress=not args.json and show_progress(args.no_progress),
                                 sequences=args.sequences,
                                 text=None if args.text is None else (args.text, args.text_length),
                                 engine=engine)
    out = {}
    if kind == "models":
        if args.out:
            # the self-check reads the certificate from the folder the report's check reads
            # it from: one check serves both
            text, checked = res.certificate.checked_dumps(Path(args.out).resolve())
            folder = build_with_certificate(text, args.out, command="checkpoint", verified=checked)
            out = {"out": str(folder), "certificate": str(Path(folder) / "certificate.json")}
            log.info(f"certificate and report: {folder}/ (certificate.json, report.md)")
        _print(res, args.checkpoint)
    else:
        if args.out:
            folder = ch.write_out(res, args.out)
            out = {"out": str(folder), "certificate": str(Path(folder) / "certificate.json")}
            log.info(f"certificate and report: {folder}/ (certificate.json, report.md, heads.md)")
        for line in ch.result_lines(res, args.checkpoint):
            log.info(line)
    for line in hub_lines(res.certificate.environment.get("hub")):
        log.info(line)
    if args.json:
        print(json.dumps({**res.to_json(), **out}))
    return res.certificate.exit_code()


def _batch(args, eps: Fraction, command: list[str]) -> int:
    if args.checkpoint or args.spec:
        raise InputError("--batch DIR certifies a folder; give no CKPT and no --spec with it (an adapter spec "
                         "beside a model's weights in its own folder is read)")
    if args.assume_default:
        raise InputError("--assume-default accepts a default of one checkpoint; with --batch DIR state the "
                         "kernel arguments in each model's config.json")
    if args.layer is not None or args.head is not None:
        raise InputError("--layer/--head pick a head of one model; --batch DIR certifies every head of every model")
    if args.sequences is not None or args.text is not None:
        raise InputError("--sequences/--text certify one model's layers on stated tokens; give CKPT, not --batch DIR")
    if args.out:
        outputs.check_out_dir(args.out, BATCH)
    with cli.engine_from_args(args, progress=not args.json and show_progress(args.no_progress)) as engine:
        entries, ignored = run_batch(args.batch, families=args.family, eps=eps, seed=args.seed,
                                     command=command, engine=engine, out=args.out)
    for e in entries:
        if e.result is None:
            log.info(f"checkpoint {e.path}: not certified: {e.error}")
            continue
        for c in e.result.certificate.claims:
            if c.verdict is not Verdict.PROVED:
                where = (f" layer {c.info.get('layer')} head {c.info.get('head')}"
                         if c.info.get("layer") is not None else "")
                print(f"checkpoint {e.path}{where}: [{c.verdict.value}] {c.kind.value}: {c.reason}",
                      file=sys.stderr)
        for fam, why in getattr(e.result, "skipped", {}).items():
            print(f"checkpoint {e.path}: skipped {fam}: {why}", file=sys.stderr)
    for name in ignored:
        log.info(f"ignored {name} (not a model)")
    log.info(summary_table(entries))
    if args.out:
        log.info(f"certificates and reports: {args.out}/NAME/ (certificate.json, report.md), "
                 f"summary: {args.out}/summary.md")
    if args.json:
        print(json.dumps({"batch": args.batch, "checkpoints": [e.row() for e in entries], "ignored": ignored}))
    return max((e.exit_code() for e in entries), default=0)
