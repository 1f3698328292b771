"""The tables of the compiled correctly rounded functions (``_crkernel.c``),
computed with arb, together with the numbers their error bounds rest on.

Each table is built once per process, on first use (tens of milliseconds),
from python-flint's ball arithmetic; the hypotheses the C code's proofs use
(bit lengths of the argument-reduction constants, the size of each
coefficient's rounding error) are checked here and a violation raises.

* ``exp``: ``INV = RN(1024/ln 2)``; ``ln2/1024 = C1 + C2 + C3`` with ``C1``,
  ``C2`` of 32 significant bits (so ``k C1``, ``k C2`` are exact for
  ``|k| < 2^21``), ``|ln2/1024 - C1| <= 2^-43``, ``|C3| <= 2^-76``; the
  double-double ``1/sqrt(2 pi)``; ``2^(j/1024)`` (``j < 1024``) as
  double-doubles.
* Taylor tables (nodes ``a0 = first + i/16``, ``|a - a0| <= 1/32``): the
  coefficients of ``f`` at ``a0`` as double-doubles, their number ``N`` and
  ``eps``, a proven bound on the relative error of the C code's double-double
  Horner evaluation of the truncated series (see ``_crkernel.c``):
  ``eps = (rem + gamma_2N(3.1 u^2) sum_n |c_n| H^n + sum_n d_n H^n) / fmin`` with
  ``rem`` the Lagrange remainder, ``d_n`` the error of the stored
  double-double ``c_n`` (exact difference from arb's midpoint plus its radius)
  and ``fmin`` a lower bound of ``|f|`` on the node's interval. The functions, each monotone on ``a >= 0`` (which gives
  ``fmin`` at an end point):

  - ``softplus``: ``g(a) = log(1 + e^-a)`` on ``[0, 11.125]``, decreasing;
  - ``tanh`` on ``[0, 0.40625]``, increasing; at its zero ``a0 = 0`` each
    error term is at most ``|h|`` times the same sum with one power of ``H``
    less, and ``tanh(h) >= h tanh(H)/H`` (``tanh(a)/a`` decreases, as
    ``a sech^2 a < tanh a``), which gives a relative bound there too;
  - ``phi``: ``Phi(x) = erfc(-x/sqrt 2)/2`` on ``[-8, 9]``, increasing;
  - ``mills``: the Mills ratio ``R(a) = Q(a)/phi(a) = int_0^inf e^(-a t - t^2/2) dt``
    on ``[8, 39]``, decreasing; its remainder from ``|R^(n)(xi)| <= n!/xi^(n+1)``
    (the integral with ``e^(-t^2/2) <= 1``).

  The remainder of the others is the order ``N+1`` Taylor coefficient of
  ``f`` over the whole ball ``a0 +- H`` (arb's power series of a ball enclose
  ``f^(N+1)(xi)/(N+1)!`` for every ``xi`` in it) times ``H^(N+1)``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: the C kernel's table slots
SLOTS = {"exp": 0, "softplus": 1, "tanh": 2, "phi": 3, "mills": 4}
#: the tables each function needs
NEEDS = {"exp": ("exp",), "expm1": ("exp",), "sigmoid": ("exp",), "softplus": ("exp", "softplus"),
         "tanh": ("exp", "tanh"), "gelu": ("exp", "phi", "mills")}
NMAX = 24
PREC = 320
#: the C code's bound on |a - a0| (1/32 plus a margin for the index's rounding)
HMAX_NUM, HMAX_EXP = (1 << 35) + 1, -40          # 1/32 + 2^-40 = (2^35 + 1) 2^-40
TARGET_EXP = -95                                  # remainder / fmin per node
ETA_U2 = 3.1                                      # relative error of one DD Horner step, in u^2


def _ctx():
    from flint import ctx
    return ctx


def _nearest(v) -> float:
    from models.canonical.rounding import nearest
    return nearest(v)


def _dd(ball) -> tuple[float, float]:
    """``(hi, lo)``, ``hi = RN(c)``, ``lo = RN(c - hi)``, with ``|c - hi - lo| <= 2^-105.9 |c|``
    for every ``c`` in the ball (its radius must be below ``2^-110 |c|``)."""
    from flint import arb
    mid = ball.mid()
    if mid == 0:
        if ball.rad() != 0:
            raise ArithmeticError("crtables: a constant's ball contains 0")
        return 0.0, 0.0
    if not (ball.rad() <= abs(mid) * arb(2) ** -110):
        raise ArithmeticError("crtables: a constant is not known to 2^-110")
    hi = _nearest(mid)
    lo = _nearest(mid - arb(hi))
    return hi, lo


def _dd_err(ball):
    """``(hi, lo, err)``: the midpoint as a double-double and ``err``, an arb
    bound on ``|c - hi - lo|`` for every ``c`` in the ball."""
    from flint import arb
    mid = ball.mid()
    hi = _nearest(mid) if mid != 0 else 0.0
    lo = _nearest(mid - arb(hi)) if mid != arb(hi) else 0.0
    return hi, lo, abs(mid - arb(hi) - arb(lo)) + ball.rad()


def _upper(ball) -> float:
    """A double >= every point of ``ball`` (nonnegative)."""
    v = float(_nearest(abs(ball).upper()))
    return v * (1 + 2.0 ** -50) + 2.0 ** -1000 if v < float("inf") else v


def _fit_int(x) -> int:
    """The unique integer of an exact-enough ball."""
    return int(x.unique_fmpz())


@lru_cache(maxsize=None)
def exp_table() -> np.ndarray:
    """``[INV, C1, C2, C3, 1/sqrt(2pi) hi, lo, 0, 0]`` then ``2^(j/1024)`` as ``(hi, lo)``."""
    from flint import arb
    ctx = _ctx()
    old = ctx.prec
    try:
        ctx.prec = PREC
        ln2 = arb(2).log()
        C = ln2 / 1024
        inv = _nearest((1024 / ln2).mid())
        m1 = _fit_int((C * arb(2) ** 42 + arb(1) / 2).floor())
        if not (1 << 31) <= m1 < (1 << 32):
            raise ArithmeticError("crtables: C1 is not a 32-bit multiple of 2^-42")
        c1 = float(m1) * 2.0 ** -42
        D = C - arb(c1)
        if not abs(D) < arb(2) ** -43:
            raise ArithmeticError("crtables: |C - C1| > 2^-43")
        e2 = -44
        while abs(D) < arb(2) ** e2:
            e2 -= 1                                   # 2^e2 <= |D| < 2^(e2 + 1)
        m2 = _fit_int((D * arb(2) ** (31 - e2) + arb(1) / 2).floor())
        if not abs(m2) < (1 << 32):
            raise ArithmeticError("crtables: C2 has more than 32 bits")
        c2 = float(m2) * 2.0 ** (e2 - 31)
        c3 = _nearest((C - arb(c1) - arb(c2)).mid())
        if not abs(c3) <= 2.0 ** -76 or not abs(C - arb(c1) - arb(c2) - arb(c3)) <= arb(2) ** -53 * abs(arb(c3)):
            raise ArithmeticError("crtables: C3 is not within bounds")
        isq = _dd(1 / (2 * arb.pi()).sqrt())
        out = [inv, c1, c2, c3, isq[0], isq[1], 0.0, 0.0]
        for j in range(1024):
            t = (arb(j) * C).exp()
            hi, lo = (1.0, 0.0) if j == 0 else _dd(t)
            out += [hi, lo]
        return np.array(out, dtype=np.float64)
    finally:
        ctx.prec = old


def _padded(coeffs, n):
    from flint import arb
    return list(coeffs) + [arb(0)] * (n - len(coeffs))


def _series(fn, a0, rad=None):
    from flint import arb, arb_series
    x = arb(a0) if rad is None else arb(a0, rad)
    return _padded(fn(arb_series([x, 1])).coeffs(), NMAX + 3)


def _taylor(fn, first, count, fmin_at, rem_closed=None, odd_at_zero=False) -> np.ndarray:
    from flint import arb
    ctx = _ctx()
    old, oldcap = ctx.prec, ctx.cap
    H = arb(HMAX_NUM) * arb(2) ** HMAX_EXP
    eta = arb(ETA_U2) * arb(2) ** -106
    target = arb(2) ** TARGET_EXP
    stride = 2 + 2 * (NMAX + 1)
    rows = np.zeros((count, stride), dtype=np.float64)
    try:
        ctx.prec = PREC
        ctx.cap = NMAX + 3
        for i in range(count):
            a0 = arb(first) + arb(i) / 16
            c = _series(fn, a0)
            cb = None if rem_closed is not None else _series(fn, a0, H)
            # at a zero of f (f(0) = 0, f odd): every error term is bounded by |h| times
            # the same sum with one power of H less, and |f(h)| >= |h| f(H)/H
            zero = odd_at_zero and i == 0
            if zero and c[0] != 0:
                raise ArithmeticError("crtables: f(0) is not exactly 0")
            fmin = fmin_at(a0, H)
            if not fmin > 0:
                raise ArithmeticError(f"crtables: no positive lower bound at node {i}")
            p = 1 if zero else 0
            for N in range(1, NMAX + 1):
                # cb is None exactly when a closed-form remainder is given
                rem = abs(cb[N + 1]) * H ** (N + 1 - p) if cb is not None else rem_closed(a0, H, N)
                if rem / fmin < target:
                    break
            else:
                raise ArithmeticError(f"crtables: node {i} needs more than {NMAX} terms")
            S = sum((abs(c[n]) * H ** (n - p) for n in range(p, N + 1)), arb(0))
            g = 2 * N * eta / (1 - 2 * N * eta)
            coef_err = arb(0)
            for n in range(N + 1):
                rows[i, 2 + 2 * n], rows[i, 3 + 2 * n], err = _dd_err(c[n])
                coef_err += err * H ** (n - p) if n >= p else err
            eps = (rem + g * S + coef_err) / fmin
            rows[i, 0], rows[i, 1] = N, _upper(eps)
    finally:
        ctx.prec, ctx.cap = old, oldcap
    head = np.array([first, count, stride, NMAX], dtype=np.float64)
    return np.concatenate([head, rows.reshape(-1)])


def _at(fn):
    """``f`` at an exact point, as an arb (the constant term of its series)."""
    def at(x):
        from flint import arb_series
        return fn(arb_series([x, 1])).coeffs()[0]
    return at


def _softplus_neg(s):
    return ((-s).exp() + 1).log()


def _tanh(s):
    e = (2 * s).exp()
    return (e - 1) / (e + 1)


def _phi(s):
    from flint import arb
    return (-s / arb(2).sqrt()).erfc() / 2


def _mills(s):
    from flint import arb
    return (arb.pi() / 2).sqrt() * (s / arb(2).sqrt()).erfc() * (s * s / 2).exp()


@lru_cache(maxsize=None)
def softplus_table() -> np.ndarray:
    return _taylor(_softplus_neg, 0.0, 179, lambda a0, H: _at(_softplus_neg)(a0 + H).lower())


@lru_cache(maxsize=None)
def tanh_table() -> np.ndarray:
    def fmin(a0, H):
        if a0 == 0:
            return (_at(_tanh)(H) / H).lower()                 # tanh(a)/a is decreasing
        return _at(_tanh)(a0 - H).lower()
    return _taylor(_tanh, 0.0, 7, fmin, odd_at_zero=True)


@lru_cache(maxsize=None)
def phi_table() -> np.ndarray:
    return _taylor(_phi, -8.0, 273, lambda a0, H: _at(_phi)(a0 - H).lower())


@lru_cache(maxsize=None)
def mills_table() -> np.ndarray:
    def rem(a0, H, N):
        return (H ** (N + 1) / (a0 - H) ** (N + 2)).upper()
    return _taylor(_mills, 8.0, 497, lambda a0, H: _at(_mills)(a0 + H).lower(), rem_closed=rem)


BUILDERS = {"exp": exp_table, "softplus": softplus_table, "tanh": tanh_table, "phi": phi_table,
            "mills": mills_table}
