"""Certified float64 enumeration of a quantized sketch model's transcripts.

The only float question in a quantized transcript is on which side of a cell
boundary each pre-quantization value falls. This module answers it for every
assignment of a multilevel family, with a rigorous bound, at numpy speed:

* Every quantity is a *ball* ``(mid, rad)`` of float64 arrays with the
  invariant ``|true - mid| <= rad``, where ``true`` is the exact real value
  of the model's definition (weights are exact dyadics, tokens 0/1, so
  ``rad = 0`` to start). Each operation propagates the radius by the standard
  model of floating point, ``fl(a o b) = (a o b)(1 + d)``, ``|d| <= u = 2^-53``
  (round to nearest), plus an absolute ``eta`` for underflow:

  - ``a + b``: ``rad = ra + rb + u |fl(a + b)|``;
  - ``A @ B`` (``n`` terms, any summation order, FMA or not):
    ``rad = |A| rB + rA (|B| + rB) + gamma_n |A| |B| + n eta``, with
    ``gamma_n = (n + 2) u / (1 - (n + 2) u)`` (Higham, Thm 3.5: the error of
    an n-term dot product is at most ``gamma_n |a|.|b|``; the extra 2 covers
    the rounding of ``|A| |B|`` itself);
  - ``relu`` and the identity are 1-Lipschitz and exact: ``rad`` unchanged;
  - ``a / b`` with ``|b| > rb``: ``rad = (|a| rb + ra |b|) / (|b| (|b| - rb))
    + u |a/b|``; a ball of ``b`` that contains 0 (and is not exactly 0) makes
    the assignment *uncertain*; an exact 0 gives 0 (the model's rule).

  Each radius is itself computed in floating point from at most ~2^8
  nonnegative terms, so it is multiplied by ``1 + 2^-40`` (which exceeds the
  relative rounding error ``(n + 4) u`` of that computation) and ``eta = 2^-1000``
  is added per operation (an underflowing product errs by < 2^-1074).
* Layer 1 of a model without positions is a sum over tokens of per-token
  contributions, and the database token at slot ``i`` depends on ``kappa_i``
  only: the sketch of assignment ``(hi, lo)`` is ``A[hi] + B[lo]`` with ``A``
  the partial sums over the queries and the first ``q1`` slots and ``B`` over
  the remaining ones (per-slot partial sums, built incrementally), so a
  sketch costs ``T`` additions instead of ``2q T``.
* Quantization (uniform): ``t = (x - lo) / step + 1/2`` as a ball; the index
  ``clamp(floor(t), 0, 2^p - 1)`` is certain unless an integer ``j`` with
  ``1 <= j <= 2^p - 1`` lies within ``rad(t) + 4u(|t| + 1)`` of ``t`` (the
  floor can only change at such ``j``; below 1 or above ``2^p - 1`` both sides
  clamp to the same index).
* Query outputs: ``|y - t| + rad < 1/2`` (with ``4u`` slack) is certainly
  correct, ``|y - t| - rad >= 1/2`` certainly wrong.

An assignment with any uncertain symbol, denominator or output is replayed
exactly (:func:`models.sketch.forward_exact`, Fractions), so every transcript
and every correctness bit returned here is exact. Transcripts are compared as
integer rows (64-bit hashes; equal hashes are replayed and compared exactly).

Scope: identity / relu feature maps and uniform quantizers (everything is
then rational); other models go through the float search of
:mod:`certify.transcript`. One-layer models run through
:mod:`certify.transcript.onelayer` (the same bounds, a few fused passes per
batch over reused buffers, transcripts packed into 64-bit words).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from certify.transcript.balls import ETA, INFL, U, _gamma  # noqa: F401 (the ball constants)

if TYPE_CHECKING:
    from certify.transcript.onelayer import OneLayer

MAX_ERRORS = 8          # error indices kept per shard (the first ones)


def supported(model) -> bool:
    """Models this enumerator certifies (rational maps, uniform quantizer)."""
    return model.cfg.feature_map in ("identity", "relu") and model.quantizer.kind == "uniform"


def _add(a, ra, b, rb):
    c = a + b
    return c, (ra + rb + U * np.abs(c)) * INFL + ETA


def _matmul(A, B):
    """``A @ B`` as one GEMM where numpy would loop over a batch of small ones:
    (B, rows, k) @ (k, n) and (1, rows, k) @ (B, k, n)."""
    if A.ndim == 3 and B.ndim == 2:
        return (A.reshape(-1, A.shape[-1]) @ B).reshape(A.shape[0], A.shape[1], B.shape[1])
    if A.ndim == 3 and A.shape[0] == 1 and B.ndim == 3:
        Bt = np.swapaxes(B, 1, 2).reshape(-1, B.shape[1])                 # (B n, k)
        C = (Bt @ A[0].T).reshape(B.shape[0], B.shape[2], A.shape[1])      # (B, n, rows)
        return np.swapaxes(C, 1, 2)
    return A @ B


def _mm(A, rA, B, rB, n: int):
    """Ball matrix product; ``rA`` / ``rB`` may be None (exact operand)."""
    C = _matmul(A, B)
    aA, aB = np.abs(A), np.abs(B)
    R = _gamma(n) * _matmul(aA, aB)
    if rB is not None:
        R = R + _matmul(aA, rB)
    if rA is not None:
        R = R + _matmul(rA, aB if rB is None else aB + rB)
    return C, R * INFL + n * ETA


def _fmap(name: str, x, rx):
    """relu is 1-Lipschitz; a certainly negative input gives an exact 0 (radius 0)."""
    if name != "relu":
        return x, rx
    return np.maximum(x, 0.0), np.where(x < -rx, 0.0, rx)


@dataclass(frozen=True)
class _Weights:
    """Float64 weights (exact dyadics: radius 0) and the quantizer's constants."""

    W: dict
    lo: float
    step: float
    top: int
    zero_level: int      # index whose level lo + k step is exactly 0, else -1

    @classmethod
    def of(cls, model) -> "_Weights":
        W = {k: np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, dtype=np.float64)
             for k, v in model.weights.items()}
        qz = model.quantizer
        k0 = -qz.lo / qz.step
        z = int(k0) if k0.denominator == 1 and 0 <= k0 < qz.levels else -1
        return cls(W, float(qz.lo), float(qz.step), qz.levels - 1, z)


