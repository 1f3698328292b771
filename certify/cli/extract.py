"""``certify extract``: the kernel ``alpha`` of a model, checkpoint or matrix, as a file.

``certify extract SOURCE --out FILE [--tokens cube:M | --family NAME|FILE] [--spec SPEC]``
writes a kernel file (``.npz``: float features or matrix plus JSON metadata;
``.json``: exact rationals) that ``certify.rank`` and the other commands read.
Features are stored in the dtype the model computed them in, so the file
holds the model's kernel exactly.
"""

from __future__ import annotations

import argparse
import json
from typing import Sequence

from certify.cli import common as cli
from certify.cli import log
from certify.core import outputs
from certify.core.kernel import Form, parse_tokens
from certify.sources.hub import resolve as resolve_hub
from certify.sources.load import load_kernel
from certify.sources.paths import precheck_checkpoint, resolve_source


def _parser() -> argparse.ArgumentParser:
    p = cli.parser("extract", "Extract the kernel alpha(x, z) = <phiQ(x), phiK(z)> from a checkpoint (models/, or a third-party weights file or model folder, layout detected; --spec for a custom layout) or a kernel matrix file, on the Boolean cube, a family's tokens or a model's vocabulary.")
    p.add_argument("source", help=cli.SOURCE_HELP)
    p.add_argument("--out", required=True, help="kernel file to write (.npz or .json); "
                   + cli.OUT_FILE_HELP)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tokens", help=cli.TOKENS_HELP)
    g.add_argument("--family", help="token set: a family's tokens (name or file)")
    p.add_argument("--spec", help="adapter spec (JSON) for a third-party state dict of a custom layout")
    cli.add_head_arguments(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the library comparison's sequences and values")
    p.add_argument("--json", action="store_true", help="print the kernel's metadata as JSON on stdout")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    outputs.check_out_file(a.out, suffixes=(".npz", ".json"))
    if a.tokens and not a.tokens.startswith("vocab"):       # a model's vocabulary: checked with the model
        parse_tokens(a.tokens)                  # cube:M bounds, before any model is loaded
    hub = resolve_hub(a.source)
    source = str(hub.path) if hub is not None else (a.source if a.spec else str(resolve_source(a.source)))
    if not a.spec:
        precheck_checkpoint(source)
    kernel = load_kernel(source, tokens=a.tokens or a.family, spec=a.spec, layer=a.layer, head=a.head,
                         seed=a.seed, assume=a.assume_default)
    cli.say_extraction(kernel)
    kernel = kernel.materialize()
    if hub is not None:                         # the provenance names hf://org/name@commit/...
        kernel = hub.rename_kernel(kernel)
        log.info(f"hub model {hub.repo_id} at commit {hub.commit}: {kernel.provenance.source} "
                 f"(sha256 {kernel.provenance.source_sha256})")
    outputs.check_out_file(a.out, suffixes=(".npz", ".json"))
    kernel.save(a.out)
    meta = kernel.meta()
    what = (f"features {kernel.num_tokens} x {kernel.rank}" if kernel.form is Form.FACTOR
            else f"matrix {kernel.shape[0]} x {kernel.shape[1]}")
    log.info(f"certify extract: wrote {a.out}: {what} on {kernel.token_set} "
          f"({kernel.provenance.adapter}, {kernel.provenance.dtype})")
    if a.json:
        print(json.dumps(meta))
    return 0
