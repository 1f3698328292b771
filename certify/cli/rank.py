"""``certify rank SOURCE``: exact two-sided rank, certified eps-rank, numerical rank (a float
matrix, or ``--tol``), code rank and nonnegativity of a kernel (:func:`certify.rank.run.certify_rank`).

``--json`` prints one object with ``rank_lower``, ``rank_upper``, ``verdict``
and the certificate."""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from typing import Sequence

from certify.checkers import scratch
from certify.cli import common as cli
from certify.cli import log
from certify.core import limits, outputs
from certify.core.errors import InputError
from certify.core.kernel import parse_tokens
from certify.core.progress import show_progress
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank, load_code
from certify.sources.hub import hub_lines
from certify.sources.hub import resolve as resolve_hub
from certify.sources.load import annotate, extraction_info, load_kernel
from certify.sources.paths import precheck_checkpoint, resolve_source


def _parser() -> argparse.ArgumentParser:
    p = cli.parser("rank", 'Exact two-sided rank (modular minor + exact span or null-space witness) and certified approximate rank of a kernel; optional Lemma 4 / Thm 5 code-rank and nonnegativity claims. Exit 0 when every claim is proved.')
    p.add_argument("source", help=cli.SOURCE_HELP)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tokens", help=cli.TOKENS_HELP)
    g.add_argument("--family", help="token set: a family's tokens (name or file)")
    p.add_argument("--spec", help="adapter spec (JSON) for a third-party state dict of a custom layout")
    cli.add_head_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--out", metavar="CERT", help="write the certificate here; " + cli.OUT_FILE_HELP)
    p.add_argument("--eps", help="eps-rank threshold (exact: '1/1000', '0.001'; > 0)")
    p.add_argument("--tol", help="numerical rank at this tolerance (exact: '1/10^9', '1e-9'; > 0): how many "
                   "singular values exceed it, certified from both sides. Without --tol, a float matrix "
                   "whose entries are not all integers gets it at numpy's default tolerance, sigma_1 x "
                   "max(m, n) x 2^-52 (the number numpy.linalg.matrix_rank returns, here proved, with "
                   "sigma_1 enclosed); the exact rank over Q of the stored float values is a different "
                   "question, answered by the exact_rank claim. A singular value too close to the "
                   "tolerance leaves the count undecided (verdict unknown, the bracket proved)")
    p.add_argument("--numerical-only", action="store_true",
                   help="certify the numerical rank alone (no exact rank over Q of the stored values, "
                        "which costs far more on float data); --json's rank_lower, rank_upper are then "
                        "the numerical rank's bracket")
    p.add_argument("--seed", type=int, default=0, help="seed of the random primes (and of a third-party "
                   "model's library comparison)")
    p.add_argument("--max-primes", type=int, default=4,
                   help="random primes tried for the modular rank (1..64, default 4)")
    p.add_argument("--upper-bound", choices=("auto", "exact", "freivalds"), default="auto",
                   help="matrix form's upper bound: 'exact' (column-span check by many primes), "
                        "'freivalds' (a Freivalds test whose vectors and primes come from the claim's "
                        "hash; the claim states its error probability <= 2^-128), 'auto' (default: "
                        "the one whose CPU time, predicted from n1, n2, r, the entry sizes and the "
                        "Freivalds plan, is smaller, exact on a tie; the claim's method and "
                        "info.upper_auto give both predictions). "
                        "The lower bound is always exact")
    p.add_argument("--code", help="code for the Lemma 4 claim: 'paper-5.1', a .json list of "
                                  "0/1 strings, or a .npy (W, M) array")
    p.add_argument("--require-nonnegative", action="store_true",
                   help="certify alpha >= 0; a signed kernel exits with code 3")
    p.add_argument("--batch-size", type=int, default=1 << 14,
                   help="tokens per feature batch (1..2^20, default 2^14)")
    cli.add_progress(p)
    cli.add_engine_arguments(p)                        # sharded factor-form Gram pass
    return p


def parse_eps(text: str) -> Fraction:
    return limits.parse_eps(text, "--eps")


def main(argv: Sequence[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if not 1 <= a.max_primes <= 64 or not 1 <= a.batch_size <= 1 << 20:
        raise InputError("--max-primes must be in 1..64, --batch-size in 1..2^20")
    eps = parse_eps(a.eps) if a.eps else None
    tol = limits.parse_eps(a.tol, "--tol") if a.tol else None
    if a.out:
        outputs.check_out_file(a.out)
    tokens = a.tokens or a.family
    if a.tokens and not a.tokens.startswith("vocab"):       # a model's vocabulary: checked with the model
        parse_tokens(a.tokens)                  # cube:M bounds, before any model is loaded
    hub = resolve_hub(a.source)
    source = str(hub.path) if hub is not None else (a.source if a.spec else str(resolve_source(a.source)))
    if not a.spec:
        precheck_checkpoint(source)
    kernel = load_kernel(source, tokens=tokens, spec=a.spec, layer=a.layer, head=a.head, seed=a.seed,
                         assume=a.assume_default)
    cli.say_extraction(kernel)
    code, code_name = load_code(a.code) if a.code else (None, None)
    opt = RankOptions(seed=a.seed, max_primes=a.max_primes, eps=eps,
                      code=code, code_name=code_name, require_nonnegative=a.require_nonnegative,
                      batch_size=a.batch_size, progress=show_progress(a.no_progress),
                      upper_bound=a.upper_bound, tol=tol, numerical_only=a.numerical_only)
    # the producer's computation and its own check before writing share one scratch: the span
    # check, minor and Freivalds test it computed with the checker's functions are found there
    with scratch.session(), cli.engine_from_args(a, progress=False) as engine:
        rep = certify_rank(kernel, opt, engine=engine)
        cert = annotate(rep.certificate, kernel)
        cert.command = ["certify", "rank", *(sys.argv[1:] if argv is None else list(argv))]
        if hub is not None:                     # portable names: hf://org/name@commit/...
            cert, kernel = hub.rename_certificate(cert), hub.rename_kernel(kernel)
            for line in hub_lines(cert.environment.get("hub")):
                print(line, file=sys.stderr)
        text = cert.dumps() if a.out or a.json else None     # checked before it leaves
    if a.out and text is not None:
        outputs.write_file(a.out, text)
    for c in cert.claims:
        log.info(f"[{c.verdict.value}] {c.statement}" + (f" ({c.reason})" if c.reason else ""))
        if c.kind.value == "numerical_rank" and c.evidence.get("sigma_max"):
            lo, hi = (float(Fraction(v)) for v in c.evidence["sigma_max"])
            log.info(f"  sigma_1 in [{lo:.12g}, {hi:.12g}], tol in [{float(Fraction(c.evidence['tol_lower'])):.6g}, "
                     f"{float(Fraction(c.evidence['tol_upper'])):.6g}] (certified)")
    if any(c.kind.value == "numerical_rank" for c in cert.claims) and not a.numerical_only \
            and a.tol is None:
        log.info("note: the entries are not all integers: the numerical rank above is the count "
                 "numpy.linalg.matrix_rank makes; the exact rank over Q of the stored float values is a "
                 "different question (--numerical-only skips it)")
    if a.json:
        print(json.dumps({"rank_lower": rep.rank_lower, "rank_upper": rep.rank_upper,
                          "verdict": rep.verdict.value, "form": kernel.form.value,
                          "token_set": kernel.token_set, "shape": list(kernel.shape),
                          "source": kernel.provenance.source, "adapter": kernel.provenance.adapter,
                          **extraction_info(kernel), "certificate": cert.to_json()}))
    return cert.exit_code()