def quantize_balls(x, rx, lo: float, step: float, top: int):
    """Indices (int64), an ``uncertain`` mask, and the dequantized balls of
    ``(x, rx)``. With ``d = fl(x - lo)``, ``tq = fl(d / step)``, ``t = tq + 1/2``:
    ``|d - (x* - lo*)| <= rx + u(|lo| + |d|)``, and the rounding of ``step``,
    the division and the ``+ 1/2`` add at most ``2u |tq|``, ``u |tq|`` and
    ``u(|tq| + 1/2)``; the floor test adds ``4u(|t| + 1)``. All of it is below
    ``rd / step (1 + 2u) + 9u (|tq| + 1)``."""
    t = x - lo
    rt = np.abs(t)
    rt *= U
    rt += rx
    rt += U * abs(lo)
    t /= step
    rt /= step
    rt *= (1 + 2 * U)
    rt += 9 * U * (np.abs(t) + 1)
    rt *= INFL
    rt += ETA
    t += 0.5
    j = np.rint(t)
    unc = np.abs(t - j) <= rt
    unc &= (j >= 1) & (j <= top)
    unc |= ~np.isfinite(t) | ~np.isfinite(rt)
    with np.errstate(invalid="ignore"):
        kf = np.clip(np.floor(t), 0, top)
        kf[~np.isfinite(kf)] = 0
    val = kf * step
    rval = val * (4 * U)                       # |k step - k step*| + rounding, k >= 0
    val += lo
    rval += (abs(lo) * U + np.abs(val) * U) * 2
    rval *= INFL
    rval += ETA
    return kf.astype(np.int64), unc, val, rval


