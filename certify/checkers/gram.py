"""Lemma summaries of large float feature matrices re-derived from replayed
features: the stated Grams by the kernel's random-product identity test
(:func:`certify.checkers.kernel.gram.gram_identity`, error at most 2^-128), the quadratic-kernel
summaries by the kernel's rigorous float bounds
(:func:`certify.checkers.kernel.inertia.quadratic_summaries`), the minima,
and every product's sign by the kernel's enclosed product
(:func:`certify.checkers.kernel.inertia.negative_pair`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

import numpy as np

from certify.checkers import scratch
from certify.checkers.kernel.gram import GramError, gram_identity
from certify.checkers.kernel.inertia import negative_pair, quadratic_summaries
from certify.checkers.kinds import trusted_table

__all__ = ["GramError", "gram_identity", "gram_problems", "read_features", "replayed_gram", "summary_problems",
           "write_features"]


def write_features(path: str, phi_q: list[np.ndarray], phi_k: list[np.ndarray]) -> None:
    """A replay's features file: two ``.npy`` records back to back, ``phi_q`` then
    ``phi_k``, each the row batches given, stacked (no zip, no checksum pass, no
    concatenated copy; written to a temporary name, then moved into place)."""
    import os
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        for parts in (phi_q, phi_k):
            parts = [np.ascontiguousarray(b) for b in parts]
            np.lib.format.write_array_header_2_0(f, {
                "descr": np.lib.format.dtype_to_descr(parts[0].dtype), "fortran_order": False,
                "shape": (sum(len(b) for b in parts), *parts[0].shape[1:])})
            for b in parts:
                f.write(b.data.cast("B"))
    os.replace(tmp, path)


def read_features(path: str, expect: tuple[int, int] | None = None) -> dict[str, Any]:
    """``{"phi_q": array, "phi_k": array}`` from a replay's features file
    (:func:`write_features`; no pickles), each checked to be a finite 2-d float array of
    the expected shape, and nothing after them."""
    try:
        with open(path, "rb") as f:
            out = {k: np.lib.format.read_array(f, allow_pickle=False) for k in ("phi_q", "phi_k")}
            if f.read(1):
                raise ValueError("bytes after the two arrays")
    except (OSError, ValueError, EOFError) as exc:
        raise GramError(f"{path}: not a features file ({exc})") from None
    for k, a in out.items():
        if a.ndim != 2 or a.dtype.kind != "f" or (expect is not None and tuple(a.shape) != tuple(expect)):
            raise GramError(f"{path}: {k} is {a.dtype} {a.shape}, expected float {expect}")
    return out


def _tag(arr: np.ndarray, sha: str | None = None) -> tuple[str, tuple[int, ...], str]:
    """The complete content of ``arr`` (dtype, shape, sha256 of its bytes in its dtype,
    little-endian, row-major: :func:`_features_sha`), ``sha`` when the caller has it."""
    a = np.ascontiguousarray(arr)
    return (a.dtype.newbyteorder("<").str, tuple(int(n) for n in a.shape),
            sha if sha is not None else _features_sha(a, a.dtype.name))


def _is_gram_of(arr: np.ndarray, W: list[list[int]], we: int, sha: str | None = None) -> bool:
    """``arr^T arr = W 2^we``, by the kernel's random-product test (error at most 2^-128,
    :func:`certify.checkers.kernel.gram.gram_identity`), once per features and stated Gram
    within one certificate's check (:mod:`certify.checkers.scratch`; the claims of one head,
    its exact and eps rank, share the test)."""
    key = ("gram_of", _tag(arr, sha), scratch.content_key([W, we]))
    s = scratch.current()
    if s is not None and s.lookup(key):
        return True
    if not gram_identity(np.ascontiguousarray(arr), W, we):
        return False
    if s is not None:
        s.put(key, True)
    return True


def gram_problems(claim: dict[str, Any], features: dict[str, np.ndarray]) -> list[str]:
    """What is wrong with a factor-form claim's Gram summaries (``num_tokens``,
    ``gram_q``/``gram_q_exponent``, ``gram_k``/``gram_k_exponent``) against the
    replayed features themselves (:func:`read_features`), by the kernel's identity
    test; ``[]`` means those summaries are re-derived (no longer ``trusted:``). The
    caller has matched the features' sha256 with ``features_sha256``."""
    ev = claim.get("evidence") or {}
    q, k = features["phi_q"], features["phi_k"]
    out = []
    if ev.get("num_tokens") != q.shape[0] or q.shape != k.shape:
        out.append(f"the replayed features have {q.shape[0]} tokens, the evidence {ev.get('num_tokens')}")
        return out
    shas: Any = features.get("sha256") or {}          # {phi_q, phi_k, dtype} of the file read
    for name, arr in (("q", q), ("k", k)):
        want, we = ev.get(f"gram_{name}"), ev.get(f"gram_{name}_exponent")
        if not isinstance(want, list) or not isinstance(we, int) or isinstance(we, bool):
            out.append(f"gram_{name} is not an integer matrix with an exponent")
            continue
        try:
            W = [[int(v) for v in row] for row in want]
        except (TypeError, ValueError):
            out.append(f"gram_{name} is not an integer matrix")
            continue
        if not _is_gram_of(arr, W, we, shas.get(f"phi_{name}") if arr.dtype.name == shas.get("dtype") else None):
            out.append(f"gram_{name} 2^gram_{name}_exponent is not PhiK^T PhiK of the replayed features"
                       if name == "k" else "gram_q 2^gram_q_exponent is not PhiQ^T PhiQ of the replayed features")
    return out


