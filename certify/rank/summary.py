"""Factor form: one batched pass over the tokens gives the exact Gram matrices
``PhiQ^T PhiQ`` and ``PhiK^T PhiK`` (never the ``K x K`` kernel), the features'
hashes and exact minima; on Ray the Gram products run as tasks over token
blocks and are summed exactly, so the summary does not depend on the split.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from certify.checkers.common import without_negative_zeros
from certify.core.errors import InputError
from certify.core.kernel import Kernel
from solvers import exact as ex


@dataclass(frozen=True, eq=False)
class FactorSummary:
    """Exact summaries of ``PhiQ, PhiK`` from one batched pass (never ``K x K``)."""

    num_tokens: int
    r: int
    dtype: str
    gram_q: np.ndarray                # (r, r) Python ints; PhiQ^T PhiQ = gram_q 2^eq
    eq: int
    gram_k: np.ndarray
    ek: int
    sha_q: str                        # sha256 of PhiQ (K, r) bytes, row-major, little-endian
    sha_k: str
    min_q: Fraction
    min_k: Fraction
    phi_q: np.ndarray | None          # stored features (small token sets), else None
    phi_k: np.ndarray | None
    seconds: float
    structure: dict | None = None     # quadratic-kernel summaries (certify.rank.structure), if any


def _gram_shard(kernel: Kernel, start: int, stop: int, batch_size: int):
    """Exact Grams of ``PhiQ, PhiK`` over tokens ``start..stop-1`` (one task)."""
    accq, acck = ex.GramAccumulator(kernel.feature_rank), ex.GramAccumulator(kernel.feature_rank)
    for a in range(start, stop, batch_size):
        q, k = kernel.features_at(kernel.token_batch(a, min(stop, a + batch_size)))
        accq.add(q)
        acck.add(k)
    return accq.result(), acck.result(), accq.rows


def _sum_pow2(parts) -> tuple[np.ndarray, int]:
    """Exact sum of ``G_i 2^e_i`` (object arrays), as ``G 2^e`` normalized."""
    tot, e0 = None, 0
    for G, e in parts:
        if not any(int(v) for v in G.ravel()):
            continue
        if tot is None:
            tot, e0 = G, e
        elif e >= e0:
            tot = tot + G * (1 << (e - e0))
        else:
            tot, e0 = tot * (1 << (e0 - e)) + G, e
    if tot is None:
        return parts[0][0] * 0, 0
    return ex.normalize_pow2(tot, e0)


_LAST: tuple | None = None           # (weak reference to the kernel, arguments, summary)


def summarize_features(kernel: Kernel, *, batch_size: int = 1 << 14, keep_limit: int = 1 << 22,
                       engine=None, shards: int | None = None,
                       progress: bool = False) -> FactorSummary:
    """One pass over the tokens. With an ``engine`` on Ray (or ``shards`` given)
    the exact Gram products, the costly part, run as tasks over token blocks and
    are summed exactly (integer sums: the result does not depend on the split);
    this process still streams the features once for the hashes and minima.
    The last summary is kept for the same kernel object and arguments (a second
    claim on the same head does not pay a second pass)."""
    global _LAST
    import weakref
    args = (batch_size, keep_limit)
    if _LAST is not None and _LAST[0]() is kernel and _LAST[1] == args:
        return _LAST[2]
    t0 = time.perf_counter()
    if (engine is not None and engine.parallel) or shards:
        out = _summarize_sharded(kernel, batch_size, keep_limit, engine, shards, t0)
    else:
        out = _summarize_local(kernel, batch_size, keep_limit, progress, t0)
    try:
        _LAST = (weakref.ref(kernel), args, out)
    except TypeError:                                     # not weak-referenceable: no memo
        _LAST = None
    return out


def feature_hashes(kernel: Kernel, batch_size: int = 1 << 14, keep: bool = False
                   ) -> tuple[str, str, str, list[np.ndarray], list[np.ndarray]]:
    """``(dtype, sha_q, sha_k, q_rows, k_rows)``: the features' hashes of
    :func:`summarize_features` (the same pass), without the exact Grams: what a replay
    compares; the rows themselves (batches) when ``keep``, else empty lists."""
    dtype, hq, hk, _, _, qs, ks = _feature_pass(kernel, kernel.feature_rank, batch_size, keep)
    return dtype, hq.hexdigest(), hk.hexdigest(), qs, ks


def _summarize_local(kernel: Kernel, batch_size: int, keep_limit: int, progress: bool, t0: float
                     ) -> FactorSummary:
    r = kernel.feature_rank
    accq, acck = ex.GramAccumulator(r), ex.GramAccumulator(r)
    keep = kernel.num_tokens * r <= keep_limit
    bar = None
    if progress and kernel.num_tokens > 4 * batch_size:     # long passes only
        from tqdm.auto import tqdm
        bar = tqdm(total=kernel.num_tokens, desc="features", unit="tok", unit_scale=True,
                   file=sys.stderr, leave=False)
    struct = _structure(kernel)
    try:
        dtype, hq, hk, mq, mk, qs, ks = _feature_pass(kernel, r, batch_size, keep, (accq, acck), bar,
                                                      struct)
    finally:
        if bar is not None:
            bar.close()
    if accq.rows != kernel.num_tokens:
        raise InputError(f"feature pass covered {accq.rows} of {kernel.num_tokens} tokens")
    gq, eq = accq.result()
    gk, ek = acck.result()
    return FactorSummary(kernel.num_tokens, r, dtype, gq, eq, gk, ek, hq.hexdigest(), hk.hexdigest(),
                         Fraction(float(mq)), Fraction(float(mk)),
                         np.concatenate(qs) if keep else None, np.concatenate(ks) if keep else None,
                         time.perf_counter() - t0, _structure_result(struct))


def _structure(kernel: Kernel):
    """Accumulators for the quadratic-kernel lemma when the feature map proposes a
    layout (:mod:`certify.rank.structure`), else None."""
    from certify.rank.structure import QuadraticSummary, quadratic_layout
    layout = quadratic_layout(kernel)
    if layout is None:
        return None
    return QuadraticSummary(layout), QuadraticSummary(layout)


def _structure_result(struct) -> dict | None:
    if struct is None:
        return None
    sq, sk = struct
    return {"layout": sq.layout, "g": sq.g, "q": sq.result(), "k": sk.result()}


def _feature_pass(kernel: Kernel, r: int, batch_size: int, keep: bool, accs=None, bar=None,
                  struct=None):
    """One streaming pass over the features: their dtype, sha256 hashers, exact
    minima and (when ``keep``) the rows; ``accs`` (two Gram accumulators) and
    ``struct`` (two structure summaries) are fed on the way. Returns
    ``(dtype, hq, hk, min_q, min_k, qs, ks)``."""
    hq, hk = hashlib.sha256(), hashlib.sha256()
    mq = mk = None
    qs, ks = [], []
    dtype = None
    for q, k in kernel.feature_batches(batch_size):
        if bar is not None:
            bar.update(len(q))
        if q.shape[1] != r or k.shape[1] != r or len(q) != len(k):
            raise InputError(f"feature batch shapes {q.shape}, {k.shape} do not match rank {r}")
        dtype = dtype or q.dtype.name
        if q.dtype.name != dtype or k.dtype.name != dtype:
            raise InputError("PhiQ and PhiK must have one dtype")
        q, k = without_negative_zeros(q), without_negative_zeros(k)     # hashed by value
        if accs is not None:
            accs[0].add(q)
            accs[1].add(k)
        if struct is not None:                            # one map: the keys use the queries' g
            struct[0].add(q)
            struct[1].g = struct[0].g
            struct[1].add(k)
        hq.update(np.ascontiguousarray(q, dtype=q.dtype.newbyteorder("<")).tobytes())
        hk.update(np.ascontiguousarray(k, dtype=k.dtype.newbyteorder("<")).tobytes())
        mq = q.min() if mq is None else min(mq, q.min())
        mk = k.min() if mk is None else min(mk, k.min())
        if keep:
            qs.append(q)
            ks.append(k)
    return dtype, hq, hk, mq, mk, qs, ks


def _summarize_sharded(kernel, batch_size, keep_limit, engine, shards, t0) -> FactorSummary:
    r, K = kernel.feature_rank, kernel.num_tokens
    n = shards or 4 * max(engine.workers, 1)
    step = -(-K // n)
    step = -(-step // batch_size) * batch_size
    tasks = [(kernel, a, min(K, a + step), batch_size) for a in range(0, K, step)]
    from certify.core.engine import Engine
    runner = engine if engine is not None else Engine(1, progress=False)
    parts = runner.map(_gram_shard, tasks, label="gram shards")
    if sum(p[2] for p in parts) != K:
        raise InputError(f"feature pass covered {sum(p[2] for p in parts)} of {K} tokens")
    gq, eq = _sum_pow2([p[0] for p in parts])
    gk, ek = _sum_pow2([p[1] for p in parts])
    keep = K * r <= keep_limit
    struct = _structure(kernel)
    dtype, hq, hk, mq, mk, qs, ks = _feature_pass(kernel, r, batch_size, keep, struct=struct)
    return FactorSummary(K, r, dtype, gq, eq, gk, ek, hq.hexdigest(), hk.hexdigest(),
                         Fraction(float(mq)), Fraction(float(mk)),
                         np.concatenate(qs) if keep else None, np.concatenate(ks) if keep else None,
                         time.perf_counter() - t0, _structure_result(struct))