def _head_output(phiq, rphiq, Sq, rSq, zq, rzq, z0, WO, r: int, dv: int):
    """Ball of ``WO a`` for every row (``WO`` a ball (d, dv)^T, or (dv, 1) when the
    readout is folded in), and a per-assignment uncertain mask.
    phiq (B|1, rows, r), Sq (B, r, dv), zq (B, r, 1), z0 (B, r) bool."""
    SZ = np.concatenate([Sq, zq], 2)                         # (B, r, dv + 1)
    rSZ = np.concatenate([rSq, rzq], 2)
    aSZ = np.abs(SZ)
    ND = _matmul(phiq, SZ)                                    # (B, rows, dv + 1)
    # |phiq| (gamma |SZ| + rSZ) + rphiq (|SZ| + rSZ), one rounding slack (see _mm)
    R = _matmul(np.abs(phiq), _gamma(r) * aSZ + rSZ) + _matmul(rphiq, aSZ + rSZ)
    R = R * INFL + r * ETA
    num, rnum, den, rden = ND[..., :dv], R[..., :dv], ND[..., dv:], R[..., dv:]
    zero = den == 0
    if zero.any():
        zero &= _exact_zero(phiq, rphiq, z0)
    adn = np.abs(den)
    bad = (adn <= rden) & ~zero                      # uncertain: replayed exactly
    safe = np.where(zero | bad, 1.0, den)
    a = np.where(zero | bad, 0.0, num / safe)
    with np.errstate(divide="ignore", invalid="ignore"):
        ra = (np.abs(num) * rden + rnum * adn) / (adn * (adn - rden)) + U * np.abs(a)
    ra = np.where(zero | bad, 0.0, ra * INFL + ETA)
    upd, rupd = _mm(a, ra, WO[0], WO[1], dv)                  # (B, rows, d | 1)
    return upd, rupd, bad.reshape(bad.shape[0], -1).any(1)


def _exact_zero(phiq, rphiq, z0):
    """den is exactly 0 when every product phiq_a zq_a is exactly 0: phiq_a is an
    exact 0 (radius 0) or zq_a sits on the quantizer level that is exactly 0
    (``z0``). Anything else is not 'exactly zero'. Counted as a product:
    #{a: phiq_a not exact 0 and zq_a not exact 0} == 0."""
    npz = ~((phiq == 0) & (rphiq == 0))                                  # (B|1, rows, r)
    nz = (~z0).astype(np.float64)[:, :, None]                           # (B, r, 1)
    return _matmul(npz.astype(np.float64), nz) == 0                     # (B, rows, 1)


@dataclass
class ShardResult:
    """What one range of assignments contributes (all exact)."""

    start: int
    stop: int
    hashes: np.ndarray                 # (stop - start,) uint64 of the certified transcripts
    correct: int                       # assignments with every query output within < 1/2
    errors: list[int]                  # first assignments (indices) with an output >= 1/2 off
    error_count: int
    replayed: int                      # uncertain in float64, decided by the exact replay
    float_max_error: float             # display only
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "stop": self.stop, "hashes": self.hashes.tobytes().hex(),
                "correct": self.correct, "errors": self.errors, "error_count": self.error_count,
                "replayed": self.replayed, "float_max_error": self.float_max_error}


