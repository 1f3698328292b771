"""``python -m certify checkpoint CKPT``: end-to-end certification of a trained head.

``python -m certify checkpoint CKPT [--spec SPEC] [--family NAME|FILE ...]
[--eps E] [--out DIR] [--json] [--seed N]``

1. The kernel (:mod:`certify.kernel`): factor form from the checkpoint (a
   ``models/`` checkpoint, or a third-party state dict with an adapter
   ``--spec``), on the model's lookup table, ``cube:m`` (m <= 16) or the first
   applicable family's tokens.
2. Rank (:mod:`certify.rank`): exact two-sided rank over Q, the eps-rank with
   certified singular-value enclosures, nonnegativity, and Lemma 4 on the
   family's code when it has one.
3. Exact correctness (:mod:`certify.audit`) on every built-in family whose
   token dimension is the model's (and, for lookup tables, whose tokens are
   all in the table), plus the families given with ``--family``.
4. The Lemma 3 audit along each family's chains: where the kernel breaks gap
   domination, the concrete input (Y, Z or M of that jump) that the model gets
   wrong, confirmed by exact evaluation.

A third-party checkpoint (a weights file or a Hugging Face style folder, or
any checkpoint with ``--spec``) goes to :mod:`certify.checkpoint_heads`: its
layout is detected (:mod:`models.layouts`) and every head of every layer is
certified (``--layer L --head H`` to pick one); ``--out`` also writes
``heads.md``, the layer x head table.

``--out DIR`` writes ``DIR/certificate.json`` and its report (``certify.report``)
in one atomic step. Exit 0 when every claim is proved, 1 when some claim is
refuted or unknown, 2 bad input, 3 not a kernel head (dense softmax,
position-dependent keys).
"""

from __future__ import annotations

import dataclasses

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from certify.certificate import Certificate, Claim, Verdict, sha256_file
from certify import cli, limits, outputs
from certify.errors import InputError, UncertifiableError, run_command

#: Built-in families tried on every checkpoint (those with the model's token dimension).
BUILTIN_FAMILIES = ("paper-5.1", "ood-6-4-8-test", "ood-8-6-12-test", "ood-10-8-16-test")
DEFAULT_EPS = Fraction(1, 1000)


@dataclass
class CheckpointResult:
    certificate: Certificate
    families: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)      # family -> reason
    failing: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        claims = self.certificate.claims
        return {"verdict": _overall(claims).value,
                "claims": [{"kind": c.kind.value, "verdict": c.verdict.value,
                            "statement": c.statement, "reason": c.reason} for c in claims],
                "families": self.families, "skipped_families": self.skipped,
                "failing_inputs": self.failing}


def _overall(claims: Sequence[Claim]) -> Verdict:
    vs = [c.verdict for c in claims]
    if Verdict.REFUTED in vs:
        return Verdict.REFUTED
    return Verdict.UNKNOWN if Verdict.UNKNOWN in vs or not vs else Verdict.PROVED


def load_head(ckpt: str, spec: str | None):
    """``(model, config, input hashes)``; the model must be a kernel head."""
    path = Path(ckpt)
    if spec is not None:
        from models.adapters import adapt, read_spec, read_state_dict
        model = adapt(read_state_dict(path), read_spec(spec))
        return model, {"architecture": f"adapter:{model.spec.layout}"}, \
            {str(path): sha256_file(path), str(spec): sha256_file(spec)}
    from models.checkpoint import _paths, build_model, load_checkpoint
    config, tensors = load_checkpoint(path)
    model = build_model(config, tensors)
    if not hasattr(model, "feature_matrices"):
        raise UncertifiableError(f"{config.get('architecture')} is not a kernel head: it has no "
                                 "feature maps, so there is no kernel alpha(x, z) to certify")
    if getattr(model, "position_dependent", False):
        raise UncertifiableError("position-dependent key maps have no single kernel alpha(x, z)")
    cfg_path, weights = _paths(path)
    return model, config, {str(weights): sha256_file(weights), str(cfg_path): sha256_file(cfg_path)}


def applicable(model, family) -> str | None:
    """Why the family does not apply to the model, or None when it does."""
    if int(getattr(model, "m", -1)) != family.m:
        return f"token dimension {family.m} differs from the model's {getattr(model, 'm', '?')}"
    if hasattr(model, "index_of"):
        try:
            model.index_of(family.tokens)
        except InputError:
            return "some family tokens are not in the model's lookup table"
    if not (hasattr(model, "readout") and hasattr(model, "values")) and not hasattr(model, "g"):
        return "the head has no scalar readout (value table g), so its outputs are not defined"
    return None


