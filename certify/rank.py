"""Exact and certified approximate rank of a kernel: ``python -m certify.rank SOURCE``.

Claims (evidence fields: :mod:`certify.checkers.rank`):

* ``exact_rank`` -- two-sided rank over Q of ``alpha`` on the token set
  (factor form through the exact Gram core, matrix form through a modular
  minor and an exact column-span witness); ``proved`` only when the bounds meet.
* ``eps_rank`` (``--eps``) -- ``k`` singular values ``> eps``: every matrix
  within ``eps`` in spectral norm has rank ``>= k`` (exact count on the core).
* ``code_rank`` (``--code``) -- Lemma 4 / Thm 5: the row-normalized
  ``B[S, U] = alpha(x_S, x_{U^c})`` over a constant-weight code has rank
  ``>= ceil(t^2 / ||C||_F^2)`` (per-pair Lambda).
* ``nonnegative`` (``--require-nonnegative``) -- ``alpha >= 0`` on the token
  set; a signed kernel is refused with exit code 3.

``--json`` prints one object with ``rank_lower``, ``rank_upper``, ``verdict``
and the certificate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from certify.certificate import Certificate, Claim, ClaimKind, Verdict, q_to_str, sha256_bytes
from certify import cli, limits, outputs
from certify.errors import InputError, UncertifiableError, run_command
from certify.kernel import Form, Kernel, load_kernel
from solvers import exact as ex
from solvers import spectral as sp

from certify.verify import TRUSTED_MIN_ENTRIES

#: entries of a matrix / feature pair embedded in a certificate: the checker's
#: threshold (below it, verify refuses trusted summaries), not a user setting
DEFAULT_EMBED_LIMIT = TRUSTED_MIN_ENTRIES
SPECTRAL_EXACT_LIMIT = 160          # matrix form: exact charpoly of A^T A up to this side
SIGNED_PRODUCT_LIMIT = 1 << 26      # signed factor kernels: K^2 products checked exactly


@dataclass(frozen=True)
class RankOptions:
    seed: int = 0
    max_primes: int = 4
    eps: Fraction | None = None
    code: np.ndarray | None = None          # (W, M) 0/1 words
    code_name: str | None = None
    require_nonnegative: bool = False
    embed_limit: int = DEFAULT_EMBED_LIMIT
    batch_size: int = 1 << 14
    enclosures: bool = True
    enclosure_prec: int = 64
    progress: bool = False                  # a bar over the token pass (stderr)


# ---------------------------------------------------------------- factor form: one pass over the tokens

@dataclass(frozen=True, eq=False)
class FactorSummary:
    """Exact summaries of ``PhiQ, PhiK`` from one batched pass (never ``K x K``)."""

    num_tokens: int
    r: int
    dtype: str
    gram_q: np.ndarray                # (r, r) Python ints; PhiQ^T PhiQ = gram_q 2^eq
    eq: int
    gram_k: np.ndarray
    ek: int
    sha_q: str                        # sha256 of PhiQ (K, r) bytes, row-major, little-endian
    sha_k: str
    min_q: Fraction
    min_k: Fraction
    phi_q: np.ndarray | None          # stored features (small token sets), else None
    phi_k: np.ndarray | None
    seconds: float


def _gram_shard(kernel: Kernel, start: int, stop: int, batch_size: int):
    """Exact Grams of ``PhiQ, PhiK`` over tokens ``start..stop-1`` (one task)."""
    accq, acck = ex.GramAccumulator(int(kernel.rank)), ex.GramAccumulator(int(kernel.rank))
    for a in range(start, stop, batch_size):
        q, k = kernel.features_at(kernel.token_batch(a, min(stop, a + batch_size)))
        accq.add(q)
        acck.add(k)
    return accq.result(), acck.result(), accq.rows


def _sum_pow2(parts) -> tuple[np.ndarray, int]:
    """Exact sum of ``G_i 2^e_i`` (object arrays), as ``G 2^e`` normalized."""
    tot, e0 = None, 0
    for G, e in parts:
        if not any(int(v) for v in G.ravel()):
            continue
        if tot is None:
            tot, e0 = G, e
        elif e >= e0:
            tot = tot + G * (1 << (e - e0))
        else:
            tot, e0 = tot * (1 << (e0 - e)) + G, e
    if tot is None:
        return parts[0][0] * 0, 0
    return ex.normalize_pow2(tot, e0)


def summarize_features(kernel: Kernel, *, batch_size: int = 1 << 14, keep_limit: int = 1 << 22,
                       engine=None, shards: int | None = None,
                       progress: bool = False) -> FactorSummary:
    """One pass over the tokens. With an ``engine`` on Ray (or ``shards`` given)
    the exact Gram products, the costly part, run as tasks over token blocks and
    are summed exactly (integer sums: the result does not depend on the split);
    this process still streams the features once for the hashes and minima."""
    t0 = time.perf_counter()
    if (engine is not None and engine.uses_ray) or shards:
        return _summarize_sharded(kernel, batch_size, keep_limit, engine, shards, t0)
    r = int(kernel.rank)
    accq, acck = ex.GramAccumulator(r), ex.GramAccumulator(r)
    keep = kernel.num_tokens * r <= keep_limit
    bar = None
    if progress and kernel.num_tokens > 4 * batch_size:     # long passes only
        from tqdm import tqdm
        bar = tqdm(total=kernel.num_tokens, desc="features", unit="tok", unit_scale=True,
                   file=sys.stderr, leave=False)
    try:
        dtype, hq, hk, mq, mk, qs, ks = _feature_pass(kernel, r, batch_size, keep, (accq, acck), bar)
    finally:
        if bar is not None:
            bar.close()
    if accq.rows != kernel.num_tokens:
        raise InputError(f"feature pass covered {accq.rows} of {kernel.num_tokens} tokens")
    gq, eq = accq.result()
    gk, ek = acck.result()
    return FactorSummary(kernel.num_tokens, r, dtype, gq, eq, gk, ek, hq.hexdigest(), hk.hexdigest(),
                         Fraction(float(mq)), Fraction(float(mk)),
                         np.concatenate(qs) if keep else None, np.concatenate(ks) if keep else None,
                         time.perf_counter() - t0)


def _feature_pass(kernel: Kernel, r: int, batch_size: int, keep: bool, accs=None, bar=None):
    """One streaming pass over the features: their dtype, sha256 hashers, exact
    minima and (when ``keep``) the rows; ``accs`` (two Gram accumulators) are fed
    on the way. Returns ``(dtype, hq, hk, min_q, min_k, qs, ks)``."""
    hq, hk = hashlib.sha256(), hashlib.sha256()
    mq = mk = None
    qs, ks = [], []
    dtype = None
    for q, k in kernel.feature_batches(batch_size):
        if bar is not None:
            bar.update(len(q))
        if q.shape[1] != r or k.shape[1] != r or len(q) != len(k):
            raise InputError(f"feature batch shapes {q.shape}, {k.shape} do not match rank {r}")
        dtype = dtype or q.dtype.name
        if q.dtype.name != dtype or k.dtype.name != dtype:
            raise InputError("PhiQ and PhiK must have one dtype")
        if accs is not None:
            accs[0].add(q)
            accs[1].add(k)
        hq.update(np.ascontiguousarray(q, dtype=q.dtype.newbyteorder("<")).tobytes())
        hk.update(np.ascontiguousarray(k, dtype=k.dtype.newbyteorder("<")).tobytes())
        mq = q.min() if mq is None else min(mq, q.min())
        mk = k.min() if mk is None else min(mk, k.min())
        if keep:
            qs.append(q)
            ks.append(k)
    return dtype, hq, hk, mq, mk, qs, ks


def _summarize_sharded(kernel, batch_size, keep_limit, engine, shards, t0) -> FactorSummary:
    r, K = int(kernel.rank), kernel.num_tokens
    n = shards or 4 * max(engine.workers, 1)
    step = -(-K // n)
    step = -(-step // batch_size) * batch_size
    tasks = [(kernel, a, min(K, a + step), batch_size) for a in range(0, K, step)]
    from certify.parallel import Engine
    runner = engine if engine is not None else Engine(1, progress=False)
    parts = runner.map(_gram_shard, tasks, label="gram shards")
    if sum(p[2] for p in parts) != K:
        raise InputError(f"feature pass covered {sum(p[2] for p in parts)} of {K} tokens")
    gq, eq = _sum_pow2([p[0] for p in parts])
    gk, ek = _sum_pow2([p[1] for p in parts])
    keep = K * r <= keep_limit
    dtype, hq, hk, mq, mk, qs, ks = _feature_pass(kernel, r, batch_size, keep)
    return FactorSummary(K, r, dtype, gq, eq, gk, ek, hq.hexdigest(), hk.hexdigest(),
                         Fraction(float(mq)), Fraction(float(mk)),
                         np.concatenate(qs) if keep else None, np.concatenate(ks) if keep else None,
                         time.perf_counter() - t0)


def _ints(a) -> list[list[int]]:
    return [[int(v) for v in row] for row in np.asarray(a).tolist()]


def _gram_evidence(s: FactorSummary) -> dict[str, Any]:
    return {"form": "factor", "num_tokens": s.num_tokens, "r": s.r,
            "features_sha256": {"phi_q": s.sha_q, "phi_k": s.sha_k, "dtype": s.dtype,
                                "layout": "row-major little-endian (K, r)"},
            "gram_q": _ints(s.gram_q), "gram_q_exponent": s.eq,
            "gram_k": _ints(s.gram_k), "gram_k_exponent": s.ek}


#: what a claim takes as stated when the features are too large to embed
#: (certify.checkers.rank documents and prints these as trusted)
TRUSTED_GRAMS = ["gram_q", "gram_k", "num_tokens"]


def _feature_evidence(s: FactorSummary, embed_limit: int, trusted: list[str]) -> dict[str, Any]:
    """The features themselves when small enough, else the list of fields the
    checker must take as stated (identified by ``features_sha256``)."""
    if s.phi_q is None or s.num_tokens * s.r > embed_limit:
        return {"trusted": list(trusted), "trusted_entries": s.num_tokens * s.r}
    dq, dk = ex.dyadic(s.phi_q), ex.dyadic(s.phi_k)
    return {"features": {"phi_q": dq.rows(), "phi_q_exponent": dq.exponent,
                         "phi_k": dk.rows(), "phi_k_exponent": dk.exponent}}


def _attempts_info(res: ex.ExactRank) -> dict[str, Any]:
    return {"prime_attempts": [[a.prime, a.rank_mod_p] for a in res.attempts]}


def exact_rank_factor_claim(kernel: Kernel, s: FactorSummary, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    res = ex.core_rank(ex.IntMatrix(ex._compact(s.gram_q)), ex.IntMatrix(ex._compact(s.gram_k)),
                       seed=opt.seed, max_primes=opt.max_primes)
    ev = {**_gram_evidence(s), **_feature_evidence(s, opt.embed_limit, TRUSTED_GRAMS),
          "prime": res.prime, "minor_rows": list(res.minor_rows), "minor_cols": list(res.minor_cols),
          "null_basis": [list(r) for r in res.null_basis] if res.null_basis else [],
          "null_prime": res.null_prime, "null_minor_rows": list(res.null_minor_rows),
          "null_minor_cols": list(res.null_minor_cols),
          "upper_witness": res.upper_witness, "rank_lower": res.lower, "rank_upper": res.upper}
    return Claim(ClaimKind.EXACT_RANK, None, res.verdict,
                 parameters=_params(kernel, opt), evidence=ev, info=_attempts_info(res),
                 method="factor form: exact Gram core rank(PhiQ PhiK^T) = rank(GQ GK); "
                        "lower: minor nonsingular mod p; upper: exact null-space basis of the core",
                 reason=res.reason,
                 timings={"features": s.seconds, "rank": time.perf_counter() - t0})


def _params(kernel: Kernel, opt: RankOptions) -> dict[str, Any]:
    return {"token_set": kernel.token_set, "shape": list(kernel.shape), "form": kernel.form.value,
            "source": kernel.provenance.source,
            "source_sha256": kernel.provenance.source_sha256, "adapter": kernel.provenance.adapter,
            "dtype": kernel.provenance.dtype}


def _source_params(kernel: Kernel) -> dict[str, Any]:
    """What every claim about a kernel names, so that verify binds it to its source."""
    return {"token_set": kernel.token_set, "source": kernel.provenance.source,
            "source_sha256": kernel.provenance.source_sha256, "adapter": kernel.provenance.adapter}


# ---------------------------------------------------------------- matrix form

def integer_matrix(kernel: Kernel) -> ex.IntMatrix:
    if kernel.matrix is not None:
        return ex.dyadic(kernel.matrix, "kernel matrix")
    return ex.rational_rows([list(r) for r in kernel.rational], "kernel matrix")


def matrix_sha256(N: ex.IntMatrix) -> str:
    """sha256 of the exact kernel matrix: the canonical JSON of its scale and a
    newline, then the integer rows as int64 little-endian bytes when they fit,
    else their compact JSON (the checker recomputes it the same way)."""
    head = (json.dumps(_scale_evidence(N), sort_keys=True, separators=(",", ":")) + "\n").encode()
    if N.values.dtype != object:
        return "int64:" + sha256_bytes(head + np.ascontiguousarray(N.values, dtype="<i8").tobytes())
    return "json:" + sha256_bytes(head + json.dumps(N.rows(), separators=(",", ":")).encode())


def _scale_evidence(N: ex.IntMatrix) -> dict[str, Any]:
    if N.row_den is not None:
        return {"kind": "row_denominators", "row_den": list(N.row_den)}
    return {"kind": "dyadic", "exponent": N.exponent}


def exact_rank_matrix_claim(kernel: Kernel, N: ex.IntMatrix, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    res = ex.exact_rank(N, seed=opt.seed, max_primes=opt.max_primes)
    ev = {"form": "matrix", "shape": list(N.shape), "scale": _scale_evidence(N),
          "matrix_sha256": matrix_sha256(N), "prime": res.prime,
          "minor_rows": list(res.minor_rows), "minor_cols": list(res.minor_cols),
          "upper_witness": res.upper_witness, "rank_lower": res.lower, "rank_upper": res.upper}
    if N.values.size <= opt.embed_limit:
        ev["matrix"] = N.rows()
    return Claim(ClaimKind.EXACT_RANK, None, res.verdict,
                 parameters=_params(kernel, opt), evidence=ev, info=_attempts_info(res),
                 method="matrix form: lossless integer matrix; lower: minor nonsingular mod p; "
                        "upper: exact column-span (null-space) witness of that minor",
                 reason=res.reason, timings={**res.timings, "total": time.perf_counter() - t0})


# ---------------------------------------------------------------- eps-rank

def eps_rank_factor_claim(kernel: Kernel, s: FactorSummary, eps: Fraction, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    GQ, GK = ex.fmpz_matrix(s.gram_q), ex.fmpz_matrix(s.gram_k)
    if not (sp.is_psd(GQ) and sp.is_psd(GK)):
        raise RuntimeError("internal error: Gram matrices are not PSD")
    res = sp.eps_rank_core(GQ * GK, s.eq + s.ek, eps, enclosures=opt.enclosures and s.r <= 128,
                           prec=opt.enclosure_prec)
    ev = {**_gram_evidence(s), **_feature_evidence(s, opt.embed_limit, TRUSTED_GRAMS),
          "eps": q_to_str(eps), "k": res.k, "exact": True,
          "sigma_sq_enclosures": [[q_to_str(lo), q_to_str(hi)] for lo, hi in res.sigma_sq_enclosures]}
    return Claim(ClaimKind.EPS_RANK, None, res.verdict,
                 parameters={"eps": q_to_str(eps), **_source_params(kernel)}, evidence=ev,
                 method=res.method,
                 timings={"eps_rank": time.perf_counter() - t0})


def _exact_rational_matrix(N: ex.IntMatrix):
    """The kernel matrix itself as an fmpq_mat (undoing the integer scaling)."""
    import flint
    A = flint.fmpq_mat(N.fmpz())
    if N.row_den is not None:
        for i, d in enumerate(N.row_den):
            for j in range(A.ncols()):
                A[i, j] = A[i, j] / d
    else:
        A = A * (flint.fmpq(2) ** N.exponent if N.exponent >= 0 else flint.fmpq(1, 2 ** -N.exponent))
    return A


def eps_rank_matrix_claim(kernel: Kernel, N: ex.IntMatrix, eps: Fraction, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    n1, n2 = N.shape
    ev: dict[str, Any] = {"form": "matrix", "shape": [n1, n2], "scale": _scale_evidence(N),
                          "matrix_sha256": matrix_sha256(N), "eps": q_to_str(eps)}
    if N.values.size <= opt.embed_limit:
        ev["matrix"] = N.rows()
    if min(n1, n2) <= SPECTRAL_EXACT_LIMIT:
        A = _exact_rational_matrix(N)
        G = A.transpose() * A if n2 <= n1 else A * A.transpose()
        k = sp.count_eigenvalues_above(G, eps * eps)
        res = sp.EpsRank(k=k, eps=eps, exact=True, method="descartes_charpoly_gram", verdict=Verdict.PROVED)
        ev.update({"k": k, "exact": True, "method": "gram"})
    else:
        if N.row_den is not None:
            ev["method"] = "none"
            ev.update({"k": 0, "exact": False})
            return Claim(ClaimKind.EPS_RANK, None, Verdict.UNKNOWN,
                         parameters={"eps": q_to_str(eps), **_source_params(kernel)}, evidence=ev,
                         method="none",
                         reason=f"rational matrix larger than {SPECTRAL_EXACT_LIMIT}: no certified method")
        res, Y = sp.eps_rank_projection(np.asarray(N.values), N.exponent, eps)
        ev.update({"k": res.k, "exact": False, "method": "projection"})
        if Y is not None and Y.values.size <= opt.embed_limit:
            ev.update({"witness_y": Y.rows(), "witness_y_exponent": Y.exponent})
    return Claim(ClaimKind.EPS_RANK, None, res.verdict,
                 parameters={"eps": q_to_str(eps), **_source_params(kernel)},
                 evidence=ev, method=res.method, reason=res.reason,
                 timings={"eps_rank": time.perf_counter() - t0})


# ---------------------------------------------------------------- code rank (Lemma 4 / Thm 5)

def code_rank_claim(kernel: Kernel, words: np.ndarray, name: str | None, opt: RankOptions,
                    summary: FactorSummary | None = None) -> Claim:
    from certify.codes import as_words
    t0 = time.perf_counter()
    W = as_words(words)
    if kernel.m != W.shape[1]:
        raise InputError(f"the code has {W.shape[1]}-bit words; the kernel reads m = {kernel.m}")
    comp = (1 - W).astype(np.uint8)
    ev: dict[str, Any] = {"words": ["".join(map(str, w)) for w in W.tolist()]}
    if kernel.form is Form.FACTOR:
        fq, _ = kernel.features_at(W)            # phiQ(x_S)
        _, fk = kernel.features_at(comp)         # phiK(x_{U^c})
        dq, dk = ex.dyadic(fq), ex.dyadic(fk)
        prod = ex.exact_products(dq, dk)
        scale = Fraction(2) ** (dq.exponent + dk.exponent)
        B = [[Fraction(int(v)) * scale for v in row] for row in prod]
        ev.update({"query_features": dq.rows(), "query_exponent": dq.exponent,
                   "key_features": dk.rows(), "key_exponent": dk.exponent})
        trusted = ["query_features", "key_features"]
        located = None                  # where the word rows sit among the embedded features
        if summary is not None and kernel.tokens is not None and kernel.token_set != f"cube:{W.shape[1]}":
            try:
                located = (kernel.token_rows(W), kernel.token_rows(comp))
            except InputError:          # a word or complement is not one of the tokens
                located = None
        if summary is None:             # no pass over the token set: rows taken as stated
            ev["trusted"] = trusted
        else:
            ev["features_sha256"] = _gram_evidence(summary)["features_sha256"]
            if kernel.token_set == f"cube:{W.shape[1]}" or located is not None:
                ev.update(_feature_evidence(summary, opt.embed_limit, trusted))
            else:
                ev["trusted"] = trusted
            if located is not None and "trusted" not in ev:
                ev["tokens"] = ["".join(map(str, t)) for t in kernel.tokens.tolist()]
                ev["word_rows"] = [[int(a), int(b)] for a, b in zip(*located)]
    else:
        rows, cols = kernel.token_rows(W), kernel.token_rows(comp)
        if kernel.rational is not None:
            B = [[kernel.rational[i][j] for j in cols] for i in rows]
        else:
            B = [[Fraction(float(kernel.matrix[i, j])) if kernel.matrix.dtype.kind == "f"
                  else Fraction(int(kernel.matrix[i, j])) for j in cols] for i in rows]
        ev["B"] = [[q_to_str(v) for v in row] for row in B]
        ev["trusted"] = ["B"]
    b = sp.unit_diagonal_rank_bound(B)
    ev.update({"t": b.t, "kept": list(b.kept), "frobenius_sq": q_to_str(b.frobenius_sq),
               "bound": q_to_str(b.bound), "rank_lower": b.rank_lower,
               "min_lambda": None if b.min_lambda is None else q_to_str(b.min_lambda)})
    verdict, reason = Verdict.PROVED, None
    if b.t == 0:
        verdict, reason = Verdict.UNKNOWN, "every diagonal entry alpha(x_S, x_(S^c)) is zero"
    return Claim(ClaimKind.CODE_RANK, None, verdict,
                 parameters={"code": name, "num_words": int(len(W)), "M": int(W.shape[1]),
                             **_source_params(kernel)},
                 evidence=ev, method="Lemma 4 with per-pair Lambda_SU = |B_SS / B_SU| (trace/nuclear/Frobenius)",
                 reason=reason, timings={"code_rank": time.perf_counter() - t0})


# ---------------------------------------------------------------- nonnegativity

def nonnegative_claim_factor(kernel: Kernel, s: FactorSummary, opt: RankOptions) -> Claim:
    base = {"form": "factor", "features_sha256": _gram_evidence(s)["features_sha256"]}
    stmt = None                              # rendered from the parameters
    params = _source_params(kernel)
    if s.min_q >= 0 and s.min_k >= 0:
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.PROVED, parameters=params,
                     evidence={**base, **_feature_evidence(s, opt.embed_limit, ["min_phi_q", "min_phi_k"]),
                               "method": "features_nonnegative",
                               "min_phi_q": q_to_str(s.min_q), "min_phi_k": q_to_str(s.min_k)},
                     method="every feature is >= 0 (exact minimum over all tokens)")
    K = kernel.num_tokens
    if K * K > SIGNED_PRODUCT_LIMIT:
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.UNKNOWN, parameters=params, evidence={**base, "method": "none"},
                     method="signed features", reason=f"signed features on {K} tokens: {K}^2 products "
                     f"exceed the exact-check limit {SIGNED_PRODUCT_LIMIT}")
    q = s.phi_q if s.phi_q is not None else np.concatenate([b[0] for b in kernel.feature_batches()])
    k = s.phi_k if s.phi_k is not None else np.concatenate([b[1] for b in kernel.feature_batches()])
    neg, exact_checked = _find_negative(q, k)
    if neg is None:
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.PROVED, parameters=params,
                     evidence={**base, **_feature_evidence(s, opt.embed_limit, ["all_products"]),
                               "method": "all_products", "num_checked": K * K},
                     info={"pairs_summed_exactly": exact_checked},
                     method="every product: float64 with the rigorous bound gamma_r sum |q_i k_i|; "
                            "pairs the bound does not decide summed exactly")
    i, j, val = neg
    dq, dk = ex.dyadic(q[i:i + 1]), ex.dyadic(k[j:j + 1])
    ev = {**base, **_feature_evidence(s, opt.embed_limit, ["phi_q_row", "phi_k_row"]),
          "method": "counterexample", "pair": [int(i), int(j)], "value": q_to_str(val),
          "phi_q_row": dq.rows()[0], "phi_q_exponent": dq.exponent,
          "phi_k_row": dk.rows()[0], "phi_k_exponent": dk.exponent}
    return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.REFUTED, parameters=params, evidence=ev,
                 method="exact counterexample", reason=f"alpha(x_{i}, x_{j}) = {float(val):.6g} < 0")


def _exact_dot(a: np.ndarray, b: np.ndarray) -> Fraction:
    return sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b)), Fraction(0))


def _find_negative(q: np.ndarray, k: np.ndarray, block: int = 512):
    """A pair with ``<q_i, k_j> < 0`` (exact) or None, and how many pairs were
    summed exactly. Float64 products with the bound
    ``|fl(s) - s| <= gamma_r sum |q_i k_i|`` (``gamma_r = r u / (1 - r u)``, any
    summation order, plus an underflow margin): a pair with ``fl(s) - bound >= 0``
    is nonnegative; every other pair is summed exactly."""
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    r = q.shape[1]
    u = 2.0 ** -53
    gamma = (r * u) / (1 - r * u) * (1 + 8 * r * u)
    aq, ak = np.abs(q64), np.abs(k64)
    exact_checked = 0
    for s in range(0, len(q64), block):
        P = q64[s:s + block] @ k64.T
        E = gamma * (aq[s:s + block] @ ak.T) + 1e-300
        amb = np.argwhere(P - E < 0)
        amb = amb[np.argsort(P[amb[:, 0], amb[:, 1]])] if len(amb) else amb
        for a, b in amb:
            exact_checked += 1
            v = _exact_dot(q[s + a], k[b])
            if v < 0:
                return (s + int(a), int(b), v), exact_checked
    return None, exact_checked


def nonnegative_claim_matrix(kernel: Kernel, N: ex.IntMatrix, opt: RankOptions) -> Claim:
    vals = N.values
    if vals.dtype == object:
        flat = [int(v) for v in vals.ravel()]
        idx = flat.index(min(flat))                 # first minimum, as np.argmin
        mn = flat[idx]
    else:
        idx = int(np.argmin(vals))
        mn = int(vals.ravel()[idx])
    i, j = divmod(idx, vals.shape[1])
    ev = {"form": "matrix", "method": "entries", "shape": list(N.shape), "scale": _scale_evidence(N),
          "matrix_sha256": matrix_sha256(N), "argmin": [i, j], "min_sign": (mn > 0) - (mn < 0)}
    if N.values.size <= opt.embed_limit:
        ev["matrix"] = N.rows()
    stmt, params = None, _source_params(kernel)
    if mn < 0:
        return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.REFUTED, parameters=params, evidence=ev, method="exact entry",
                     reason=f"entry ({i}, {j}) is negative")
    return Claim(ClaimKind.NONNEGATIVE, stmt, Verdict.PROVED, parameters=params, evidence=ev, method="exact entries")


# ---------------------------------------------------------------- front end

@dataclass(frozen=True)
class RankReport:
    certificate: Certificate
    rank_lower: int
    rank_upper: int
    verdict: Verdict


def certify_rank(kernel: Kernel, opt: RankOptions = RankOptions(), engine=None) -> RankReport:
    """All requested claims for ``kernel``; a signed kernel under
    ``require_nonnegative`` raises :class:`UncertifiableError`. ``engine``
    (:mod:`certify.parallel`) shards the factor-form Gram pass."""
    claims: list[Claim] = []
    if kernel.form is Form.FACTOR:
        s = summarize_features(kernel, batch_size=opt.batch_size,
                               keep_limit=max(opt.embed_limit, 1 << 22), engine=engine,
                               progress=opt.progress)
        if opt.require_nonnegative:
            claims.append(_require(nonnegative_claim_factor(kernel, s, opt)))
        rank_claim = exact_rank_factor_claim(kernel, s, opt)
        claims.insert(0, rank_claim)
        if opt.eps is not None:
            claims.append(eps_rank_factor_claim(kernel, s, opt.eps, opt))
    else:
        N = integer_matrix(kernel)
        if opt.require_nonnegative:
            claims.append(_require(nonnegative_claim_matrix(kernel, N, opt)))
        rank_claim = exact_rank_matrix_claim(kernel, N, opt)
        claims.insert(0, rank_claim)
        if opt.eps is not None:
            claims.append(eps_rank_matrix_claim(kernel, N, opt.eps, opt))
    if opt.code is not None:
        claims.append(code_rank_claim(kernel, opt.code, opt.code_name, opt,
                                      summary=s if kernel.form is Form.FACTOR else None))
    claims = share_features(claims)
    prov = kernel.provenance
    inputs = {prov.source: prov.source_sha256} if prov.source_sha256 else {}
    cert = Certificate(claims=claims, inputs=inputs, seeds={"primes": opt.seed})
    ev = rank_claim.evidence
    return RankReport(cert, int(ev["rank_lower"]), int(ev["rank_upper"]), rank_claim.verdict)


def share_features(claims: list[Claim]) -> list[Claim]:
    """Embed the features once: a later claim with the same embedded features
    refers to the first one's (``features_claim``, its index in the certificate)."""
    import dataclasses
    out: list[Claim] = []
    first: tuple[int, Any] | None = None
    for c in claims:
        feats = c.evidence.get("features")
        if feats is not None and first is None:
            first = (len(out), feats)
        elif feats is not None and feats == first[1]:
            ev = {k: v for k, v in c.evidence.items() if k != "features"}
            ev["features_claim"] = first[0]
            c = dataclasses.replace(c, evidence=ev)
        out.append(c)
    return out