class Enumerator:
    """Certified transcripts and correctness of assignment ranges of ``spec``."""

    def __init__(self, spec, model) -> None:
        if not supported(model):
            raise ValueError("certified enumeration needs identity/relu and a uniform quantizer")
        self.spec, self.model = spec, model
        self.cfg = model.cfg
        self.w = _Weights.of(model)
        self._EW = None
        self._one: OneLayer | None = None   # the one-layer fast path's buffers, when it applies
        self._prepare()

    # -- layer 1, per token (K tokens)
    def _prepare(self) -> None:
        spec, cfg, W = self.spec, self.cfg, self.w.W
        self.tokens = spec.tokens.astype(np.float64)                       # (K, m)
        h0, rh0 = _mm(self.tokens, None, W["embed.weight"].T, None, cfg.m)  # (K, d)
        self.h0, self.rh0 = h0, rh0
        # the last layer's head outputs read out directly: g_c = WO_c^T w (dv, 1) and
        # the constant bO.w + b, as balls; y0 = h0.w per token (layer-1 split)
        wr = W["readout.weight"][:, None]                                   # (d, 1)
        L = cfg.layers - 1
        self.fold = [_mm(W[f"layers.{L}.heads.{c}.o.weight"].T, None, wr, None, cfg.d)
                     for c in range(cfg.heads)]
        bw, rbw = _mm(W[f"layers.{L}.o.bias"][None], None, wr, None, cfg.d)
        self.yb = _add(bw[0, 0], rbw[0, 0], W["readout.bias"][0], 0.0)
        y0, ry0 = _mm(h0, rh0, wr, None, cfg.d)
        self.y0, self.ry0 = y0[:, 0], ry0[:, 0]
        self.layer1_split = not cfg.positions
        if not self.layer1_split:
            return
        q, s = spec.q, spec.s
        r, dv = cfg.rank, cfg.dv
        self.heads1 = []
        for c in range(cfg.heads):
            p = f"layers.0.heads.{c}."
            k, rk = _mm(h0, rh0, W[p + "k.weight"].T, None, cfg.d)
            k, rk = _add(k, rk, W[p + "k.bias"], 0.0)
            pk, rpk = _fmap(cfg.feature_map, k, rk)                          # (K, r)
            v, rv = _mm(h0, rh0, W[p + "v.weight"].T, None, cfg.d)
            v, rv = _add(v, rv, W[p + "v.bias"], 0.0)                        # (K, dv)
            S, rS = _mm(pk[:, :, None], rpk[:, :, None], v[:, None, :], rv[:, None, :], 1)
            cm = np.concatenate([S.reshape(-1, r * dv), pk], 1)               # (K, T1)
            cr = np.concatenate([rS.reshape(-1, r * dv), rpk], 1)
            qq, rqq = _mm(h0, rh0, W[p + "q.weight"].T, None, cfg.d)
            qq, rqq = _add(qq, rqq, W[p + "q.bias"], 0.0)
            pq, rpq = _fmap(cfg.feature_map, qq, rqq)                        # (K, r)
            self.heads1.append((cm, cr, pq, rpq))
        # per-slot partial sums: A over queries + slots < q1, B over slots >= q1
        self.q1 = q // 2
        self.A, self.B = [], []
        for cm, cr, _, _ in self.heads1:
            am, ar = cm[:q].sum(0, keepdims=True), None
            ar = (cr[:q].sum(0, keepdims=True) + _gamma(q) * np.abs(cm[:q]).sum(0, keepdims=True)) \
                * INFL + q * ETA
            for i in range(self.q1):
                sl = slice(q + i * (s + 1), q + (i + 1) * (s + 1))
                am, ar = _add(am[:, None, :], ar[:, None, :], cm[sl][None], cr[sl][None])
                am, ar = am.reshape(-1, am.shape[-1]), ar.reshape(-1, ar.shape[-1])
            bm = np.zeros((1, cm.shape[1]))
            br = np.zeros((1, cm.shape[1]))
            for i in range(self.q1, q):
                sl = slice(q + i * (s + 1), q + (i + 1) * (s + 1))
                bm, br = _add(bm[:, None, :], br[:, None, :], cm[sl][None], cr[sl][None])
                bm, br = bm.reshape(-1, bm.shape[-1]), br.reshape(-1, br.shape[-1])
            self.A.append((am, ar))
            self.B.append((bm, br))
        self.nlo = (s + 1) ** (q - self.q1)

    def exact_weights(self):
        if self._EW is None:
            from models.sketch import exact_weights
            self._EW = exact_weights(self.model.weights)
        return self._EW

    def replay(self, index: int):
        """Exact transcript (tuple of ints) and outputs (Fractions) of one assignment."""
        from models.sketch import forward_exact
        spec = self.spec
        kap = spec.assignments(index, index + 1)
        toks = spec.tokens[spec.inputs(kap)[0]]
        run = forward_exact(self.cfg, self.exact_weights(), self.model.quantizer, toks)
        return run.transcript, run.outputs[:spec.q], [int(v) for v in kap[0]]

    # -- one batch: indices start..stop-1
    def _layer1_pre(self, c: int, start: int, stop: int):
        am, ar = self.A[c]
        bm, br = self.B[c]
        idx = np.arange(start, stop, dtype=np.int64)
        hi, lo = idx // self.nlo, idx % self.nlo
        return _add(am[hi], ar[hi], bm[lo], br[lo])

    def batch(self, start: int, stop: int):
        """(keys (B, T) int64, uncertain (B,), correct (B,), wrong (B,), max error)."""
        spec, cfg, W, w = self.spec, self.cfg, self.w.W, self.w
        q, r, dv, d = spec.q, cfg.rank, cfg.dv, cfg.d
        kap = spec.assignments(start, stop)                                    # (B, q)
        B = kap.shape[0]
        idx = spec.inputs(kap)                                                 # (B, 2q)
        N = idx.shape[1]
        unc = np.zeros(B, dtype=bool)
        keys = []
        h = rh = None                                   # dense states (B, N, d)
        if not self.layer1_split:
            h, rh = _add(self.h0[idx], self.rh0[idx], W["embed.pos"][:N], 0.0)
        for l in range(cfg.layers):
            last = l == cfg.layers - 1
            rows = q if last else N
            dm = dr = None
            for c in range(cfg.heads):
                p = f"layers.{l}.heads.{c}."
                if l == 0 and self.layer1_split:
                    pre, rpre = self._layer1_pre(c, start, stop)              # (B, T1)
                    _, _, pqt, rpqt = self.heads1[c]
                    if rows == q:
                        phiq, rphiq = pqt[None, :q], rpqt[None, :q]           # (1, q, r)
                    else:
                        phiq, rphiq = pqt[idx], rpqt[idx]                     # (B, N, r)
                else:
                    assert h is not None and rh is not None     # set but before a split layer 1
                    kk, rkk = _mm(h, rh, W[p + "k.weight"].T, None, d)
                    kk, rkk = _add(kk, rkk, W[p + "k.bias"], 0.0)
                    pk, rpk = _fmap(cfg.feature_map, kk, rkk)                 # (B, N, r)
                    v, rv = _mm(h, rh, W[p + "v.weight"].T, None, d)
                    v, rv = _add(v, rv, W[p + "v.bias"], 0.0)                 # (B, N, dv)
                    pkT, rpkT = np.swapaxes(pk, 1, 2), np.swapaxes(rpk, 1, 2)
                    S, rS = _mm(pkT, rpkT, v, rv, N)                          # (B, r, dv)
                    z = pk.sum(1)                                             # (B, r)
                    rz = (rpk.sum(1) + _gamma(N) * np.abs(pk).sum(1)) * INFL + N * ETA
                    pre = np.concatenate([S.reshape(B, -1), z], 1)
                    rpre = np.concatenate([rS.reshape(B, -1), rz], 1)
                    qq, rqq = _mm(h[:, :rows], rh[:, :rows], W[p + "q.weight"].T, None, d)
                    qq, rqq = _add(qq, rqq, W[p + "q.bias"], 0.0)
                    phiq, rphiq = _fmap(cfg.feature_map, qq, rqq)             # (B, rows, r)
                k, u, val, rval = quantize_balls(pre, rpre, w.lo, w.step, w.top)
                keys.append(k)
                unc |= u.any(1)
                Sq, rSq = val[:, :r * dv].reshape(B, r, dv), rval[:, :r * dv].reshape(B, r, dv)
                zq, rzq = val[:, r * dv:, None], rval[:, r * dv:, None]
                z0 = k[:, r * dv:] == w.zero_level                            # (B, r)
                out = self.fold[c] if last else (W[p + "o.weight"].T, None)
                upd, rupd, bad = _head_output(phiq, rphiq, Sq, rSq, zq, rzq, z0, out, r, dv)
                unc |= bad
                if dm is None:
                    dm, dr = upd, rupd
                else:
                    dm, dr = _add(dm, dr, upd, rupd)
            assert dm is not None and dr is not None            # every layer has a head
            if last:                                    # y = w.h + b, readout folded in
                if h is None or rh is None:
                    base, rbase = self.y0[None, :q], self.ry0[None, :q]       # (1, q)
                else:
                    base, rbase = _mm(h[:, :q], rh[:, :q], W["readout.weight"][:, None], None, d)
                    base, rbase = base[..., 0], rbase[..., 0]
                y, ry = _add(base, rbase, dm[..., 0], dr[..., 0])
                y, ry = _add(y, ry, self.yb[0], self.yb[1])                   # (B, q)
                break
            if h is None or rh is None:
                base, rbase = self.h0[idx[:, :rows]], self.rh0[idx[:, :rows]]
            else:
                base, rbase = h[:, :rows], rh[:, :rows]
            h, rh = _add(base, rbase, dm, dr)
            h, rh = _add(h, rh, W[f"layers.{l}.o.bias"], 0.0)
        err = np.abs(y - kap)
        good = ((err + ry) * (1 + 4 * U) < 0.5).all(1)
        wrong = ((err - ry) - 4 * U * (err + ry) >= 0.5).any(1)
        undecided = ~good & ~wrong
        unc |= undecided | ~np.isfinite(y).all(1) | ~np.isfinite(ry).all(1)
        emax = float(np.nan_to_num(err, nan=np.inf).max()) if B else 0.0
        return np.concatenate(keys, 1), unc, good & ~unc, wrong & ~unc, emax

    def run(self, start: int, stop: int, *, batch: int = 4096,
            progress=None) -> ShardResult:
        """Certify assignments ``start..stop-1``; ``progress(n)`` is called per batch."""
        from contextlib import nullcontext
        try:
            from threadpoolctl import threadpool_limits
            limit = threadpool_limits(1)            # one thread per task
        except ImportError:                         # pragma: no cover
            limit = nullcontext()
        with limit:
            return self._run(start, stop, batch, progress)

    def _run(self, start, stop, batch, progress) -> ShardResult:
        from certify.transcript import onelayer
        if onelayer.applicable(self):
            return self._run_one_layer(start, stop, progress)
        from certify.transcript.search import hash_rows

        tally = _Tally(self, start, stop)
        for b0 in range(start, stop, batch):
            b1 = min(stop, b0 + batch)
            keys, unc, good, wrong, e = self.batch(b0, b1)

            def store(j, tr, keys=keys):
                keys[j] = np.asarray(tr, dtype=np.int64)
            tally.add(b0, good, wrong, unc, e, store)
            tally.hashes[b0 - start:b1 - start] = hash_rows(keys)
            if progress is not None:
                progress(b1 - b0)
        return tally.result()


    def _run_one_layer(self, start, stop, progress) -> ShardResult:
        """:meth:`_run` through :mod:`certify.transcript.onelayer` (one-layer models):
        batches within one block of the lo table, transcripts packed into words."""
        from certify.transcript import onelayer
        from certify.transcript.search import hash_rows

        if self._one is None:
            self._one = onelayer.OneLayer(self)
        one = self._one
        tally = _Tally(self, start, stop)
        b0 = start
        while b0 < stop:
            b1 = min(stop, b0 + onelayer.BATCH, (b0 // self.nlo + 1) * self.nlo)
            words, unc, good, wrong, e = one.batch(b0, b1)

            def store(j, tr, words=words):
                words[j] = one.pack_transcript(tr)
            tally.add(b0, good, wrong, unc, e, store)
            tally.hashes[b0 - start:b1 - start] = words[:, 0] if words.shape[1] == 1 else \
                hash_rows(words.view(np.int64))
            if progress is not None:
                progress(b1 - b0)
            b0 = b1
        return tally.result()


class _Tally:
    """One shard's counts while its batches are certified: the float64 decisions
    of a batch, then the exact replay of each uncertain assignment (its exact
    transcript replaces the float one through ``store(j, transcript)``)."""

    def __init__(self, enum: Enumerator, start: int, stop: int):
        self.enum, self.start, self.stop = enum, start, stop
        self.t0 = time.perf_counter()
        self.hashes = np.empty(stop - start, dtype=np.uint64)
        self.correct = self.err_count = self.replayed = 0
        self.errors: list[int] = []
        self.emax = 0.0

    def _error(self, index: int) -> None:
        self.err_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(index)

    def add(self, b0: int, good, wrong, unc, emax: float, store) -> None:
        self.emax = max(self.emax, emax)
        self.correct += int(good.sum())
        wrong_at = np.nonzero(wrong)[0]
        self.err_count += len(wrong_at)
        room = max(0, MAX_ERRORS - len(self.errors))
        self.errors.extend(b0 + int(j) for j in wrong_at[:room])
        for j in np.nonzero(unc)[0]:
            self.replayed += 1
            tr, ys, kap = self.enum.replay(b0 + int(j))
            store(j, tr)
            if all(abs(y - t) < Fraction(1, 2) for y, t in zip(ys, kap)):
                self.correct += 1
            else:
                self._error(b0 + int(j))

    def result(self) -> ShardResult:
        self.errors.sort()
        return ShardResult(self.start, self.stop, self.hashes, self.correct,
                           self.errors[:MAX_ERRORS], self.err_count, self.replayed, self.emax,
                           time.perf_counter() - self.t0)


@dataclass(frozen=True)
class EnumResult:
    """All assignments, merged (deterministic: shards in index order)."""

    assignments: int
    correct: int
    errors: tuple[int, ...]
    error_count: int
    replayed: int
    distinct: int                              # distinct 64-bit hashes (<= distinct transcripts)
    collisions: tuple[tuple[int, int], ...]    # exact: equal certified transcripts
    unresolved: int                            # equal-hash pairs not replayed
    float_max_error: float
    shards: int
    seconds: float
    per_shard_seconds: tuple[float, ...] = field(default=())

    @property
    def injective(self) -> bool:
        """Every pair of certified transcripts differs: distinct hashes, and every
        equal-hash pair replayed exactly and found different."""
        return not self.collisions and not self.unresolved


def merge(enum: Enumerator, shards: list[ShardResult], max_collisions: int = 8) -> EnumResult:
    """Concatenate shard hashes in index order; pairs with equal hashes are
    replayed exactly and compared (a 64-bit hash match alone proves nothing)."""
    shards = sorted(shards, key=lambda s: s.start)
    allh = np.concatenate([s.hashes for s in shards]) if shards else np.zeros(0, np.uint64)
    order = np.argsort(allh, kind="stable")
    sh = allh[order]
    dup = np.nonzero(sh[1:] == sh[:-1])[0]
    collisions: list[tuple[int, int]] = []
    unresolved = 0
    for i in dup:
        a, b = sorted((int(order[i]), int(order[i + 1])))
        if len(collisions) >= max_collisions:
            unresolved += 1             # not replayed: injectivity stays undecided
            continue
        if enum.replay(a)[0] == enum.replay(b)[0]:
            collisions.append((a, b))
    distinct = len(sh) - len(dup)
    errors = sorted(e for s in shards for e in s.errors)[:MAX_ERRORS]
    return EnumResult(
        assignments=enum.spec.num_assignments, correct=sum(s.correct for s in shards),
        errors=tuple(errors), error_count=sum(s.error_count for s in shards),
        replayed=sum(s.replayed for s in shards), distinct=distinct,
        collisions=tuple(collisions), unresolved=unresolved,
        float_max_error=max((s.float_max_error for s in shards), default=0.0),
        shards=len(shards), seconds=sum(s.seconds for s in shards),
        per_shard_seconds=tuple(s.seconds for s in shards))


DEFAULT_SHARD = 1 << 16


def run_shard(spec, model, start: int, stop: int) -> ShardResult:
    """One task: certify assignments ``start..stop-1`` (builds its own tables)."""
    return Enumerator(spec, model).run(start, stop)


def enumerate_all(spec, model, *, shard: int = DEFAULT_SHARD, time_limit: float | None = None,
                  progress: bool = True, engine=None) -> tuple[EnumResult | None, int, Enumerator]:
    """Certify every assignment in shards of ``shard`` assignments, in process or
    on ``engine`` (a :class:`certify.core.engine.Engine`). Returns the merged result
    (None when the time limit stopped the in-process run), the number of
    assignments done and the enumerator. Shards are merged in index order, so the
    result does not depend on how many workers ran them. ``time_limit``: CPU
    seconds of this process (:mod:`certify.core.budget`), checked between shards
    of an in-process run (an engine's run has none)."""
    from certify.core.budget import CpuBudget

    N = spec.num_assignments
    ranges = [(a, min(N, a + shard)) for a in range(0, N, shard)]
    enum = Enumerator(spec, model)
    budget = None if time_limit is None else CpuBudget(time_limit)
    if engine is not None and engine.parallel:
        shards = engine.map(run_shard, [(spec, model, a, b) for a, b in ranges],
                            label="transcript shards")
        return merge(enum, shards), N, enum
    from tqdm.auto import tqdm

    shards, done = [], 0
    bar = tqdm(total=N, unit="asg", disable=not progress, leave=False)
    try:
        for a, b in ranges:
            if budget is not None and budget.exhausted():
                return None, done, enum
            shards.append(enum.run(a, b, progress=bar.update))
            done = b
    finally:
        bar.close()
    return merge(enum, shards), N, enum
