"""The canonical extraction (models.canonical): correctly rounded functions against
an independent high-precision oracle, fixed-order sums against plain Python
floats, exact weight decoding, every map against its torch counterpart within a
stated tolerance, and the same bits in subprocesses whose numpy and torch pick
other kernels (NPY_DISABLE_CPU_FEATURES, ATEN_CPU_CAPABILITY, thread counts)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from models.canonical import arith, maps

ROOT = Path(__file__).resolve().parents[1]


def _oracle(fn, x: float) -> float:
    """fn(x) at 300 bits with mpmath, rounded to the nearest double."""
    with mpmath.workprec(300):
        return float(fn(mpmath.mpf(x)))


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.floats(min_value=-745.0, max_value=709.0, allow_nan=False))
@example(0.0)
@example(-0.0)
@example(1e-300)
@example(-744.5)       # deep in the subnormal range
@example(0.6931471805599453)
def test_exp_is_correctly_rounded(x):
    assert arith.cr_exp(np.array([x]))[0] == _oracle(mpmath.exp, x)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.floats(min_value=-60.0, max_value=0.0, allow_nan=False))
@example(-1e-20)
def test_expm1_and_softplus_are_correctly_rounded(x):
    assert arith.cr_expm1(np.array([x]))[0] == _oracle(mpmath.expm1, x)
    assert maps.softplus(np.array([x]))[0] == _oracle(lambda v: mpmath.log1p(mpmath.exp(v)), x)


def test_exp_differs_from_numpy_somewhere():
    """numpy's exp is not correctly rounded everywhere: the canonical path cannot be it."""
    x = np.random.default_rng(0).standard_normal(20000)
    ours = arith.cr_exp(x)
    assert np.max(np.abs(ours - np.exp(x)) / np.exp(x)) <= 2.3e-16      # within an ulp of numpy
    oracle = [_oracle(mpmath.exp, v) for v in x[:500].tolist()]
    assert ours[:500].tolist() == oracle


def test_softmax_and_constants():
    row = np.array([[1.0, 2.0, 3.0], [-800.0, 0.0, 800.0]])
    got = arith.cr_softmax(row)
    with mpmath.workprec(300):
        for r, g in zip(row.tolist(), got.tolist()):
            e = [mpmath.exp(mpmath.mpf(v)) for v in r]
            assert g == [float(v / sum(e)) for v in e]
    assert maps.inv_fourth_root(3) == _oracle(lambda v: v ** mpmath.mpf(-0.25), 3.0)
    assert maps.inv_sqrt(8) == _oracle(lambda v: 1 / mpmath.sqrt(v), 8.0)


def test_linear_and_rowsum_fix_the_order():
    """Each entry is ((x0 w0 + x1 w1) + ...) + b in IEEE double: the same as plain
    Python floats in that order (an oracle that shares no code with numpy)."""
    rng = np.random.default_rng(1)
    x, W, b = rng.standard_normal((7, 33)), rng.standard_normal((5, 33)), rng.standard_normal(5)
    got = arith.linear(x, W, b)
    for i in range(7):
        for j in range(5):
            acc = x[i, 0] * W[j, 0]
            for t in range(1, 33):
                acc = acc + x[i, t] * W[j, t]
            assert got[i, j] == acc + b[j]
    s = arith.rowsum(x)
    assert s[:, 0].tolist() == [math.fsum([]) + _left(r) for r in x.tolist()]


def _left(r):
    acc = r[0]
    for v in r[1:]:
        acc = acc + v
    return acc


def test_half_precision_decoding_is_exact():
    g = torch.Generator().manual_seed(0)
    t = torch.randn(300, generator=g) * 1e3
    t[:4] = torch.tensor([0.0, -0.0, 1e-40, -6e-8])
    for dt in (torch.bfloat16, torch.float16):
        h = t.to(dt)
        want = h.to(torch.float64).numpy()
        bits = h.view(torch.int16).numpy().tobytes()
        got = arith.decode(bits, str(dt).removeprefix("torch."), (300,))
        assert got.tobytes() == want.tobytes()
        assert arith.f64(h).tobytes() == want.tobytes()


# ---------------------------------------------------------------- against torch (the library's arithmetic)

def _torch_maps():
    from models import feature_table as ft
    g = torch.Generator().manual_seed(3)
    W, b = torch.randn(4, 6, generator=g), torch.randn(4, generator=g)
    P = torch.randn(8, 6, generator=g)
    gam, bet = torch.randn(6, generator=g), torch.randn(6, generator=g)
    f = arith.f64
    return [
        ("elu_p1", ft.elu_p1, maps.elu_p1),
        ("elu1", ft.elu1, maps.elu_p1),
        ("relu", torch.relu, maps.relu),
        ("dpfp", ft.dpfp, maps.dpfp),
        ("taylor", ft.taylor, maps.taylor),
        ("rebased", ft.rebased(gam, bet, True), maps.rebased(f(gam), f(bet), True)),
        ("hedgehog", lambda u: torch.cat([2 * (u @ W.T + b), -2 * (u @ W.T + b)], -1).softmax(-1),
         maps.hedgehog(f(W), f(b))),
        ("softmax", lambda u: u.softmax(-1), maps.softmax),
        ("performer-relu", lambda u: torch.relu((6 ** -0.25 * u) @ P.T) + 0.001, maps.performer(maps.relu, f(P), 6)),
        ("performer-softplus", lambda u: torch.nn.functional.softplus((6 ** -0.25 * u) @ P.T) + 0.001,
         maps.performer(maps.softplus, f(P), 6)),
        ("layer_norm", lambda u: torch.nn.functional.layer_norm(u, (6,), gam, bet, 1e-5),
         maps.layer_norm(f(gam), f(bet), 1e-5)),
        ("rms_norm", lambda u: u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + 1e-5) * gam,
         maps.rms_norm(f(gam), 1e-5)),
    ]


