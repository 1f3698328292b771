"""Exact Gram matrices and lemma summaries of large float feature matrices (numpy only).

``exact_gram(X)`` returns ``(G, e)`` with ``X^T X = G 2^e`` exactly, for a
finite float64 (or float32) array ``X`` of shape ``(K, r)``; ``G`` is an
``r x r`` list of Python ints, normalized so that some entry is odd (or
``e = 0`` when ``G = 0``), the form of the certificates' ``gram_q`` /
``gram_q_exponent``. It is how the checker recomputes a kernel's Grams from
replayed features that are too large to embed (``K = 65,536``, ``r = 153``).

How, exactly:

1. Every entry is ``M 2^E`` with an integer ``|M| < 2^53`` (``frexp``,
   exact); with ``e0`` the least ``E`` over the nonzero entries,
   ``X = N 2^e0`` with integers ``N = M 2^(E - e0)`` of up to
   ``53 + max(E - e0)`` bits.
2. ``|N|`` is split into limbs of :data:`LIMB` bits, ``N = sign * sum_t L_t 2^(LIMB t)``
   with ``0 <= L_t < 2^LIMB``, computed from ``M`` and the shift by integer
   shifts and masks (int64, exact).
3. ``N^T N = sum_{s,t} 2^(LIMB (s+t)) (S L_s)^T (S L_t)`` (``S`` the signs). Each
   block product ``(S L_s)^T (S L_t)`` over :data:`BLOCK` rows is computed in
   float64 by numpy's ``@``: every term is an integer below ``2^(2 LIMB)`` and
   every partial sum, in whatever order the BLAS adds (and with or without
   FMA), is an integer below ``BLOCK 2^(2 LIMB) <= 2^52``, so each is exact and
   the product is the exact integer matrix, on every machine. The limbs are
   stacked side by side so that one product per block gives every ``(s, t)``.
4. The block results (int64, exact) are summed and combined with the limb
   weights in Python integers.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

#: bits per limb and rows per block: BLOCK * 2^(2 LIMB) <= 2^52 keeps every float64 partial sum exact
LIMB = 20
BLOCK = 1 << 12


def _check_block() -> None:
    if BLOCK * (1 << (2 * LIMB)) > 1 << 52:
        raise GramError("BLOCK * 2^(2 LIMB) must be at most 2^52")


class GramError(ValueError):
    """The features are not a finite 2-d float array."""


def dyadic_parts(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(M, E)`` int64 arrays with ``X = M 2^E`` exactly, ``|M| < 2^53`` (zeros: ``M = 0``)."""
    if X.ndim != 2 or X.dtype.kind != "f":
        raise GramError(f"expected a 2-d float array, got {X.dtype} of shape {X.shape}")
    x = X.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise GramError("the features have NaN or Inf entries")
    m, e = np.frexp(x)                                   # x = m 2^e, 0.5 <= |m| < 1 (exact)
    M = np.ldexp(m, 53).astype(np.int64)                 # exact: m has at most 53 significant bits
    return M, e.astype(np.int64) - 53


