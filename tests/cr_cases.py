"""Inputs for checking the correctly rounded functions of models.canonical.arith
against arb: random over the whole range, and the hard cases.

Hard cases, per function:
* special values: signed zeros, the smallest and largest subnormals and normals,
  the largest double, infinities;
* every threshold of the kernel's branches (range rules, table ends, the
  exp-reduction's k = 0 boundary) and every mathematical rounding threshold
  (overflow to inf at ``2^1024 - 2^970``, the zero/subnormal/normal
  boundaries ``2^-1075``, ``2^-1074 (k + 1/2)``, ``2^-1022``, rounding to
  ``+-1`` or to ``x`` itself), each with 64 neighbours on either side: the
  values there lie within a few ulps of a midpoint;
* both ends of every Taylor table node's interval (``a0 +- 1/32``) and their
  neighbours;
* families whose value is a midpoint to first order (``exp((2m+1) 2^-53)
  = 1 + (2m+1) 2^-53 + ...``, ``sigmoid((2m+1) 2^-52) = 1/2 + (2m+1) 2^-54 - ...``,
  ``tanh(x) = x - x^3/3`` where ``x^3/3`` is half an ulp of ``x``, ...);
* :func:`near_midpoints`: inputs whose double-double value (from the kernel's
  approximation) is closest to a midpoint, searched among many random inputs.
"""

from __future__ import annotations

import numpy as np

FUNCTIONS = ("exp", "expm1", "softplus", "sigmoid", "tanh", "gelu")

#: where each function is not a constant of its range rules
ACTIVE = {"exp": (-746.0, 710.0), "expm1": (-41.0, 710.0), "softplus": (-747.0, 41.0),
          "sigmoid": (-747.0, 39.0), "tanh": (-20.0, 20.0), "gelu": (-40.0, 10.0)}

_DMAX = np.finfo(np.float64).max
SPECIAL = [0.0, -0.0, 5e-324, -5e-324, 1e-323, 2.225073858507201e-308, -2.225073858507201e-308,
           2.2250738585072014e-308, -2.2250738585072014e-308, 1e-310, -1e-310, 1e-300, -1e-300, 2.0 ** -1020,
           -2.0 ** -1020, 2.0 ** -1021, 2.0 ** -60, -2.0 ** -60, 2.0 ** -54, -2.0 ** -54, 2.0 ** -30, -2.0 ** -30,
           0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1e300, -1e300, 2.0 ** 50, -2.0 ** 50, 1e18, -1e18, _DMAX, -_DMAX]
#: arb decides these (a value or ArithmeticError); the kernel leaves them undecided
NONFINITE = [float("inf"), float("-inf"), float("nan")]


def _mp():
    import mpmath
    mpmath.mp.prec = 400
    return mpmath


def _f(v) -> float:
    return float(v)


