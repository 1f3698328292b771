"""Every supported feature map and pre-norm, canonically (:mod:`models.canonical`).

Each function maps ``float64`` arrays ``(N, d)`` to ``float64`` arrays with
the operations of :mod:`.arith` only, in the order written. They are the
definitions the certificates bind; the torch functions of
:mod:`models.layouts` and :mod:`models.adapters` compute the same
mathematical maps in float32 and are compared with these within the library
check's tolerance.

Nonlinearities are the mathematical function correctly rounded: ``elu(u) + 1``
(fla's ``elu_p1`` and fast-transformers' ``elu + 1``) is ``u + 1`` for
``u >= 0`` and ``exp(u)`` rounded once below; ``softplus`` is
``log(1 + exp(u))`` rounded once (torch's linear branch above 20 differs by
less than ``exp(-20)``); softmax is rounded once per entry.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from models.canonical.arith import (
    cr_const,
    cr_exp,
    cr_expm1,
    cr_gelu,
    cr_sigmoid,
    cr_softmax,
    cr_softplus,
    cr_tanh,
    linear,
    prenorm,
    relu,
    rowsum,
)

Map = Callable[[np.ndarray], np.ndarray]


# ---------------------------------------------------------------- constants

def inv_sqrt(n: float) -> float:
    """``n^-1/2`` correctly rounded."""
    return cr_const(lambda a: a.rsqrt(), n)


def inv_fourth_root(n: float) -> float:
    """``n^-1/4`` correctly rounded."""
    return cr_const(lambda a: a.rsqrt().sqrt(), n)


def sqrt_ratio(a: float, b: float) -> float:
    """``sqrt(a / b)`` correctly rounded."""
    return cr_const(lambda x, y: (x / y).sqrt(), a, b)


# ---------------------------------------------------------------- elementwise maps

def identity(u: np.ndarray) -> np.ndarray:
    return u


def elu_p1(u: np.ndarray) -> np.ndarray:
    """``elu(u) + 1``: ``u + 1`` for ``u >= 0``, ``exp(u)`` correctly rounded below."""
    return np.where(u >= 0, u + 1.0, cr_exp(np.minimum(u, 0.0)))


def elu(u: np.ndarray) -> np.ndarray:
    """``u`` for ``u > 0``, ``expm1(u)`` correctly rounded below."""
    return np.where(u > 0, u, cr_expm1(np.minimum(u, 0.0)))


def softplus(u):
    return cr_softplus(u)


def sigmoid(u):
    return cr_sigmoid(u)


def tanh(u):
    return cr_tanh(u)


def gelu(u):
    return cr_gelu(u)


def softmax(u: np.ndarray) -> np.ndarray:
    """Softmax over the features, each entry correctly rounded."""
    return cr_softmax(u)


# ---------------------------------------------------------------- structured maps

def dpfp(u: np.ndarray, nu: int = 4) -> np.ndarray:
    """fla's DPFP: ``x = [relu(u), relu(-u)]``, ``[x] * nu`` times the rolls of x by ``1..nu``."""
    x = np.concatenate([relu(u), relu(-u)], axis=-1)
    rolled = np.concatenate([np.roll(x, j, axis=-1) for j in range(1, nu + 1)], axis=-1)
    return np.concatenate([x] * nu, axis=-1) * rolled


def taylor(u: np.ndarray) -> np.ndarray:
    """fla's TaylorFeatureMap ``[1, u/d^1/4, u_i^2/(sqrt2 sqrt d), u_i u_j/sqrt d (i<j)]``
    with its constants ``sqrt(d)``, ``sqrt(sqrt(d))``, ``sqrt(d) sqrt(2)`` (IEEE sqrt)."""
    d = u.shape[-1]
    rd, rrd = math.sqrt(d), math.sqrt(math.sqrt(d))
    iu = np.triu_indices(d, 1)
    outer = u[:, :, None] * u[:, None, :]
    diag = outer[:, np.arange(d), np.arange(d)]
    off = outer[:, iu[0], iu[1]]
    return np.concatenate([np.ones_like(u[:, :1]), u / rrd, diag / (rd * math.sqrt(2)), off / rd], axis=-1)


def rebased(gamma: np.ndarray | None, beta: np.ndarray | None, normalize: bool, eps: float = 1e-5) -> Map:
    """fla's ReBased map: (LayerNorm or affine) then ``[x_i^2 d^-1/2, x_i x_j sqrt(2/d) (i<j)]``."""
    def f(u):
        d = u.shape[-1]
        if normalize:
            x = layer_norm(gamma, beta, eps)(u)
        else:
            x = u * gamma[None, :] if gamma is not None else u
            x = x + beta[None, :] if beta is not None else x
        outer = x[:, :, None] * x[:, None, :]
        iu = np.triu_indices(d, 1)
        return np.concatenate([outer[:, np.arange(d), np.arange(d)] * inv_sqrt(d),
                               outer[:, iu[0], iu[1]] * sqrt_ratio(2, d)], axis=-1)
    return f


