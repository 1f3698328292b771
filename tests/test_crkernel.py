"""The compiled canonical arithmetic (models/canonical/_crkernel.c) against its
definition, arb (called directly: ``arith.arb_values`` / ``arith._softmax_arb``):
random inputs over the whole range and every hard case per function give arb's
bits; the double-double error bounds hold where arb measures them; the kernel's
instruction-set variants and the pure path (no kernel) give the same bits,
also on the gallery heads and with flush-to-zero switched on in the process.
The 10^7-input run per function is ``benchmarks/bench_cr_functions.py``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import cr_cases as C
import numpy as np
import pytest

from models.canonical import arith, crtables

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kernel():
    k = arith._kernel()
    if k is None:
        if os.environ.get("CI"):
            pytest.fail("models/canonical/_crkernel.c is not built (make install builds it)")
        pytest.skip("models/canonical/_crkernel.c is not built (make install builds it)")
    return k


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64)


def _variants(k, which: int) -> list[int]:
    return list(range(k.variants()[which] + 1))


@pytest.mark.parametrize("name", C.FUNCTIONS)
def test_kernel_gives_arbs_bits_on_random_and_hard_inputs(kernel, name):
    rng = np.random.default_rng(35)
    hard = np.concatenate([C.hard_inputs(name), C.near_midpoints(name, 1 << 18, 100, rng)])
    rand = C.random_inputs(name, 6000, rng)
    x = np.concatenate([hard, rand])
    want = arith.arb_values(name, x)
    outs = [arith.fast_path(name, x, v) for v in _variants(kernel, 0)]
    fast, und = outs[0]
    for f, u in outs[1:]:
        assert np.array_equal(_bits(f), _bits(fast)) and np.array_equal(u, und)
    wrong = np.flatnonzero(~und & (_bits(fast) != _bits(want)))
    assert wrong.size == 0, [(x[i], fast[i], want[i]) for i in wrong[:5]]
    assert np.array_equal(_bits(arith.cr_function(name, x)), _bits(want))
    assert und[hard.size:].mean() <= 1e-3                       # the kernel decides random inputs itself
    assert und[:hard.size].any()                                # and the hard cases do reach arb
    assert (~und[:hard.size]).sum() >= hard.size // 4


@pytest.mark.parametrize("name", C.FUNCTIONS)
def test_double_double_error_bounds_hold(kernel, name):
    """|exact - 2^q (h + l)| <= e (1 + 2^-40), measured with arb at 400 bits, on
    random inputs, table node edges and thresholds; the bound itself is within
    2^-70 of the value (so the rounding test rarely fails)."""
    from flint import arb, ctx
    rng = np.random.default_rng(7)
    x = np.concatenate([C.random_inputs(name, 1500, rng), C.node_edges(name)[::7], C.neighbours(C.thresholds(name), 2)])
    ap = arith.approximations(name, x)
    idx = np.flatnonzero(ap["code"] == 1)
    assert idx.size > 500
    old = ctx.prec
    try:
        ctx.prec = 400
        worst = arb(0)
        for i in idx.tolist():
            scale = arb(2) ** int(-ap["q"][i])
            v = arith.ARB[name](arb(float(x[i]))) * scale
            err = abs(v - arb(float(ap["h"][i])) - arb(float(ap["l"][i])))
            bound = arb(float(ap["e"][i])) * (1 + arb(2) ** -40)
            assert err <= bound, (name, x[i])
            assert bound <= abs(v) * arb(2) ** -70, (name, x[i])
            worst = max(worst, (err / bound).upper())
    finally:
        ctx.prec = old
    assert worst > arb(2) ** -40                              # the measured errors are real, not zero


@pytest.mark.parametrize("name", C.FUNCTIONS)
def test_nonfinite_inputs_are_arbs(kernel, name):
    """inf, -inf and NaN are left to arb: the same value or the same error."""
    for v in C.NONFINITE:
        x = np.array([1.0, v])
        assert arith.fast_path(name, x)[1].tolist() == [False, True]
        try:
            want = arith.arb_values(name, x)
        except ArithmeticError:
            with pytest.raises(ArithmeticError):
                arith.cr_function(name, x)
        else:
            assert np.array_equal(_bits(arith.cr_function(name, x)), _bits(want))


def test_softmax_gives_arbs_bits(kernel):
    rng = np.random.default_rng(11)
    for width in (1, 2, 7, 16, 128):
        rows = C.softmax_rows(60 if width < 128 else 12, width, rng)
        want = arith._softmax_arb(rows)
        outs = [arith.softmax_fast_path(rows, v) for v in _variants(kernel, 0)]
        for out, bad in outs:
            assert np.array_equal(_bits(out[~bad]), _bits(want[~bad]))
            assert np.array_equal(bad, outs[0][1]) and bad.mean() < 0.2
        assert np.array_equal(_bits(arith.cr_softmax(rows)), _bits(want))
    with pytest.raises(ArithmeticError):
        arith.cr_softmax(np.array([[0.0, np.nan]]))
    with pytest.raises(ArithmeticError):
        arith.cr_softmax(np.array([[0.0, np.inf]]))


def test_vectorised_passes_give_the_plain_loops_bits(kernel):
    """exp's branch-free pass (exp_pass) and softmax's (softmax_row_fast), which the
    x86-64-v3 variant runs before its element-by-element loops, give the bits and
    the undecided masks of those loops alone (plain=True, the twins): exp on its
    hard cases, near-midpoints, random inputs over the whole range and the edges
    of the pass's range (-707, 709, 2^-60 and their neighbours, signed zeros,
    subnormals, huge magnitudes, infinities, NaN); softmax rows of random scales,
    of exp's hard cases (the maximum 0), with ties, -inf entries, entries dropped
    below -800, results near and below 2^-1021, NaN and infinite rows. A planted
    wrong value in the pass's range would differ from the twin and from arb (the
    tests above compare the same path with arb)."""
    rng = np.random.default_rng(41)
    edges = np.array([-707.0, 709.0, 2.0 ** -60, -(2.0 ** -60), 0.0, -0.0, 5e-324, -5e-324, 1e-310, 709.78,
                      -708.0, -745.2, 1e300, -1e300, np.inf, -np.inf, np.nan, 1.0, -1.0])
    edges = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
    hard = C.hard_inputs("exp")
    near = C.near_midpoints("exp", 1 << 16, 200, rng)
    x = np.concatenate([edges, hard, near, C.random_inputs("exp", 50000, rng), rng.uniform(-720, 720, 20000),
                        -np.abs(rng.standard_normal(20000)) * 4])
    for v in _variants(kernel, 0):
        with np.errstate(all="ignore"):
            fast, plain = arith.fast_path("exp", x, v), arith.fast_path("exp", x, v, plain=True)
        assert np.array_equal(_bits(fast[0]), _bits(plain[0])) and np.array_equal(fast[1], plain[1]), v
        assert plain[1][len(edges) + len(hard) + len(near):].mean() < 0.001      # random inputs: decided
    rows = [C.softmax_rows(40, w, rng) for w in (1, 2, 3, 5, 8, 17, 128)]
    for w in (1, 3, 8, 64, 130):
        r = rng.standard_normal((300, w)) * 10.0 ** rng.integers(-3, 4, (300, 1))
        r[0], r[1, 0], r[2, -1], r[3] = -np.inf, np.nan, np.inf, 0.0
        r[4] = np.where(rng.random(w) < 0.5, -np.inf, 0.0)
        r[5], r[6], r[7] = rng.uniform(-900, 0, w), rng.uniform(-760, -700, w), rng.uniform(-1100, 0, w)
        r[6, 0] = r[7, 0] = 0.0
        r[8] = np.round(rng.standard_normal(w))
        r[9] = 5e-324 * rng.integers(-3, 4, w)
        r[10] = np.concatenate([[0.0], rng.choice(hard[(hard <= 0) & (hard > -800)], w - 1)])
        r[11], r[12] = 1e308, -1e308
        rows.append(r)
    for r in rows:
        for v in _variants(kernel, 0):
            with np.errstate(all="ignore"):
                fast, plain = arith.softmax_fast_path(r, v), arith.softmax_fast_path(r, v, plain=True)
            decided = ~plain[1]
            assert np.array_equal(fast[1], plain[1]), (r.shape, v)
            assert np.array_equal(_bits(fast[0][decided]), _bits(plain[0][decided])), (r.shape, v)


def _python_linear(x, W, b):
    out = []
    for row in x.tolist():
        r = []
        for w, bb in zip(W.tolist(), b.tolist() if b is not None else [None] * len(W)):
            acc = row[0] * w[0]
            for t in range(1, len(w)):
                acc = acc + row[t] * w[t]
            r.append(acc + bb if bb is not None else acc)
        out.append(r)
    return np.array(out, dtype=np.float64).reshape(len(x), len(W))


def test_linear_and_rowsum_variants_fix_the_order(kernel):
    """Every instruction-set variant computes ((x0 W0 + x1 W1) + ...) + b in that
    order, unfused: plain Python floats as the oracle on small shapes (every
    tile remainder), the pure numpy loop on larger ones; -0.0 products survive
    (the first term is a product, not 0 + product), b = None adds nothing."""
    rng = np.random.default_rng(2)
    for (N, m, r) in [(1, 1, 1), (5, 3, 17), (13, 33, 16), (50, 9, 31), (49, 2, 3)]:
        x, W, b = rng.standard_normal((N, m)), rng.standard_normal((r, m)), rng.standard_normal(r)
        x[0, :] = -0.0
        W[0, 0] = 0.0
        for bb in (b, None):
            want = _python_linear(x, W, bb)
            for v in _variants(kernel, 1):
                assert np.array_equal(_bits(arith.linear(x, W, bb, variant=v)), _bits(want)), (N, m, r, v)
    x, W, b = rng.standard_normal((300, 130)), rng.standard_normal((70, 130)) * 1e-3, rng.standard_normal(70)
    want = arith._linear_pure(x, W, b)
    assert np.signbit(arith.linear(np.full((2, 2), -0.0), np.ones((3, 2)))).all()
    for v in _variants(kernel, 1):
        assert np.array_equal(_bits(arith.linear(x, W, b, variant=v)), _bits(want))
    # a planted pair where a fused multiply-add (x0 W0 + x1 W1 with one rounding of the second step) differs
    from fractions import Fraction
    for _ in range(1000):
        a, w = rng.standard_normal((1, 2)), rng.standard_normal((1, 2))
        p0 = a[0, 0] * w[0, 0]
        unfused, fused = p0 + a[0, 1] * w[0, 1], float(Fraction(p0) + Fraction(a[0, 1]) * Fraction(w[0, 1]))
        if unfused != fused:
            break
    assert unfused != fused
    for v in _variants(kernel, 1):
        assert arith.linear(np.repeat(a, 30, 0), np.repeat(w, 20, 0), variant=v)[29, 19] == unfused
    y = rng.standard_normal((4, 7, 33))
    assert np.array_equal(_bits(arith.rowsum(y)), _bits(arith._rowsum_pure(y)))
    for row, got in zip(y.reshape(-1, 33).tolist(), arith.rowsum(y).reshape(-1).tolist()):
        acc = row[0]
        for v in row[1:]:
            acc = acc + v
        assert got == acc


def _python_prenorm(kind, x, w, b, c):
    """The pre-norms of maps.py in plain Python floats, each operation in the numpy definition's order."""
    out = []
    for row in x.tolist():
        d = len(row)
        if kind == "layer_norm":
            s = row[0]
            for v in row[1:]:
                s = s + v
            mean = s / d
            row = [v - mean for v in row]
        s = row[0] * row[0]
        for v in row[1:]:
            s = s + v * v
        if kind == "scale_norm":
            n = math.sqrt(s) if s >= 0 else math.nan
            den = n if (n >= 1e-5 or n != n) else 1e-5
            out.append([(v / den) * c for v in row])
            continue
        den = math.sqrt(s / d + c)
        y = [v / den for v in row]
        y = [v * t for v, t in zip(y, w)] if w is not None else y
        out.append([v + t for v, t in zip(y, b)] if b is not None else y)
    return np.array(out, dtype=np.float64).reshape(x.shape)