def replayed_gram(fs: Any, side: str, W: Any, we: Any, shape: Any = None) -> bool:
    """Whether ``W 2^we`` was found equal (:func:`_is_gram_of`), in this certificate's
    check, to the Gram ``Phi^T Phi`` of replayed features of shape ``shape`` whose sha256 in
    their dtype is ``fs["phi_" + side]``, ``fs["dtype"]``: then it is positive semidefinite
    by construction. False when no such features were replayed in this check (the caller
    tests the stated Gram itself)."""
    if not isinstance(fs, dict) or not isinstance(fs.get("dtype"), str) or not isinstance(we, int) \
            or isinstance(we, bool) or not isinstance(W, list) or not isinstance(fs.get("phi_" + side), str):
        return False
    s = scratch.current()
    if s is None or shape is None:
        return False
    try:
        tag = np.dtype(fs["dtype"]).newbyteorder("<").str
        dims = tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        return False
    return bool(s.lookup(("gram_of", (tag, dims, fs["phi_" + side]), scratch.content_key([W, we]))))


# ---------------------------------------------------------------- the quadratic-kernel lemma's summaries

def quadratic_problems(ev: dict[str, Any], features: dict[str, np.ndarray]) -> list[str]:
    """The quadratic-kernel summaries of a ``nonnegative`` claim (``min_const_*``,
    ``max_linear_sq_*``, ``max_quadratic_sq_*``, ``max_residual_sq_*``, ``r``)
    re-derived from the replayed features: the minima must be equal (exact float
    comparisons), the stated upper bounds at least the kernel's rigorous upper
    bounds (:func:`certify.checkers.kernel.inertia.quadratic_summaries`)."""
    problems: list[str] = []
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
    if any(Fraction(float(val)) != val for val in (gd, go)):
        return ["g_diag / g_off are not doubles (exact dyadics expected)"]
    for side in ("q", "k"):
        try:
            X = features[f"phi_{side}"].astype(np.float64, copy=False)     # read only: no copy
            got = quadratic_summaries(X, 0, c, lin, quad, gd, go)
        except (ValueError, OverflowError) as exc:             # non-finite features, |g| beyond the bounds
            return problems + [f"the quadratic-kernel summaries of phi_{side} cannot be bounded: {exc}"]
        stated = {k: Fraction(str(ev[f"{k}_{side}"])) for k in got}
        if stated["min_const"] != got["min_const"]:
            problems.append(f"min_const_{side} is not the replayed constant feature's minimum")
        for key in ("max_linear_sq", "max_quadratic_sq", "max_residual_sq"):
            if stated[key] < got[key]:
                problems.append(f"{key}_{side} is below a rigorous bound of the replayed features' maximum")
    return problems


def _features_sha(a: np.ndarray, dtype: str) -> str:
    """sha256 of ``a`` in ``dtype``, little-endian, row-major (hashed in place when it
    already is)."""
    import hashlib
    arr = np.ascontiguousarray(a.astype(dtype, copy=False), dtype=np.dtype(dtype).newbyteorder("<"))
    return hashlib.sha256(arr.data).hexdigest()            # C-contiguous: its bytes in order


