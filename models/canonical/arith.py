"""Portable arithmetic on ``float64`` arrays: fixed-order reductions, correctly
rounded elementary functions, exact weight decoding.

Every function takes and returns numpy ``float64`` arrays; see the package
docstring for why each result is the same bit for bit on every machine.

The definition is arb's: each function value is the exact real value rounded
to the nearest double (ties to even), each dot product
``((x0 W0 + x1 W1) + ...) + b`` rounded step by step from left to right. Two
implementations compute it:

* the compiled kernel ``_crkernel.c`` (when built): a double-double
  evaluation with a proven error bound and Ziv's rounding test, arb
  (below) for the few entries the test cannot decide (exp and softmax first
  through branch-free passes the x86-64-v3 variant vectorises, the
  element-by-element loops for what those leave); the dot products, row sums
  and pre-norms (:func:`prenorm`, one pass per row) with the same operations
  in the same order, vectorized across outputs and tokens;
* the pure path (no compiler, or ``CERTIFY_CANONICAL_KERNEL=0``): python-flint
  ``arb`` balls, the precision doubled until the ball rounds uniquely, and
  numpy loops over the reduction index.

Both give the same bits; the tests compare them.

>>> float(cr_exp(np.array([0.5]))[0]) == 1.6487212707001282
True
"""

from __future__ import annotations

import math
import os
from typing import Callable

import numpy as np

from certify.core.errors import InputError
from models.canonical.rounding import MAX_PREC, START_PREC, correctly_rounded, round_ball  # noqa: F401
from models.canonical.rounding import nearest as _nearest  # noqa: F401

# ---------------------------------------------------------------- exact conversions

