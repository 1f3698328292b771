"""The certified enumeration of a one-layer model without positions, at float
speed: the same ball arithmetic as :mod:`certify.transcript.enumerate` (every
radius bound below is the one written out there), arranged so that a batch
is a handful of whole-array passes over buffers allocated once.

* A batch is a run of assignments with one ``hi`` part (the first ``q1`` slots):
  the layer-1 sketch is ``A[hi] + B[lo..]``, a broadcast add of a row to a
  contiguous block of the per-slot table (no gather).
* The sketch coordinates are stored as ``dv + 1`` blocks of ``r`` (``S[:, j]``
  for each value column ``j``, then ``z``), so numerators and denominators of
  every query come from one BLAS product ``(B (dv + 1), r) @ (r, q)``, and their
  radii from one more (two when the query features carry a radius).
* When ``step`` is a power of two the per-slot tables hold the quantizer's
  coordinate ``t = (x - lo) / step + 1/2`` and a bound of its radius directly
  (:meth:`OneLayer._t_tables`): a batch adds two rows and tests the index.
* Transcripts are packed, ``p`` bits per symbol, into 64-bit words: equal
  words iff equal transcripts (no hashing needed when one word holds a whole
  transcript); assignments replayed exactly are packed the same way.
"""

from __future__ import annotations

import math
import os

import numpy as np

from certify.transcript.balls import ETA, INFL, U, _gamma

#: assignments per batch (a few hundred kilobytes per buffer: the passes stay in cache)
BATCH = 1024

#: floor of the radii that enter the output's radius products (in place of ETA: a
#: larger radius is still a bound); products of two such radii stay normal numbers,
#: where products of ETA-sized ones would be subnormal and slow every BLAS call
FLOOR = 2.0 ** -500


def _kernel():
    """The compiled fused passes (``_ballkernel.c``: the same operations, entry by
    entry), or None: the numpy passes then (also with ``CERTIFY_NO_COMPILED=1``)."""
    if os.environ.get("CERTIFY_NO_COMPILED", "") not in ("", "0"):
        return None
    try:
        from certify.transcript import _ballkernel
    except ImportError:          # built without a C compiler
        return None
    return _ballkernel


def _rows_any(u: np.ndarray) -> np.ndarray:
    """Per assignment: any over the symbols of a (blocks, B, r) or (B, T) mask."""
    return np.any(u, axis=(0, 2) if u.ndim == 3 else 1)


def applicable(enum) -> bool:
    """One layer, per-token layer-1 tables (no positions)."""
    return enum.cfg.layers == 1 and enum.layer1_split


