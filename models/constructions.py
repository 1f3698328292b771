"""The paper's exact constructions, as exact rational tables and as torch models.

Every construction is a :class:`KernelConstruction`: a token set, exact
feature tables ``PhiQ (K, r)``, ``PhiK (K, r)`` (``Fraction``) and the exact
scalarized table ``G (K, K)`` with ``G[x, z] = g_x(z)`` (Eq. 5), so that

    t_hat_x(X) = sum_j alpha(x, x_j) G[x, x_j] / sum_j alpha(x, x_j),  alpha = PhiQ PhiK^T.

:meth:`KernelConstruction.check` evaluates this in exact arithmetic and
applies the strict criterion of Eq. 2.

* Thm 1 (dense softmin): ``s_ij = -tau <x_i, x_j>``, ``v(x) = x``,
  ``t_hat_i = <x_i, y_i>``. Its weights are ``c^<x_i, x_j>`` with
  ``c = e^-tau``; at the theorem's ``tau = log(n/eps)``, ``c = eps/n`` is
  rational, so the check is exact. Torch model: :func:`thm1_softmin_head`.
* Thm 2 (exact positive features): ``phiQ(x) = e_x``, ``phiK(z)_u = c^<u,z>``
  over the whole cube, ``r = 2^m``; the same kernel as Thm 1.
* Thm 6 (rank one, lengths ``<= 2``): ``alpha = 1``, ``v(z) = z``, readout
  ``2 <x, a> - |x|_1``.
* The lookup construction for a finite family: one feature per distinct query
  token, ``alpha(x, z) = c^<x, z>`` on query rows, ``G[x, z] = <x, z>``:
  rank = number of query tokens, correct by Thm 1 on every family of length ``n``.

Torch models built from a construction with a dyadic base ``c = 2^-k``
compute exactly the construction's tables in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping

import numpy as np
import torch

from certify.core.cube import all_tokens, enumerate_sequences, min_ip_targets, token_index
from certify.core.errors import InputError
from certify.core.numbers import exact_product
from models.heads import DenseSoftmaxHead, KernelHead, LookupHead

# ---------------------------------------------------------------- exact evaluation

@dataclass(frozen=True)
class ExactCheck:
    """Result of an exact strict-error check over a set of scored positions."""

    ok: bool                        # every scored |t_hat - t| < eps, every denominator > 0
    eps: Fraction
    checked: int                    # scored positions checked
    failures: int                   # scored positions with |t_hat - t| >= eps
    max_error: Fraction | None      # max |t_hat - t| (None if some denominator <= 0)
    min_signed_error: Fraction | None   # min (t_hat - t)
    worst: tuple[int, int] | None   # (input, position) of the max error
    nonpositive_denominator: tuple[int, int] | None = None


def _obj(a) -> np.ndarray:
    arr = np.array(a, dtype=object)
    return np.vectorize(Fraction, otypes=[object])(arr) if arr.size else arr


def exact_predictions(A, G, inputs: np.ndarray) -> tuple[np.ndarray, tuple[int, int] | None]:
    """Eq. 5 in exact arithmetic.

    ``A``, ``G``: ``(K, K)`` exact kernel and value tables over one token set;
    ``inputs``: ``(I, N)`` token indices. Returns ``(pred (I, N) object array of
    Fraction, first (input, position) with a denominator <= 0 or None)``; a
    position with a denominator ``<= 0`` gets ``None``.
    """
    # each row over its own common denominator: A[x] = NA[x] / a_x, G[x] = NG[x] / g_x, so
    # t_hat = sum NA NG / (g_x sum NA) in integers, one Fraction per prediction (the plain
    # sum of Fractions: tests/test_constructions.py)
    NA, _ = _integer_rows(A)
    NG, dG = _integer_rows(G)
    inputs = np.asarray(inputs, dtype=np.int64)
    pred = np.empty(inputs.shape, dtype=object)
    bad = None
    for b, seq in enumerate(inputs.tolist()):
        for i, x in enumerate(seq):
            Ax, Gx = NA[x], NG[x]
            den = sum(Ax[z] for z in seq)
            if den <= 0:
                bad = bad or (b, i)
                pred[b, i] = None
                continue
            pred[b, i] = Fraction(sum(Ax[z] * Gx[z] for z in seq), dG[x] * den)
    return pred, bad


def _integer_rows(T) -> tuple[list[list[int]], list[int]]:
    """``(N, d)`` with ``T[x][z] = N[x][z] / d[x]`` exactly, ``d[x] > 0`` the least common
    denominator of row ``x`` of the rational table ``T``."""
    rows = [[Fraction(v) for v in row] for row in np.asarray(T, dtype=object)]
    dens = [math.lcm(1, *(v.denominator for v in row)) for row in rows]
    return [[v.numerator * (d // v.denominator) for v in row] for row, d in zip(rows, dens)], dens


def check_predictions(pred: np.ndarray, targets: np.ndarray, scored: np.ndarray | None = None,
                      eps: Fraction = Fraction(1, 2),
                      bad: tuple[int, int] | None = None) -> ExactCheck:
    """Strict criterion of Eq. 2 on exact predictions (``None`` = denominator <= 0)."""
    eps = Fraction(eps)
    targets = np.asarray(targets)
    scored = np.ones(targets.shape, dtype=bool) if scored is None else np.asarray(scored, dtype=bool)
    max_err = min_signed = worst = None
    failures = checked = 0
    for b, i in zip(*np.nonzero(scored)):
        checked += 1
        p = pred[b, i]
        if p is None:
            failures += 1
            bad = bad or (int(b), int(i))
            continue
        d = p - int(targets[b, i])
        if abs(d) >= eps:
            failures += 1
        if max_err is None or abs(d) > max_err:
            max_err, worst = abs(d), (int(b), int(i))
        if min_signed is None or d < min_signed:
            min_signed = d
    if bad is not None and scored[bad]:
        max_err = min_signed = None
    return ExactCheck(ok=failures == 0 and checked > 0 and bad is None, eps=eps, checked=checked,
                      failures=failures, max_error=max_err, min_signed_error=min_signed,
                      worst=worst, nonpositive_denominator=bad)


# ---------------------------------------------------------------- constructions

@dataclass(frozen=True, eq=False)
class KernelConstruction:
    """Exact tables of a scalarized kernel head over a token set (see module doc)."""

    name: str
    tokens: np.ndarray              # (K, m) uint8
    phi_q: np.ndarray               # (K, r) object, Fraction
    phi_k: np.ndarray               # (K, r) object, Fraction
    g: np.ndarray                   # (K, K) object, Fraction: g_x(z)
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def rank(self) -> int:
        """Feature dimension ``r`` (an upper bound on the kernel's rank)."""
        return int(self.phi_q.shape[1])

    def kernel(self) -> np.ndarray:
        """``alpha = PhiQ PhiK^T`` exactly, ``(K, K)`` object array."""
        return exact_product(self.phi_q, self.phi_k.T)

    def predictions(self, inputs: np.ndarray):
        return exact_predictions(self.kernel(), self.g, inputs)

    def check(self, inputs: np.ndarray, targets: np.ndarray, scored: np.ndarray | None = None,
              eps: Fraction = Fraction(1, 2)) -> ExactCheck:
        """Exact strict check on ``inputs (I, N)`` (indices into ``tokens``)."""
        pred, bad = self.predictions(inputs)
        return check_predictions(pred, targets, scored, eps, bad)

    def check_family(self, family, eps: Fraction = Fraction(1, 2)) -> ExactCheck:
        """Exact strict check on a :class:`certify.core.families.Family` whose tokens are
        this construction's tokens (same order)."""
        if not np.array_equal(family.tokens, self.tokens):
            raise InputError("the family's token table differs from the construction's")
        return self.check(family.inputs, family.targets, family.scored, eps)

    def check_exhaustive(self, n: int, min_length: int = 1,
                         eps: Fraction = Fraction(1, 2)) -> ExactCheck:
        """Exact strict check at every position of every sequence of length
        ``min_length..n`` over the cube (the tokens must be the whole cube)."""
        if not np.array_equal(self.tokens, all_tokens(self.m)):
            raise InputError("exhaustive check needs a construction over the whole cube")
        results = []
        for X in enumerate_sequences(self.m, n, min_length):
            idx = token_index(X)                                       # (B, N)
            results.append(self.check(idx, min_ip_targets(X), None, eps))
        return _merge(results, Fraction(eps))

    def to_lookup_head(self, dtype: torch.dtype = torch.float64) -> LookupHead:
        """A :class:`LookupHead` holding these tables (``lookup_relu`` when every
        feature is ``>= 0``, else ``lookup_signed``). Exact in ``dtype`` when
        the tables are dyadic and representable."""
        nonneg = all(v >= 0 for v in self.phi_q.ravel()) and all(v >= 0 for v in self.phi_k.ravel())
        head = LookupHead(self.tokens, self.rank, "lookup_relu" if nonneg else "lookup_signed",
                          dtype=dtype)
        with torch.no_grad():
            head.query_map.raw.copy_(_tensor(self.phi_q, dtype))
            head.key_map.raw.copy_(_tensor(self.phi_k, dtype))
            head.g.copy_(_tensor(self.g, dtype))
        return head


def _tensor(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([[float(v) for v in row] for row in a], dtype=dtype)


def _merge(results: list[ExactCheck], eps: Fraction) -> ExactCheck:
    checked = sum(r.checked for r in results)
    failures = sum(r.failures for r in results)
    bad = next((r.nonpositive_denominator for r in results if r.nonpositive_denominator), None)
    errs = [r.max_error for r in results if r.max_error is not None]
    lows = [r.min_signed_error for r in results if r.min_signed_error is not None]
    if bad is not None or len(errs) < len(results):
        return ExactCheck(False, eps, checked, failures, None, None, None, bad)
    assert len(lows) == len(results)        # known together with max_error (check_predictions)
    k = max(range(len(results)), key=lambda j: errs[j])
    return ExactCheck(failures == 0 and checked > 0, eps, checked, failures, errs[k],
                      min(lows), results[k].worst)


def softmin_base(n: int, eps: Fraction = Fraction(1, 2), *, dyadic: bool = False) -> Fraction:
    """``c = e^-tau`` at Thm 1's ``tau = log(n/eps)``: ``eps/n``; with ``dyadic``, the
    largest ``2^-k <= eps/n`` (``tau = k log 2 >= log(n/eps)``)."""
    eps = Fraction(eps)
    if n < 1 or not 0 < eps:
        raise InputError(f"need n >= 1 and eps > 0, got n = {n}, eps = {eps}")
    c = eps / n
    if not dyadic:
        return c
    k = 0
    while Fraction(1, 2 ** k) > c:
        k += 1
    return Fraction(1, 2 ** k)


def _overlaps(tokens: np.ndarray) -> np.ndarray:
    t = np.asarray(tokens, dtype=np.int64)
    return t @ t.T                                                     # (K, K)


def _powers(base: Fraction, exps: np.ndarray) -> np.ndarray:
    out = np.empty(exps.shape, dtype=object)
    for idx, e in np.ndenumerate(exps):
        out[idx] = base ** int(e)
    return out


def thm1_softmin(m: int, n: int, eps: Fraction = Fraction(1, 2), *,
                 base: Fraction | None = None) -> KernelConstruction:
    """Thm 1 over the cube: ``alpha(x, z) = c^<x,z>``, ``g_x(z) = <x, z>``, factored as
    ``PhiQ = I``, ``PhiK[z, u] = c^<u,z>``. ``base`` defaults to ``eps/n``
    (``tau = log(n/eps)``); a larger base is a smaller ``tau``."""
    c = softmin_base(n, eps) if base is None else Fraction(base)
    if not 0 < c <= 1:
        raise InputError(f"softmin base c = e^-tau must lie in (0, 1], got {c}")
    tokens = all_tokens(m)
    O = _overlaps(tokens)
    K = len(tokens)
    eye = np.array([[Fraction(int(i == j)) for j in range(K)] for i in range(K)], dtype=object)
    return KernelConstruction(
        name="thm1-softmin", tokens=tokens, phi_q=eye, phi_k=_powers(c, O), g=_obj(O),
        params={"m": m, "n": n, "eps": str(Fraction(eps)), "base": str(c),
                "tau": -math.log(c) if c < 1 else 0.0})


def thm2_exact_features(m: int, n: int, eps: Fraction = Fraction(1, 2), *,
                        base: Fraction | None = None) -> KernelConstruction:
    """Thm 2: ``phiQ(x) = e_x``, ``phiK(z)_u = c^<u,z>``, ``r = 2^m``, readout
    ``<x, a>``. ``base`` defaults to the dyadic ``2^-k <= eps/n`` so that the
    float64 model is exact."""
    c = softmin_base(n, eps, dyadic=True) if base is None else Fraction(base)
    con = thm1_softmin(m, n, eps, base=c)
    return KernelConstruction(name="thm2-exact-features", tokens=con.tokens, phi_q=con.phi_q,
                              phi_k=con.phi_k, g=con.g, params={**con.params, "rank": 2 ** m})


def thm6_rank_one(m: int) -> KernelConstruction:
    """Thm 6 (first part) over the cube: ``alpha = 1``, ``g_x(z) = 2<x,z> - |x|_1``;
    exact (error 0) on every sequence of length ``<= 2``."""
    tokens = all_tokens(m)
    O = _overlaps(tokens)
    ones = np.full((len(tokens), 1), Fraction(1), dtype=object)
    return KernelConstruction(name="thm6-rank-one", tokens=tokens, phi_q=ones, phi_k=ones.copy(),
                              g=_obj(2 * O - O.diagonal()[:, None]), params={"m": m, "n": 2})


def lookup_construction(family, eps: Fraction = Fraction(1, 2), *,
                        base: Fraction | None = None) -> KernelConstruction:
    """The trivial construction for a finite family: rank = number of distinct query
    tokens. Query token ``q_a`` gets ``e_a``, any other token the all-ones row
    (keeps its denominators positive); ``PhiK[z, a] = c^<q_a, z>``;
    ``G[x, z] = <x, z>``. With ``c <= eps/n`` (default: dyadic) the predictions at
    query tokens are Thm 1's, hence correct with error ``< eps``."""
    c = softmin_base(family.n, eps, dyadic=True) if base is None else Fraction(base)
    if not 0 < c <= 1:
        raise InputError(f"base c must lie in (0, 1], got {c}")
    Q = family.query_tokens()                                          # (r,) token indices
    K, r = family.tokens.shape[0], len(Q)
    O = _overlaps(family.tokens)
    phi_q = np.full((K, r), Fraction(1), dtype=object)
    phi_q[Q] = Fraction(0)
    for a, q in enumerate(Q):
        phi_q[q, a] = Fraction(1)
    phi_k = _powers(c, O[:, Q])                                        # (K, r)
    return KernelConstruction(name="lookup", tokens=family.tokens.copy(), phi_q=phi_q,
                              phi_k=phi_k, g=_obj(O),
                              params={"family": family.name, "family_sha256": family.sha256,
                                      "rank": r, "base": str(c), "eps": str(Fraction(eps))})


@dataclass(frozen=True, eq=False)
class PositionalConstruction:
    """Exact tables of a head with position-dependent key maps (Thm 8) over a family's tokens:
    ``phi_q (Q, r)`` for the query tokens ``query_tokens``, one ``phi_k[j] (K, r)`` and one
    ``g[j] (Q, K)`` per position ``j`` (``Fraction``); an input ``(z_0..z_(n-1))`` queried at its
    final token ``x`` outputs ``sum_j alpha_j(x, z_j) g[j][x, z_j] / sum_j alpha_j(x, z_j)``,
    ``alpha_j = phi_q phi_k[j]^T``."""

    name: str
    tokens: np.ndarray              # (K, m) uint8
    query_tokens: np.ndarray        # (Q,) token indices
    phi_q: np.ndarray               # (Q, r) object, Fraction
    phi_k: tuple[np.ndarray, ...]   # n x (K, r) object, Fraction
    g: tuple[np.ndarray, ...]       # n x (Q, K) object, Fraction
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return int(self.phi_q.shape[1])


def thm8_positional_lookup(family, eps: Fraction = Fraction(1, 2), *,
                           base: Fraction | None = None) -> PositionalConstruction:
    """A head with position-dependent key maps that solves a family with positions (query at the
    final position): the lookup construction with position weights ``w_j = j + 1``. Query token
    ``q_a`` gets ``e_a``; ``phiK_j(z)_a = w_j c^<q_a, z>``; ``g_j(x, z) = <x, z>``. Its error is
    ``sum_j w_j d_j c^d_j / sum_j w_j c^d_j`` (``d_j = <x, z_j> - t >= 0``), at most
    ``(W - 1) c`` for ``c <= 1/2`` (``d c^d <= c``; ``W = sum_j w_j``; a minimizer has weight
    ``>= 1``), so ``c`` defaults to the largest ``2^-k`` with ``(W - 1) c < eps``. Every
    contribution ``alpha_j >= 0``; rank = number of query tokens (Thm 8's effective kernel
    ``sum_j alpha_j`` is ``W' c^<q_a, z>`` on query rows)."""
    eps = Fraction(eps)
    n = family.n
    w = [Fraction(j + 1) for j in range(n)]
    W = sum(w)
    if base is None:
        base = Fraction(1, 2)
        while (W - 1) * base >= eps:
            base /= 2
    c = Fraction(base)
    if not 0 < c <= 1:
        raise InputError(f"base c must lie in (0, 1], got {c}")
    Q = np.unique(family.inputs[family.scored])
    O = _overlaps(family.tokens)
    r = len(Q)
    phi_q = np.array([[Fraction(int(a == b)) for b in range(r)] for a in range(r)], dtype=object)
    phi_k = tuple(_powers(c, O[:, Q]) * wj for wj in w)
    g = tuple(_obj(O[Q]) for _ in w)
    return PositionalConstruction(name="thm8-positional-lookup", tokens=family.tokens.copy(),
                                  query_tokens=Q, phi_q=phi_q, phi_k=phi_k, g=g,
                                  params={"family": family.name, "family_sha256": family.sha256,
                                          "rank": r, "base": str(c), "position_weights": [int(v) for v in w],
                                          "eps": str(eps)})


# ---------------------------------------------------------------- torch models

def thm1_softmin_head(m: int, n: int, eps: Fraction = Fraction(1, 2), *, tau: float | None = None,
                      dtype: torch.dtype = torch.float64) -> DenseSoftmaxHead:
    """Thm 1 as a dense softmax head: ``q(x) = -tau x``, ``k(x) = x``, ``v(x) = x``,
    ``beta = 0``, ``w(x) = x``. ``tau`` defaults to ``log(n/eps)``."""
    tau = math.log(n / float(eps)) if tau is None else float(tau)
    head = DenseSoftmaxHead(m, dk=m, dv=m, dtype=dtype)
    eye = torch.eye(m, dtype=dtype)
    with torch.no_grad():
        for aff, W in ((head.query, -tau * eye), (head.key, eye), (head.value, eye), (head.w, eye),
                       (head.beta, torch.zeros(1, m, dtype=dtype))):
            aff.weight.copy_(W)
            aff.bias.zero_()
    return head


def thm6_rank_one_head(m: int, dtype: torch.dtype = torch.float64) -> KernelHead:
    """Thm 6's rank-one head for any ``m``: ``relu`` features with ``W = 0, b = 1``
    (``phi = 1``), ``v(z) = z``, ``beta(x) = -|x|_1``, ``w(x) = 2x``."""
    head = KernelHead(m, rank=1, dv=m, feature_map="relu", dtype=dtype)
    eye = torch.eye(m, dtype=dtype)
    with torch.no_grad():
        for fm in (head.query_map, head.key_map):
            fm.proj.weight.zero_()
            fm.proj.bias.fill_(1.0)
        head.value.weight.copy_(eye)
        head.value.bias.zero_()
        head.beta.weight.fill_(-1.0)
        head.beta.bias.zero_()
        head.w.weight.copy_(2 * eye)
        head.w.bias.zero_()
    return head


def exhaustive_float_predictions(model, m: int, n: int, min_length: int = 1):
    """Float predictions of a torch head on every sequence of length ``min_length..n``:
    yields ``(X (B, N, m) uint8, t_hat (B, N) float64 numpy)``."""
    for X in enumerate_sequences(m, n, min_length):
        with torch.no_grad():
            yield X, model(torch.from_numpy(X)).double().numpy()


def exact_tables(model, tokens: np.ndarray, name: str = "model") -> KernelConstruction:
    """The exact rational tables of a torch kernel head over ``tokens (K, m)``:
    features as computed by ``feature_matrices`` (floats are dyadic rationals,
    converted losslessly) and ``g_x(z) = beta(x) + w(x)^T v(z)`` evaluated in
    exact arithmetic from the computed ``beta``, ``w``, ``v``."""
    with torch.no_grad():
        PQ, PK = model.feature_matrices(tokens)
        if isinstance(model, LookupHead):
            G = _obj(model.value_table(tokens, tokens).double().numpy().tolist())
        else:
            beta, w = model.readout(tokens)
            v = model.values(tokens)
            beta, w, v = (_obj(t.double().numpy().tolist()) for t in (beta, w, v))
            G = beta[:, None] + exact_product(w, v.T)
    to_q = lambda t: _obj(t.double().numpy().tolist())          # noqa: E731
    return KernelConstruction(name=name, tokens=np.asarray(tokens, dtype=np.uint8),
                              phi_q=to_q(PQ), phi_k=to_q(PK), g=G,
                              params={"feature_map": model.feature_map, "rank": model.rank})
