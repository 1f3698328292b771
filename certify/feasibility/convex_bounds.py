"""Convex lower bounds on the rank of a family's chain matrix, with exact dual certificates.

Setting (from :mod:`certify.feasibility.chain_bounds`). The family's Lemma 3 chains
give ``t`` queries ``x_i``, diagonal keys ``c_i`` and factors ``Lambda_ij`` with
``alpha(x_i, c_i) > Lambda_ij alpha(x_i, c_j)``. For any head of rank ``<= r``
(real features with ``alpha >= 0`` on the used pairs -- so also the paper's
class and nonnegative features) the row-normalized matrix
``C_ij = alpha(x_i, c_j) / alpha(x_i, c_i)`` lies in the *chain polytope*

    P = { C : C_ii = 1,  0 <= C_ij <= rho_ij },   rho_ij = 1 / Lambda_ij,

and ``rank C <= r``. The values ``g`` enter nowhere.

The convex statement certified infeasible
------------------------------------------
For rank ``r >= 2``, fixed rationals ``W`` (t x t) with ``||W||_2 <= 1``, ``x, y``
with ``|x|^2 |y|^2 <= 1``, ``lambda > 0`` and ``mu >= 0``, put

    U(C)  = t + sum_{i != j} rho_ij C_ij,
    L(C)  = <W, C> + mu x^T C y - (r-1)/(2 lambda) sum_{i != j} rho_ij C_ij,
    k     = lambda/2 + (r-1) t/(2 lambda) + (1+mu)^2 lambda / (2 (r-1)).

**Lemma.** If ``min_{C in P} L(C) > k`` then no ``C in P`` has rank ``<= r``.

*Proof.* Let ``C in P`` have rank ``<= r``, singular values ``s_1 >= ... >= s_r``,
``F = ||C||_F^2``. (1) ``<W, C> <= ||C||_* = sum s_i`` (von Neumann's trace
inequality, ``||W||_2 <= 1``). (2) ``sum s_i <= s_1 + sqrt(r-1) sqrt(F - s_1^2)``
(Cauchy-Schwarz on ``s_2..s_r``). (3) ``F = t + sum C_ij^2 <= U(C)`` since
``0 <= C_ij <= rho_ij`` gives ``C_ij^2 <= rho_ij C_ij``. (4) ``s_1 >= x^T C y``
(``|x^T C y| <= |x| |y| s_1 <= s_1``). (5) ``sqrt(a) <= lambda/2 + a/(2 lambda)``
for ``a >= 0`` (AM-GM), applied to ``a = (r-1)(U(C) - s_1^2) >= 0``. Hence

    0 >= <W,C> - s_1 - lambda/2 - (r-1)(U(C) - s_1^2)/(2 lambda)
      >= <W,C> - s_1 - lambda/2 - (r-1)(U(C) - s_1^2)/(2 lambda) - mu (s_1 - x^T C y)
      >= L(C) - k,

the last step minimizing the convex quadratic ``(r-1) s^2/(2 lambda) - (1+mu) s``
over all real ``s`` (minimum ``-(1+mu)^2 lambda/(2(r-1))``). A rank ``r' < r``
matrix satisfies (2) with ``r`` too, so every rank ``<= r`` is excluded. []

``min_{C in P} L(C)`` is exact and closed-form: the diagonal is fixed and each
off-diagonal entry sits at ``0`` or ``rho_ij`` by the sign of its coefficient.

The certificate is the *dual* of the convex program

    min_{C in P, s}  ||C||_* - s - sqrt(r-1) sqrt(U(C) - s^2)   s.t.  s >= x^T C y

(a semidefinite program: ``||C||_* = min (tr Y + tr Z)/2`` over
``[[Y, C], [C^T, Z]] >= 0``, whose dual block is ``[[I, W], [W^T, I]] >= 0``,
i.e. ``||W||_2 <= 1``). Steps (1)-(5) are exactly its Lagrangian, so the best
certificate matches the program's value. Special cases: ``W = I``,
``mu = 0`` is Lemma 4 (``t <= sqrt(r U)``); ``W = I``, ``x = 1/t``, ``y = 1`` and a
uniform ``rho`` contain the nonnegative refinement
(:func:`certify.core.bounds.lemmas.perron_discriminant`): its quadratic ``Q(sigma) <= 0`` is
what remains of the program after aggregating ``s = sum C_ij``, so whenever
``Delta(r) < 0`` the program is infeasible and a certificate exists. With
per-pair ``rho_ij`` (the complementary pair of paper-5.1 has ``Lambda = 16``)
and an optimized ``W`` the program can be stronger.

Floats (cvxpy with Clarabel, or SCS) only propose ``W, lambda, mu``; ``W`` is
rationalized and shrunk until ``I - W^T W`` has an exact rational ``LDL^T`` with
nonnegative pivots, and the margin ``min_P L - k`` is computed in Fractions.
:mod:`certify.checkers.convex_dual` re-checks all of it without cvxpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from certify.core.certificate import Claim, ClaimKind
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict
from certify.feasibility.chain_bounds import ChainBound
from certify.feasibility.result import FeasibilityResult, Outcome

METHOD = "convex-dual"


# ---------------------------------------------------------------- exact pieces

def rho_matrix(bound: ChainBound) -> list[list[Fraction]]:
    """``rho_ij = 1/Lambda_ij`` off the diagonal, 0 on it (exact)."""
    t = len(bound.queries)
    return [[Fraction(0) if i == j else Fraction(1, bound.lambdas[i, j]) for j in range(t)]
            for i in range(t)]


def psd_ldl(M) -> bool:
    """Exact PSD test of a symmetric rational matrix: the checker's own
    (:func:`certify.checkers.kernel.is_psd`), so producer and checker agree."""
    from certify.checkers.kernel import is_psd
    return is_psd(M)


def contraction_ok(W: list[list[Fraction]]) -> bool:
    """``||W||_2 <= 1`` exactly: ``I - W^T W`` is PSD."""
    n = len(W[0])
    G = [[(1 if a == b else 0) - sum(W[k][a] * W[k][b] for k in range(len(W)))
          for b in range(n)] for a in range(n)]
    return psd_ldl(G)


def exact_margin(rho, r: int, W, x, y, lam: Fraction, mu: Fraction) -> Fraction:
    """``min_{C in P} L(C) - k`` of the Lemma (exact): the checker's own
    (:func:`certify.checkers.convex_dual.margin`), so producer and checker agree."""
    from certify.checkers.convex_dual import margin
    return margin(rho, r, W, x, y, lam, mu)


def _float_margin(rho: np.ndarray, r: int, W: np.ndarray, x: np.ndarray, y: np.ndarray,
                  lam: float, mu: float) -> float:
    t = rho.shape[0]
    coef = W + mu * np.outer(x, y) - (r - 1) / (2 * lam) * rho
    off = ~np.eye(t, dtype=bool)
    total = np.trace(W + mu * np.outer(x, y)) + float(np.minimum(coef[off], 0) @ rho[off])
    return total - (lam / 2 + (r - 1) * t / (2 * lam) + (1 + mu) ** 2 * lam / (2 * (r - 1)))


def _q(v: float, den: int) -> Fraction:
    return Fraction(float(v)).limit_denominator(den)


# ---------------------------------------------------------------- the certificate

@dataclass(frozen=True)
class ConvexCertificate:
    """An exactly checked dual certificate excluding every rank ``<= rank``."""

    rank: int
    W: tuple[tuple[Fraction, ...], ...]
    x: tuple[Fraction, ...]
    y: tuple[Fraction, ...]
    lam: Fraction
    mu: Fraction
    margin: Fraction             # min_P L - k > 0
    program_value: float | None  # float optimum of the convex program (diagnostic)

    def to_json(self) -> dict:
        return {"rank": self.rank,
                "W": [[q_to_str(v) for v in row] for row in self.W],
                "x": [q_to_str(v) for v in self.x], "y": [q_to_str(v) for v in self.y],
                "lambda": q_to_str(self.lam), "mu": q_to_str(self.mu),
                "margin": q_to_str(self.margin)}


def relaxation_value(rho: np.ndarray, r: int, x: np.ndarray, y: np.ndarray, *,
                     solver: str = "CLARABEL"):
    """Solve the convex program of the module docstring with cvxpy. Returns
    ``(value, W, C)``: its optimum (> 0 means rank ``<= r`` is excluded), the
    dual block ``W`` of the nuclear-norm constraint, and the minimizer ``C``."""
    import cvxpy as cp

    t = rho.shape[0]
    C = cp.Variable((t, t))
    Y = cp.Variable((t, t), symmetric=True)
    Z = cp.Variable((t, t), symmetric=True)
    s = cp.Variable()
    w = cp.Variable()                       # w <= sqrt(U(C) - s^2)
    off = ~np.eye(t, dtype=bool)
    U = t + cp.sum(cp.multiply(rho * off, C))
    block = cp.bmat([[Y, C], [C.T, Z]])
    psd = block >> 0
    cons = [psd, cp.diag(C) == 1, C >= 0, C <= rho + np.eye(t),
            s >= x @ C @ y, cp.sum_squares(cp.hstack([w, s])) <= U, w >= 0]
    obj = (cp.trace(Y) + cp.trace(Z)) / 2 - s - np.sqrt(r - 1) * w
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver=solver)
    if prob.status not in ("optimal", "optimal_inaccurate") or psd.dual_value is None:
        return None, None, None
    D = np.asarray(psd.dual_value)
    W = 2 * D[:t, t:]
    Cv = np.asarray(C.value)
    if np.sum(W * Cv) < 0:                  # the dual's sign convention
        W = -W
    return float(prob.value), W, Cv


def _best_multipliers(rho, r, W, x, y) -> tuple[float, float, float]:
    """Float ``(lambda, mu)`` maximizing the margin for fixed ``W, x, y``."""
    from scipy.optimize import minimize

    def neg(z):
        return -_float_margin(rho, r, W, x, y, float(np.exp(z[0])), float(z[1] ** 2))

    best: Any = None                    # scipy's OptimizeResult (untyped)
    t = rho.shape[0]
    for lam0 in (np.sqrt(t * (r - 1)), 1.0, float(t)):
        for mu0 in (0.0, 0.5, 1.0):
            res = minimize(neg, [np.log(lam0), np.sqrt(mu0)], method="Nelder-Mead",
                           options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 4000})
            if best is None or res.fun < best.fun:
                best = res
    return float(np.exp(best.x[0])), float(best.x[1] ** 2), float(-best.fun)


def certify_rank(bound: ChainBound, r: int, *, solver: str = "CLARABEL",
                 W0: np.ndarray | None = None, den: int = 10 ** 9) -> tuple[ConvexCertificate | None, dict]:
    """Try to exclude every rank ``<= r`` on the chain polytope of ``bound``.

    Tries ``W = I`` and the program's dual ``W`` (or ``W0``); ``lambda`` and ``mu``
    are optimized in floats and rationalized with denominators ``<= den`` (any
    positive values give a valid certificate; only the margin's sign matters).
    Returns the exactly checked certificate with the largest margin, or None,
    and diagnostics."""
    if r < 2:
        raise ValueError("the convex certificate needs r >= 2 (r = 1 is Lemma 4's)")
    rho_q = rho_matrix(bound)
    t = len(rho_q)
    rho = np.array([[float(v) for v in row] for row in rho_q])
    x_q = tuple(Fraction(1, t) for _ in range(t))
    y_q = tuple(Fraction(1) for _ in range(t))
    x, y = np.full(t, 1.0 / t), np.ones(t)
    info: dict = {}
    candidates = [np.eye(t)]
    if W0 is not None:
        candidates.append(np.asarray(W0, dtype=np.float64))
    else:
        val, Wd, _ = relaxation_value(rho, r, x, y, solver=solver)
        info["program_value"] = val
        if Wd is not None:
            candidates.append(Wd)
    best: ConvexCertificate | None = None
    for Wf in candidates:
        Wq = _contraction(Wf)
        if Wq is None:
            continue
        Wf2 = np.array([[float(v) for v in row] for row in Wq])
        lam, mu, fm = _best_multipliers(rho, r, Wf2, x, y)
        lam_q, mu_q = _q(lam, den), max(_q(mu, den), Fraction(0))
        if lam_q <= 0:
            continue
        m = exact_margin(rho_q, r, Wq, x_q, y_q, lam_q, mu_q)
        info.setdefault("float_margins", []).append(fm)
        if m > 0 and (best is None or m > best.margin):
            best = ConvexCertificate(r, tuple(tuple(row) for row in Wq), x_q, y_q, lam_q, mu_q,
                                     m, info.get("program_value"))
    return best, info


def _contraction(Wf: np.ndarray):
    """Rationalize ``Wf`` (dyadic, 2^-30) and shrink it until ``||W||_2 <= 1`` holds
    exactly."""
    nrm = float(np.linalg.norm(Wf, 2))
    if not np.isfinite(nrm) or nrm == 0:
        return None
    if np.allclose(Wf, np.eye(Wf.shape[0])):
        t = Wf.shape[0]
        return [[Fraction(int(i == j)) for j in range(t)] for i in range(t)]
    base = Wf / max(nrm, 1.0)
    for shrink in (Fraction(1), Fraction(1) - Fraction(1, 10 ** 8), Fraction(1) - Fraction(1, 10 ** 6),
                   Fraction(1) - Fraction(1, 10 ** 4)):
        Wq = [[Fraction(round(float(v) * 2 ** 30), 2 ** 30) * shrink for v in row] for row in base]
        if contraction_ok(Wq):
            return Wq
    return None


def max_certified_rank(bound: ChainBound, *, solver: str = "CLARABEL", hi: int | None = None):
    """The largest ``r`` (>= 2) with an exact certificate, scanning upward from the
    chain bound's own ``max_infeasible_rank``; returns ``(r, certificate)`` or
    ``(None, None)``. Exclusion is monotone in ``r``, so the scan stops at the
    first failure."""
    t = len(bound.queries)
    hi = t if hi is None else hi
    best: tuple[int, ConvexCertificate] | tuple[None, None] = (None, None)
    for r in range(max(2, bound.max_infeasible_rank), hi + 1):
        cert, _ = certify_rank(bound, r, solver=solver)
        if cert is None:
            break
        best = (r, cert)
    return best


# ---------------------------------------------------------------- claims

def derivation_json(bound: ChainBound, cert: ConvexCertificate) -> dict:
    """``evidence.derivation`` of a convex-dual infeasibility claim (schema in
    :mod:`certify.checkers.convex_dual`)."""
    chain = bound.to_json()
    chains = {k: chain[k] for k in ("lemma3", "edges", "edge_columns", "queries", "diagonal",
                                    "pairs")}
    return {"method": METHOD, "chains": chains, "dual": cert.to_json()}


def convex_result(family, rank: int, features, bound: ChainBound | None, timings: dict, *,
                  solver: str = "CLARABEL", model_class=None):
    """A proved-``infeasible`` :class:`certify.feasibility.result.FeasibilityResult` carrying a
    convex dual certificate for ``rank``, or None when the program cannot exclude it."""
    import time

    if bound is None or rank < 2 or len(bound.queries) < 2:
        return None
    t0 = time.perf_counter()
    try:
        cert, info = certify_rank(bound, rank, solver=solver)
    except Exception:                       # a solver failure is not a proof of anything
        cert, info = None, {}
    timings = dict(timings, convex_dual_s=time.perf_counter() - t0)
    if cert is None:
        return None
    return ConvexInfeasible(Outcome.INFEASIBLE, rank, features, family,
                            f"Lemma 3 chains of the family + convex dual certificate "
                            f"(nuclear-norm SDP dual W, {solver}; exact LDL^T of I - W^T W; "
                            f"exact margin)", bound=bound, timings=timings,
                            search_info={"program_value": info.get("program_value")},
                            convex=cert, **({} if model_class is None else
                                            {"model_class": model_class}))


@dataclass(frozen=True)
class ConvexInfeasible(FeasibilityResult):
    """A proved-infeasible result whose evidence is a convex dual certificate."""

    convex: ConvexCertificate | None = None

    def _evidence(self) -> tuple[ChainBound, ConvexCertificate]:
        """The chains and the dual certificate, which every such result carries (the field
        defaults to None only because a dataclass field after defaulted ones must)."""
        if self.bound is None or self.convex is None:
            raise ValueError("a convex-dual infeasibility result carries its chains and certificate")
        return self.bound, self.convex

    def to_claim(self) -> Claim:
        bound, convex = self._evidence()
        params = {"rank": self.rank, "features": self.features.value,
                  "class": self.model_class.value, "scope": "family",
                  "family": self.family.name, "family_sha256": self.family.sha256,
                  "error": "1/2"}
        return Claim(ClaimKind.INFEASIBLE, None, Verdict.PROVED, params,
                     {"family": self.family.to_json(),
                      "derivation": derivation_json(bound, convex)},
                     self.method, None, self.timings,
                     info={"margin_float": float(convex.margin),
                           "program_value": convex.program_value})

    def line_detail(self) -> str:
        _, convex = self._evidence()
        return (f"(proved) every rank <= {convex.rank} excluded by a convex dual "
                f"certificate, exact margin {q_to_str(convex.margin)} ~ "
                f"{float(convex.margin):.4g} [{self.method}]")
