"""Lemma summaries of large float feature matrices re-derived from replayed
features: the Grams by the kernel's exact limb-split products
(:func:`certify.checkers.kernel.gram.exact_gram`), the quadratic-kernel and
minimum summaries, and every product's sign by the kernel's rigorous product
enclosure (:func:`certify.checkers.kernel.inertia.product_enclosure`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

import numpy as np

from certify.checkers.kernel.attention import kernel_value
from certify.checkers.kernel.gram import (
    GramError,
    _normalize,
    exact_gram,
)
from certify.checkers.kernel.inertia import product_enclosure

__all__ = ["GramError", "exact_gram", "gram_problems", "read_features", "summary_problems"]


def read_features(path: str, expect: tuple[int, int] | None = None) -> dict[str, Any]:
    """``{"phi_q": array, "phi_k": array}`` from a replay's features file (``.npz``,
    no pickles), each checked to be a finite 2-d float array of the expected shape."""
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in ("phi_q", "phi_k") if k in z.files}
    if set(out) != {"phi_q", "phi_k"}:
        raise GramError(f"{path}: a features file holds phi_q and phi_k")
    for k, a in out.items():
        if a.ndim != 2 or a.dtype.kind != "f" or (expect is not None and tuple(a.shape) != tuple(expect)):
            raise GramError(f"{path}: {k} is {a.dtype} {a.shape}, expected float {expect}")
    return out


#: exact Grams computed in this process, by the features' dtype, shape and sha256 (the
#: hash each claim's ``features_sha256`` was just compared with): a replay's features file
#: serves every claim of its head (exact and eps rank) once
_GRAMS: dict[str, tuple[list[list[int]], int]] = {}


def _exact_gram_once(arr: np.ndarray, sha: str | None = None) -> tuple[list[list[int]], int]:
    """``exact_gram(arr)``, kept by content: ``sha`` is the sha256 of ``arr``'s bytes in
    its dtype, little-endian, row-major (:func:`_features_sha`), computed here when not given."""
    a = np.ascontiguousarray(arr)
    h = f"{a.dtype.str}{a.shape}:{sha if sha is not None else _features_sha(a, a.dtype.name)}"
    if h not in _GRAMS:
        if len(_GRAMS) >= 8:
            _GRAMS.pop(next(iter(_GRAMS)))
        _GRAMS[h] = exact_gram(a)
    return _GRAMS[h]


def gram_problems(claim: dict[str, Any], features: dict[str, np.ndarray]) -> list[str]:
    """What is wrong with a factor-form claim's Gram summaries (``num_tokens``,
    ``gram_q``/``gram_q_exponent``, ``gram_k``/``gram_k_exponent``) against the
    replayed features themselves (:func:`read_features`), recomputed exactly;
    ``[]`` means those summaries are re-derived (no longer ``trusted:``). The
    caller has matched the features' sha256 with ``features_sha256``."""
    ev = claim.get("evidence") or {}
    q, k = features["phi_q"], features["phi_k"]
    out = []
    if ev.get("num_tokens") != q.shape[0] or q.shape != k.shape:
        out.append(f"the replayed features have {q.shape[0]} tokens, the evidence {ev.get('num_tokens')}")
        return out
    shas = features.get("sha256") or {}
    for name, arr in (("q", q), ("k", k)):
        G, e = _exact_gram_once(arr, shas.get(f"phi_{name}") if arr.dtype.name == shas.get("dtype") else None)
        want, we = ev.get(f"gram_{name}"), ev.get(f"gram_{name}_exponent")
        if not isinstance(want, list) or not isinstance(we, int) or isinstance(we, bool):
            out.append(f"gram_{name} is not an integer matrix with an exponent")
            continue
        try:
            W, we2 = _normalize([[int(v) for v in row] for row in want], we)
        except (TypeError, ValueError):
            out.append(f"gram_{name} is not an integer matrix")
            continue
        if (W, we2) != (G, e):
            out.append(f"gram_{name} 2^gram_{name}_exponent is not PhiK^T PhiK of the replayed features"
                       if name == "k" else "gram_q 2^gram_q_exponent is not PhiQ^T PhiQ of the replayed features")
    return out


# ---------------------------------------------------------------- float bounds of the quadratic-kernel lemma
# (elementwise rounding bounds, no product: read here)

U = 2.0 ** -53
TINY = 2.0 ** -1000


def sum_sq_upper(X: np.ndarray) -> Fraction:
    """An exact rational upper bound of ``max_rows sum_j x_j^2`` for float64 rows:
    the squares and their sum (any order) round to nearest, so the exact sum is at
    most the computed one times ``1 + 2 (n + 1) u``, plus ``(n + 1) 2^-1074`` for
    underflow."""
    n = X.shape[1]
    acc = X[:, 0] * X[:, 0]
    for j in range(1, n):
        acc = acc + X[:, j] * X[:, j]
    top = float(acc.max(initial=0.0))
    return Fraction(top) * (1 + Fraction(2 * (n + 1), 1 << 53)) + Fraction(n + 1, 1) * Fraction(1, 1 << 1074)