def thresholds(name: str) -> list[float]:
    """The branch thresholds of the kernel and the function's rounding thresholds."""
    mp = _mp()
    ln = mp.log
    two = mp.mpf(2)
    sub = [ln(two ** -1074 * (k + mp.mpf(1) / 2)) for k in (0, 1, 2, 3, 7, 100, 2 ** 20, 2 ** 51)]
    under = [ln(two ** -1075), ln(two ** -1074), ln(two ** -1022), ln(two ** -1022 * (1 - two ** -53)),
             ln(two ** 1024 - two ** 970), ln(mp.mpf(_DMAX))] + sub
    k0 = [ln(2) / 2048, -ln(2) / 2048]
    t = {
        "exp": lambda: under + k0 + [709.79, -745.2, ln(1 + two ** -53), ln(1 - two ** -54), 2.0 ** -60],
        "expm1": lambda: k0 + [709.79, -40.0, ln(two ** -54), ln(two ** -53), ln(two ** 1024 - two ** 970),
                               2.0 ** -54, -2.0 ** -54, ln(two ** 60), ln(two ** 61), ln(2 - two ** -52)],
        "softplus": lambda: [40.0, -746.0, 11.125, -11.125, 48 * ln(2), 47 * ln(2), 49 * ln(2)]
                            + [ln(mp.expm1(v)) for v in (two ** -1075, two ** -1074, two ** -1022, 1.5 * two ** -1074)],
        "sigmoid": lambda: [38.0, -746.0, ln(two ** 54 - 1), ln(two ** 53 - 1), ln(two ** 55 - 1)]
                           + [-ln(1 / v - 1) for v in (two ** -1075, two ** -1074, two ** -1022, 1.5 * two ** -1074)],
        "tanh": lambda: [19.1, -19.1, 0.40625, -0.40625, ln(two ** 55 - 1) / 2, -ln(two ** 55 - 1) / 2,
                         ln(two ** 54 - 1) / 2, 2.0 ** -30, -2.0 ** -30],
        "gelu": lambda: [9.0, -39.0, -8.0, 8.0, 2.0 ** -60, -2.0 ** -60, 2.0 ** -1020, -2.0 ** -1020]
                        + [_root(mp, lambda x, v=v: _gelu(mp, x) - v, -39, -36)
                           for v in (-two ** -1075, -two ** -1074, -1.5 * two ** -1074, -two ** -1022)]
                        + [_root(mp, lambda x: x - _gelu(mp, x) - two ** -50, 7.5, 8.99)],
    }
    return [_f(v) for v in t[name]()]


def _gelu(mp, x):
    return x * mp.erfc(-x / mp.sqrt(2)) / 2


def _root(mp, g, a, b):
    """A root of g in [a, b] (where g changes sign) by bisection."""
    a, b = mp.mpf(a), mp.mpf(b)
    ga = g(a)
    for _ in range(300):
        c = (a + b) / 2
        gc = g(c)
        if (gc > 0) == (ga > 0):
            a, ga = c, gc
        else:
            b = c
    return (a + b) / 2


def neighbours(points, k: int = 64) -> np.ndarray:
    """Every double within k ulps of each point."""
    out = []
    for p in points:
        v = np.float64(p)
        if not np.isfinite(v):
            continue
        lo = hi = v
        out.append(v)
        for _ in range(k):
            lo, hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
            out += [lo, hi]
    return np.array(out, dtype=np.float64)


def node_edges(name: str) -> np.ndarray:
    """Both ends of each Taylor node's interval (a0 +- 1/32), as inputs of the function."""
    tabs = {"softplus": [(0.0, 179, (1, -1))], "tanh": [(0.0, 7, (1, -1))],
            "gelu": [(-8.0, 273, (1,)), (8.0, 497, (-1,))]}
    pts = []
    for first, count, signs in tabs.get(name, []):
        for i in range(count):
            a0 = first + i / 16
            for e in (a0 - 1 / 32, a0 + 1 / 32):
                pts += [s * e for s in signs]
    return neighbours(pts, 2)


def families(name: str) -> np.ndarray:
    """Inputs whose value is a midpoint to first order."""
    m = np.arange(0, 400, dtype=np.float64)
    odd = 2 * m + 1
    if name == "exp":
        return np.concatenate([odd * 2.0 ** -53, -odd * 2.0 ** -54, odd * 2.0 ** -52])
    if name == "sigmoid":
        return np.concatenate([odd * 2.0 ** -52, -odd * 2.0 ** -53])
    if name == "expm1":                   # x + x^2/2 with x^2/2 near half an ulp of x
        return neighbours([2.0 ** -26.5, -2.0 ** -26.5, 2.0 ** -26, -(2.0 ** -26)], 200)
    if name == "tanh":                    # x^3/3 = ulp(x)/2 (x in [2^-26, 2^-25))
        x0 = (3 * 2.0 ** -79) ** (1 / 3)
        return neighbours([x0, -x0, x0 * 2 ** 0.5, -x0 * 2 ** 0.5], 200)
    if name == "gelu":                    # x/2 + x^2/sqrt(2 pi): x^2 0.399 = ulp(x/2)/2
        x0 = 2.0 ** -54 / 0.3989422804014327
        return neighbours([x0, -x0, 3 * x0, -3 * x0], 200)
    if name == "softplus":                # log 2 + x/2 + x^2/8
        return neighbours([2.0 ** -52, -(2.0 ** -52), 2.0 ** -27, -(2.0 ** -27)], 100)
    return np.zeros(0)