def hedgehog(W: np.ndarray, b: np.ndarray) -> Map:
    """``softmax([2 (W u + b), -2 (W u + b)])``."""
    def f(u):
        z = linear(u, W, b)
        return softmax(np.concatenate([2.0 * z, -2.0 * z], axis=-1))
    return f


def t2r(W: np.ndarray, b: np.ndarray | None) -> Map:
    return lambda u: relu(linear(u, W, b))


def elementwise_product(W1, b1, W2, b2) -> Map:
    return lambda u: linear(u, W1, b1) * linear(u, W2, b2)


def tensor_square(u: np.ndarray) -> np.ndarray:
    """``u (x) u``: the products ``u_i u_j`` in row-major order (each one rounded product)."""
    return (u[:, :, None] * u[:, None, :]).reshape(u.shape[0], -1)


def normalized(phi: Map, on: bool, scale: float = 1.0, eps: float = 1e-4) -> Map:
    """``phi(u) / (sum phi(u) + eps)`` when ``on``, times ``scale`` (fla's norm_q/k and query scale)."""
    def f(u):
        x = phi(u)
        if on:
            x = x / (rowsum(x) + eps)
        return x * scale if scale != 1.0 else x
    return f


def performer(g: Map, P: np.ndarray, d: int, epsilon: float = 0.001, normalize: bool = True) -> Map:
    """performer-pytorch's generalized kernel ``g(d^-1/4 u P^T) + epsilon`` (``g`` the canonical
    elementwise map of its ``kernel_fn``, :mod:`models.feature_table`)."""
    c = inv_fourth_root(d) if normalize else 1.0

    def f(u):
        return g(linear(u * c if c != 1.0 else u, P)) + epsilon
    return f


def scaled_softmax(scale: float) -> Map:
    """``softmax(u) * scale`` (linear-attention-transformer's causal queries)."""
    return lambda u: softmax(u) * scale if scale != 1.0 else softmax(u)


def favor(P: np.ndarray) -> Map:
    """``exp(u P^T - |u|^2 / 2) / sqrt(r)``."""
    rs = math.sqrt(P.shape[0])

    def f(u):
        return cr_exp(linear(u, P) - 0.5 * rowsum(u * u)) / rs
    return f


# ---------------------------------------------------------------- pre-norms

def layer_norm(weight: np.ndarray | None, bias: np.ndarray | None, eps: float) -> Map:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` (biased variance); the kernel
    runs :func:`_layer_norm_numpy`'s operations in its order, one pass per row."""
    def f(x):
        got = prenorm("layer_norm", x, weight, bias, eps)
        return got if got is not None else _layer_norm_numpy(x, weight, bias, eps)
    return f


def _layer_norm_numpy(x, weight, bias, eps):
    d = x.shape[-1]
    xc = x - rowsum(x) / d
    y = xc / np.sqrt(rowsum(xc * xc) / d + eps)
    if weight is not None:
        y = y * weight[None, :]
    return y + bias[None, :] if bias is not None else y


def rms_norm(weight: np.ndarray | None, eps: float) -> Map:
    """``x / sqrt(mean(x^2) + eps) * weight`` (:func:`_rms_norm_numpy`, in the kernel one pass per row)."""
    def f(x):
        got = prenorm("rms_norm", x, weight, None, eps)
        return got if got is not None else _rms_norm_numpy(x, weight, eps)
    return f


def _rms_norm_numpy(x, weight, eps):
    y = x / np.sqrt(rowsum(x * x) / x.shape[-1] + eps)
    return y * weight[None, :] if weight is not None else y


def scale_norm(g: np.ndarray) -> Map:
    """``x / max(|x|, 1e-5) * g`` (:func:`_scale_norm_numpy`, in the kernel one pass per row)."""
    def f(x):
        gain = g.reshape(-1)[0]
        got = prenorm("scale_norm", x, None, None, gain) if isinstance(gain, np.float64) else None
        return got if got is not None else _scale_norm_numpy(x, g)
    return f


def _scale_norm_numpy(x, g):
    return x / np.maximum(np.sqrt(rowsum(x * x)), 1e-5) * g.reshape(-1)[0]


def affine(W: np.ndarray, b: np.ndarray | None) -> Map:
    return lambda x: linear(x, W, b)