def residual_upper(w: np.ndarray, g: np.ndarray, xi: np.ndarray, xj: np.ndarray) -> np.ndarray:
    """An entrywise upper bound of ``|w - g xi xj|`` (floats; ``g`` exact dyadics):
    ``|fl(e)| + 8u (|fl(e)| + |fl(g fl(xi xj))|) + 2^-1000`` with ``e = w - g xi xj``.
    The product, the scaling and the subtraction each round by at most ``u``
    relative (and ``2^-1074`` absolute), so the true residual is at most
    ``|fl(e)| (1 + 2u) + 3u |fl(g p)|``; rounding the bound itself loses less than
    the slack."""
    gp = g[None, :] * (xi * xj)
    e = w - gp
    return np.abs(e) + 8 * U * (np.abs(e) + np.abs(gp)) + TINY


# ---------------------------------------------------------------- the quadratic-kernel lemma's summaries

def quadratic_problems(ev: dict[str, Any], features: dict[str, np.ndarray]) -> list[str]:
    """The quadratic-kernel summaries of a ``nonnegative`` claim (``min_const_*``,
    ``max_linear_sq_*``, ``max_quadratic_sq_*``, ``max_residual_sq_*``, ``r``)
    re-derived from the replayed features: the minima must be equal (exact float
    comparisons), the stated upper bounds at least rigorous upper bounds computed
    here (:func:`sum_sq_upper`, :func:`residual_upper`)."""
    from fractions import Fraction
    problems = []
    q = features["phi_q"]
    try:
        r = int(ev["r"])
        c = int(ev["constant"])
        lin = [int(i) for i in ev["linear"]]
        quad = [(int(f), int(i), int(j)) for f, i, j in ev["quadratic"]]
        gd, go = Fraction(str(ev["g_diag"])), Fraction(str(ev["g_off"]))
    except (KeyError, TypeError, ValueError) as exc:
        return [f"the quadratic-kernel evidence cannot be read: {exc!r}"]
    if r != q.shape[1]:
        return [f"r is {r}, the replayed features have {q.shape[1]} columns"]
    g = []
    for val in (gd, go):
        f = float(val)
        if Fraction(f) != val:
            return ["g_diag / g_off are not doubles (exact dyadics expected)"]
        g.append(f)
    fidx = np.array([f for f, _, _ in quad], dtype=np.int64)
    pi = np.array([lin[i] for _, i, _ in quad], dtype=np.int64)
    pj = np.array([lin[j] for _, _, j in quad], dtype=np.int64)
    gvec = np.array([g[0] if i == j else g[1] for _, i, j in quad], dtype=np.float64)
    for side in ("q", "k"):
        X = features[f"phi_{side}"].astype(np.float64)
        mn = Fraction(float(X[:, c].min()))
        stated = {k: Fraction(str(ev[f"{k}_{side}"])) for k in ("min_const", "max_linear_sq",
                                                                  "max_quadratic_sq", "max_residual_sq")}
        if stated["min_const"] != mn:
            problems.append(f"min_const_{side} is not the replayed constant feature's minimum")
        w = X[:, fidx]
        b = residual_upper(w, gvec, X[:, pi], X[:, pj])
        for key, arr in (("max_linear_sq", X[:, lin]), ("max_quadratic_sq", w), ("max_residual_sq", b)):
            if stated[key] < sum_sq_upper(arr):
                problems.append(f"{key}_{side} is below a rigorous bound of the replayed features' maximum")
    return problems


def _features_sha(a: np.ndarray, dtype: str) -> str:
    """sha256 of ``a`` in ``dtype``, little-endian, row-major (hashed in place when it
    already is)."""
    import hashlib
    arr = np.ascontiguousarray(a.astype(dtype, copy=False), dtype=np.dtype(dtype).newbyteorder("<"))
    return hashlib.sha256(arr.reshape(-1).view(np.uint8)).hexdigest()


#: the last features file read: ``(path, arrays, {dtype: (sha_q, sha_k)})``. Each claim
#: still compares the arrays' hashes with its own ``features_sha256`` and checks those
#: arrays; the claims of one head (its exact rank, eps rank, nonnegativity) read its file once
_LAST_READ: list = []


def _read_hashed(path: str, dtype: str) -> tuple[dict[str, Any], tuple[str, str]]:
    """The arrays of the features file ``path`` and their sha256 in ``dtype`` (read and
    hashed once for the claims that follow, while the file is unchanged)."""
    import os
    st = os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    if not (_LAST_READ and _LAST_READ[0][0] == key):
        feats = read_features(path)
        for a in feats.values():
            a.setflags(write=False)                      # shared by the claims that read it
        _LAST_READ[:] = [(key, feats, {})]
    _, feats, shas = _LAST_READ[0]
    if dtype not in shas:
        shas[dtype] = (_features_sha(feats["phi_q"], dtype), _features_sha(feats["phi_k"], dtype))
    return feats, shas[dtype]