def hard_inputs(name: str) -> np.ndarray:
    """Every finite hard case of function ``name`` (see ``NONFINITE`` for the others)."""
    return np.concatenate([np.array(SPECIAL), neighbours(thresholds(name)), node_edges(name), families(name)])


def random_inputs(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n inputs over the whole range: 35% uniform on the active range, 25% normal
    with scale 4, 20% random bit patterns (every exponent, subnormals and
    infinities-free), 20% log-uniform magnitudes in [2^-60, 2^10] of either sign."""
    lo, hi = ACTIVE[name]
    n1, n2, n3 = int(0.35 * n), int(0.25 * n), int(0.20 * n)
    n4 = n - n1 - n2 - n3
    bits = rng.integers(0, 1 << 63, n3, dtype=np.int64).astype(np.uint64)
    bits |= rng.integers(0, 2, n3).astype(np.uint64) << np.uint64(63)
    b = bits.view(np.float64)
    b = np.where(np.isfinite(b), b, 1.0)
    mag = np.exp2(rng.uniform(-60, 10, n4)) * np.where(rng.integers(0, 2, n4), 1.0, -1.0)
    return np.concatenate([rng.uniform(lo, hi, n1), rng.standard_normal(n2) * 4, b, mag])


def near_midpoints(name: str, pool: int, keep: int, rng: np.random.Generator) -> np.ndarray:
    """The ``keep`` inputs among ``pool`` random ones whose double-double value
    lies closest to a midpoint between two doubles (measured in ulps), found with
    the kernel's approximations (empty without the kernel)."""
    from models.canonical import arith
    lo, hi = ACTIVE[name]
    best_x, best_d = np.zeros(0), np.zeros(0)
    for start in range(0, pool, 1 << 20):
        m = min(1 << 20, pool - start)
        x = np.concatenate([rng.uniform(lo, hi, m // 2), rng.standard_normal(m - m // 2) * 3])
        ap = arith.approximations(name, x)
        if ap is None:
            return np.zeros(0)
        ok = (ap["code"] == 1) & (ap["h"] != 0)
        h, l = ap["h"][ok], ap["l"][ok]
        up = np.spacing(np.abs(h))
        down = np.where((np.frexp(np.abs(h))[0] == 0.5), up / 2, up)   # a power of two: the ulp below halves
        u = np.where(np.sign(l) == np.sign(h), up, down)
        d = np.abs(np.abs(l) / u - 0.5)
        cand_x = np.concatenate([best_x, x[ok]])
        cand_d = np.concatenate([best_d, d])
        order = np.argsort(cand_d, kind="stable")[:keep]
        best_x, best_d = cand_x[order], cand_d[order]
    return best_x


def softmax_rows(n_rows: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Random softmax rows of several scales plus special rows: equal entries,
    -inf entries, huge spreads, subnormal results, ties of the maximum, entries
    that differ by an ulp."""
    scale = np.exp2(rng.uniform(-3, 8, n_rows))[:, None]
    rows = rng.standard_normal((n_rows, width)) * scale
    w = max(width, 4)
    special = [np.zeros(w), np.full(w, -3.5), np.linspace(-800, 0, w), np.linspace(-745.5, -700, w),
               np.r_[0.0, np.full(w - 1, -np.inf)], np.r_[1.0, 1.0, np.full(w - 2, -2.0)],
               np.r_[-1.7e308, 1.7e308, np.zeros(w - 2)], np.r_[0.0, np.full(w - 1, -708.4)],
               np.nextafter(np.zeros(w), 1) * np.arange(w), np.full(w, 1e300),
               np.r_[np.full(w - 1, 0.0), 2.0 ** -53], np.r_[np.full(w // 2, 0.0), np.full(w - w // 2, -np.log(2.0))]]
    return np.vstack([rows] + [s[None, :width] for s in special])
