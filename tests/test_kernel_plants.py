"""Every primitive of the trusted kernel is load-bearing and watched: a deliberately wrong
implementation, planted (monkeypatched) under every name the checker reads it by, changes an
answer of the checker that the real kernel gets right.

Each plant below names the primitive, the wrong variant and the check it must break. Most checks
are genuine certificates, made here by the producers on small inputs, that ``verify`` accepts with
the real kernel and must fail with the plant. A few primitives are one layer of a decision with a
fallback (a float test that proves or abstains, then an exact one): a wrong answer in the safe
direction there is corrected by the next layer, so what must be caught is a wrong answer in the
unsafe direction, on evidence that is not true (a Gram that is not positive semidefinite, an
eigenvalue enclosure that does not hold); for those the check is the checker's refusal of that
evidence. Where a plant needs a layer before it to abstain (a legitimate answer of a float test),
it plants that too. ``certify/checkers/kernel/README.md`` names, per primitive, the plants here
(``test_every_primitive_in_the_readme_has_a_plant`` keeps the two lists equal)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import gram_reference
import numpy as np
import pytest

from certify.checkers import verify
from certify.checkers.common import Bad
from certify.checkers.kernel import (
    attention,
    balls,
    freivalds,
    gram,
    hashing,
    inertia,
    matrices,
    modular,
    products,
    psd,
    replay,
    roots,
    singular,
    span,
)
from tests.oracle.genuine import _run  # certify <command> in this process, output swallowed

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "certify/checkers/kernel/README.md"


# ---------------------------------------------------------------- genuine certificates



def _rank(folder: Path, name: str, save: Callable[[Path], None], *args: str) -> Path:
    folder.mkdir()
    save(folder / name)
    assert _run("rank", [name, *args, "--out", "c.json", "--no-progress"], folder) == 0
    return folder / "c.json"


def _low_rank(rng: np.random.Generator, n1: int, n2: int, r: int) -> np.ndarray:
    return (rng.integers(-3, 4, (n1, r)) @ rng.integers(-3, 4, (r, n2))).astype(np.int64)


def _chain_family():
    from certify.core import families
    words = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1, 0], [1, 0, 0, 0, 0, 1, 1, 1]],
                     dtype=np.uint8)
    return families.chain_family(words, n=3)


def _audit(folder: Path) -> Path:
    """Correctness and gap domination of the softmin head ``alpha(x, z) = 8^-<x,z>`` on a chain
    family (Thm 1: base 8 solves it at n = 3)."""
    from certify import audit
    from certify.core.certificate import Certificate
    family = _chain_family()
    T = family.tokens.astype(np.int64)
    G = T @ T.T
    q = family.query_tokens()
    phi_q = np.eye(len(T), dtype=np.int64)[q]
    phi_k = np.array([[Fraction(1, 8 ** int(G[u, z])) for u in range(len(T))] for z in range(len(T))],
                     dtype=object)
    head = audit.head_from_tables(phi_q, phi_k, G[q], q)
    folder.mkdir()
    claims = audit.audit_claims(head, family, "softmin-8")
    Certificate(claims=claims, command=["test"]).write(folder / "c.json")
    return folder / "c.json"


def _feasibility(folder: Path, rank: str) -> Path:
    folder.mkdir()
    _chain_family().save(folder / "family.json")
    args = ["--rank", rank, "--family", "family.json", "--time-limit", "20", "--no-progress",
            "--out", "c.json"]
    assert _run("feasibility", args, folder) == 0
    return folder / "c.json"


def _nonnegative(folder: Path, fq: np.ndarray, fk: np.ndarray, tokens: str, method: str,
                 structure: bool = False, feature_map: str | None = None) -> Path:
    """A ``nonnegative`` claim on the given features (``structure``: past the pair limit, so the
    feature map's structure decides), checked to use ``method``."""
    from certify.core.certificate import Certificate
    from certify.core.kernel import Provenance, from_features
    from certify.rank import nonnegative
    from certify.rank.options import RankOptions
    from certify.rank.summary import summarize_features
    details = {"feature_map": feature_map} if feature_map else None
    kernel = from_features(fq, fk, Provenance("memory", None, "memory", str(fq.dtype), details=details),
                           token_set=tokens)
    with pytest.MonkeyPatch.context() as mp:
        if structure:
            mp.setattr(nonnegative, "SIGNED_PRODUCT_LIMIT", 0)
        claim = nonnegative.nonnegative_claim_factor(kernel, summarize_features(kernel), RankOptions())
    assert claim.evidence["method"] == method, claim.evidence["method"]
    folder.mkdir()
    Certificate(claims=[claim], command=["test"]).write(folder / "c.json")
    return folder / "c.json"


def _near_log2(folder: Path) -> Path:
    """Thm 1 at m = 1, lengths <= 3, tau within 10^-39 above ln 2: the class (1; 0, 1) has error
    2q / (1 + 2q) < 1/2 (q = e^-tau) by about 10^-39, decided by balls only above 128 bits."""
    from certify.audit.theorems import cube_claim
    from certify.core.certificate import Certificate
    tau = "693147180559945309417232121458176568076/1000000000000000000000000000000000000000"
    claim = cube_claim("thm1", 1, 3, tau=tau)
    assert claim.verdict.value == "proved"
    folder.mkdir()
    Certificate(claims=[claim], command=["test"]).write(folder / "c.json")
    return folder / "c.json"


def _taylor(u: np.ndarray) -> np.ndarray:
    """Based's Taylor features ``[1, u / d^1/4, u_i^2 / (sqrt 2 sqrt d), u_i u_j / sqrt d]`` (float64)."""
    d = u.shape[1]
    iu = np.triu_indices(d, 1)
    outer = u[:, :, None] * u[:, None, :]
    return np.concatenate([np.ones((len(u), 1)), u / d ** 0.25, np.einsum("bii->bi", outer) / (2 * d) ** 0.5,
                           outer[:, iu[0], iu[1]] / d ** 0.5], axis=1)


def _build(base: Path) -> dict[str, Path]:
    rng = np.random.default_rng(55)
    out = {}
    out["bounds"] = base / "bounds" / "c.json"
    (base / "bounds").mkdir()
    assert _run("bounds", ["--m", "6", "--out", "c.json"], base / "bounds") == 0
    A = _low_rank(rng, 6, 7, 3)
    out["matrix"] = _rank(base / "matrix", "m.npy", lambda p: np.save(p, A), "--eps", "1/100")
    # squared singular values 1 and 5/32 around eps^2 = 1/4: the scale 2^-3 decides the count
    S = np.array([[1, 0, 2], [0, 8, 0], [1, 0, 2]]) / 8.0
    out["scaled"] = _rank(base / "scaled", "m.npy", lambda p: np.save(p, S), "--eps", "1/2")
    Fq = (rng.integers(0, 4, (16, 3)) @ rng.integers(0, 4, (3, 5))).astype(np.float64)
    Fk = rng.integers(0, 3, (16, 5)).astype(np.float64)

    def factor(p: Path) -> None:
        np.savez(p, phi_q=Fq, phi_k=Fk)
        (p.parent / "code.json").write_text(json.dumps(["1100", "0011", "1001"]))
    out["factor"] = _rank(base / "factor", "f.npz", factor, "--tokens", "cube:4", "--eps", "1/100",
                          "--code", "code.json")
    out["large"] = _rank(base / "large", "m.npy", lambda p: np.save(p, _low_rank(rng, 260, 260, 5)))
    out["freivalds"] = _rank(base / "freivalds", "m.npy", lambda p: np.save(p, _low_rank(rng, 300, 240, 6)),
                             "--upper-bound", "freivalds")
    out["projection"] = _rank(base / "projection", "m.npy", lambda p: np.save(p, _low_rank(rng, 170, 170, 3)),
                              "--eps", "1/100")
    (base / "transcript").mkdir()
    assert _run("transcript", ["--M", "6", "--s", "1", "--h", "3", "--q", "2", "--bits", "4", "--no-progress",
                               "--out", "c.json"], base / "transcript") == 0
    out["transcript"] = base / "transcript" / "c.json"
    (base / "transcript-exp").mkdir()
    args = ["--M", "6", "--s", "1", "--h", "3", "--q", "2", "--bits", "4", "--model", "random",
            "--feature-map", "exp", "--no-progress", "--out", "c.json"]
    assert _run("transcript", args, base / "transcript-exp") == 1               # refuted, by a collision
    out["transcript-exp"] = base / "transcript-exp" / "c.json"
    out["audit"] = _audit(base / "audit")
    out["infeasible"] = _feasibility(base / "infeasible", "1")
    out["feasible"] = _feasibility(base / "feasible", "4")
    # signed features whose products are all >= 0, one of them exactly 0
    Q = np.array([[1, 1], [1, -1], [2, 0], [1, 0]], dtype=np.float64)
    K = np.array([[1, 1], [1, 1], [1, 0], [2, 1]], dtype=np.float64)
    out["all-products"] = _nonnegative(base / "all-products", Q, K, "cube:2", "all_products")
    signed = rng.normal(size=(2, 16, 3))
    out["pair"] = _nonnegative(base / "pair", signed[0], signed[1], "cube:4", "counterexample")
    cube = ((np.arange(64)[:, None] >> np.arange(6)) & 1).astype(np.float64)
    W = rng.normal(0, 0.7, (2, 3, 6))
    out["quadratic"] = _nonnegative(base / "quadratic", _taylor(cube @ W[0].T), _taylor(cube @ W[1].T),
                                    "cube:6", "quadratic_kernel", structure=True,
                                    feature_map="based-taylor_exp")
    out["theorem-near-log2"] = _near_log2(base / "theorem-near-log2")
    gauss = rng.standard_normal((70, 4)) @ rng.standard_normal((4, 70))
    out["numerical"] = _rank(base / "numerical", "m.npy", lambda p: np.save(p, gauss), "--numerical-only")
    out["numerical-tol"] = _rank(base / "numerical-tol", "m.npy",
                                 lambda p: np.save(p, np.diag([10.0, 1.0] + [0.0] * 8)),
                                 "--numerical-only", "--tol", "1/2")
    box = [np.concatenate([np.ones((64, 1)), rng.uniform(-0.1, 0.1, (64, 5))], 1) for _ in range(2)]
    out["key-box"] = _nonnegative(base / "key-box", box[0], box[1], "cube:6", "key_box", structure=True)
    return out


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> dict[str, Path]:
    return _build(tmp_path_factory.mktemp("genuine"))


# ---------------------------------------------------------------- checks (the checker's right answers)

def _holds(name: str) -> Callable[[dict[str, Path]], bool]:
    """The genuine certificate ``name`` verifies (every claim re-derived as written)."""
    return lambda g: verify.verify_file(g[name]).holds


def _psd_of(g: list[list[int]]) -> bool:
    """The eps-rank checker's PSD test of a stated Gram (``certify.checkers.rank.eps._psd``)."""
    from certify.checkers.rank import eps
    return eps._psd(g, matrices.fmpz_matrix(g))


#: a singular PSD Gram (X^T X, X of rank 2) and a symmetric one with a negative eigenvalue but a
#: positive diagonal and nonsingular leading minors of both signs
_SINGULAR_GRAM = [[2, 1, 3], [1, 1, 2], [3, 2, 5]]
_INDEFINITE = [[1, 2, 0], [2, 1, 0], [0, 0, 1]]


def _singular_gram_is_psd(_: dict[str, Path]) -> bool:
    return _psd_of(_SINGULAR_GRAM)


def _indefinite_gram_is_refused(_: dict[str, Path]) -> bool:
    return not _psd_of(_INDEFINITE)


def _replayed(seed: int = 9) -> dict[str, np.ndarray]:
    """Replayed features: nonnegative, with exactly zero products (a zero row of ``phi_k``)."""
    rng = np.random.default_rng(seed)
    q, k = np.abs(rng.standard_normal((50, 4))), np.abs(rng.standard_normal((50, 4)))
    k[7] = 0.0
    return {"phi_q": q, "phi_k": k}


def _replayed_grams_hold(_: dict[str, Path]) -> bool:
    """The genuine Grams of replayed features (the tests' own exact Gram) are found equal."""
    from certify.checkers import gram as checker_gram
    f = _replayed()
    (Gq, eq), (Gk, ek) = gram_reference.exact_gram(f["phi_q"]), gram_reference.exact_gram(f["phi_k"])
    ev = {"num_tokens": 50, "gram_q": Gq, "gram_q_exponent": eq, "gram_k": Gk, "gram_k_exponent": ek}
    return checker_gram.gram_problems({"evidence": ev}, f) == []


def _replayed_products_hold(_: dict[str, Path]) -> bool:
    """Every product of nonnegative replayed features is found >= 0."""
    from certify.checkers import gram as checker_gram
    return checker_gram.all_products_problems({"num_checked": 50 * 50}, _replayed(), rows=16) == []


def _freivalds_primes_redrawn(g: dict[str, Path]) -> bool:
    """The primes of a genuine Freivalds claim are the ones its challenge draws at which the minor
    is invertible (``certify.checkers.rank.freivalds.primes``)."""
    from certify.checkers.rank import freivalds as fchk
    claim = json.loads(g["freivalds"].read_text())["claims"][0]
    ev = claim["evidence"]
    A = np.load(g["freivalds"].parent / "m.npy")
    MZ = matrices.fmpz_matrix(A[np.ix_(ev["minor_rows"], ev["minor_cols"])])
    fr = ev["freivalds"]
    try:
        return fchk.primes(bytes.fromhex(fr["challenge"]), MZ, len(fr["primes"])) == fr["primes"]
    except Bad:                                              # no prime found
        return False


def _forged_numerical_count_is_refused(g: dict[str, Path]) -> bool:
    """diag(10, 1, 0, ...) at tol = 1/2 (two singular values above it) forged to a count of one:
    the rank-1 residual is 1 > 1/2, so verify must refuse it."""
    from certify.checkers.statements import render
    cert = json.loads(g["numerical-tol"].read_text())
    c = cert["claims"][0]
    assert c["evidence"]["k_lower"] == c["evidence"]["k_upper"] == 2
    c["evidence"]["k_lower"] = c["evidence"]["k_upper"] = 1
    c["statement"] = render(c["kind"], c["parameters"], c["evidence"]).text
    return not verify.verify_certificate(cert, g["numerical-tol"].parent).holds


def _forged_enclosure(g: dict[str, Path]) -> dict:
    """The factor certificate with every eigenvalue's enclosure replaced by the first's."""
    cert = json.loads(g["factor"].read_text())
    claim = next(c for c in cert["claims"] if c["kind"] == "eps_rank")
    enc = claim["evidence"]["sigma_sq_enclosures"]
    assert Fraction(enc[1][1]) < Fraction(enc[0][0])         # two distinct eigenvalues
    claim["evidence"]["sigma_sq_enclosures"] = [list(enc[0]) for _ in enc]
    return cert


def _forged_enclosure_is_refused(g: dict[str, Path]) -> bool:
    return not verify.verify_certificate(_forged_enclosure(g), g["factor"].parent).holds


CHECKS: dict[str, Callable[[dict[str, Path]], bool]] = {
    **{name: _holds(name) for name in ("bounds", "matrix", "scaled", "factor", "large", "freivalds",
                                       "projection", "transcript", "transcript-exp", "audit", "infeasible",
                                       "feasible", "all-products", "pair", "quadratic", "key-box",
                                       "theorem-near-log2", "numerical")},
    "forged-numerical-count-refused": _forged_numerical_count_is_refused,
    "singular-gram-psd": _singular_gram_is_psd, "indefinite-gram-refused": _indefinite_gram_is_refused,
    "replayed-grams": _replayed_grams_hold, "replayed-products": _replayed_products_hold,
    "freivalds-primes": _freivalds_primes_redrawn, "forged-enclosure-refused": _forged_enclosure_is_refused,
}


# ---------------------------------------------------------------- the plants

@dataclass(frozen=True)
class Plant:
    """``owner.name`` (a kernel module, or a class of one) replaced by ``wrong(real)``; ``check``
    is the answer it must change; ``abstain``: layers read before it, planted to abstain (a float
    test that does not decide, as it may), so that this primitive decides."""
    id: str
    owner: Any
    name: str
    wrong: Callable[[Callable], Callable]
    check: str
    abstain: tuple[tuple[Any, str, Callable], ...] = field(default=())


def _unless_none(f: Callable[[Any], Any]) -> Callable[[Callable], Callable]:
    """A wrong variant applying ``f`` to the real answer (None, an abstention, is kept)."""
    return lambda real: lambda *a, **k: (lambda v: v if v is None else f(v))(real(*a, **k))


def _uncertain_as_negative(real: Callable) -> Callable:
    """negative_pair taking every pair its enclosure does not prove nonnegative as negative."""
    def negative_pair(Q: np.ndarray, K: np.ndarray, rows: int = 256, limit: int = 4096) -> tuple[int, ...]:
        C, R = inertia.product_enclosure(Q, K)
        hits = np.argwhere(C < R)
        return (int(hits[0][0]), int(hits[0][1])) if len(hits) else ()
    return negative_pair


def _rank_shortcut(real: Callable) -> Callable:
    """is_psd_by_rank without asking that the principal part be positive definite."""
    def is_psd_by_rank(G: Any, part_is_pd: Any, p: int = (1 << 61) - 1) -> bool:
        R, S = modular.pivot_minor_mod_p(G, p)
        return R == S and len(S) == G.rank()
    return is_psd_by_rank


def _spaced_json(real: Callable) -> Callable:
    return lambda obj: hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _header_without_shape(real: Callable) -> Callable:
    return lambda scale, shape, encoding: (json.dumps({"encoding": encoding, "scale": scale}, sort_keys=True,
                                                      separators=(",", ":")) + "\n").encode()


def _big_endian(real: Callable) -> Callable:
    def array_sha256(A: np.ndarray, scale: Any) -> str:
        h = hashlib.sha256(hashing.matrix_header(scale, A.shape, "int64") + A.astype(">i8").tobytes())
        return "int64:" + h.hexdigest()
    return array_sha256


def _without_last_row(real: Callable) -> Callable:
    def fmpz_matrix(rows: Any, ncols: int | None = None) -> Any:
        M = real(rows, ncols)
        return M if M.nrows() < 2 else real(M.tolist()[:-1])
    return fmpz_matrix


def _exponent_negated(real: Callable) -> Callable:
    return lambda rows, scale: real(rows, scale if scale.get("kind") == "row_denominators"
                                    else {**scale, "exponent": -int(scale["exponent"])})


def _fermat_off_by_one(real: Callable) -> Callable:
    return lambda p: isinstance(p, int) and p >= 2 and pow(2, p, p) == 1        # should be 2^(p-1)


def _last_pivot_rows(real: Callable) -> Callable:
    return lambda F, p: (lambda R, C: (R[::-1], C))(*real(F, p))


def _box_with_the_origin(real: Callable) -> Callable:
    """Each term's minimum taken over its interval and 0 (a box taken to contain the origin)."""
    return lambda c, lo, hi: sum((min(Fraction(a) * lv, Fraction(a) * hv, Fraction(0))
                                  for a, lv, hv in zip(c, lo, hi)), Fraction(0))


def _one_entry_off(real: Callable) -> Callable:
    """A product whose entry (0, 0) is one too large."""
    def product(A: Any, B: Any) -> Any:
        M = real(A, B)
        M = type(M)(M)
        M[0, 0] = M[0, 0] + 1
        return M
    return product


def _reversed_rows(real: Callable) -> Callable:
    return _unless_none(lambda v: (v[0][::-1], v[1]))(real)


def _first_enclosure_repeated(real: Callable) -> Callable:
    return _unless_none(lambda v: [v[0]] * len(v))(real)


def _summaries_doubled(real: Callable) -> Callable:
    return lambda *a: {k: v * 2 for k, v in real(*a).items()}


_NEVER = lambda real: lambda *a, **k: False          # noqa: E731
_NONE = lambda *a, **k: None                         # noqa: E731
_FALSE = lambda *a, **k: False                       # noqa: E731

PLANTS = [
    Plant("canonical-json-with-spaces", hashing, "canonical_sha256", _spaced_json, "audit"),
    Plant("header-without-shape", hashing, "matrix_header", _header_without_shape, "matrix"),
    Plant("int64-bytes-big-endian", hashing, "array_sha256", _big_endian, "large"),
    Plant("rows-hash-without-scale", hashing, "rows_sha256",
          lambda real: lambda rows, scale: real(rows, None), "matrix"),
    Plant("matrix-without-last-row", matrices, "fmpz_matrix", _without_last_row, "matrix"),
    Plant("scale-exponent-negated", matrices, "scaled_matrix", _exponent_negated, "scaled"),
    Plant("product-entry-off-by-one", matrices, "product", _one_entry_off, "audit"),
    Plant("gram-doubled", matrices, "gram_matrix", lambda real: lambda A: real(A) * 2, "scaled"),
    Plant("fermat-test-off-by-one", matrices, "is_prime", _fermat_off_by_one, "large"),
    Plant("minor-test-inverted", modular, "minor_nonzero_mod_p",
          lambda real: lambda F, p, R, C: not real(F, p, R, C) if R else True, "matrix"),
    Plant("pivot-rows-reversed", modular, "pivot_minor_mod_p", _last_pivot_rows, "matrix"),
    Plant("determinant-test-inverted", modular, "det_nonzero_mod_p", lambda real: lambda M, p: not real(M, p),
          "freivalds-primes"),
    Plant("semidefinite-tested-as-definite", psd, "is_psd",
          lambda real: lambda M, strict=False: real(M, True), "singular-gram-psd",
          ((inertia, "positive_definite", _FALSE), (psd, "is_psd_by_rank", _FALSE))),
    Plant("definite-never-proved", psd, "is_positive_definite", _NEVER, "projection"),
    Plant("rank-shortcut-without-definite-part", psd, "is_psd_by_rank", _rank_shortcut,
          "indefinite-gram-refused"),
    Plant("identity-without-d", products, "product_identity",
          lambda real: lambda A, B, C, d=1, c=1: real(A, B, C, 1, c), "matrix"),
    Plant("span-refused-beyond-the-minor", products, "column_span_rational",
          lambda real: lambda F, R, C, block=256: F.ncols() == len(C), "matrix"),
    Plant("least-product-off-by-one", products, "product_min", _unless_none(lambda v: v - 1), "all-products"),
    Plant("box-with-the-origin", products, "box_minimum", _box_with_the_origin, "key-box"),
    Plant("span-answer-inverted", span, "span_mod_primes", _unless_none(lambda v: not v), "large"),
    Plant("hadamard-bound-overestimated", span, "bound_sq", _unless_none(lambda v: v << (1 << 20)),
          "freivalds"),
    Plant("pivot-rows-in-reverse", span, "pivot_rows", _reversed_rows, "large"),
    Plant("freivalds-test-inverted", freivalds, "test", _unless_none(lambda v: (not v[0], v[1])),
          "freivalds"),
    Plant("error-without-the-prime-term", freivalds, "error",
          lambda real: lambda s, t, m, L, LD: Fraction(1, 1 << (s * t)), "freivalds"),
    Plant("limb-product-off-by-one", freivalds, "product", _unless_none(lambda v: v + 1), "freivalds"),
    Plant("charpoly-plus-one", roots, "charpoly", _unless_none(lambda v: v + 1), "matrix"),
    Plant("descartes-count-plus-one", roots, "count_above", _unless_none(lambda v: v + 1), "matrix"),
    Plant("enclosure-check-rejects-the-first", roots, "enclosures_hold", lambda real: lambda *a: 0, "factor",
          ((inertia, "enclosures", _NONE),)),
    Plant("projection-margin-never", roots, "projection_margin_definite", _NEVER, "projection"),
    Plant("float-count-plus-one", inertia, "count_above", _unless_none(lambda v: v + 1), "factor"),
    Plant("ball-count-plus-one", balls, "count_above", _unless_none(lambda v: v + 1), "factor",
          ((inertia, "count_above", _NONE),)),
    Plant("enclosures-first-repeated", inertia, "enclosures", _first_enclosure_repeated,
          "forged-enclosure-refused"),
    Plant("definite-by-positive-diagonal", inertia, "positive_definite",
          lambda real: lambda G: all(G[i][i] > 0 for i in range(len(G))), "indefinite-gram-refused"),
    Plant("enclosed-product-negated", inertia, "product_enclosure",
          lambda real: lambda P, Q: (lambda C, R: (-C, R))(*real(P, Q)), "replayed-products"),
    Plant("undecided-products-as-negative", inertia, "negative_pair", _uncertain_as_negative,
          "replayed-products"),
    Plant("summaries-doubled", inertia, "quadratic_summaries", _summaries_doubled, "quadratic"),
    Plant("residual-quartered", singular, "singular_bounds",
          _unless_none(lambda b: b._replace(delta_sq=b.delta_sq / 16)), "forged-numerical-count-refused"),
    Plant("float64-bytes-big-endian", hashing, "float64_sha256",
          lambda real: lambda A: "float64:" + hashlib.sha256(hashing.matrix_header(None, A.shape, "float64")
                                                             + A.astype(">f8").tobytes()).hexdigest(),
          "numerical"),
    Plant("gram-exponent-off-by-one", gram, "gram_identity",
          lambda real: lambda X, W, we, bits=128: real(X, W, we + 1, bits), "replayed-grams"),
    Plant("kernel-value-plus-one", attention, "kernel_value", _unless_none(lambda v: v + 1), "feasible"),
    Plant("output-drops-the-last-token", attention, "output",
          lambda real: lambda alpha, g, seq: real(alpha, g, seq[:-1]), "audit"),
    Plant("error-doubled", attention, "error", _unless_none(lambda v: 2 * v), "audit"),
    Plant("within-target-off-by-one", attention, "within",
          lambda real: lambda N, D, t, eps, b=1: real(N, D, t + 1, eps, b), "audit"),
    Plant("lemma3-factor-plus-one", attention, "lemma3", _unless_none(lambda v: (v[0], v[1] + 1)), "bounds"),
    Plant("lemma4-rank-plus-one", attention, "lemma4_rank", _unless_none(lambda v: (v[0], v[1] + 1)),
          "infeasible"),
    Plant("trace-bound-doubled", attention, "trace_rank_bound", _unless_none(lambda v: (*v[:3], 2 * v[3])),
          "factor"),
    Plant("chain-ranks-lemma4-plus-one", attention, "chain_ranks",
          _unless_none(lambda v: {**v, "lemma4": v["lemma4"] + 1}), "infeasible"),
    Plant("margin-term-counted-twice", attention, "quadratic_margin",
          _unless_none(lambda v: v - Fraction(1, 2)), "quadratic"),
    Plant("feature-map-doubled", replay.Numbers, "f", lambda real: lambda self, x: real(self, x) * 2,
          "transcript-exp"),
    Plant("precision-ignored", replay, "working_precision",
          lambda real: lambda bits: contextlib.nullcontext(), "theorem-near-log2"),
    Plant("replay-product-plus-one", replay, "product", _unless_none(lambda v: v + 1), "transcript"),
    Plant("cells-offset", replay, "cells",
          lambda real: lambda A, B, g, top, a, b: real(A, B, g, top, a + 1, b), "transcript"),
    Plant("sum-test-inverted", replay, "sum_at_least", _unless_none(lambda v: ~v), "transcript"),
]


def _plant(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, wrong: Callable) -> None:
    """``owner.name = wrong``, and the same under every name a loaded ``certify`` module holds the
    real one by (``from ... import name`` copies the reference)."""
    real = getattr(owner, name)
    monkeypatch.setattr(owner, name, wrong)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("certify."):
            for attr, value in list(vars(mod).items()):
                if value is real:
                    monkeypatch.setattr(mod, attr, wrong)


@pytest.mark.parametrize("plant", PLANTS, ids=[p.id for p in PLANTS])
def test_a_planted_wrong_primitive_changes_a_checked_answer(plant, genuine, monkeypatch):
    right = CHECKS[plant.check]
    assert right(genuine), f"{plant.check} with the real kernel"
    for owner, name, wrong in plant.abstain:
        _plant(monkeypatch, owner, name, wrong)
    assert right(genuine), f"{plant.check} with {[n for _, n, _ in plant.abstain]} abstaining"
    _plant(monkeypatch, plant.owner, plant.name, plant.wrong(getattr(plant.owner, plant.name)))
    assert not right(genuine), f"{plant.id}: {plant.check} is still answered right with a wrong {plant.name}"


def _readme_rows() -> list[tuple[str, list[str]]]:
    """``(primitives cell, plant ids)`` of every row of the README's table of primitives."""
    rows = []
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 4:
            rows.append((cells[0], re.findall(r"`([a-z0-9-]+)`", cells[-1])))
    return rows


def test_every_primitive_in_the_readme_has_a_plant():
    """Each row of the README's table names plants of this file for its primitives, each plant
    is named once, for a primitive of its row, and every exported name of the kernel is in a row."""
    import certify.checkers.kernel as kernel
    rows = _readme_rows()
    assert len(rows) >= 20
    by_id = {p.id: p for p in PLANTS}
    named = [i for _, ids in rows for i in ids]
    assert sorted(named) == sorted(by_id), set(named) ^ set(by_id)
    for cell, ids in rows:
        assert ids, f"no plant for {cell}"
        for i in ids:
            assert by_id[i].name in cell or by_id[i].owner.__name__.split(".")[-1] in cell, (i, cell)
    text = " ".join(cell for cell, _ in rows)
    assert all(name in text for name in kernel.__all__)