def summary_problems(claim: dict[str, Any], path: str) -> list[str] | None:
    """The trusted summaries of ``claim`` re-derived from the replayed features in
    ``path``: ``[]`` (discharged), the problems found, or None when this claim's
    summaries have no recomputation here (they stay trusted). The file's arrays
    must hash to the claim's ``features_sha256`` (recomputed here)."""
    ev = claim.get("evidence") or {}
    fs = ev.get("features_sha256")
    if not isinstance(fs, dict) or not isinstance(fs.get("dtype"), str):
        return None
    kind, trusted = claim.get("kind"), ev.get("trusted")
    check: Callable[..., list[str] | None]
    if kind in ("exact_rank", "eps_rank") and trusted == ["gram_q", "gram_k", "num_tokens"]:
        check = gram_problems
    elif kind == "nonnegative" and ev.get("method") == "quadratic_kernel":
        check = quadratic_problems
    elif kind == "nonnegative" and ev.get("method") == "all_products" and trusted == ["all_products"]:
        check = all_products_problems
    elif kind == "nonnegative" and ev.get("method") == "features_nonnegative" \
            and trusted == ["min_phi_q", "min_phi_k"]:
        check = min_phi_problems
    else:
        return None
    try:
        feats, got = _read_hashed(path, fs["dtype"])
    except (GramError, OSError, ValueError, TypeError) as exc:
        return [f"the replayed features cannot be read: {exc}"]
    if list(got) != [fs.get("phi_q"), fs.get("phi_k")]:
        return ["the replayed features file does not hash to features_sha256"]
    if feats["phi_q"].dtype != np.dtype(fs["dtype"]):
        return [f"the replayed features are {feats['phi_q'].dtype}, the claim's {fs['dtype']}"]
    feats = {**feats, "sha256": {"phi_q": got[0], "phi_k": got[1], "dtype": fs["dtype"]}}
    return check(claim if check is gram_problems else ev, feats)


def min_phi_problems(ev: dict[str, Any], features: dict[str, np.ndarray]) -> list[str]:
    """``min_phi_q``, ``min_phi_k`` of a ``features_nonnegative`` claim re-derived from
    the replayed features: each must equal the exact minimum of its (finite)
    array, compared as exact rationals (a float is a dyadic rational)."""
    from fractions import Fraction

    from certify.checkers.common import Bad, rational
    out = []
    for side in ("q", "k"):
        a = features[f"phi_{side}"]
        if a.size == 0 or not np.all(np.isfinite(a)):
            out.append(f"the replayed phi_{side} is empty or not finite")
            continue
        try:
            stated = rational(ev.get(f"min_phi_{side}"), f"min_phi_{side}")
        except Bad as exc:
            out.append(str(exc))
            continue
        if stated != Fraction(float(a.min())):
            out.append(f"min_phi_{side} is not the minimum of the replayed features")
    return out


# ---------------------------------------------------------------- every product

#: largest number of pairs decided exactly (Fractions) when the float filter cannot decide them
MAX_EXACT_PAIRS = 4096


def all_products_problems(ev: dict[str, Any], features: dict[str, np.ndarray],
                          rows: int = 256) -> list[str] | None:
    """``<phi_q(x), phi_k(z)> >= 0`` on every pair, re-derived from the replayed
    features: each block of products ``Q K^T`` is enclosed by the kernel's rigorous
    float product (midpoint ``P``, radius ``E``); pairs the enclosure cannot decide
    are decided exactly (at most :data:`MAX_EXACT_PAIRS`, else None: the summary
    stays trusted). Problems: a negative product, or ``num_checked`` not ``K^2``."""
    Q, K = features["phi_q"].astype(np.float64), features["phi_k"].astype(np.float64)
    n = Q.shape[0]
    if ev.get("num_checked") != n * K.shape[0]:
        return [f"num_checked is not the {n * K.shape[0]} pairs of the replayed features"]
    unsure: list[tuple[int, int]] = []
    for a in range(0, n, rows):
        P, E = product_enclosure(Q[a:a + rows], K)
        if np.any(P + E < 0):
            i, j = np.argwhere(P + E < 0)[0]
            return [f"the replayed features give a negative product at pair ({a + i}, {j})"]
        for i, j in np.argwhere(P - E < 0):
            unsure.append((a + int(i), int(j)))
            if len(unsure) > MAX_EXACT_PAIRS:
                return None
    for i, j in unsure:
        if kernel_value(Q[i].tolist(), K[j].tolist()) < 0:
            return [f"the replayed features give a negative product at pair ({i}, {j})"]
    return []
