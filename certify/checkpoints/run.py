"""End-to-end certification of a trained ``models/`` head (``certify checkpoint CKPT``).

1. The kernel (:mod:`certify.sources`): factor form from the checkpoint (a
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
any checkpoint with ``--spec``) goes to :mod:`certify.checkpoints.heads`: its
layout is detected (:mod:`models.layouts`) and every head of every layer is
certified (``--layer L --head H`` to pick one); ``--out`` also writes
``heads.md``, the layer x head table.

The command front (``--out DIR``: the certificate and its report in one atomic
step; exit codes) is :mod:`certify.cli.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from certify.core.certificate import Certificate, Claim
from certify.core.errors import InputError, UncertifiableError
from certify.core.files import sha256_file
from certify.core.verdict import Verdict, overall

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
        return {"verdict": overall(c.verdict for c in claims).value,
                "claims": [{"kind": c.kind.value, "verdict": c.verdict.value,
                            "statement": c.statement, "reason": c.reason} for c in claims],
                "families": self.families, "skipped_families": self.skipped,
                "failing_inputs": self.failing}


def load_head(ckpt: str, spec: str | None):
    """``(model, config, input hashes, weights_sha256)``: the model must be a kernel
    head; ``weights_sha256`` is the canonical hash of the tensors it was built from
    (:func:`certify.sources.tensor_hash.weights_sha256`)."""
    from certify.sources.tensor_hash import weights_sha256

    path = Path(ckpt)
    if spec is not None:
        from certify.sources.checkpoint import read_state_dict
        from models.adapters import adapt, read_spec
        sd = read_state_dict(path)
        head = adapt(sd, read_spec(spec))
        return head, {"architecture": f"adapter:{head.spec.layout}"}, \
            {str(path): sha256_file(path), str(spec): sha256_file(spec)}, weights_sha256(sd)
    from certify.sources.checkpoint import load_checkpoint
    from models.checkpoint import _paths, build_model
    config, tensors = load_checkpoint(path)
    model = build_model(config, tensors)
    if not hasattr(model, "feature_matrices"):
        raise UncertifiableError(f"{config.get('architecture')} is not a kernel head: it has no "
                                 "feature maps, so there is no kernel alpha(x, z) to certify")
    if getattr(model, "position_dependent", False):
        raise UncertifiableError("position-dependent key maps have no single kernel alpha(x, z)")
    cfg_path, weights = _paths(path)
    if weights is None:                     # load_checkpoint found them: not reached
        raise InputError(f"no checkpoint weights at {path}")
    return model, config, {str(weights): sha256_file(weights), str(cfg_path): sha256_file(cfg_path)}, \
        weights_sha256(tensors)


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
    from certify.rank.nonnegative import nonnegative_claim_factor
    from certify.rank.options import RankOptions
    from certify.rank.run import certify_rank
    from certify.rank.summary import summarize_features
    from certify.sources.load import load_kernel

    tokens = None
    if not hasattr(model, "index_of") and int(getattr(model, "m", 99)) > 16:
        if not families:
            skipped["rank"] = "no token set: the model reads m > 16 bits and no family applies"
            return []
        tokens = families[0][0]
    kernel = load_kernel(ckpt, tokens=tokens, spec=spec)
    code = next(((f.words, name) for name, f in families if f.words is not None
                 and f.words.shape[1] == kernel.m and name == "paper-5.1"), (None, None))
    opt = RankOptions(seed=seed, eps=eps, code=code[0], code_name=code[1])
    claims = list(certify_rank(kernel, opt).certificate.claims)
    try:
        s = summarize_features(kernel)
        claims.append(nonnegative_claim_factor(kernel, s, opt))
    except (InputError, UncertifiableError) as exc:
        skipped["nonnegative"] = str(exc)
    return claims


def certify_checkpoint(ckpt: str, *, spec: str | None = None, families: Sequence[str] = (),
                       eps: Fraction = DEFAULT_EPS, seed: int = 0,
                       command: Sequence[str] = ()) -> CheckpointResult:
    from certify import audit
    from certify.core.families import load_family

    t0 = time.perf_counter()
    model, config, inputs, wsha = load_head(ckpt, spec)
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
    bound = {"source": weights, "source_sha256": inputs[weights], "weights_sha256": wsha,
             "adapter": "spec-adapter" if spec is not None else "models.checkpoint"}
    for _fam_name, fam in usable:
        head = audit.head_from_model(model, fam)
        # the head was computed from the weights: name them, so verify binds the claim to them
        fam_claims = [dataclasses.replace(c, parameters={**c.parameters, **bound}, statement=None)
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