@pytest.mark.parametrize("name,torch_fn,canon_fn", _torch_maps(), ids=lambda v: v if isinstance(v, str) else "")
def test_canonical_maps_agree_with_torch(name, torch_fn, canon_fn):
    """float64 canonical vs the library's float32: relative error <= 1e-5 of the row's scale."""
    u = torch.randn(64, 6, generator=torch.Generator().manual_seed(4)) * 2
    want = torch_fn(u).double().numpy()
    got = canon_fn(u.double().numpy())
    assert got.dtype == np.float64 and got.shape == want.shape
    scale = np.maximum(np.abs(want).max(axis=-1, keepdims=True), 1e-30)
    assert np.max(np.abs(got - want) / scale) <= 1e-5, name


# ---------------------------------------------------------------- the same bits under other kernels

_CHILD = r"""
import hashlib, json, sys
import numpy as np
from numpy._core._multiarray_umath import __cpu_features__ as feats
from models.canonical import arith, maps
rng = np.random.default_rng(7)
u = rng.standard_normal((257, 16)) * 3
W, b, P = rng.standard_normal((16, 16)), rng.standard_normal(16), rng.standard_normal((24, 16))
x = maps.layer_norm(rng.standard_normal(16), rng.standard_normal(16), 1e-5)(u)
outs = [maps.taylor(arith.linear(x, W, b)), maps.performer(arith.relu, P, 16)(x), maps.elu_p1(x),
        maps.hedgehog(W, b)(x[:40]), maps.rms_norm(None, 1e-6)(u), maps.dpfp(x)]
canon = hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest()
import torch
ut = torch.from_numpy(u.astype(np.float32))
lib = torch.nn.functional.layer_norm(ut @ torch.from_numpy(W.astype(np.float32)).T, (16,)).exp()
print(json.dumps({"canonical": canon, "torch": hashlib.sha256(lib.numpy().tobytes()).hexdigest(),
                  "features": {k: v for k, v in feats.items() if v},
                  "capability": torch.backends.cpu.get_cpu_capability()}))
"""


def settings_env() -> list[tuple[str, dict[str, str]]]:
    """Environment settings that change numpy's, torch's and the BLAS's kernels."""
    from numpy._core._multiarray_umath import __cpu_dispatch__
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NPY_", "ATEN_", "MKL_", "ONEDNN_",
                                                                      "OPENBLAS_", "OMP_"))}
    base["PYTHONPATH"] = str(ROOT)
    out = [("default", {**base, "OMP_NUM_THREADS": "1"}),
           ("aten-default", {**base, "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}),
           ("aten-avx2", {**base, "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2"}),
           ("numpy-baseline", {**base, "NPY_DISABLE_CPU_FEATURES": " ".join(__cpu_dispatch__),
                               "OMP_NUM_THREADS": "1"}),
           ("blas-isa", {**base, "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
                         "OPENBLAS_CORETYPE": "Nehalem", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
                         "OPENBLAS_NUM_THREADS": "2"})]
    if torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        out.append(("aten-avx512", {**base, "ATEN_CPU_CAPABILITY": "avx512", "OMP_NUM_THREADS": "1"}))
    return out


def run_child(code: str, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_canonical_bits_match_without_numpy_simd():
    """Default suite: one child with numpy's dispatched SIMD switched off (confirmed
    in the child) and torch's default kernels gives the canonical bits of this process."""
    from numpy._core._multiarray_umath import __cpu_dispatch__
    code = _CHILD.split("import torch")[0] + "print(json.dumps({'canonical': canon, 'features': " \
        "{k: v for k, v in feats.items() if v}}))"
    env = dict(settings_env()[3][1], ATEN_CPU_CAPABILITY="default", OMP_NUM_THREADS="2")
    child = run_child(code, env)
    here = {}
    exec(compile(code.replace("print(json.dumps(", "here.update(("), "<here>", "exec"), {"here": here})
    assert child["canonical"] == here["canonical"]
    assert not any(child["features"].get(f) for f in __cpu_dispatch__)


@pytest.mark.slow
def test_canonical_bits_do_not_depend_on_cpu_kernels():
    """Every setting gives the same canonical bits; numpy's dispatch really was
    switched off where asked, and torch's own output changes under some setting
    (the control: otherwise the settings would prove nothing)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__
    got = {name: run_child(_CHILD, env) for name, env in settings_env()}
    assert len({g["canonical"] for g in got.values()}) == 1, {k: g["canonical"][:12] for k, g in got.items()}
    for f in __cpu_dispatch__:
        assert not got["numpy-baseline"]["features"].get(f), f
    assert got["aten-default"]["capability"] == "DEFAULT"
    assert len({g["torch"] for g in got.values()}) > 1, "torch's output is the same under every setting"