def limbs(X: np.ndarray) -> tuple[list[np.ndarray], int]:
    """``([S L_0, S L_1, ...], e0)``: float64 arrays of signed limbs with
    ``X = sum_t (S L_t) 2^(LIMB t + e0)`` exactly (module docstring)."""
    M, E = dyadic_parts(X)
    nz = M != 0
    if not nz.any():
        return [], 0
    e0 = int(E[nz].min())
    shift = np.where(nz, E - e0, 0)                      # bit position of M's lowest bit in N
    A = np.abs(M)
    top = int((shift + 53).max())
    out = []
    mask = np.int64((1 << LIMB) - 1)
    sign = np.sign(M).astype(np.float64)
    for t in range(-(-top // LIMB)):
        lo = LIMB * t - shift                            # limb t holds bits lo .. lo+LIMB-1 of A
        k = np.clip(-lo, 0, LIMB)                        # lo < 0: the limb is (A << -lo) & mask
        below = (A & ((np.int64(1) << (LIMB - k)) - 1)) << k
        part = np.where(lo >= 0, (A >> np.clip(lo, 0, 63)) & mask, np.where(k < LIMB, below, 0))
        out.append(part.astype(np.float64) * sign)
    return out, e0


def exact_gram(X: np.ndarray) -> tuple[list[list[int]], int]:
    """``(G, e)`` with ``X^T X = G 2^e`` exactly (module docstring); ``G`` normalized
    (some entry odd) or all zero with ``e = 0``."""
    _check_block()
    L, e0 = limbs(np.asarray(X))
    r = X.shape[1]
    if not L:
        return [[0] * r for _ in range(r)], 0
    T = len(L)
    A = np.concatenate(L, axis=1)                        # (K, T r), exact small integers
    if -(-A.shape[0] // BLOCK) > 1 << 10:
        raise GramError(f"{A.shape[0]} rows: more than int64 accumulation of exact blocks allows")
    acc = np.zeros((T * r, T * r), dtype=np.int64)
    for a in range(0, A.shape[0], BLOCK):
        blk = A[a:a + BLOCK]
        acc += (blk.T @ blk).astype(np.int64)            # exact integers < 2^52; <= 2^10 blocks < 2^62
    G = [[0] * r for _ in range(r)]
    big = acc.tolist()
    for s in range(T):
        for t in range(T):
            w = 1 << (LIMB * (s + t))
            for i in range(r):
                row = big[s * r + i]
                Gi = G[i]
                for j in range(r):
                    v = row[t * r + j]
                    if v:
                        Gi[j] += v * w
    return _normalize(G, 2 * e0)


def _normalize(G: list[list[int]], e: int) -> tuple[list[list[int]], int]:
    nz = [abs(v) for row in G for v in row if v]
    if not nz:
        return [[0] * len(row) for row in G], 0
    g = 0
    for v in nz:
        g |= v
    k = (g & -g).bit_length() - 1                        # the common power of two
    if k:
        G = [[v >> k if v >= 0 else -((-v) >> k) for v in row] for row in G]
    return G, e + k


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
    for name, arr in (("q", q), ("k", k)):
        G, e = exact_gram(arr)
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


# ---------------------------------------------------------------- the quadratic-kernel lemma's summaries

U = 2.0 ** -53
TINY = 2.0 ** -1000


def _sum_sq_upper(X: np.ndarray) -> Any:
    """An exact rational upper bound of ``max_rows sum_j x_j^2`` for float64 rows:
    the squares and their sum (any order) round to nearest, so the exact sum is at
    most the computed one times ``1 + 2 (n + 1) u``, plus ``(n + 1) 2^-1074`` for
    underflow."""
    from fractions import Fraction
    n = X.shape[1]
    acc = X[:, 0] * X[:, 0]
    for j in range(1, n):
        acc = acc + X[:, j] * X[:, j]
    top = float(acc.max(initial=0.0))
    return Fraction(top) * (1 + Fraction(2 * (n + 1), 1 << 53)) + Fraction(n + 1, 1) * Fraction(1, 1 << 1074)


def quadratic_problems(ev: dict[str, Any], features: dict[str, np.ndarray]) -> list[str]:
    """The quadratic-kernel summaries of a ``nonnegative`` claim (``min_const_*``,
    ``max_linear_sq_*``, ``max_quadratic_sq_*``, ``max_residual_sq_*``, ``r``)
    re-derived from the replayed features: the minima must be equal (exact float
    comparisons), the stated upper bounds at least rigorous upper bounds computed
    here. The residual ``e = w - g_ij v_i v_j`` (``g`` exact dyadics) is bounded per
    entry by ``|fl(e)| + 8u (|fl(e)| + |fl(g fl(v_i v_j))|) + 2^-1000``: the product,
    the scaling and the subtraction each round by at most ``u`` relative (and
    ``2^-1074`` absolute), so the true residual is at most ``|fl(e)| (1 + 2u) +
    3u |fl(g p)|``, and rounding the bound itself loses less than the slack."""
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
        gp = gvec[None, :] * (X[:, pi] * X[:, pj])
        e = w - gp
        b = np.abs(e) + 8 * U * (np.abs(e) + np.abs(gp)) + TINY
        for key, arr in (("max_linear_sq", X[:, lin]), ("max_quadratic_sq", w), ("max_residual_sq", b)):
            if stated[key] < _sum_sq_upper(arr):
                problems.append(f"{key}_{side} is below a rigorous bound of the replayed features' maximum")
    return problems


def _features_sha(a: np.ndarray, dtype: str) -> str:
    import hashlib
    arr = np.ascontiguousarray(a.astype(dtype), dtype=np.dtype(dtype).newbyteorder("<"))
    return hashlib.sha256(arr.tobytes()).hexdigest()


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
        feats = read_features(path)
    except (GramError, OSError, ValueError) as exc:
        return [f"the replayed features cannot be read: {exc}"]
    if [_features_sha(feats["phi_q"], fs["dtype"]), _features_sha(feats["phi_k"], fs["dtype"])] != \
            [fs.get("phi_q"), fs.get("phi_k")]:
        return ["the replayed features file does not hash to features_sha256"]
    if feats["phi_q"].dtype != np.dtype(fs["dtype"]):
        return [f"the replayed features are {feats['phi_q'].dtype}, the claim's {fs['dtype']}"]
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
    features: each block of products ``P = Q K^T`` is computed in float64 (numpy's
    ``@``, any order, with or without FMA) together with ``A = |Q| |K|^T``; the
    exact product lies within ``2 (r + 2) u A + (r + 2) 2^-1070`` of ``P`` (the
    dot product's rounding, ``|fl(x) - x| <= gamma_r sum |q_i k_i|``, and the
    rounding of ``A`` itself, plus underflow). Pairs the bound cannot decide are
    decided exactly in Fractions (at most :data:`MAX_EXACT_PAIRS`, else None: the
    summary stays trusted). Problems: a negative product, or ``num_checked`` not
    ``K^2``."""
    from fractions import Fraction
    Q, K = features["phi_q"].astype(np.float64), features["phi_k"].astype(np.float64)
    n, r = Q.shape
    if ev.get("num_checked") != n * K.shape[0]:
        return [f"num_checked is not the {n * K.shape[0]} pairs of the replayed features"]
    AK = np.abs(K)
    slack = 2 * (r + 2) * U
    floor = (r + 2) * 2.0 ** -1070
    unsure: list[tuple[int, int]] = []
    for a in range(0, n, rows):
        P = Q[a:a + rows] @ K.T
        E = (np.abs(Q[a:a + rows]) @ AK.T) * slack + floor
        if np.any(P + E < 0):
            i, j = np.argwhere(P + E < 0)[0]
            return [f"the replayed features give a negative product at pair ({a + i}, {j})"]
        for i, j in np.argwhere(P - E < 0):
            unsure.append((a + int(i), int(j)))
            if len(unsure) > MAX_EXACT_PAIRS:
                return None
    for i, j in unsure:
        v = sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(Q[i], K[j])), Fraction(0))
        if v < 0:
            return [f"the replayed features give a negative product at pair ({i}, {j})"]
    return []