def decode(data: bytes | np.ndarray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """A stored tensor's values as ``float64``, exactly: float32/float64 read
    as little-endian, bf16 as its 16 bits shifted into a float32's high half,
    fp16 through its sign, exponent and mantissa fields."""
    buf = data if isinstance(data, (bytes, bytearray, memoryview)) else np.ascontiguousarray(data).tobytes()
    if dtype == "float64":
        a = np.frombuffer(buf, dtype="<f8")
    elif dtype == "float32":
        a = np.frombuffer(buf, dtype="<f4").astype(np.float64)
    elif dtype == "bfloat16":
        bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << np.uint32(16)
        a = bits.view("<f4").astype(np.float64)
    elif dtype == "float16":
        h = np.frombuffer(buf, dtype="<u2").astype(np.int64)
        sign = np.where(h >> 15, -1.0, 1.0)
        e, m = (h >> 10) & 0x1F, h & 0x3FF
        if np.any(e == 0x1F):
            raise InputError("a float16 weight is Inf or NaN: the model computes no finite kernel, "
                             "nothing can be certified")
        mant = np.where(e == 0, m, m | 0x400).astype(np.float64)       # exact integers < 2^11
        a = sign * np.ldexp(mant, np.where(e == 0, 1, e) - 25)          # ldexp: exact scaling
    elif dtype in ("int64", "int32", "int16", "int8", "uint8", "bool"):
        a = np.frombuffer(buf, dtype=np.dtype(dtype).newbyteorder("<") if dtype != "bool" else "?")
        a = a.astype(np.float64)
    else:
        raise ValueError(f"dtype {dtype} has no canonical decoding")
    if not np.isfinite(a).all():
        raise InputError(f"a {dtype} weight is Inf or NaN: the model computes no finite kernel, "
                         "nothing can be certified")
    return np.array(a, dtype=np.float64).reshape(shape)


def f64(t) -> np.ndarray:
    """A torch tensor (float32/float64, read through ``.numpy()``, a view of its
    bytes), a stored :class:`~models.canonical.stored.Weight` (decoded once from
    its bytes) or an array as ``float64`` (exact: every float32 is a float64)."""
    if hasattr(t, "numpy64"):
        return t.numpy64()
    if hasattr(t, "detach"):
        t = t.detach()
        dt = str(t.dtype).removeprefix("torch.")
        if dt in ("bfloat16", "float16"):
            import torch
            bits = t.contiguous().view(torch.int16).numpy().tobytes()
            return decode(bits, dt, tuple(t.shape))
        t = t.numpy()
    a = np.asarray(t)
    if a.dtype.kind not in "fiub":
        raise ValueError(f"cannot read {a.dtype} as float64")
    return a.astype(np.float64)


# ---------------------------------------------------------------- the compiled kernel

_KERNEL: list = []
#: tables already handed to the kernel
_TABLES: set[str] = set()


def _kernel():
    """The compiled kernel (``_crkernel.c``), or None: not built, or switched off
    with ``CERTIFY_CANONICAL_KERNEL=0`` or ``CERTIFY_NO_COMPILED=1`` (the pure path gives
    the same bits)."""
    if not _KERNEL:
        mod = None
        if os.environ.get("CERTIFY_CANONICAL_KERNEL", "1") != "0" and \
                os.environ.get("CERTIFY_NO_COMPILED", "") in ("", "0"):
            try:
                from models.canonical import _crkernel as mod
            except ImportError:
                mod = None
        _KERNEL.append(mod)
    return _KERNEL[0]


def _ready(k, name: str):
    """The kernel with the tables of function ``name`` set (built with arb once)."""
    from models.canonical import crtables
    for t in crtables.NEEDS[name]:
        if t not in _TABLES:
            k.set_table(crtables.SLOTS[t], crtables.BUILDERS[t]())
            _TABLES.add(t)
    return k


# ---------------------------------------------------------------- fixed-order reductions

def _is_f64(*arrays) -> bool:
    return all(a is None or (isinstance(a, np.ndarray) and a.dtype == np.float64) for a in arrays)


def rowsum(x: np.ndarray) -> np.ndarray:
    """``sum_j x[..., j]`` added left to right (shape ``x.shape[:-1] + (1,)``)."""
    k = _kernel()
    if k is None or not _is_f64(x) or x.ndim == 0 or x.shape[-1] == 0:
        return _rowsum_pure(x)
    d = x.shape[-1]
    flat = np.ascontiguousarray(x).reshape(-1, d)
    out = np.empty(flat.shape[0], dtype=np.float64)
    k.rowsum(flat, out, flat.shape[0], d)
    return out.reshape(x.shape[:-1] + (1,))


def _rowsum_pure(x: np.ndarray) -> np.ndarray:
    acc = x[..., 0:1].copy()
    for j in range(1, x.shape[-1]):
        acc = acc + x[..., j:j + 1]
    return acc


def linear(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None, *, variant: int = -1) -> np.ndarray:
    """``x W^T (+ b)``: ``(N, m) x (r, m) -> (N, r)``, each entry
    ``((x_0 W_0 + x_1 W_1) + ...) + b``, products and sums rounded one by one.
    ``variant`` picks the kernel's instruction set (tests): -1 this CPU's best,
    0 SSE2, 1 AVX2, 2 AVX-512; every variant gives the same bits."""
    if x.shape[-1] != W.shape[1]:
        raise ValueError(f"linear: {x.shape} against weights {W.shape}")
    k = _kernel()
    if (k is None or not _is_f64(x, W, b) or x.ndim != 2 or W.ndim != 2 or W.shape[1] == 0
            or (b is not None and b.shape != (W.shape[0],))):
        return _linear_pure(x, W, b)
    N, m = x.shape
    r = W.shape[0]
    out = np.empty((N, r), dtype=np.float64)
    k.linear(np.ascontiguousarray(x), np.ascontiguousarray(W), None if b is None else np.ascontiguousarray(b),
             out, N, m, r, variant)
    return out


def _linear_pure(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    acc = x[:, 0:1] * W[None, :, 0]
    for j in range(1, W.shape[1]):
        acc = acc + x[:, j:j + 1] * W[None, :, j]
    return acc + b[None, :] if b is not None else acc


#: the pre-norms the kernel computes in one pass per row (maps.py has their numpy definitions)
PRENORMS = {"rms_norm": 0, "layer_norm": 1, "scale_norm": 2}


def prenorm(kind: str, x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, c: float) -> np.ndarray | None:
    """The pre-norm ``kind`` of :mod:`.maps` (``rms_norm``, ``layer_norm`` with
    eps ``c``; ``scale_norm`` with gain ``c``) through the kernel, one pass per
    row with the numpy definition's operations in its order; None without the
    kernel or for inputs it does not take (then the numpy definition runs)."""
    k = _kernel()
    if k is None or not _is_f64(x, w, b) or x.ndim == 0 or x.shape[-1] == 0:
        return None
    d = x.shape[-1]
    if any(v is not None and v.shape != (d,) for v in (w, b)):
        return None
    flat = np.ascontiguousarray(x).reshape(-1, d)
    out = np.empty(flat.shape, dtype=np.float64)
    k.prenorm(PRENORMS[kind], flat, None if w is None else np.ascontiguousarray(w),
              None if b is None else np.ascontiguousarray(b), float(c), out, flat.shape[0], d)
    return out.reshape(x.shape)


# ---------------------------------------------------------------- correct rounding of arb balls

def cr_map(fn: Callable, x: np.ndarray, sign: Callable[[float], float] | None = None) -> np.ndarray:
    """``fn`` (an arb function) applied to every entry, correctly rounded; each
    distinct value is computed once. ``sign(v)``: the sign ``fn``'s value at a
    nonzero result is known to have (see :func:`round_ball`)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    vals, inv = np.unique(x, return_inverse=True)
    out = np.array([correctly_rounded(fn, v, sign=sign(v) if sign else 0.0) for v in vals.tolist()],
                   dtype=np.float64)
    return out[inv].reshape(x.shape)


def _exp(a):
    return a.exp()


def _expm1(a):
    return a.expm1()


def _softplus(a):
    return a.exp().log1p()


def _sigmoid(a):
    return 1 / (1 + (-a).exp())


def _tanh(a):
    return a.tanh()


def _gelu(a):
    """``a Phi(a) = a (1 + erf(a/sqrt2))/2``, written with ``erfc(-a/sqrt2) = 1 + erf(a/sqrt2)``
    (the same real number, without the cancellation that made large negative
    arguments need huge precision)."""
    from flint import arb
    return a * (-a / arb(2).sqrt()).erfc() / 2


def _positive(v: float) -> float:
    return 1.0


def _sign_of_x(v: float) -> float:
    return math.copysign(1.0, v)


#: the arb definition of each compiled function, and its number in the kernel
ARB: dict[str, Callable] = {"exp": _exp, "expm1": _expm1, "softplus": _softplus, "sigmoid": _sigmoid,
                            "tanh": _tanh, "gelu": _gelu}
#: the sign of each function's nonzero values: it decides the zero a value below
#: 2^-1075 rounds to where arb's enclosure (of exp far below -2^60) contains zero
SIGN: dict[str, Callable[[float], float]] = {"exp": _positive, "expm1": _sign_of_x, "softplus": _positive,
                                             "sigmoid": _positive, "tanh": _sign_of_x, "gelu": _sign_of_x}
_FID = {"exp": 0, "expm1": 1, "softplus": 2, "sigmoid": 3, "tanh": 4, "gelu": 5}


def arb_values(name: str, x: np.ndarray) -> np.ndarray:
    """Function ``name`` on every entry through arb alone (the definition)."""
    return cr_map(ARB[name], x, SIGN[name])


def fast_path(name: str, x: np.ndarray, variant: int = -1, *,
              plain: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """The kernel's values of function ``name`` (flat float64) and the mask of the
    entries its rounding test left undecided (their values are 0 there), or None
    without the kernel; :func:`arb_values` fills the undecided ones. ``variant``:
    the instruction set (tests): -1 this CPU's best, 0 SSE2, 1 x86-64-v3.
    ``plain`` (tests): the element-by-element loop alone, without the vectorised
    pass the x86-64-v3 variant runs first (exp); both give the same bits and mask."""
    k = _kernel()
    if k is None:
        return None
    flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    out = np.empty_like(flat)
    und = np.zeros(flat.size, dtype=np.uint8)
    _ready(k, name).map(_FID[name], flat, out, und, variant, plain)
    return out, und.view(bool)


def approximations(name: str, x: np.ndarray, variant: int = -1) -> dict[str, np.ndarray] | None:
    """The kernel's double-double values before the rounding test (tests and the
    hard-case search): ``code`` 0 decided by a range rule (``h`` the value), 1 an
    approximation ``2^q (h + l)`` with absolute error at most ``e (1 + 2^-40)``
    in units of ``2^q``, -1 left to arb."""
    k = _kernel()
    if k is None:
        return None
    flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    q, h, l, e = (np.empty_like(flat) for _ in range(4))
    code = np.empty(flat.size, dtype=np.int8)
    _ready(k, name).approx(_FID[name], flat, q, h, l, e, code, variant)
    return {"code": code, "q": q.astype(np.int64), "h": h, "l": l, "e": e}


def cr_function(name: str, x: np.ndarray) -> np.ndarray:
    """Function ``name`` (``ARB``'s keys) on every entry, correctly rounded: the
    kernel, arb for what its rounding test leaves undecided (or for all
    entries without the kernel)."""
    x = np.asarray(x, dtype=np.float64)
    got = fast_path(name, x) if x.size else None
    if got is None:
        return arb_values(name, x)
    out, und = got
    if und.any():
        flat = x.reshape(-1)
        out[und] = arb_values(name, flat[und])
    return out.reshape(x.shape)


def cr_exp(x: np.ndarray) -> np.ndarray:
    """``exp`` correctly rounded."""
    return cr_function("exp", x)


def cr_expm1(x: np.ndarray) -> np.ndarray:
    """``exp(x) - 1`` correctly rounded."""
    return cr_function("expm1", x)


def cr_softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x))`` correctly rounded."""
    return cr_function("softplus", x)


def cr_sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` correctly rounded."""
    return cr_function("sigmoid", x)


def cr_tanh(x: np.ndarray) -> np.ndarray:
    """``tanh`` correctly rounded."""
    return cr_function("tanh", x)


def cr_gelu(x: np.ndarray) -> np.ndarray:
    """``x (1 + erf(x / sqrt 2)) / 2`` correctly rounded."""
    return cr_function("gelu", x)


def cr_const(fn: Callable, *args: float) -> float:
    """A constant such as ``d^-1/4`` correctly rounded: ``cr_const(lambda d: d.rsqrt().sqrt(), d)``."""
    return correctly_rounded(fn, *map(float, args))


def cr_softmax(x: np.ndarray) -> np.ndarray:
    """``exp(x_i) / sum_j exp(x_j)`` over the last axis, each entry correctly
    rounded as a whole: the kernel, arb for every row it leaves undecided."""
    x = np.asarray(x, dtype=np.float64)
    got = softmax_fast_path(x)
    if got is None:
        return _softmax_arb(x)
    out, bad = got
    if bad.any():
        out[bad] = _softmax_arb(x.reshape(out.shape)[bad])
    return out.reshape(x.shape)


def softmax_fast_path(x: np.ndarray, variant: int = -1, *,
                      plain: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """The kernel's softmax rows ``(R, n)`` and the mask of the rows it left
    undecided, or None (no kernel, or an empty or 0-d input). ``plain`` (tests):
    the row loop alone, without the vectorised passes the x86-64-v3 variant
    tries first; both give the same bits and mask."""
    k = _kernel()
    if k is None or x.ndim == 0 or x.shape[-1] == 0 or x.size == 0:
        return None
    rows = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    und = np.zeros(rows.shape[0], dtype=np.uint8)
    _ready(k, "exp").softmax(rows, out, und, rows.shape[0], rows.shape[1], variant, plain)
    return out, und.view(bool)


def _softmax_arb(x: np.ndarray) -> np.ndarray:
    """The softmax in ball arithmetic (the definition)."""
    from flint import arb, ctx
    x = np.asarray(x, dtype=np.float64)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    cache: dict[bytes, np.ndarray] = {}
    old = ctx.prec
    try:
        for i, row in enumerate(rows):
            key = row.tobytes()
            if key in cache:
                out[i] = cache[key]
                continue
            prec = START_PREC
            while True:
                if prec > MAX_PREC:
                    raise ArithmeticError("no unique rounding of a softmax row")
                ctx.prec = prec
                m = max(row.tolist())                       # exact shift: exp(x - m) / sum exp(x - m)
                e = [(arb(v) - arb(m)).exp() for v in row.tolist()]
                s = sum(e[1:], e[0])
                got = [round_ball(v / s, 1.0) for v in e]
                if all(g is not None for g in got):
                    out[i] = got
                    cache[key] = out[i].copy()
                    break
                prec *= 2
    finally:
        ctx.prec = old
    return out.reshape(x.shape)


def relu(x: np.ndarray) -> np.ndarray:
    """``max(x, 0)`` with ``+0.0`` for every nonpositive entry."""
    return np.where(x > 0, x, 0.0)


def positive_zero(x: np.ndarray) -> np.ndarray:
    """``-0.0`` as ``+0.0`` (the same number; one byte pattern)."""
    return np.where(x == 0, 0.0, x)
