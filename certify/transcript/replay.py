"""Exact replay of single assignments (Fractions for identity / relu maps, arb
balls for elu1 / exp) and the evidence a refutation carries: the family, the
model, the colliding or failing input.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from certify.core.numbers import q_to_str
from certify.transcript.model import QuantizedSketchModel


@dataclass(frozen=True)
class Replay:
    """Exact replay of one assignment: transcript (or None when uncertain)."""

    index: int
    kappa: tuple[int, ...]
    tokens: np.ndarray                      # (2q, m)
    transcript: tuple | None
    outputs: tuple | None                   # query outputs (Fraction or arb)
    reason: str | None = None


def replay(spec, model: QuantizedSketchModel, index: int, exact_weights=None) -> Replay:
    from models.sketch import Uncertain, forward_exact
    from models.sketch import exact_weights as _ew

    kap = spec.assignments(index, index + 1)
    toks = spec.tokens[spec.inputs(kap)[0]]
    EW = exact_weights if exact_weights is not None else _ew(model.weights)
    try:
        run = forward_exact(model.cfg, EW, model.quantizer, toks)
    except Uncertain as exc:
        return Replay(index, tuple(int(v) for v in kap[0]), toks, None, None, str(exc))
    return Replay(index, tuple(int(v) for v in kap[0]), toks, run.transcript,
                  run.outputs[:spec.q])


def _sym(x) -> Any:
    return x if isinstance(x, int) else q_to_str(x)


def _bits(row) -> str:
    return "".join(str(int(b)) for b in row)


def _query_error(y, t: int) -> tuple[bool | None, Any]:
    """(is the error >= 1/2 for certain?, exact/ball value). None = undecided."""
    if isinstance(y, Fraction):
        return abs(y - t) >= Fraction(1, 2), y
    d = abs(y - t)
    if d >= 0.5:
        return True, y
    if d < 0.5:
        return False, y
    return None, y


def family_evidence(spec, n: int) -> dict[str, Any]:
    """The multilevel family (its inputs have length 2q; the context length ``n``
    only has to admit them, so it is a diagnostic, not evidence)."""
    return {"M": spec.M, "s": spec.s, "h": spec.h, "q": spec.q,
            "words": [_bits(w) for w in spec.words]}


def error_refutation(spec, model, r: Replay, position: int, output: Fraction, target: int,
                     n: int) -> tuple[dict[str, Any], str]:
    """The evidence and the reason of a refutation by one exact output: query
    ``position`` of assignment ``r`` outputs ``output``, at least 1/2 from ``target``."""
    ev = {"type": "error", "family": family_evidence(spec, n), "model": model.evidence(),
          "kappa": list(r.kappa), "index": r.index, "input": [_bits(x) for x in r.tokens],
          "position": position, "target": target, "output": q_to_str(output)}
    reason = f"assignment {list(r.kappa)}: query {position} outputs {output} (exact), target {target}"
    return ev, reason


def collision_refutation(spec, model, ra: Replay, rb: Replay, n: int
                         ) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The evidence, the reason and the summary of a refutation by an exact
    collision: ``ra`` and ``rb`` have one exact transcript and different targets."""
    ev = collision_evidence(spec, model, ra, rb, n)
    reason = (f"assignments {list(ra.kappa)} and {list(rb.kappa)} have the same exact "
              f"transcript but different targets: their query outputs coincide, so one "
              f"errs by >= 1/2 (Thm 9)")
    collision = {"kappa_a": list(ra.kappa), "kappa_b": list(rb.kappa),
                 "index_a": ra.index, "index_b": rb.index, "transcript": ev["transcript"]}
    return ev, reason, collision


def collision_evidence(spec, model, ra: Replay, rb: Replay, n: int) -> dict[str, Any]:
    """Everything the checker needs to replay the collision without torch."""
    assert ra.transcript is not None and ra.outputs is not None     # an exact replay collided
    ev: dict[str, Any] = {
        "type": "collision",
        "family": family_evidence(spec, n),
        "model": model.evidence(),
        "kappa_a": list(ra.kappa), "kappa_b": list(rb.kappa),
        "index_a": ra.index, "index_b": rb.index,
        "input_a": [_bits(r) for r in ra.tokens], "input_b": [_bits(r) for r in rb.tokens],
        "targets_a": list(ra.kappa), "targets_b": list(rb.kappa),
        "transcript": [_sym(x) for x in ra.transcript],
    }
    if all(isinstance(y, Fraction) for y in ra.outputs):
        ev["query_outputs"] = [q_to_str(y) for y in ra.outputs]
        for i, (ta, tb) in enumerate(zip(ra.kappa, rb.kappa)):
            if ta != tb:
                y = ra.outputs[i]
                which = "a" if abs(y - ta) >= Fraction(1, 2) else "b"
                ev["failing"] = {"input": which, "position": i,
                                 "target": ta if which == "a" else tb, "output": q_to_str(y)}
                break
    return ev
