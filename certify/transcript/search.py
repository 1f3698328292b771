"""The float64 fast path (proposes only): stream every assignment through the
model, hash the transcripts (64 bits), sort once; equal hashes are candidate
collisions for the exact replay to decide.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from certify.transcript.model import QuantizedSketchModel

DEFAULT_BATCH = 4096


MAX_CANDIDATES = 64


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


def search_collisions(spec, model: QuantizedSketchModel, *, batch: int = DEFAULT_BATCH,
                      time_limit: float | None = None, progress: bool = True,
                      max_candidates: int = MAX_CANDIDATES) -> SearchResult:
    """Stream all assignments through the float64 model, hash the transcripts,
    and return candidate collisions (pairs with equal transcript hashes).
    ``time_limit``: CPU seconds of this process (:mod:`certify.core.budget`),
    checked between batches."""
    import torch
    from tqdm.auto import tqdm

    from certify.core.budget import CpuBudget
    from models.sketch import forward_fast

    N = spec.num_assignments
    t0 = time.perf_counter()
    budget = None if time_limit is None else CpuBudget(time_limit)     # CPU seconds
    tokens = torch.from_numpy(spec.tokens.astype(np.float64))
    hashes: list[np.ndarray] = []
    correct, worst, worst_i, done = 0, -1.0, 0, 0
    bar = tqdm(total=N, unit="asg", disable=not progress, file=sys.stderr, leave=False)
    with torch.inference_mode():
        for start in range(0, N, batch):
            if budget is not None and budget.exhausted():
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