def _require(claim: Claim) -> Claim:
    if claim.verdict is Verdict.REFUTED:
        raise UncertifiableError(f"nonnegativity required but the kernel is signed: {claim.reason}")
    if claim.verdict is not Verdict.PROVED:
        raise UncertifiableError(f"nonnegativity required but not certifiable: {claim.reason}")
    return claim


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="certify rank", description='Exact two-sided rank (modular minor + exact span or null-space witness) and certified approximate rank of a kernel; optional Lemma 4 / Thm 5 code-rank and nonnegativity claims. Exit 0 when every claim is proved.')
    p.add_argument("source", help="kernel file, matrix file, models/ checkpoint, or state dict "
                   "(with --spec); resolved as given, then a folder with a config and "
                   "safetensors, then with a known suffix (.json, .safetensors, .npz, .npy, .csv)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tokens", help="token set: cube:M")
    g.add_argument("--family", help="token set: a family's tokens (name or file)")
    p.add_argument("--spec", help="adapter spec (JSON) for a third-party checkpoint")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--out", metavar="CERT", help="write the certificate here; " + cli.OUT_FILE_HELP)
    p.add_argument("--eps", help="eps-rank threshold (exact: '1/1000', '0.001'; > 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random primes")
    p.add_argument("--max-primes", type=int, default=4,
                   help="random primes tried for the modular rank (1..64, default 4)")
    p.add_argument("--code", help="code for the Lemma 4 claim: 'paper-5.1', a .json list of "
                                  "0/1 strings, or a .npy (W, M) array")
    p.add_argument("--require-nonnegative", action="store_true",
                   help="certify alpha >= 0; a signed kernel exits with code 3")
    p.add_argument("--batch-size", type=int, default=1 << 14,
                   help="tokens per feature batch (1..2^20, default 2^14)")
    cli.add_progress(p)
    from certify.parallel import add_arguments
    add_arguments(p)                                   # sharded factor-form Gram pass
    return p