def _rank_claims(ckpt: str, spec: str | None, model, families, eps: Fraction, seed: int,
                 skipped: dict[str, str]) -> list[Claim]:
    from certify import rank as rank_mod
    from certify.kernel import load_kernel

    tokens = None
    if not hasattr(model, "index_of") and int(getattr(model, "m", 99)) > 16:
        if not families:
            skipped["rank"] = "no token set: the model reads m > 16 bits and no family applies"
            return []
        tokens = families[0][0]
    kernel = load_kernel(ckpt, tokens=tokens, spec=spec)
    code = next(((f.words, name) for name, f in families if f.words is not None
                 and f.words.shape[1] == kernel.m and name == "paper-5.1"), (None, None))
    opt = rank_mod.RankOptions(seed=seed, eps=eps, code=code[0], code_name=code[1])
    claims = list(rank_mod.certify_rank(kernel, opt).certificate.claims)
    try:
        s = rank_mod.summarize_features(kernel)
        claims.append(rank_mod.nonnegative_claim_factor(kernel, s, opt))
    except (InputError, UncertifiableError) as exc:
        skipped["nonnegative"] = str(exc)
    return claims


def certify_checkpoint(ckpt: str, *, spec: str | None = None, families: Sequence[str] = (),
                       eps: Fraction = DEFAULT_EPS, seed: int = 0,
                       command: Sequence[str] = ()) -> CheckpointResult:
    from certify import audit
    from certify.families import load_family

    t0 = time.perf_counter()
    model, config, inputs = load_head(ckpt, spec)
    name = Path(ckpt).stem
    source = ckpt if spec is not None else str(next(p for p in inputs if p.endswith(".json")))
    res = CheckpointResult(Certificate(claims=[], command=list(command), inputs=inputs,
                                       seeds={"primes": seed}))
    usable = []
    for fam_name in dict.fromkeys([*families, *BUILTIN_FAMILIES]):
        fam = load_family(fam_name)
        why = applicable(model, fam)
        if why is None:
            usable.append((fam_name, fam))
        elif fam_name in families:
            raise InputError(f"family {fam_name}: {why}")
        else:
            res.skipped[fam_name] = why
        if Path(fam_name).is_file():
            res.certificate.inputs[fam_name] = sha256_file(fam_name)
    claims = _rank_claims(source, spec, model, usable, eps, seed, res.skipped)
    weights = ckpt if spec is not None else next(p for p in inputs if not p.endswith(".json"))
    bound = {"source": weights, "source_sha256": inputs[weights],
             "adapter": "spec-adapter" if spec is not None else "models.checkpoint"}
    for fam_name, fam in usable:
        head = audit.head_from_model(model, fam)
        # the head was computed from the weights: name them, so verify binds the claim to them
        fam_claims = [dataclasses.replace(c, parameters={**c.parameters, **bound})
                      for c in audit.audit_claims(head, fam, name)]
        claims += fam_claims
        res.families.append(fam.name)
        for c in fam_claims:
            ev = c.evidence
            rec = ev.get("counterexample") if c.kind.value == "correctness" else \
                (ev.get("violation") or {}).get("failing_input")
            if c.verdict is Verdict.REFUTED and rec:
                tok = [''.join(map(str, fam.tokens[t])) for t in rec["sequence"]]
                res.failing.append({"family": fam.name, "claim": c.kind.value, **rec,
                                    "tokens": tok,
                                    **({"jump": ev["violation"]["jump"], "role": ev["violation"]["role"]}
                                       if c.kind.value == "gap_domination" else {})})
    res.certificate.claims = claims
    res.certificate.environment.setdefault("seconds", round(time.perf_counter() - t0, 3))
    return res


