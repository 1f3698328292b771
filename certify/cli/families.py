"""``certify families``: show, save and build the finite input families
(:mod:`certify.core.families`)."""

from __future__ import annotations

import json

from certify.cli import common, log
from certify.core import outputs
from certify.core.errors import InputError
from certify.core.families import (
    Family,
    builtin_names,
    chain_family,
    check_family_size,
    load_code,
    load_family,
    multilevel_spec,
    ood_families,
)
from certify.core.limits import parse_exact


def main(argv=None) -> int:
    """``python -m certify families show NAME|FILE [--json]`` prints a family's
    counts; ``save NAME|FILE --out FILE`` writes it; ``build chain|multilevel|ood
    ... --out FILE`` builds one from parameters (and a code file)."""
    p = common.parser(
        "families",
        "Build, inspect and save the finite input families of the paper. "
                    f"Built-in names: {'; '.join(builtin_names())}. Files: .json or .npz "
                    "(format in the module docstring); loading re-derives every target.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sh = sub.add_parser("show", help="print a family's counts (words, tokens, inputs, jumps, sha256)")
    sh.add_argument("family", help="built-in name or a .json/.npz family file")
    sh.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    sv = sub.add_parser("save", help="write a family to a file (.json or .npz), atomically")
    sv.add_argument("family", help="built-in name or a family file")
    sv.add_argument("--out", required=True, help="output path ending in .json or .npz; an existing "
                    "file is replaced only when certify wrote it; missing folders are created")
    b = sub.add_parser("build", help="build a family from parameters and write it")
    b.add_argument("builder", choices=["chain", "multilevel", "ood"],
                   help="chain (Lemma 3, from a code file), multilevel (Sec. 4) or ood (Sec. 5.2)")
    b.add_argument("--code", help="code file (JSON list of bit strings, .npy, or .txt); "
                   "chain: required; multilevel: default greedy packing")
    b.add_argument("--n", type=int, default=3, help="chain: exact length (>= 3)")
    b.add_argument("--eps", default="1/2", help="chain: error eps, 0 < eps <= 1/2")
    b.add_argument("--g", type=int, help="chain: step (default: least valid)")
    b.add_argument("--M", type=int, help="multilevel/ood: code length")
    b.add_argument("--s", type=int, help="multilevel: levels")
    b.add_argument("--h", type=int, help="multilevel: code weight")
    b.add_argument("--q", type=int, help="multilevel/ood: number of queries")
    b.add_argument("--split", choices=["train", "test"], default="test", help="ood: pool")
    b.add_argument("--size", type=int, default=1024, help="ood: inputs in the pool")
    b.add_argument("--seed", type=int, default=0, help="ood: seed")
    b.add_argument("--out", required=True, help="output path ending in .json or .npz; an existing "
                   "file is replaced only when certify wrote it; missing folders are created")
    b.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = p.parse_args(argv)
    if args.cmd in ("save", "build"):
        outputs.check_out_file(args.out, suffixes=(".json", ".npz"))
    if args.cmd == "build":
        check_family_size(M=args.M, q=args.q, s=args.s, h=args.h, size=args.size, n=args.n)
        fam = _build(args)
    else:
        fam = load_family(args.family)
    if args.cmd in ("save", "build"):
        fam.save(args.out)
        log.info(f"wrote {args.out} ({fam.inputs.shape[0]} inputs, sha256 {fam.sha256[:16]}...)")
        if not getattr(args, "json", False):
            return 0
    counts = {**fam.counts(), "params": dict(fam.params)}
    if args.json:
        print(json.dumps(counts))
    else:
        for k, v in counts.items():
            print(f"{k:>17}: {v}")
    return 0


def _build(args) -> Family:
    def need(*names):
        for nm in names:
            if getattr(args, nm) is None:
                raise InputError(f"build {args.builder} needs --{nm}")
    if args.builder == "chain":
        need("code")
        eps = parse_exact(args.eps, "--eps")
        return chain_family(load_code(args.code), n=args.n, eps=eps, g=args.g)
    if args.builder == "multilevel":
        need("M", "s", "h", "q")
        words = load_code(args.code) if args.code else None
        return multilevel_spec(args.M, args.s, args.h, args.q, words=words).family()
    need("M", "q")
    train, test = ood_families(args.M, args.q, train_size=args.size, test_size=args.size,
                               seed=args.seed)
    return train if args.split == "train" else test
