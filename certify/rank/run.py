"""Exact and certified approximate rank of a kernel (``certify rank SOURCE``).

Claims (evidence fields: :mod:`certify.checkers.rank`):

* ``exact_rank`` -- two-sided rank over Q of ``alpha`` on the token set
  (factor form through the exact Gram core, matrix form through a modular
  minor and an exact column-span witness); ``proved`` only when the bounds meet.
* ``eps_rank`` (``--eps``) -- ``k`` singular values ``> eps``: every matrix
  within ``eps`` in spectral norm has rank ``>= k`` (exact count on the core).
* ``numerical_rank`` (a float matrix whose entries are not all integers, or ``--tol``) -- how
  many singular values exceed numpy's default tolerance ``sigma_1 max(m, n) 2^-52`` (the count
  ``numpy.linalg.matrix_rank`` makes) or a stated one, two-sided (:mod:`.numerical`); with
  ``numerical_only`` it is the only claim (the exact rank of the stored values is another question).
* ``code_rank`` (``--code``) -- Lemma 4 / Thm 5: the row-normalized
  ``B[S, U] = alpha(x_S, x_{U^c})`` over a constant-weight code has rank
  ``>= ceil(t^2 / ||C||_F^2)`` (per-pair Lambda).
* ``nonnegative`` (``--require-nonnegative``) -- ``alpha >= 0`` on the token
  set; a signed kernel is refused with exit code 3.

:func:`certify_rank` makes every requested claim for one kernel; the claim
builders are :mod:`.exact`, :mod:`.eps`, :mod:`.code` and :mod:`.nonnegative`
over the factor-form summary (:mod:`.summary`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from certify.core.certificate import Certificate, Claim, ClaimKind
from certify.core.errors import InputError, UncertifiableError
from certify.core.kernel import Form, Kernel
from certify.core.verdict import Verdict
from certify.rank.evidence import integer_matrix
from certify.rank.exact import exact_rank_factor_claim, exact_rank_matrix_claim
from certify.rank.options import RankOptions


@dataclass(frozen=True)
class RankReport:
    certificate: Certificate
    rank_lower: int
    rank_upper: int
    verdict: Verdict


#: the default options (frozen, so one shared instance is safe as a default argument)
_DEFAULT = RankOptions()


def certify_rank(kernel: Kernel, opt: RankOptions = _DEFAULT, engine=None) -> RankReport:
    """All requested claims for ``kernel``; a signed kernel under
    ``require_nonnegative`` raises :class:`UncertifiableError`. ``engine``
    (:mod:`certify.core.engine`) shards the factor-form Gram pass."""
    claims: list[Claim] = []
    if kernel.form is Form.FACTOR and (opt.tol is not None or opt.numerical_only):
        raise InputError("the numerical rank (--tol, --numerical-only) is certified for a matrix file, "
                         "not for features")
    if kernel.form is Form.FACTOR:                # the modules a run needs, imported when needed
        from certify.rank.summary import summarize_features
        s = summarize_features(kernel, batch_size=opt.batch_size,
                               keep_limit=max(opt.embed_limit, 1 << 22), engine=engine,
                               progress=opt.progress)
        if opt.require_nonnegative:
            from certify.rank.nonnegative import nonnegative_claim_factor
            claims.append(_require(nonnegative_claim_factor(kernel, s, opt)))
        rank_claim = exact_rank_factor_claim(kernel, s, opt)
        claims.insert(0, rank_claim)
        if opt.eps is not None:
            from certify.rank.eps import eps_rank_factor_claim
            claims.append(eps_rank_factor_claim(kernel, s, opt.eps, opt))
    else:
        from certify.rank.numerical import numerical_rank_claim, wanted
        numerical = numerical_rank_claim(kernel, opt) if wanted(kernel, opt) else None
        if opt.numerical_only:
            assert numerical is not None
            rank_claim = numerical
            claims.append(numerical)
        else:
            N = integer_matrix(kernel)
            if opt.require_nonnegative:
                from certify.rank.nonnegative import nonnegative_claim_matrix
                claims.append(_require(nonnegative_claim_matrix(kernel, N, opt)))
            rank_claim = exact_rank_matrix_claim(kernel, N, opt)
            claims.insert(0, rank_claim)
            if opt.eps is not None:
                from certify.rank.eps import eps_rank_matrix_claim
                claims.append(eps_rank_matrix_claim(kernel, N, opt.eps, opt))
            if numerical is not None:
                claims.append(numerical)
    if opt.code is not None:                    # the claims a run asks for, imported when asked
        from certify.rank.code import code_rank_claim
        claims.append(code_rank_claim(kernel, opt.code, opt.code_name, opt,
                                      summary=s if kernel.form is Form.FACTOR else None))
    claims = share_features(claims)
    prov = kernel.provenance
    inputs = {prov.source: prov.source_sha256} if prov.source_sha256 else {}
    cert = Certificate(claims=claims, inputs=inputs, seeds={"primes": opt.seed})
    ev = rank_claim.evidence
    lo, hi = ("k_lower", "k_upper") if rank_claim.kind is ClaimKind.NUMERICAL_RANK else ("rank_lower", "rank_upper")
    return RankReport(cert, int(ev[lo]), int(ev[hi]), rank_claim.verdict)


#: the fields of a factor-form claim's stated Grams
_GRAMS = ("gram_q", "gram_q_exponent", "gram_k", "gram_k_exponent")


def share_features(claims: list[Claim]) -> list[Claim]:
    """Embed the features once and state the Grams once: a later claim with the same
    embedded features refers to the first one's (``features_claim``, its index in the
    certificate), and an eps-rank claim stating the same Grams as an exact-rank claim of
    the same features refers to that claim's (``grams_claim``)."""
    import dataclasses
    out: list[Claim] = []
    first: tuple[int, Any] | None = None
    grams: dict[str, int] = {}                  # exact-rank claims stating Grams, by their features
    for c in claims:
        feats = c.evidence.get("features")
        if feats is not None and first is None:
            first = (len(out), feats)
        elif feats is not None and first is not None and feats == first[1]:
            shared = {k: v for k, v in c.evidence.items() if k != "features"}
            shared["features_claim"] = first[0]
            c = dataclasses.replace(c, evidence=shared)
        ev = c.evidence
        if ev.get("form") == "factor" and all(k in ev for k in _GRAMS):
            key = json.dumps([ev.get("features_sha256"), ev.get("num_tokens"), ev.get("r")], sort_keys=True)
            i = grams.get(key)
            if c.kind is ClaimKind.EXACT_RANK and i is None:
                grams[key] = len(out)
            elif c.kind is ClaimKind.EPS_RANK and i is not None \
                    and all(out[i].evidence[k] == ev[k] for k in _GRAMS):
                c = dataclasses.replace(c, evidence={**{k: v for k, v in ev.items() if k not in _GRAMS},
                                                     "grams_claim": i})
        out.append(c)
    return out


def _require(claim: Claim) -> Claim:
    if claim.verdict is Verdict.REFUTED:
        raise UncertifiableError(f"nonnegativity required but the kernel is signed: {claim.reason}")
    if claim.verdict is not Verdict.PROVED:
        raise UncertifiableError(f"nonnegativity required but not certifiable: {claim.reason}")
    return claim


def load_code(spec: str) -> tuple[np.ndarray, str]:
    """The code of a ``code_rank`` claim: ``paper-5.1`` or a code file
    (:func:`certify.core.families.load_code`), with the name it is shown by."""
    from pathlib import Path

    from certify.core.codes import paper51_code
    from certify.core.families import load_code as read_code

    if spec == "paper-5.1":
        return paper51_code(), "paper-5.1"
    if not Path(spec).is_file():
        raise InputError(f"unknown code {spec!r}: not 'paper-5.1' and not a file")
    return read_code(spec), Path(spec).name