def test_prenorms_in_one_pass_give_the_numpy_definitions_bits(kernel):
    """rms_norm, layer_norm and scale_norm through the kernel's one pass per row
    (arith.prenorm) give the bits of their numpy definitions (maps._*_numpy, the
    plain twins) and of plain Python floats: every block remainder of the
    four-row chains, magnitudes 2^-1000 .. 2^1000, subnormal and -0.0 rows, a NaN
    or an infinity in a row (the same NaN and sign bits), weights and biases
    present or absent; and a planted change of order (the row summed from the
    right) is caught."""
    from models.canonical import maps
    rng = np.random.default_rng(8)
    for N, d in [(1, 1), (2, 3), (3, 2), (4, 7), (5, 64), (9, 33), (13, 130)]:
        x = rng.standard_normal((N, d)) * np.exp2(rng.integers(-1000, 1000, (N, 1)))
        x[0, :] = x[0, :] * 2.0 ** rng.integers(-60, 60, d)            # widely spread terms: the order matters
        if N > 2:
            x[1, d // 2] = np.nan
            x[2, -1] = -np.inf
        if N > 3:
            x[3] = 5e-324 * rng.integers(-3, 4, d)
        if N > 4:
            x[4] = -0.0
        w, b = rng.standard_normal(d), rng.standard_normal(d)
        cases = [("rms_norm", w, None, 1e-6), ("rms_norm", None, None, 1e-5), ("layer_norm", w, b, 1e-5),
                 ("layer_norm", None, None, 1e-5), ("layer_norm", w, None, 1e-5), ("scale_norm", None, None, 1.7)]
        for kind, ww, bb, c in cases:
            with np.errstate(all="ignore"):
                got = arith.prenorm(kind, x, ww, bb, c)
                if kind == "rms_norm":
                    twin, made = maps._rms_norm_numpy(x, ww, c), maps.rms_norm(ww, c)(x)
                elif kind == "layer_norm":
                    twin, made = maps._layer_norm_numpy(x, ww, bb, c), maps.layer_norm(ww, bb, c)(x)
                else:
                    twin, made = maps._scale_norm_numpy(x, np.array([c])), maps.scale_norm(np.array([c]))(x)
            assert got is not None
            assert np.array_equal(_bits(got), _bits(twin)), (kind, N, d)
            assert np.array_equal(_bits(made), _bits(twin)), (kind, N, d)
            if kind != "layer_norm" or d < 40:
                assert np.array_equal(_bits(got), _bits(_python_prenorm(kind, x, ww, bb, c))), (kind, N, d)
    assert arith.prenorm("rms_norm", x.astype(np.float32), None, None, 1e-5) is None       # not float64: numpy
    # a planted change of order: the spread row summed from the right gives other bits, which the test sees
    x = np.array([[1.0] + [2.0 ** -27] * 4])                # 1 + 2^-54 + ... stays 1; from the right: 1 + 2^-52
    flipped = _python_prenorm("rms_norm", x[:, ::-1], None, None, 0.0)[:, ::-1]
    assert arith.prenorm("rms_norm", x, None, None, 0.0)[0, 0] == 1.0 / math.sqrt(1.0 / 5) != flipped[0, 0]


def test_flush_to_zero_in_the_process_does_not_change_the_bits(kernel):
    """torch.set_flush_denormal(True) makes numpy flush subnormals (the control);
    the kernel sets its own floating-point environment, gives the subnormal
    results arb gives and restores the caller's setting."""
    torch = pytest.importorskip("torch")
    x = np.array([-740.0, -745.0, -709.5, 1e-310, -1e-310])
    want = arith.arb_values("exp", x)
    xs, W = np.array([[1e-300, 3e-300]]), np.array([[1e-10, 2e-12]])
    lin = _python_linear(xs, W, None)
    assert want[1] == 5e-324 and 0 < lin[0, 0] < 2.2e-308          # subnormal results (checked before flushing)
    tiny = np.array([1e-310])
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode")
    try:
        assert (tiny * 1.0)[0] == 0.0                           # numpy flushes now
        assert np.array_equal(_bits(arith.cr_exp(x)), _bits(want))
        assert np.array_equal(_bits(arith.linear(xs, W)), _bits(lin))
        assert (tiny * 1.0)[0] == 0.0                           # and still does: the setting was restored
    finally:
        torch.set_flush_denormal(False)
    assert (tiny * 1.0)[0] == 1e-310


def _gallery_heads():
    from certify.sources.thirdparty import load_model
    from models.layouts import Refusal
    gallery = ROOT / "reports" / "gallery" / "models"
    for name in ("performer", "lat", "fla-linear-attn", "fla-sharded-bf16", "fla-layer-elu", "fla-based",
                 "zoology", "fast-transformers", "width24"):
        model = load_model(gallery / name)
        L = model.layer(None)
        if model.detected.embedding is not None:
            toks = model.detected.embedding.numpy()
        elif L.m <= 16:
            idx = np.arange(1 << L.m)
            toks = ((idx[:, None] >> np.arange(L.m)) & 1).astype(np.float32)
        else:                                                   # the certified token set of width24
            from certify.core.families import load_family
            toks = np.asarray(load_family("paper-5.1").tokens, dtype=np.float32)
        for h in L.heads:
            if not isinstance(h, Refusal):
                yield name, h, toks


def test_pure_path_gives_the_kernels_bits_on_the_gallery_heads(kernel, monkeypatch):
    import warnings
    warnings.filterwarnings("ignore")
    got = {}
    for name, h, toks in _gallery_heads():
        q, k = h.canonical_features(toks)
        got[(name, h.details.get("head"))] = (q.tobytes(), k.tobytes(), h.feature_map)
    assert {fm for _, _, fm in got.values()} >= {"fla-hedgehog", "fla-elu", "lat-softmax-q-exp-k", "elu1"}
    monkeypatch.setattr(arith, "_kernel", lambda: None)
    for name, h, toks in _gallery_heads():
        q, k = h.canonical_features(toks)
        assert (q.tobytes(), k.tobytes()) == got[(name, h.details.get("head"))][:2], name


_CHILD = r"""
import hashlib, json
import numpy as np
from models.canonical import arith, maps
rng = np.random.default_rng(3)
u = rng.standard_normal((64, 12)) * 3
W, b = rng.standard_normal((12, 12)), rng.standard_normal(12)
outs = [maps.hedgehog(W, b)(u), maps.elu_p1(u), maps.elu(u), maps.softplus(u), maps.sigmoid(u), maps.tanh(u),
        maps.gelu(u), maps.performer(maps.softplus, W, 12)(u), maps.favor(W)(u), maps.layer_norm(b, b, 1e-5)(u),
        maps.rms_norm(b, 1e-6)(u), maps.scale_norm(b[:1])(u)]
print(json.dumps({"kernel": arith._kernel() is not None,
                  "hash": hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest()}))
"""


def test_without_the_extension_the_pure_path_gives_the_same_bits(kernel):
    """A process with CERTIFY_CANONICAL_KERNEL=0 (as without a compiler) computes every
    elementwise map, softmax and fixed-order sum through arb and numpy: the same bits."""
    env = {k: v for k, v in os.environ.items()}
    env["PYTHONPATH"] = str(ROOT)
    got = {}
    for flag in ("1", "0"):
        env["CERTIFY_CANONICAL_KERNEL"] = flag
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        got[flag] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["1"]["kernel"] and not got["0"]["kernel"]
    assert got["1"]["hash"] == got["0"]["hash"]


def test_arb_rounding_far_out_of_range_and_around_zero():
    """The arb path's rounding: values far beyond the double range are read from
    their exponent (no 2^(10^20)-bit shift: exp(-1e20) is +0, not inf); a ball
    around zero takes the sign the value is known to have, and fails closed
    without one."""
    from flint import arb
    tiny, huge = arb((1, -10 ** 20)), arb((3, 10 ** 20))              # exact: mantissa, exponent
    assert math.copysign(1, arith._nearest(tiny)) == 1.0 and arith._nearest(tiny) == 0.0
    assert math.copysign(1, arith._nearest(-tiny)) == -1.0 and arith._nearest(-tiny) == 0.0
    assert arith._nearest(huge) == math.inf and arith._nearest(-arb((1, 1100))) == -math.inf
    assert arith._nearest(arb((1, -1074))) == 5e-324 and arith._nearest(arb((3, -1076))) == 5e-324
    assert arith._nearest(arb((1, -1075))) == 0.0 and arith._nearest(arb((3, -1077))) == 0.0   # ties to even
    ball = arb(0, arb(2) ** -3000)
    assert arith.round_ball(ball) is None
    assert math.copysign(1, arith.round_ball(ball, -1.0)) == -1.0 and math.copysign(1, arith.round_ball(ball, 1.0)) == 1
    for name in ("exp", "softplus", "sigmoid"):
        assert math.copysign(1.0, arith.arb_values(name, np.array([-1e300]))[0]) == 1.0
    assert math.copysign(1.0, arith.arb_values("gelu", np.array([-1e300]))[0]) == -1.0
    assert arith.arb_values("exp", np.array([-1e20]))[0] == 0.0


def test_tables_meet_the_hypotheses_of_the_bounds(kernel, monkeypatch):
    """The exp reduction's constants have the bit lengths the exactness proof
    needs; each double-double 2^(j/1024) is within 2^-105 of arb's value; every
    Taylor node's relative bound is below 2^-94 within NMAX terms; and a table
    that cannot reach its target within its term budget is refused."""
    from flint import arb, ctx
    t = crtables.exp_table()
    inv, c1, c2, c3 = t[:4]
    assert (c1 * 2.0 ** 42).is_integer() and c1 * 2.0 ** 42 < 2 ** 32 and abs(inv - 1024 / math.log(2)) < 1e-12
    n2, d2 = abs(c2).as_integer_ratio()
    assert n2 < 2 ** 32 and abs(c2) < 2.0 ** -43 and abs(c3) <= 2.0 ** -76
    old = ctx.prec
    try:
        ctx.prec = 300
        for j in (1, 2, 511, 1023):
            v = (arb(j) / 1024 * arb(2).log()).exp()
            assert abs(v - arb(t[8 + 2 * j]) - arb(t[9 + 2 * j])) <= v * arb(2) ** -105
    finally:
        ctx.prec = old
    for name in ("softplus", "tanh", "phi", "mills"):
        tab = crtables.BUILDERS[name]()
        rows = tab[4:].reshape(int(tab[1]), int(tab[2]))
        assert rows[:, 0].max() <= crtables.NMAX and rows[:, 1].max() <= 2.0 ** -94
    monkeypatch.setattr(crtables, "NMAX", 6)
    with pytest.raises(ArithmeticError, match="more than 6 terms"):
        crtables.tanh_table.__wrapped__()


@pytest.mark.slow
@pytest.mark.parametrize("script, line", [("bench_cr_functions.py", "0 differ from arb"),
                                          ("bench_canonical.py", "canonical / torch float64 = ")])
def test_benchmarks_smoke(kernel, script, line):
    """The benchmarks' --smoke runs exit 0 and print their result line (the full
    runs are the benchmarks themselves: 10^7 inputs per function, the real size)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--smoke"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert line in out.stderr