def parse_eps(text: str) -> Fraction:
    return limits.parse_eps(text, "--eps")


def load_code(spec: str) -> tuple[np.ndarray, str]:
    from pathlib import Path
    if spec == "paper-5.1":
        from certify.codes import paper51_code
        return paper51_code(), "paper-5.1"
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"unknown code {spec!r}: not 'paper-5.1' and not a file")
    if path.suffix == ".npy":
        from certify.kernel import _np_load
        return _np_load(path), path.name
    if path.suffix == ".json":
        from certify.kernel import _json, _token_strings
        obj = _json(path)
        words = obj.get("words") if isinstance(obj, dict) else obj
        return _token_strings(words), path.name
    raise InputError(f"{path.name}: a code is a .json list of 0/1 strings or a .npy array")


def main(argv: Sequence[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if not 1 <= a.max_primes <= 64 or not 1 <= a.batch_size <= 1 << 20:
        raise InputError("--max-primes must be in 1..64, --batch-size in 1..2^20")
    eps = parse_eps(a.eps) if a.eps else None
    if a.out:
        outputs.check_out_file(a.out)
    tokens = a.tokens or a.family
    if a.tokens:
        from certify.kernel import parse_tokens
        parse_tokens(a.tokens)                  # cube:M bounds, before any model is loaded
    source = a.source if a.spec else str(cli.resolve_source(a.source))
    if not a.spec:
        cli.precheck_checkpoint(source)
    kernel = load_kernel(source, tokens=tokens, spec=a.spec)
    code, code_name = load_code(a.code) if a.code else (None, None)
    opt = RankOptions(seed=a.seed, max_primes=a.max_primes, eps=eps,
                      code=code, code_name=code_name, require_nonnegative=a.require_nonnegative,
                      batch_size=a.batch_size, progress=cli.show_progress(a.no_progress))
    from certify.parallel import engine_from_args
    with engine_from_args(a, progress=False) as engine:
        rep = certify_rank(kernel, opt, engine=engine)
    cert = rep.certificate
    cert.command = ["certify", "rank", *(sys.argv[1:] if argv is None else list(argv))]
    if a.out:
        outputs.write_file(a.out, cert.dumps())
    for c in cert.claims:
        print(f"[{c.verdict.value}] {c.statement}" + (f" ({c.reason})" if c.reason else ""), file=sys.stderr)
    if a.json:
        print(json.dumps({"rank_lower": rep.rank_lower, "rank_upper": rep.rank_upper,
                          "verdict": rep.verdict.value, "form": kernel.form.value,
                          "token_set": kernel.token_set, "shape": list(kernel.shape),
                          "certificate": cert.to_json()}))
    return cert.exit_code()


if __name__ == "__main__":
    sys.exit(run_command("certify.rank", main))