class OneLayer:
    """Buffers and tables for :meth:`batch` (one enumerator, any number of batches)."""

    def __init__(self, enum, *, compiled: bool = True) -> None:
        self.en = enum
        self.kernel = _kernel() if compiled else None
        cfg, spec, w = enum.cfg, enum.spec, enum.w
        self.r, self.dv, self.q = cfg.rank, cfg.dv, spec.q
        r, dv = self.r, self.dv
        T1 = r * (dv + 1)
        # block order: S[:, j] (j < dv) then z; perm[new] = old column of (S row-major, z)
        self.perm = np.array([a * dv + j for j in range(dv) for a in range(r)] + [r * dv + a for a in range(r)])
        # x = A[hi] + B[lo] with radius (ra + rb + u|x|) INFL + ETA (enumerate._add) is bounded by
        # RA[hi] + RB[lo], RA = (ra + u|A|) INFL^2 + ETA, RB = (rb + u|B|) INFL^2 (|x| <= |A| + |B|;
        # the second INFL covers the rounding of these few operations and of the final sum)
        self.tables = []

        def blocks(a):                      # (n, T1) -> (dv + 1, n, r), each block contiguous
            return np.ascontiguousarray(a[:, self.perm].reshape(len(a), dv + 1, r).transpose(1, 0, 2))
        self.lo, self.step, self.top, self.zero_level = w.lo, w.step, w.top, w.zero_level
        m, e = np.frexp(self.step)
        self.inv_step = 1.0 / self.step if m == 0.5 else None                   # exact when a power of 2
        for (am, ar), (bm, br) in zip(enum.A, enum.B):
            if self.inv_step is not None:
                self.tables.append(tuple(blocks(a) for a in self._t_tables(am, ar, bm, br)))
                continue
            RA = (ar + U * np.abs(am)) * (INFL * INFL) + ETA
            RB = (br + U * np.abs(bm)) * (INFL * INFL)
            self.tables.append((blocks(am), blocks(RA), blocks(bm), blocks(RB)))
        self.heads = []
        for c, (_, _, pq, rpq) in enumerate(enum.heads1):
            phiq, rphiq = pq[:self.q], rpq[:self.q]                              # (q, r)
            exact = not rphiq.any()
            gm, gr = enum.fold[c]                                                 # (dv, 1) balls
            # |phiq| scaled by INFL^2: the INFL of the radius product, and its own rounding
            rq = np.where(rphiq > 0, np.maximum(rphiq, FLOOR), 0.0)           # a floor: see FLOOR
            self.heads.append((np.ascontiguousarray(phiq.T), np.ascontiguousarray(np.abs(phiq).T) * (INFL * INFL),
                               None if exact else np.ascontiguousarray(rq.T) * (INFL * INFL),
                               ~((phiq == 0) & (rphiq == 0)), gm[:, 0], gr[:, 0]))
        self.T1 = T1
        self.nlo = enum.nlo
        s1 = spec.s + 1
        q1 = enum.q1
        self.lo_digits = ((np.arange(self.nlo)[:, None] // s1 ** np.arange(spec.q - q1 - 1, -1, -1)) % s1
                          ).astype(np.float64)                                    # (nlo, q - q1)
        self.hi_pow = s1 ** np.arange(q1 - 1, -1, -1)
        y0, ry0 = enum.y0[:self.q], enum.ry0[:self.q]
        self.cy = y0 + enum.yb[0]                                                # c = fl(y0 + yb)
        self.cry = (ry0 + enum.yb[1] + U * np.abs(self.cy)) * INFL ** 3 + 2 * ETA
        self.bits = max(1, int(self.top).bit_length())
        per = max(1, 52 // self.bits)                                             # symbols per word
        H = len(self.heads)
        n = H * T1
        # symbol n (head c, block j, feature a: n = c T1 + j r + a) goes to word n // per at bit
        # offset bits (n % per): per block, the words it touches and the powers of two
        self.nwords = -(-n // per)
        self.parts = []                                                           # (c, j, a0, a1, word, powers)
        for c in range(H):
            for j in range(dv + 1):
                a = 0
                while a < r:
                    n0 = c * T1 + j * r + a
                    wd, off = divmod(n0, per)
                    a1 = min(r, a + per - off)
                    self.parts.append((c, j, a, a1, wd, 2.0 ** (self.bits * (off + np.arange(a1 - a)))))
                    a = a1
        self._bufs: dict = {}

    def _t_tables(self, am, ar, bm, br):
        """The quantizer's coordinate ``t = (x - lo) / step + 1/2`` split like the sketch
        (``x = A[hi] + B[lo]``, balls ``(am, ar)``, ``(bm, br)``): with ``inv = 1/step``
        (the float of a power of two; the exact step may differ by ``u``, hence the
        factors ``1 + 2u``)

            TA = fl(fl(am - lo) inv + 1/2),  rTA = ((ar + u|lo| + u|am - lo|) inv (1 + 2u) + u|TA|) INFL + ETA
            TB = fl(bm inv),                 rTB = (br + u|bm|) inv (1 + 2u) INFL + ETA

        bound ``TA* = (A* - lo*)/step* + 1/2`` and ``TB* = B*/step*``. The batch's
        ``t = fl(TA + TB)`` then errs from ``t*`` by at most ``rTA + rTB + u|t|``, and
        the floor test of :func:`enumerate.quantize_balls` adds ``4u (|t| + 1)``: with
        ``|t| <= (|TA| + |TB|)(1 + u)`` the radius is at most
        ``RA + RB``, ``RA = (rTA + 6u|TA| + 4u) INFL``, ``RB = (rTB + 6u|TB|) INFL``
        (the INFL covers the rounding of these few operations and of the sum)."""
        lo, inv = self.lo, self.inv_step
        d = am - lo
        TA = d * inv + 0.5
        rTA = ((ar + U * abs(lo) + U * np.abs(d)) * inv * (1 + 2 * U) + U * np.abs(TA)) * INFL + ETA
        TB = bm * inv
        rTB = (br + U * np.abs(bm)) * inv * (1 + 2 * U) * INFL + ETA
        RA = (rTA + 6 * U * np.abs(TA) + 4 * U) * INFL
        RB = (rTB + 6 * U * np.abs(TB)) * INFL
        return TA, RA, TB, RB

    def _buf(self, name: str, shape, dtype=np.float64) -> np.ndarray:
        b = self._bufs.get(name)
        size = math.prod(shape)
        if b is None or b.size < size or b.dtype != dtype:
            b = self._bufs[name] = np.empty(size, dtype=dtype)
        return b[:size].reshape(shape)

    # ------------------------------------------------------------------ one batch
    def batch(self, start: int, stop: int):
        """``(words (B, W) uint64 of packed symbols, uncertain, correct, wrong, max error)``
        for assignments ``start..stop-1`` sharing one ``hi`` part."""
        B = stop - start
        hi, lo0 = divmod(start, self.nlo)
        if (stop - 1) // self.nlo != hi:
            raise ValueError("a batch must not cross a block of the lo table")
        r, dv, q = self.r, self.dv, self.q
        unc = np.zeros(B, dtype=bool)
        words = np.zeros((B, self.nwords))
        dm = dr = None
        for c, ((am, ar, bm, br), (phT, aphT, rphT, npz, gm, gr)) in enumerate(zip(self.tables, self.heads)):
            # layer-1 sketch balls A[hi] + B[lo] (radius: the precomputed bounds); for a
            # power-of-two step the tables hold the quantizer's coordinate t (_t_tables)
            x = self._buf("x", (dv + 1, B, r))
            rx = self._buf("rx", (dv + 1, B, r))
            np.add(bm[:, lo0:lo0 + B], am[:, hi:hi + 1], out=x)
            np.add(br[:, lo0:lo0 + B], ar[:, hi:hi + 1], out=rx)
            k, val, rval = self._quantize(x, rx, unc) if self.inv_step is None else self._index(x, rx, unc)
            for cc, j, a0, a1, wd, pw in self.parts:
                if cc == c:
                    words[:, wd] += k[j, :, a0:a1] @ pw                       # exact: below 2^52
            upd, rupd = self._output(c, val, rval, k, phT, aphT, rphT, npz, gm, gr, B, unc)
            if dm is None:
                dm, dr = upd, rupd
            else:                                                   # enumerate._add
                dm += upd
                dr += rupd
                dr += U * np.abs(dm)
                dr *= INFL
                dr += ETA
        assert dm is not None and dr is not None                    # the model has a head
        # y = y0 + sum_c upd_c + yb: the two ball adds of enumerate.batch, with y0 + yb
        # added first (its rounding u |c| in the constant radius), then
        # ry <= (dr + ry0 + ryb + u |c|) INFL^3 + 2u INFL^3 |y| + 2 ETA
        q1 = q - self.lo_digits.shape[1]
        if self.kernel is not None:
            good, wrong = np.empty(B, dtype=bool), np.empty(B, dtype=bool)
            emax = self.kernel.tail(dm, dr, self.cy, self.cry, self.hi_digits(hi),
                                    self.lo_digits[lo0:lo0 + B], good.view(np.uint8), wrong.view(np.uint8),
                                    unc.view(np.uint8), B, q, q1, 2 * U * INFL ** 3, INFL ** 3,
                                    0.5 * (1 - 8 * U), 4 * U)
            return words.astype(np.uint64), unc, good & ~unc, wrong & ~unc, emax
        y = dm
        y += self.cy
        ry = np.abs(y, out=self._buf("ry", (B, q)))
        ry *= 2 * U * INFL ** 3
        dr *= INFL ** 3
        ry += dr
        ry += self.cry
        err = self._buf("err", (B, q))
        np.subtract(y[:, :q1], self.hi_digits(hi), out=err[:, :q1])
        np.subtract(y[:, q1:], self.lo_digits[lo0:lo0 + B], out=err[:, q1:])
        np.abs(err, out=err)
        s_ = np.add(err, ry, out=self._buf("s", (B, q)))
        good = (s_ < 0.5 * (1 - 8 * U)).all(1)               # implies (err + ry)(1 + 4u) < 1/2
        emax = float(err.max()) if B else 0.0
        if not good.all():                                   # the rows that are not certainly right
            wrong = ((err - ry) - 4 * U * (err + ry) >= 0.5).any(1)
            unc |= ~good & ~wrong
            unc |= ~np.isfinite(y).all(1) | ~np.isfinite(ry).all(1)
        else:
            wrong = np.zeros(B, dtype=bool)
        if emax != emax:
            emax = float("inf")
        return words.astype(np.uint64), unc, good & ~unc, wrong & ~unc, emax

    def hi_digits(self, hi: int) -> np.ndarray:
        """kappa's first q1 coordinates (the hi part), as float64."""
        return ((hi // self.hi_pow) % (self.en.spec.s + 1)).astype(np.float64)

    def pack_transcript(self, transcript) -> np.ndarray:
        """An exact transcript (original order, head by head) in the packed form."""
        r, dv = self.r, self.dv
        tr = np.asarray(transcript, dtype=np.float64).reshape(len(self.heads), self.T1)[:, self.perm]
        tr = tr.reshape(len(self.heads), dv + 1, r)
        words = np.zeros(self.nwords)
        for c, j, a0, a1, wd, pw in self.parts:
            words[wd] += tr[c, j, a0:a1] @ pw
        return words.astype(np.uint64)

    # ------------------------------------------------------------------ quantizer
    def _quantize(self, x, rx, unc):
        """:func:`certify.transcript.enumerate.quantize_balls` with buffers: the
        index (float64, exact small integers), and the dequantized ball."""
        shape = x.shape
        lo, step, top = self.lo, self.step, self.top
        t = self._buf("qt", shape)
        rt = self._buf("qrt", shape)
        if lo != 0.0:
            np.subtract(x, lo, out=t)
        else:
            t[...] = x
        np.abs(t, out=rt)
        rt *= U
        rt += rx
        rt += U * abs(lo)
        if self.inv_step is not None:
            t *= self.inv_step
            rt *= self.inv_step
        else:
            t /= step
            rt /= step
        rt *= (1 + 2 * U)
        a = self._buf("qa", shape)
        np.abs(t, out=a)
        a += 1
        a *= 9 * U
        rt += a
        rt *= INFL
        rt += ETA
        t += 0.5
        j = self._buf("qj", shape)
        np.rint(t, out=j)
        np.subtract(t, j, out=a)
        np.abs(a, out=a)
        u = a <= rt
        u &= (j >= 1) & (j <= top)
        u |= ~np.isfinite(t) | ~np.isfinite(rt)
        unc |= _rows_any(u)
        kf = np.floor(t, out=j)
        np.clip(kf, 0, top, out=kf)
        kf[~np.isfinite(kf)] = 0
        return self._dequantized(kf, a, ETA)

    def _index(self, t, rt, unc):
        """The quantizer's index and dequantized ball from ``t`` and its radius (the
        power-of-two tables, :meth:`_t_tables`). A symbol is uncertain when ``t`` is
        within ``rt`` of an integer in ``1..top`` (the nearest one, clipped to that
        range: a larger set than the test of ``quantize_balls``, never smaller);
        non-finite values are caught by one sum and then tested entry by entry. The
        dequantized radius ends in ``+ FLOOR`` (not ``+ ETA``), a larger bound."""
        shape = t.shape
        lo, step, top = self.lo, self.step, self.top
        fast = step == 1.0 and lo == 0.0
        if self.kernel is not None:
            kf, rval = self._buf("qj", shape), self._buf("qrv", shape)
            val = kf if fast else self._buf("qv", shape)
            self.kernel.index(t, rt, kf, val, rval, unc.view(np.uint8), shape[0], shape[1], shape[2],
                              float(top), step, lo, 6 * U * INFL, 4 * U, 2 * U, abs(lo) * U * 2, INFL,
                              FLOOR, fast)
            return kf, val, rval
        j = self._buf("qj", shape)
        a = self._buf("qa", shape)
        np.rint(t, out=j)
        np.clip(j, 1, top, out=j)
        np.subtract(t, j, out=a)
        np.abs(a, out=a)
        u = np.less_equal(a, rt, out=self._buf("qu", shape, bool))
        unc |= _rows_any(u)
        if not np.isfinite(t.sum() + rt.sum()):
            unc |= _rows_any(~np.isfinite(t) | ~np.isfinite(rt))
        kf = np.floor(t, out=j)
        np.clip(kf, 0, top, out=kf)
        if not np.isfinite(kf.sum()):
            kf[~np.isfinite(kf)] = 0
        rval = self._buf("qrv", shape)
        if fast:
            val = kf                                                # k exactly
            np.multiply(val, 6 * U * INFL, out=rval)                # 4u k + 2u |k| (k >= 0)
            rval += FLOOR
            return kf, val, rval
        return self._dequantized(kf, a, FLOOR)

    def _dequantized(self, kf, a, floor):
        """The dequantized ball ``lo + k step`` of the indices ``kf`` (``a`` is scratch),
        its radius ending in ``+ floor``."""
        shape, lo = kf.shape, self.lo
        val, rval = self._buf("qv", shape), self._buf("qrv", shape)
        np.multiply(kf, self.step, out=val)
        np.multiply(val, 4 * U, out=rval)                           # k step >= 0, before lo is added
        val += lo
        np.abs(val, out=a)
        a *= 2 * U
        rval += a
        rval += abs(lo) * U * 2
        rval *= INFL
        rval += floor
        return kf, val, rval

    # ------------------------------------------------------------------ head output
    def _output(self, c, val, rval, k, phT, aphT, rphT, npz, gm, gr, B, unc):
        """:func:`certify.transcript.enumerate._head_output` on the block layout, then
        the folded readout ``a . g`` (a ball matrix product, ``enumerate._mm``).
        All ``dv + 1`` blocks (numerators, then the denominator) in one BLAS product
        ``((dv + 1) B, r) @ (r, q)`` and their radii in one more (two when the query
        features carry a radius): ``V phiq^T`` and
        ``(gamma |V| + rV) |phiq|^T + (|V| + rV) rphiq^T``, INFL + r ETA (the INFL
        folded into the stored ``|phiq|``, ``rphiq``). Rows with a zero or uncertain
        denominator (rare) are patched afterwards."""
        r, dv, q = self.r, self.dv, self.q
        n = (dv + 1) * B
        V, RV = val.reshape(n, r), rval.reshape(n, r)
        ND = np.matmul(V, phT, out=self._buf("nd", (n, q))).reshape(dv + 1, B, q)
        X = np.abs(V, out=self._buf("ox", (n, r)))
        X2 = np.add(X, RV, out=self._buf("ox2", (n, r))) if rphT is not None else None
        X *= _gamma(r)
        X += RV
        RD = np.matmul(X, aphT, out=self._buf("rd", (n, q)))
        if X2 is not None:
            RD += X2 @ rphT
        RD += r * ETA
        RD = RD.reshape(dv + 1, B, q)
        upd = self._buf(f"upd{c}", (B, q))
        rupd = self._buf(f"rupd{c}", (B, q))
        if self.kernel is not None:
            g = [float(x) for x in gm]
            cg = np.array([_gamma(dv) * abs(x) + float(rg) for x, rg in zip(g, gr)])
            cgr = np.array([abs(x) + float(rg) for x, rg in zip(g, gr)])
            if not self.kernel.output(ND, RD, cg, cgr, np.array(g), upd, rupd, dv, B, q, INFL, ETA, U,
                                      dv * ETA):
                return upd, rupd
        den, rden = ND[dv], RD[dv]
        adn = np.abs(den, out=self._buf("adn", (B, q)))
        skip = None
        if not (adn > rden).all():                          # some denominator 0 or uncertain
            zero = den == 0
            if zero.any():                                   # exactly 0: every product phiq_a zq_a is 0
                z0 = (k[dv] != self.zero_level).astype(np.float64)                      # (B, r)
                zero &= (z0 @ npz.T.astype(np.float64)) == 0
            bad = (adn <= rden) & ~zero
            unc |= bad.any(1)
            skip = zero | bad
            den = np.where(skip, 1.0, den)
            np.abs(den, out=adn)
        # 1 / (|den| (|den| - rden)), then per block the ball of a_j = num_j / den:
        # ra = (|num| rden + rnum |den|) / (|den| (|den| - rden)) + u |a| (times INFL: the
        # rounding of these operations, the reciprocal included)
        iw = np.subtract(adn, rden, out=self._buf("iw", (B, q)))
        iw *= adn
        np.divide(1.0, iw, out=iw)
        tmp = self._buf("tmp", (B, q))
        for j in range(dv):
            num, rnum = ND[j], RD[j]
            ra = np.abs(num, out=tmp)
            ra *= rden
            rnum *= adn
            ra += rnum
            ra *= iw
            a = np.divide(num, den, out=num)                                   # a_j (num consumed)
            aa = np.abs(a, out=rnum)                                          # rnum consumed: |a|
            ra += np.multiply(aa, U, out=self._buf("ua", (B, q)))
            ra *= INFL
            ra += ETA
            if skip is not None:
                a[skip] = 0.0
                ra[skip] = 0.0
                aa[skip] = 0.0
            # a . g with dv terms: mid = sum_j a_j g_j; radius gamma_dv |a||g| + |a| rg + ra (|g| + rg)
            g, rg = float(gm[j]), float(gr[j])
            if j == 0:
                np.multiply(a, g, out=upd)
                np.multiply(aa, _gamma(dv) * abs(g) + rg, out=rupd)
            else:
                upd += a * g
                rupd += aa * (_gamma(dv) * abs(g) + rg)
            ra *= abs(g) + rg
            rupd += ra
        rupd *= INFL
        rupd += dv * ETA
        return upd, rupd
