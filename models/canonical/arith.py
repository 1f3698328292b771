"""Portable arithmetic on ``float64`` arrays: fixed-order reductions, correctly
rounded elementary functions through ``arb``, exact weight decoding.

Every function takes and returns numpy ``float64`` arrays; see the package
docstring for why each result is the same bit for bit on every machine.

>>> float(cr_exp(np.array([0.5]))[0]) == 1.6487212707001282
True
"""

from __future__ import annotations

from typing import Callable

import numpy as np

#: starting working precision (bits) of the ball computations; doubled until the ball rounds uniquely
START_PREC = 96
MAX_PREC = 1 << 14


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
            raise ValueError("an fp16 weight is Inf or NaN")
        mant = np.where(e == 0, m, m | 0x400).astype(np.float64)       # exact integers < 2^11
        a = sign * np.ldexp(mant, np.where(e == 0, 1, e) - 25)          # ldexp: exact scaling
    elif dtype in ("int64", "int32", "int16", "int8", "uint8", "bool"):
        a = np.frombuffer(buf, dtype=np.dtype(dtype).newbyteorder("<") if dtype != "bool" else "?")
        a = a.astype(np.float64)
    else:
        raise ValueError(f"dtype {dtype} has no canonical decoding")
    return np.array(a, dtype=np.float64).reshape(shape)


def f64(t) -> np.ndarray:
    """A torch tensor (float32/float64, read through ``.numpy()``, a view of its
    bytes) or an array as ``float64`` (exact: every float32 is a float64)."""
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


# ---------------------------------------------------------------- fixed-order reductions

def rowsum(x: np.ndarray) -> np.ndarray:
    """``sum_j x[..., j]`` added left to right (shape ``x.shape[:-1] + (1,)``)."""
    acc = x[..., 0:1].copy()
    for j in range(1, x.shape[-1]):
        acc = acc + x[..., j:j + 1]
    return acc


def linear(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``x W^T (+ b)``: ``(N, m) x (r, m) -> (N, r)``, each entry
    ``((x_0 W_0 + x_1 W_1) + ...) + b``, products and sums rounded one by one."""
    if x.shape[-1] != W.shape[1]:
        raise ValueError(f"linear: {x.shape} against weights {W.shape}")
    acc = x[:, 0:1] * W[None, :, 0]
    for j in range(1, W.shape[1]):
        acc = acc + x[:, j:j + 1] * W[None, :, j]
    return acc + b[None, :] if b is not None else acc


# ---------------------------------------------------------------- correct rounding of arb balls

def _nearest(v) -> float:
    """The double nearest to an exact arb point (ties to even): Python's int
    true division is correctly rounded."""
    man, exp = v.man_exp()
    man, exp = int(man), int(exp)
    if man == 0:
        return 0.0
    try:
        return float(man << exp) if exp >= 0 else man / (1 << -exp)
    except OverflowError:
        return float("inf") if man > 0 else float("-inf")


def round_ball(ball) -> float | None:
    """The double every point of ``ball`` rounds to, or None when its two
    endpoints round differently (more precision is needed)."""
    if not ball.is_finite():
        return None
    lo, hi = _nearest(ball.lower()), _nearest(ball.upper())
    return lo if lo == hi else None


def correctly_rounded(fn: Callable, *args: float) -> float:
    """``fn(arb(a), ...)`` rounded to the nearest double, raising the precision
    until the enclosure rounds uniquely (exact inputs: every double is an arb)."""
    from flint import arb, ctx
    prec = START_PREC
    old = ctx.prec
    try:
        while prec <= MAX_PREC:
            ctx.prec = prec
            got = round_ball(fn(*(arb(a) for a in args)))
            if got is not None:
                return got
            prec *= 2
    finally:
        ctx.prec = old
    raise ArithmeticError(f"no unique rounding of {fn} at {args} within {MAX_PREC} bits")


def cr_map(fn: Callable, x: np.ndarray) -> np.ndarray:
    """``fn`` (an arb function) applied to every entry, correctly rounded; each
    distinct value is computed once."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    vals, inv = np.unique(x, return_inverse=True)
    out = np.array([correctly_rounded(fn, float(v)) for v in vals.tolist()], dtype=np.float64)
    return out[inv].reshape(x.shape)


def _exp(a):
    return a.exp()


def _expm1(a):
    return a.expm1()


def cr_exp(x: np.ndarray) -> np.ndarray:
    """``exp`` correctly rounded."""
    return cr_map(_exp, x)


def cr_expm1(x: np.ndarray) -> np.ndarray:
    """``exp(x) - 1`` correctly rounded."""
    return cr_map(_expm1, x)


def cr_const(fn: Callable, *args: float) -> float:
    """A constant such as ``d^-1/4`` correctly rounded: ``cr_const(lambda d: d.rsqrt().sqrt(), d)``."""
    return correctly_rounded(fn, *map(float, args))


def cr_softmax(x: np.ndarray) -> np.ndarray:
    """``exp(x_i) / sum_j exp(x_j)`` over the last axis, each entry correctly
    rounded as a whole (the sum and quotient in ball arithmetic)."""
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
                got = [round_ball(v / s) for v in e]
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