def _read_hashed(path: str, dtype: str) -> tuple[dict[str, Any], tuple[str, str]]:
    """The arrays of the features file ``path`` and their sha256 in ``dtype``, read and
    hashed once within one certificate's check while the file is unchanged (the claims of
    one head, its exact rank, eps rank and nonnegativity, read its file once). Each claim
    still compares the hashes with its own ``features_sha256``."""
    import os

    def read() -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
        feats = read_features(path)
        for a in feats.values():
            a.setflags(write=False)                      # shared by the claims that read it
        return feats, {}

    st = os.stat(path)
    key = ("features_file", os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
           st.st_ctime_ns)
    feats, shas = scratch.recent(key, read)
    if dtype not in shas:
        shas[dtype] = (_features_sha(feats["phi_q"], dtype), _features_sha(feats["phi_k"], dtype))
    return feats, shas[dtype]


def _summary_check(claim: dict[str, Any]) -> Callable[..., list[str] | None] | None:
    """The recomputation of ``claim``'s trusted summaries from features, or None (none here)."""
    ev = claim.get("evidence") or {}
    kind, trusted, method = claim.get("kind"), ev.get("trusted"), ev.get("method")
    table = trusted_table()             # (kind, form or method) -> the fields it may trust
    if kind in ("exact_rank", "eps_rank") and trusted == table[str(kind), "factor"]:
        return gram_problems
    if kind == "nonnegative" and method == "quadratic_kernel":
        return quadratic_problems
    if kind == "nonnegative" and method == "all_products" and trusted == table[kind, method]:
        return all_products_problems
    if kind == "nonnegative" and method == "features_nonnegative" and trusted == table[kind, method]:
        return min_phi_problems
    return None


def source_summary_problems(claim: dict[str, Any]) -> list[str] | None:
    """The trusted summaries of ``claim`` re-derived, as :func:`summary_problems` does, from the
    features of its present factor file, which binding read and found to hash to the claim's
    ``features_sha256`` in this certificate's check
    (:func:`certify.checkers.sources.source_features_key`); None when no such features were read
    or the summaries have no recomputation here (they stay trusted)."""
    from certify.checkers.sources import source_features_key
    ev = claim.get("evidence") or {}
    fs, s, check = ev.get("features_sha256"), scratch.current(), _summary_check(claim)
    if s is None or check is None or not isinstance(fs, dict) or not isinstance(fs.get("dtype"), str) \
            or not isinstance(fs.get("phi_q"), str) or not isinstance(fs.get("phi_k"), str):
        return None
    feats = s.lookup(source_features_key(fs["dtype"], fs["phi_q"], fs["phi_k"]))
    if feats is None:
        return None
    feats = {**feats, "sha256": {"phi_q": fs["phi_q"], "phi_k": fs["phi_k"], "dtype": fs["dtype"]}}
    return check(claim if check is gram_problems else ev, feats)


def summary_problems(claim: dict[str, Any], path: str) -> list[str] | None:
    """The trusted summaries of ``claim`` re-derived from the replayed features in
    ``path``: ``[]`` (discharged), the problems found, or None when this claim's
    summaries have no recomputation here (they stay trusted). The file's arrays
    must hash to the claim's ``features_sha256`` (recomputed here)."""
    ev = claim.get("evidence") or {}
    fs = ev.get("features_sha256")
    check = _summary_check(claim)
    if check is None or not isinstance(fs, dict) or not isinstance(fs.get("dtype"), str):
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
    features by the kernel's enclosed product
    (:func:`certify.checkers.kernel.inertia.negative_pair`; at most
    :data:`MAX_EXACT_PAIRS` pairs decided exactly, else None: the summary stays
    trusted). Problems: a negative product, or ``num_checked`` not ``K^2``."""
    Q, K = features["phi_q"].astype(np.float64, copy=False), features["phi_k"].astype(np.float64, copy=False)
    n = Q.shape[0]
    if ev.get("num_checked") != n * K.shape[0]:
        return [f"num_checked is not the {n * K.shape[0]} pairs of the replayed features"]
    pair = negative_pair(Q, K, rows, MAX_EXACT_PAIRS)
    if pair is None:
        return None
    return [f"the replayed features give a negative product at pair ({pair[0]}, {pair[1]})"] if pair else []
