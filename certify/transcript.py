"""Theorem 9 against a quantized sketch model: ``python -m certify.transcript``.

The claim checked (``ClaimKind.TRANSCRIPT``): "this quantized L-layer, H-head
sketch model solves the Sec. 4 multilevel family ``(M, s, h, q)`` with error
below 1/2 at every query position".

1. Eq. 8 / Thm 9, exactly: ``2^(L H r (dv+1) p) >= (s+1)^q`` (uniform ``p``-bit
   quantizer, a ``BOUND`` claim) or ``|Sigma|^(L H r (dv+1)) >= (s+1)^q`` (float
   format with ``|Sigma|`` finite values).
2. Float64 fast path (proposes): every assignment in lexicographic batches;
   each transcript is hashed (64 bits) and the hashes sorted once; equal hashes
   give candidate collisions (the pair's full float transcripts are compared).
3. Exact replay (decides): a candidate pair is recomputed with Fractions
   (identity / relu maps) or arb balls (elu1 / exp), starting from the exact
   dyadic weights. Equal certain transcripts with different targets make the
   two inputs' query outputs identical, so one of them errs by >= 1/2:
   ``refuted``. A ball straddling a cell boundary leaves the pair undecided.
4. Without a collision, ``proved`` needs an exact check of every query output of
   every assignment (done up to ``exact_limit`` assignments); a float failure is
   replayed exactly and may refute; everything else is ``unknown``.

Models with identity / relu maps and a uniform quantizer skip steps 2-4: the
certified enumeration (:mod:`certify.transcript_enum`, claims in
:mod:`certify.transcript_certified`) decides every assignment's transcript and
correctness exactly, so ``proved`` / ``refuted`` is available at any family
size the enumeration reaches (``--workers N`` / ``--ray-address`` shard it).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from certify.certificate import (Certificate, Claim, ClaimKind, Verdict, q_to_str, sha256_json)
from certify import cli, limits, outputs
from certify.errors import InputError, run_command

DEFAULT_EXACT_LIMIT = 4096
REPLAY_ASSUMPTION = "replay:transcript-enumeration"
DEFAULT_BATCH = 4096
MAX_CANDIDATES = 64


# ---------------------------------------------------------------- the certified model

@dataclass(frozen=True)
class QuantizedSketchModel:
    """A sketch model together with its quantizer: the object that is certified."""

    cfg: Any                      # models.sketch.SketchConfig
    weights: dict                 # name -> float64 torch tensor (exact dyadic values)
    quantizer: Any                # models.quantize.UniformQuantizer | FloatFormatQuantizer
    source: str = "builtin"

    @property
    def T(self) -> int:
        return self.cfg.transcript_length

    def weights_json(self) -> dict[str, Any]:
        from models.sketch import weights_to_json

        return weights_to_json(self.weights)

    def evidence(self) -> dict[str, Any]:
        w = self.weights_json()
        return {"config": self.cfg.to_json(), "weights": w, "weights_sha256": sha256_json(w),
                "quantizer": self.quantizer.to_json(), "source": self.source}


def check_compatible(spec, model: QuantizedSketchModel, n: int) -> None:
    """Family and model must fit: token dimension, ``2q <= n``, positions."""
    if 2 * spec.q > n:
        raise InputError(f"2q = {2 * spec.q} exceeds the context length n = {n}")
    if model.cfg.m != spec.m:
        raise InputError(f"the model reads tokens of dimension {model.cfg.m}, the family "
                         f"(M, s) = ({spec.M}, {spec.s}) has m = 2 + M + s = {spec.m}")
    if model.cfg.positions and model.cfg.positions < 2 * spec.q:
        raise InputError(f"the model has {model.cfg.positions} positions, the family needs 2q = {2 * spec.q}")


# ---------------------------------------------------------------- capacity (Eq. 8 / Thm 9)

@dataclass(frozen=True)
class Capacity:
    coordinates: int              # T = L H r (dv + 1)
    alphabet: int                 # per coordinate
    assignments: int              # (s+1)^q
    holds: bool                   # alphabet^T >= (s+1)^q, exact
    bits_available: float         # T log2 alphabet (an integer for uniform quantizers)
    bits_needed: float            # q log2(s+1)

    def to_json(self) -> dict[str, Any]:
        """Exact evidence: ``holds`` is ``alphabet^coordinates >= assignments``; the
        integer bit counts are ``bits_needed`` = least b with ``2^b >= assignments``
        and ``bits_available`` = ``coordinates log2 alphabet`` when the alphabet
        is a power of two (else null)."""
        A = self.alphabet
        return {"coordinates": self.coordinates, "alphabet": A,
                "assignments": self.assignments, "holds": self.holds,
                "bits_available": self.coordinates * (A.bit_length() - 1) if A & (A - 1) == 0 else None,
                "bits_needed": (self.assignments - 1).bit_length()}

    def display(self) -> dict[str, float]:
        """Float bit counts for people (never evidence)."""
        return {"bits_available": float(self.bits_available), "bits_needed": float(self.bits_needed)}


def _num(x: float):
    return int(x) if float(x).is_integer() else x


def capacity(model: QuantizedSketchModel, s: int, q: int) -> Capacity:
    from certify import bounds

    T = model.T
    A = model.quantizer.alphabet
    N = (s + 1) ** q
    holds = bounds.alphabets_suffice([A] * T, s, q)
    return Capacity(T, A, N, holds, T * math.log2(A), q * math.log2(s + 1))


def bound_claim(model: QuantizedSketchModel, s: int, q: int) -> Claim | None:
    """Eq. 8 as a ``BOUND`` claim (uniform quantizers: ``p`` bits per coordinate)."""
    from certify import bounds

    if model.quantizer.kind != "uniform":
        return None
    c = model.cfg
    return bounds.bound_claim(bounds.eq8(c.layers, c.heads, c.rank, c.dv,
                                         model.quantizer.bits, s, q))


# ---------------------------------------------------------------- fast path

_MUL = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)


def hash_rows(keys: np.ndarray) -> np.ndarray:
    """64-bit hash of each row of an int64 array (B, T) -> (B,) uint64."""
    k = np.ascontiguousarray(keys).view(np.uint64)
    h = np.full(k.shape[0], np.uint64(0x243F6A8885A308D3))
    with np.errstate(over="ignore"):
        for t in range(k.shape[1]):
            h = (h ^ k[:, t]) * _MUL
            h ^= h >> np.uint64(31)
        h = (h ^ (h >> np.uint64(29))) * _MIX
    return h ^ (h >> np.uint64(32))


@dataclass(frozen=True)
class SearchResult:
    assignments: int                        # (s+1)^q
    checked: int                            # assignments processed
    complete: bool
    distinct_transcripts: int | None        # among the checked (hash count)
    candidates: tuple[tuple[int, int], ...] # (earlier, later) assignment indices
    float_correct: int                      # assignments with every query output within 1/2 (float)
    float_max_error: float
    worst_index: int                        # assignment with the largest float error
    seconds: float

    @property
    def float_accuracy(self) -> float:
        return self.float_correct / self.checked if self.checked else float("nan")


def _inputs_tensor(spec, kappas):
    import torch

    return torch.from_numpy(spec.tokens[spec.inputs(kappas)].astype(np.float64))  # (B, 2q, m)


def search_collisions(spec, model: QuantizedSketchModel, *, batch: int = DEFAULT_BATCH,
                      time_limit: float | None = None, progress: bool = True,
                      max_candidates: int = MAX_CANDIDATES) -> SearchResult:
    """Stream all assignments through the float64 model, hash the transcripts,
    and return candidate collisions (pairs with equal transcript hashes)."""
    import torch
    from tqdm import tqdm

    from models.sketch import forward_fast

    N = spec.num_assignments
    t0 = time.perf_counter()
    tokens = torch.from_numpy(spec.tokens.astype(np.float64))
    hashes: list[np.ndarray] = []
    correct, worst, worst_i, done = 0, -1.0, 0, 0
    bar = tqdm(total=N, unit="asg", disable=not progress, file=sys.stderr, leave=False)
    with torch.inference_mode():
        for start in range(0, N, batch):
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                break
            kap = spec.assignments(start, start + batch)                      # (B, q)
            run = forward_fast(model.cfg, model.weights, model.quantizer, tokens=tokens,
                               idx=torch.from_numpy(spec.inputs(kap)), n_out=spec.q)
            hashes.append(hash_rows(run.keys.numpy()))
            err = np.abs(run.outputs[:, :spec.q].numpy() - kap)               # (B, q)
            err = np.where(np.isnan(err), np.inf, err)
            per = err.max(1)
            correct += int((per < 0.5).sum())
            j = int(per.argmax())
            if per[j] > worst:
                worst, worst_i = float(per[j]), start + j
            done += len(kap)
            bar.update(len(kap))
    bar.close()
    allh = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    order = np.argsort(allh, kind="stable")
    sh = allh[order]
    dup = np.nonzero(sh[1:] == sh[:-1])[0]
    distinct = int(len(sh) - len(dup))
    cands = []
    for i in dup[:max_candidates]:
        a, b = int(order[i]), int(order[i + 1])
        cands.append((min(a, b), max(a, b)))
    return SearchResult(N, done, done == N, distinct, tuple(cands), correct, worst, worst_i,
                        time.perf_counter() - t0)


# ---------------------------------------------------------------- exact replay

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
    from models.sketch import Uncertain, exact_weights as _ew, forward_exact

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


def collision_evidence(spec, model, ra: Replay, rb: Replay, n: int) -> dict[str, Any]:
    """Everything the checker needs to replay the collision without torch."""
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


# ---------------------------------------------------------------- the whole check

@dataclass(frozen=True)
class TranscriptResult:
    verdict: Verdict
    reason: str | None
    capacity: Capacity
    search: SearchResult
    collision: dict[str, Any] | None            # kappa_a/kappa_b/... summary
    injective: bool | None                      # float transcripts pairwise distinct (complete runs)
    exact_checked: int                          # assignments whose outputs were checked exactly
    exact_correct: int
    claims: tuple[Claim, ...]
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        s = self.search
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "bits_available": _num(self.capacity.bits_available),
            "bits_needed": self.capacity.bits_needed,
            "bound_holds": self.capacity.holds,
            "capacity": self.capacity.to_json(),
            "assignments": s.assignments,
            "assignments_checked": s.checked,
            "distinct_transcripts": s.distinct_transcripts,
            "injective": self.injective,
            "candidate_collisions": len(s.candidates),
            "collision": self.collision,
            "float_accuracy": s.float_accuracy,
            "float_max_error": s.float_max_error,
            "exact_checked": self.exact_checked,
            "exact_accuracy": (self.exact_correct / self.exact_checked) if self.exact_checked else None,
            "seconds": self.timings,
        }


def check_transcript(spec, model: QuantizedSketchModel, *, n: int | None = None,
                     time_limit: float | None = None, exact_limit: int = DEFAULT_EXACT_LIMIT,
                     batch: int = DEFAULT_BATCH, progress: bool = True,
                     certified: bool = True, engine=None) -> TranscriptResult:
    """Run the Thm 9 check of ``model`` on ``spec``; see the module docstring.
    ``certified`` (default): models with identity/relu maps and a uniform quantizer
    go through the certified enumeration of :mod:`certify.transcript_enum`, which
    decides every assignment exactly at any family size (``exact_limit`` is then
    not needed); ``engine`` shards it over workers."""
    from certify import transcript_enum
    from models.sketch import exact_weights

    n = 2 * spec.q if n is None else n
    check_compatible(spec, model, n)
    if certified and transcript_enum.supported(model):
        from certify.transcript_certified import check_certified

        return check_certified(spec, model, n, time_limit=time_limit, progress=progress,
                               engine=engine)
    t0 = time.perf_counter()
    cap = capacity(model, spec.s, spec.q)
    res = search_collisions(spec, model, batch=batch, time_limit=time_limit, progress=progress)
    t1 = time.perf_counter()
    EW = exact_weights(model.weights)
    params = {"M": spec.M, "s": spec.s, "h": spec.h, "q": spec.q,
              "layers": model.cfg.layers, "heads": model.cfg.heads, "rank": model.cfg.rank,
              "dv": model.cfg.dv, "feature_map": model.cfg.feature_map,
              "quantizer": model.quantizer.to_json()}
    base_ev = {"capacity": cap.to_json()}
    info = {**cap.display(), "context_length": n, "assignments_checked_float64": res.checked,
            "distinct_float64_transcripts": res.distinct_transcripts,
            "float64_accuracy": res.float_accuracy if res.checked else None}

    verdict, reason, collision, ev = Verdict.UNKNOWN, None, None, None
    exact_checked = exact_correct = 0
    undecided = 0
    # --- candidate collisions: exact replay decides
    for a, b in res.candidates:
        ra, rb = replay(spec, model, a, EW), replay(spec, model, b, EW)
        if ra.transcript is None or rb.transcript is None:
            undecided += 1
            continue
        if ra.transcript != rb.transcript or ra.kappa == rb.kappa:
            continue                               # float proposal not confirmed
        ev = collision_evidence(spec, model, ra, rb, n)
        verdict = Verdict.REFUTED
        reason = (f"assignments {list(ra.kappa)} and {list(rb.kappa)} have the same exact "
                  f"transcript but different targets: their query outputs coincide, so one "
                  f"errs by >= 1/2 (Thm 9)")
        collision = {"kappa_a": list(ra.kappa), "kappa_b": list(rb.kappa),
                     "index_a": a, "index_b": b, "transcript": ev["transcript"]}
        break
    injective = (res.complete and not res.candidates) if res.complete else None
    # --- no certified collision
    if verdict is not Verdict.REFUTED:
        if res.float_max_error >= 0.5:
            r = replay(spec, model, res.worst_index, EW)
            bad = None
            if r.outputs is not None:
                for i, (y, t) in enumerate(zip(r.outputs, r.kappa)):
                    fails, _ = _query_error(y, t)
                    if fails:
                        bad = (i, y, t)
                        break
            if bad is not None and isinstance(bad[1], Fraction):
                verdict = Verdict.REFUTED
                reason = (f"assignment {list(r.kappa)}: query {bad[0]} outputs {bad[1]} "
                          f"(exact), target {bad[2]}")
                ev = {"type": "error", "family": family_evidence(spec, n),
                      "model": model.evidence(), "kappa": list(r.kappa), "index": r.index,
                      "input": [_bits(x) for x in r.tokens], "position": bad[0],
                      "target": bad[2], "output": q_to_str(bad[1])}
        if verdict is not Verdict.REFUTED:
            if not res.complete:
                reason = (f"time limit: {res.checked} of {res.assignments} "
                          f"assignments checked, no certified collision")
            elif res.candidates:
                reason = (f"{len(res.candidates)} candidate collision(s) from float64, none "
                          f"certified ({undecided} straddle a quantizer boundary)")
            elif res.float_max_error >= 0.5:
                reason = (f"no collision; float64 max query error {res.float_max_error:.3g} >= 1/2 "
                          "but the exact replay of the worst assignment did not confirm it")
            elif spec.num_assignments > exact_limit:
                reason = (f"no collision and float64 accuracy {res.float_accuracy:.4g}; exact "
                          f"check of all {spec.num_assignments} assignments skipped (limit "
                          f"{exact_limit})")
            else:
                verdict, reason, exact_checked, exact_correct, ev = _exact_all(
                    spec, model, EW, n, progress)
    t2 = time.perf_counter()
    evidence = dict(base_ev)
    if ev is not None:
        evidence.update(ev)
    else:
        evidence.update({"type": "none", "family": family_evidence(spec, n),
                         "model": model.evidence()})
    method = ("float64 streaming transcript hashing proposes; exact replay "
              f"({'Fractions' if model.cfg.feature_map in ('identity', 'relu') else 'arb balls'}) "
              "from the exact dyadic weights decides")
    claim = Claim(kind=ClaimKind.TRANSCRIPT, statement=None, verdict=verdict,
                  parameters=params, evidence=evidence, method=method, reason=reason,
                  timings={"search": t1 - t0, "exact": t2 - t1}, info=info)
    claims = [c for c in (bound_claim(model, spec.s, spec.q),) if c is not None] + [claim]
    return TranscriptResult(verdict, reason, cap, res, collision, injective, exact_checked,
                            exact_correct, tuple(claims),
                            {"search": t1 - t0, "exact": t2 - t1})


def _exact_all(spec, model, EW, n, progress):
    """Exact check of every query output of every assignment."""
    from tqdm import tqdm

    N = spec.num_assignments
    correct = 0
    for idx in tqdm(range(N), disable=not progress, file=sys.stderr, leave=False, unit="asg"):
        r = replay(spec, model, idx, EW)
        if r.outputs is None:
            return (Verdict.UNKNOWN, f"assignment {list(r.kappa)}: {r.reason}", idx, correct, None)
        ok = True
        for i, (y, t) in enumerate(zip(r.outputs, r.kappa)):
            fails, _ = _query_error(y, t)
            if fails is None:
                return (Verdict.UNKNOWN, f"assignment {list(r.kappa)} query {i}: the output ball "
                        "touches error 1/2", idx, correct, None)
            if fails:
                ok = False
                if isinstance(y, Fraction):
                    ev = {"type": "error", "family": family_evidence(spec, n),
                          "model": model.evidence(), "kappa": list(r.kappa), "index": idx,
                          "input": [_bits(x) for x in r.tokens], "position": i, "target": t,
                          "output": q_to_str(y)}
                    return (Verdict.REFUTED, f"assignment {list(r.kappa)}: query {i} outputs {y} "
                            f"(exact), target {t}", idx + 1, correct, ev)
                return (Verdict.UNKNOWN, f"assignment {list(r.kappa)} query {i}: certified error "
                        ">= 1/2 from an arb ball (not exact evidence)", idx + 1, correct, None)
        correct += ok
    ev = {"type": "all", "family": family_evidence(spec, n), "model": model.evidence(),
          "exact_checked": N}
    return Verdict.PROVED, None, N, correct, ev


# ---------------------------------------------------------------- building models

def calibrated_uniform(spec, cfg, W, bits: int, *, sample: int = 8192, seed: int = 0,
                       frac_bits: int = 8):
    """Uniform quantizer whose range is the min/max of the unquantized sketches
    over ``sample`` assignments, rounded outward to multiples of ``2^-frac_bits``."""
    import torch

    from models.quantize import UniformQuantizer, dyadic_outward
    from models.sketch import forward_fast

    N = spec.num_assignments
    if N <= sample:
        idx = np.arange(N)
        how = f"all {N} assignments"
    else:
        idx = np.sort(np.random.default_rng(seed).choice(N, size=sample, replace=False))
        how = f"{sample} random assignments (seed {seed})"
    kap = spec.assignments(0, 1)
    powers = (spec.s + 1) ** np.arange(spec.q - 1, -1, -1, dtype=np.int64)
    kap = (idx[:, None] // powers) % (spec.s + 1)
    with torch.inference_mode():
        pre = forward_fast(cfg, W, None, _inputs_tensor(spec, kap)).pre
    lo, hi = dyadic_outward(float(pre.min()), float(pre.max()), frac_bits)
    return UniformQuantizer(bits=bits, lo=lo, hi=hi,
                            calibrated=f"min/max of the unquantized sketches over {how}, "
                                       f"rounded outward to multiples of 2^-{frac_bits}")


def build_model(args, spec, p: int | None = None) -> tuple[QuantizedSketchModel, dict[str, int],
                                                          dict[str, str]]:
    """The model named by the command-line arguments, with its quantizer."""
    from models.quantize import FloatFormatQuantizer, UniformQuantizer
    from models.sketch import (SketchConfig, builtin_uniform_quantizer, injective_model,
                               load_sketch_checkpoint, random_model)
    from certify.certificate import sha256_file

    bits = p if p is not None else args.bits
    seeds, inputs = {}, {}
    saved_q = None
    if args.checkpoint:
        cfg, W, saved_q = load_sketch_checkpoint(args.checkpoint)
        from models.sketch import _paths

        for pth in _paths(args.checkpoint):
            inputs[pth.name] = sha256_file(pth)
        source = f"checkpoint {args.checkpoint}"
    elif args.model in ("builtin-injective", "builtin-planted"):
        cfg, W = injective_model(spec.words, spec.M, spec.s, blind=args.model == "builtin-planted")
        source = args.model
    else:
        cfg = SketchConfig(m=spec.m, d=args.d_model or spec.m, layers=args.layers,
                           heads=args.heads, rank=args.rank, dv=args.dv,
                           feature_map=args.feature_map)
        W = random_model(cfg, args.seed)
        seeds["model"] = args.seed
        source = f"random init (seed {args.seed})"
    if cfg.m != spec.m:
        raise InputError(f"the model reads tokens of dimension {cfg.m}, the family "
                         f"(M, s) = ({spec.M}, {spec.s}) has m = 2 + M + s = {spec.m}")
    builtin = not args.checkpoint and args.model.startswith("builtin")
    if args.format:
        quant = FloatFormatQuantizer(args.format)
    elif bits is None:
        if saved_q is None:
            raise InputError("give --bits P or --format NAME (the checkpoint records no quantizer)")
        quant = saved_q
    elif args.range and args.range != "auto":
        lo, hi = _parse_range(args.range)
        quant = UniformQuantizer(bits=bits, lo=lo, hi=hi)
    elif args.range == "auto":
        quant = calibrated_uniform(spec, cfg, W, bits, seed=args.seed)
    elif builtin:
        quant = builtin_uniform_quantizer(bits)
    elif saved_q is not None and saved_q.kind == "uniform":
        quant = UniformQuantizer(bits=bits, lo=saved_q.lo, hi=saved_q.hi,
                                 calibrated=saved_q.calibrated)
    else:
        quant = calibrated_uniform(spec, cfg, W, bits, seed=args.seed)
    return QuantizedSketchModel(cfg, W, quant, source), seeds, inputs


def _parse_range(text: str) -> tuple[Fraction, Fraction]:
    from certify.certificate import str_to_q

    lo, sep, hi = text.partition(":")
    if not sep:
        raise InputError(f"--range must be LO:HI or auto, got {text!r}")
    return str_to_q(lo), str_to_q(hi)


def _parse_sweep(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        a, b = int(lo), int(hi)
    except ValueError:
        raise InputError(f"--sweep-bits must be LO:HI with integers, got {text!r}") from None
    if not sep or a < 1 or b < a or b > 48:
        raise InputError(f"--sweep-bits needs 1 <= LO <= HI <= 48, got {text!r}")
    return a, b


# ---------------------------------------------------------------- figure

def sweep_figure(rows: list[dict[str, Any]], path: str | Path, title: str) -> None:
    """Bits available vs q log2(s+1) and float / exact accuracy vs p (PNG)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from certify.certificate import atomic_write_bytes

    ps = [r["p"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax1.plot(ps, [r["bits_available"] for r in rows], "o-", label="bits available L H r (dv+1) p")
    ax1.axhline(rows[0]["bits_needed"], color="k", ls="--", label="q log2(s+1)")
    col = [p for p, r in zip(ps, rows) if r["collision"]]
    if col:
        ax1.plot(col, [r["bits_available"] for r in rows if r["collision"]], "rx", ms=10,
                 mew=2, label="certified collision")
    ax1.set_xlabel("bits per coordinate p")
    ax1.set_ylabel("transcript bits")
    ax1.set_yscale("log", base=2)
    ax1.legend(fontsize=7)
    ax2.plot(ps, [r["float_accuracy"] for r in rows], "o-", label="float64 accuracy")
    ax2.plot(ps, [(r["distinct_transcripts"] or 0) / max(r["assignments_checked"], 1) for r in rows],
             "^:", label="distinct transcripts / assignments")
    ex = [(p, r["exact_accuracy"]) for p, r in zip(ps, rows) if r.get("exact_accuracy") is not None]
    if ex:
        ax2.plot([e[0] for e in ex], [e[1] for e in ex], "s", mfc="none", label="exact accuracy")
    ax2.set_xlabel("bits per coordinate p")
    ax2.set_ylabel("fraction of assignments")
    ax2.set_ylim(-0.02, 1.02)
    ax2.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


# ---------------------------------------------------------------- command

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="certify transcript",
                                 description="Thm 9 transcript check of a quantized sketch model "
                                             "on the Sec. 4 multilevel family.")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", help="sketch checkpoint X(.json|.safetensors)")
    src.add_argument("--model", default="builtin-injective",
                     choices=["builtin-injective", "builtin-planted", "random"],
                     help="built-in model (default builtin-injective)")
    ap.add_argument("--seed", type=int, default=0, help="seed of a random model / calibration")
    qg = ap.add_mutually_exclusive_group()
    qg.add_argument("--bits", type=int, help="uniform quantizer, P bits per coordinate")
    qg.add_argument("--format", choices=["fp8-e4m3", "fp8-e5m2", "bf16", "fp16"],
                    help="floating-point quantizer format (instead of --bits)")
    ap.add_argument("--range", help="uniform range LO:HI (exact rationals) or 'auto' "
                                    "(calibrated on the family); builtin models default to 0:2^P-1")
    ap.add_argument("--M", type=int, required=True,
                    help="multilevel family: code length M (token dimension m = 2 + M + s)")
    ap.add_argument("--s", type=int, required=True,
                    help="multilevel family: number of levels s (code distance s + 1)")
    ap.add_argument("--h", type=int, required=True, help="multilevel family: code weight h (0 <= h <= M)")
    ap.add_argument("--q", type=int, required=True,
                    help="multilevel family: number of queries q (assignments (s+1)^q)")
    ap.add_argument("--n", type=int, help="context length (default 2q; 2q <= n is required)")
    ap.add_argument("--layers", type=int, default=1, help="random model: layers (default 1)")
    ap.add_argument("--heads", type=int, default=1, help="random model: heads per layer (default 1)")
    ap.add_argument("--rank", type=int, default=4, help="random model: feature dimension r (default 4)")
    ap.add_argument("--dv", type=int, default=2, help="random model: value dimension (default 2)")
    ap.add_argument("--d-model", type=int, help="state dimension of a random model (default m)")
    ap.add_argument("--feature-map", default="relu", choices=["identity", "relu", "elu1", "exp"],
                    help="random model: feature map (default relu)")
    ap.add_argument("--sweep-bits", help="LO:HI: run every p in the range, print where collisions start")
    ap.add_argument("--figure", help="PNG path for the sweep figure (default reports/transcript/)")
    ap.add_argument("--exact-limit", type=int, default=DEFAULT_EXACT_LIMIT,
                    help="largest family whose outputs are all checked exactly")
    ap.add_argument("--batch-size", type=int, default=DEFAULT_BATCH,
                    help=f"assignments per batch (default {DEFAULT_BATCH})")
    ap.add_argument("--time-limit", type=float, help="seconds for the streaming search")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--out", metavar="CERT", help="write the certificate here; " + cli.OUT_FILE_HELP)
    ap.add_argument("--no-progress", action="store_true",
                    help="no progress bar (bars are shown on stderr only when it is a terminal)")
    from certify.parallel import add_arguments
    add_arguments(ap)                                  # shards of the certified enumeration
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    from certify.families import multilevel_spec

    args = _parser().parse_args(argv)
    for nm in ("layers", "heads", "rank", "dv", "batch_size"):
        if getattr(args, nm) < 1:
            raise InputError(f"--{nm.replace('_', '-')} must be >= 1")
    if args.bits is not None and args.bits < 1:
        raise InputError(f"--bits must be >= 1 (bits per coordinate), got {args.bits}")
    if args.sweep_bits and args.format:
        raise InputError("--sweep-bits sweeps the uniform quantizer's bits; drop --format")
    if not args.sweep_bits and args.bits is None and args.format is None and not args.checkpoint:
        raise InputError("give --bits P, --format NAME or --sweep-bits LO:HI")
    limits.check_time_limit(args.time_limit)
    for nm, key in (("M", "family_m"), ("s", "family_q"), ("h", "family_q"), ("q", "family_q"),
                    ("layers", "family_q"), ("heads", "family_q"), ("rank", "rank"), ("dv", "rank"),
                    ("bits", "family_q")):
        if getattr(args, nm) is not None:
            limits.check_int(key, getattr(args, nm), f"--{nm}", low=0)
    if args.n is not None:
        limits.check_int("chain_n", args.n, "--n")
    if args.d_model is not None:
        limits.check_int("rank", args.d_model, "--d-model")
    if args.out:
        outputs.check_out_file(args.out)
    if args.figure:
        outputs.check_out_file(args.figure, suffixes=(".png",))
    if args.checkpoint:
        ck = cli.resolve_source(args.checkpoint)
        cli.precheck_checkpoint(ck, "sketch")
    spec = multilevel_spec(args.M, args.s, args.h, args.q)
    n = 2 * spec.q if args.n is None else args.n
    if 2 * spec.q > n:
        raise InputError(f"2q = {2 * spec.q} exceeds the context length n = {n}")
    progress = cli.show_progress(args.no_progress)
    command = ["certify", "transcript"] + list(argv if argv is not None else sys.argv[1:])

    if args.sweep_bits:
        lo, hi = _parse_sweep(args.sweep_bits)
        rows, claims = [], []
        seeds, inputs = {}, {}
        for p in range(lo, hi + 1):
            model, seeds, inputs = build_model(args, spec, p)
            r = check_transcript(spec, model, n=n, time_limit=args.time_limit,
                                 exact_limit=args.exact_limit, batch=args.batch_size,
                                 progress=progress)
            js = r.to_json()
            rows.append({"p": p, **{k: js[k] for k in (
                "verdict", "bits_available", "bits_needed", "bound_holds", "assignments_checked",
                "distinct_transcripts", "float_accuracy", "exact_accuracy")},
                "collision": js["collision"]})
            claims.extend(r.claims)
            print(f"p={p:2d}  bits {js['bits_available']:>6} vs needed {js['bits_needed']:.3f}  "
                  f"bound {'holds' if js['bound_holds'] else 'FAILS'}  "
                  f"distinct {js['distinct_transcripts']}/{js['assignments_checked']}  "
                  f"collision {'yes' if js['collision'] else 'no'}  "
                  f"float acc {js['float_accuracy']:.4f}  -> {js['verdict']}", file=sys.stderr)
        with_col = [r["p"] for r in rows if r["collision"]]
        start = max(with_col) if with_col else None
        print(f"certified collisions at p <= {start}" if start is not None else
              "no certified collision in the sweep", file=sys.stderr)
        fig = args.figure or (Path("reports/transcript") /
                              f"sweep-{args.model if not args.checkpoint else 'checkpoint'}-"
                              f"M{spec.M}-s{spec.s}-h{spec.h}-q{spec.q}.png")
        sweep_figure(rows, fig, f"{model.source}: multilevel (M,s,h,q)=({spec.M},{spec.s},"
                                f"{spec.h},{spec.q})")
        print(f"figure: {fig}", file=sys.stderr)
        cert = Certificate(claims=claims, command=command, inputs=inputs, seeds=seeds)
        if args.out:
            outputs.write_file(args.out, cert.dumps())
        if args.json:
            import json

            print(json.dumps({"sweep": rows, "collisions_up_to_bits": start,
                              "figure": str(fig), "verdict": _worst(claims).value}))
        return cert.exit_code()

    model, seeds, inputs = build_model(args, spec)
    from certify.parallel import engine_from_args
    with engine_from_args(args, progress=progress) as engine:
        r = check_transcript(spec, model, n=n, time_limit=args.time_limit,
                             exact_limit=args.exact_limit, batch=args.batch_size,
                             progress=progress, engine=engine)
    cert = Certificate(claims=list(r.claims), command=command, inputs=inputs, seeds=seeds)
    js = r.to_json()
    _print_human(spec, model, js)
    if args.out:
        outputs.write_file(args.out, cert.dumps())
    if args.json:
        import json

        print(json.dumps(js))
    return cert.exit_code()


def _worst(claims) -> Verdict:
    vs = [c.verdict for c in claims]
    if Verdict.REFUTED in vs:
        return Verdict.REFUTED
    if Verdict.UNKNOWN in vs:
        return Verdict.UNKNOWN
    return Verdict.PROVED


def _print_human(spec, model, js) -> None:
    c = js["capacity"]
    print(f"model: {model.source}; {model.cfg.layers} layer(s) x {model.cfg.heads} head(s), "
          f"r={model.cfg.rank}, dv={model.cfg.dv}, {model.cfg.feature_map}; "
          f"quantizer {model.quantizer.describe()}", file=sys.stderr)
    print(f"Thm 9: {c['alphabet']}^{c['coordinates']} transcripts vs {c['assignments']} assignments "
          f"({js['bits_available']} bits vs q log2(s+1) = {js['bits_needed']:.3f}): "
          f"{'holds' if c['holds'] else 'FAILS (no such model can solve the family)'}",
          file=sys.stderr)
    print(f"checked {js['assignments_checked']}/{js['assignments']} assignments, "
          f"{js['distinct_transcripts']} distinct transcripts, float accuracy "
          f"{js['float_accuracy']:.4f}", file=sys.stderr)
    if js["collision"]:
        print(f"collision: kappa {js['collision']['kappa_a']} and {js['collision']['kappa_b']}",
              file=sys.stderr)
    print(f"verdict: {js['verdict']}" + (f" ({js['reason']})" if js["reason"] else ""),
          file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run_command("certify.transcript", main))
