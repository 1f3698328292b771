"""The ``exact_rank`` claim: rank over Q of alpha on the token set, two-sided.

Factor form through the exact Gram core (``rank(PhiQ PhiK^T) = rank(GQ GK)``);
matrix form through a modular minor (lower bound) and an exact column-span
witness (upper bound). ``proved`` only when the bounds meet.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from certify.checkers.rank.freivalds import shared_test
from certify.checkers.rank.span import bound_sq_shared, column_span_shared, pivot_rows_shared
from certify.core.certificate import Claim, ClaimKind
from certify.core.kernel import Kernel
from certify.rank.evidence import (
    TRUSTED_GRAMS,
    attempts_info,
    feature_evidence,
    freivalds_challenge,
    gram_evidence,
    matrix_sha256,
    rank_params,
    scale_evidence,
    token_evidence,
)
from certify.rank.options import RankOptions
from solvers import exact as ex

if TYPE_CHECKING:
    from certify.rank.summary import FactorSummary


def exact_rank_factor_claim(kernel: Kernel, s: FactorSummary, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    res = ex.core_rank(ex.IntMatrix(ex.compact(s.gram_q)), ex.IntMatrix(ex.compact(s.gram_k)),
                       seed=opt.seed, max_primes=opt.max_primes)
    ev = {**gram_evidence(s), **feature_evidence(s, opt.embed_limit, TRUSTED_GRAMS),
          "prime": res.prime, "minor_rows": list(res.minor_rows), "minor_cols": list(res.minor_cols),
          "null_basis": [list(r) for r in res.null_basis] if res.null_basis else [],
          "null_prime": res.null_prime, "null_minor_rows": list(res.null_minor_rows),
          "null_minor_cols": list(res.null_minor_cols),
          "upper_witness": res.upper_witness, "rank_lower": res.lower, "rank_upper": res.upper}
    return Claim(ClaimKind.EXACT_RANK, None, res.verdict,
                 parameters=rank_params(kernel, opt), evidence={**ev, **token_evidence(kernel)}, info=attempts_info(res),
                 method="factor form: exact Gram core rank(PhiQ PhiK^T) = rank(GQ GK); "
                        "lower: minor nonsingular mod p; upper: exact null-space basis of the core",
                 reason=res.reason,
                 timings={"features": s.seconds, "rank": time.perf_counter() - t0})


def exact_rank_matrix_claim(kernel: Kernel, N: ex.IntMatrix, opt: RankOptions) -> Claim:
    t0 = time.perf_counter()
    sha = matrix_sha256(N)
    params = rank_params(kernel, opt)
    fr_params = {**params, "upper_bound": "freivalds", "error_log2": opt.error_log2}
    tokens = token_evidence(kernel)

    def evidence(p: int | None, rows, cols, witness: str, lower: int, upper: int) -> dict:
        return {"form": "matrix", "shape": list(N.shape), "scale": scale_evidence(N),
                "matrix_sha256": sha, "prime": p, "minor_rows": list(rows), "minor_cols": list(cols),
                "upper_witness": witness, "rank_lower": lower, "rank_upper": upper, **tokens}

    def challenge(p: int, rows, cols) -> bytes:
        # the claim as it will read when the test passes (rank exactly len(rows))
        r = len(rows)
        return bytes.fromhex(freivalds_challenge(fr_params, evidence(p, rows, cols, "freivalds", r, r)))

    # the upper bound is the independent checker's column-span check or Freivalds test:
    # the certificate's own check run before writing (Certificate.self_check) then finds
    # it computed for the same bytes (keyed by sha, the hash of N.values, the array these
    # callbacks are handed) and does not repeat it; `certify verify` does
    res = ex.exact_rank(N, seed=opt.seed, max_primes=opt.max_primes, upper=opt.upper_bound,
                        challenge=challenge, error_log2=opt.error_log2,
                        exact_span=lambda V, R, C: column_span_shared(V, R, C, digest=sha),
                        freivalds_test=lambda V, R, C, *a: shared_test(V, R, C, *a, digest=sha),
                        minor=lambda V, p, r, more: pivot_rows_shared(V, p, r, digest=sha, more=more),
                        bound_sq=lambda V, R, C: bound_sq_shared(V, R, C, digest=sha))
    ev = evidence(res.prime, res.minor_rows, res.minor_cols, res.upper_witness, res.lower, res.upper)
    method = ("matrix form: lossless integer matrix; lower: minor nonsingular mod p; "
              "upper: exact column-span (null-space) witness of that minor")
    if res.upper_witness == "freivalds":
        assert res.prime is not None and res.freivalds is not None     # the test ran at that prime
        ev["freivalds"] = {"challenge": challenge(res.prime, res.minor_rows, res.minor_cols).hex(),
                           **res.freivalds}
        params = fr_params
        method = ("matrix form: lossless integer matrix; lower: minor nonsingular mod p; upper: "
                  "Freivalds test of the minor's column span (vectors and primes from the claim's "
                  f"sha256, Fiat-Shamir), error probability <= 2^-{opt.error_log2}")
    if "upper_auto" in res.details:              # --upper-bound auto: which proof, and why
        method += f"; {res.details['upper_auto']['why']}"
    if N.values.size <= opt.embed_limit:
        ev["matrix"] = N.rows()
    return Claim(ClaimKind.EXACT_RANK, None, res.verdict,
                 parameters=params, evidence=ev, info=attempts_info(res),
                 method=method, reason=res.reason, timings={**res.timings, "total": time.perf_counter() - t0})