def _print(res: CheckpointResult, ckpt: str) -> None:
    p = lambda s: print(s, file=sys.stderr)  # noqa: E731
    p(f"checkpoint {ckpt}")
    for c in res.certificate.claims:
        p(f"  [{c.verdict.value}] {c.kind.value}: {c.statement}")
        if c.reason and c.verdict is not Verdict.PROVED:
            p(f"      {c.reason}")
    for f, why in res.skipped.items():
        p(f"  skipped {f}: {why}")
    for f in res.failing:
        p(f"  FAILING INPUT ({f['family']}, {f['claim']}"
          + (f", jump {f['jump']} input {f['role']}" if "jump" in f else "")
          + f"): input {f['input']} = {f['tokens']} position {f['position']}: "
            f"t_hat = {f['t_hat']}, target {f['target']}")
    p(f"verdict: {_overall(res.certificate.claims).value}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="certify checkpoint", description='End-to-end certification of a trained head: kernel extraction, exact and approximate rank, exact correctness on the families it applies to, and the Lemma 3 audit naming inputs the model gets wrong. Writes one certificate and its report.')
    ap.add_argument("checkpoint", metavar="CKPT", nargs="?", help="models/ checkpoint (X, X.json, "
                    "X.safetensors, or a folder holding one) or a third-party checkpoint; "
                    "resolved as given, then a folder with a config and safetensors, then with "
                    "a known suffix")
    ap.add_argument("--spec", help="adapter spec (JSON) for a custom third-party layout "
                    "(known libraries are recognised without one)")
    ap.add_argument("--layer", type=int, help="third-party checkpoints: certify only this layer")
    ap.add_argument("--head", type=int, help="third-party checkpoints: certify only this head")
    ap.add_argument("--family", action="append", default=[],
                    help="also check this family (built-in name or file); repeatable")
    ap.add_argument("--eps", default=str(DEFAULT_EPS),
                    help="eps-rank threshold (exact, e.g. 1/1000; > 0; default 1/1000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random primes")
    ap.add_argument("--out", metavar="DIR", help="folder for certificate.json and its report; "
                    + cli.OUT_DIR_HELP)
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    # a folder of checkpoints (certify.checkpoint_batch), optionally on Ray
    ap.add_argument("--batch", metavar="DIR", help="certify every checkpoint in folder DIR "
                    "(with --out OUT: one subfolder per checkpoint)")
    from certify.parallel import add_arguments
    add_arguments(ap)
    args = ap.parse_args(argv)
    if not args.batch and not args.checkpoint:
        raise InputError("give a checkpoint CKPT or --batch DIR")
    if args.batch and args.checkpoint:
        raise InputError("give either a checkpoint CKPT or --batch DIR, not both")
    eps = limits.parse_eps(args.eps, "--eps")
    command = ["certify", "checkpoint", *(sys.argv[1:] if argv is None else list(argv))]
    if args.batch:
        from certify.checkpoint_batch import run_batch
        return run_batch(args, eps, command)
    if args.out:
        outputs.check_out_dir(args.out, "checkpoint")
    ckpt = None
    if args.spec is None:
        try:
            ckpt = str(cli.resolve_source(args.checkpoint))
        except InputError:
            ckpt = None
    if ckpt is None or not _is_models_checkpoint(ckpt):
        return _main_layouts(args, eps, command)
    cli.precheck_checkpoint(ckpt)
    res = certify_checkpoint(ckpt, spec=args.spec, families=args.family, eps=eps,
                             seed=args.seed, command=command)
    out = {}
    if args.out:
        from certify import report
        text = res.certificate.dumps()
        folder = report.build_with_certificate(text, args.out)
        out = {"out": str(folder), "certificate": str(Path(folder) / "certificate.json")}
        print(f"certificate and report: {folder}/ (certificate.json, report.md)", file=sys.stderr)
    _print(res, ckpt)
    if args.json:
        print(json.dumps({**res.to_json(), **out}))
    return res.certificate.exit_code()


def _is_models_checkpoint(ckpt: str) -> bool:
    """A ``models/`` checkpoint (X, X.json, X.safetensors with its config); anything
    else is a third-party checkpoint whose layout is detected."""
    from certify.kernel import _is_checkpoint
    p = Path(ckpt)
    return _is_checkpoint(p) or (not p.exists() and p.with_suffix(".json").is_file()
                                 and _is_checkpoint(p.with_suffix(".json")))


def _main_layouts(args, eps: Fraction, command: list[str]) -> int:
    """Third-party checkpoints: every head of every layer (:mod:`certify.checkpoint_heads`)."""
    from certify import checkpoint_heads as ch
    res = ch.certify_heads(args.checkpoint, spec=args.spec, families=args.family, eps=eps, seed=args.seed,
                           layer=args.layer, head=args.head, command=command)
    out = {}
    if args.out:
        folder = ch.write_out(res, args.out)
        out = {"out": str(folder), "certificate": str(Path(folder) / "certificate.json")}
        print(f"certificate and report: {folder}/ (certificate.json, report.md, heads.md)", file=sys.stderr)
    ch.print_result(res, args.checkpoint)
    if args.json:
        print(json.dumps({**res.to_json(), **out}))
    return res.certificate.exit_code()


if __name__ == "__main__":
    sys.exit(run_command("certify checkpoint", main))
