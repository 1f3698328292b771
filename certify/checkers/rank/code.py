"""Checker of ``code_rank`` claims: Lemma 4 / Thm 5 re-derived from the rows of
the features at the code's tokens.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Mapping

from certify.checkers.common import (
    Bad,
    bits,
    int_matrix,
    integer,
    rational,
    rational_matrix,
    same_rational,
)
from certify.checkers.kernel import fmpz_matrix, product
from certify.checkers.kernel.attention import trace_rank_bound
from certify.checkers.kinds import BY_NAME
from certify.checkers.rank.evidence import _FEATURE_SOURCES, _TRUSTED, _Features, _indices

#: a code_rank claim's parameters and evidence forms (declared in certify.checkers.kinds)
_DECLARED = BY_NAME["code_rank"]
#: the feature sources other than trusted summaries (the features at hand)
_AT_HAND = tuple(k for k in _FEATURE_SOURCES if k != "trusted")


def _cube_index(bitrow: list[int]) -> int:
    return sum(b << k for k, b in enumerate(bitrow))


def check_code_rank(claim: Mapping[str, Any], cert: Mapping[str, Any], matrix: Any = None) -> list[str]:
    ev = claim["evidence"]
    p = _DECLARED.params().check_keys(claim["parameters"], "parameters")
    if not isinstance(ev.get("words"), list) or not ev["words"]:
        raise Bad("words must be a non-empty list of bit strings")
    words = [bits(w, "code word") for w in ev["words"]]
    W, M = len(words), len(words[0])
    if any(len(w) != M for w in words) or len({sum(w) for w in words}) != 1:
        raise Bad("the words are not of one length and one weight")
    if (integer(p["num_words"], "num_words"), integer(p["M"], "M")) != (W, M):
        raise Bad(f"parameters num_words, M are not the code's {W}, {M}")
    if "B" in ev:
        _DECLARED.form("matrix").check_keys(ev, "code_rank evidence")
        if ev["trusted"] != _TRUSTED["code_rank", "matrix"]:
            raise Bad(f"trusted must be exactly {_TRUSTED['code_rank', 'matrix']}")
        B = rational_matrix(ev["B"], "B", (W, W))
    else:
        factor = _DECLARED.form("factor")
        if "trusted" in ev:     # features not at hand: their hash is optional, no word is located
            factor.check_keys(ev, "code_rank evidence", require=("trusted",),
                              forbid=_AT_HAND + ("word_rows",))
            if ev["trusted"] != _TRUSTED["code_rank", "factor"]:
                raise Bad(f"trusted must be exactly {_TRUSTED['code_rank', 'factor']}")
        else:                   # the features at hand: no trusted summary and no size of one
            factor.check_keys(ev, "code_rank evidence", require=("features_sha256",),
                              forbid=("trusted_entries",))
        qf = int_matrix(ev["query_features"], "query_features", (W, None))
        kf = int_matrix(ev["key_features"], "key_features", (W, len(qf[0])))
        qe, ke = integer(ev["query_exponent"], "query_exponent"), integer(ev["key_exponent"], "key_exponent")
        F = _Features(ev, cert, "code_rank", "factor") if "trusted" not in ev else None
        if F is not None and F.have:
            ts = p["token_set"]
            if ("tokens" in ev) != ("word_rows" in ev):
                raise Bad("tokens and word_rows go together")
            if "tokens" in ev:          # the rows of x_S and x_(U^c) among the listed tokens
                toks = [bits(t, "token", M) for t in ev["tokens"]]
                if len(toks) != len(F.phi_q):
                    raise Bad(f"{len(toks)} tokens listed for {len(F.phi_q)} feature rows")
                located = int_matrix(ev["word_rows"], "word_rows", (W, 2))
                for i, (a, b) in enumerate(located):
                    if not (0 <= a < len(toks) and 0 <= b < len(toks)) or toks[a] != words[i] \
                            or toks[b] != [1 - v for v in words[i]]:
                        raise Bad(f"word_rows[{i}] are not the rows of x_S and x_(S^c)")
            elif ts != f"cube:{M}":
                raise Bad(f"feature rows are located on the token set cube:{M}, or by tokens and "
                          f"word_rows, not on {ts!r}")
            else:
                located = [[_cube_index(w), _cube_index([1 - b for b in w])] for w in words]
            for i, _w in enumerate(words):
                xs, xc = located[i]
                for c in range(len(qf[0])):
                    if Fraction(qf[i][c]) * Fraction(2) ** qe != F.value("q", xs, c) or \
                            Fraction(kf[i][c]) * Fraction(2) ** ke != F.value("k", xc, c):
                        raise Bad(f"word {i}: query/key features are not the kernel's features "
                                  f"at x_S = {xs}, x_(U^c) = {xc}")
        P = product(fmpz_matrix(qf), fmpz_matrix(kf).transpose())
        sc = Fraction(2) ** (qe + ke)
        B = [[Fraction(int(P[i, j])) * sc for j in range(W)] for i in range(W)]
    kept, frob, lam, bound = trace_rank_bound(B)
    t = len(kept)
    problems = []
    if _indices(ev["kept"], "kept") != kept or integer(ev["t"], "t") != t:
        problems.append(f"kept / t differ from the nonzero diagonal {kept}")
    if (ev["min_lambda"] is None) != (lam is None) or (lam is not None and rational(ev["min_lambda"], "min_lambda") != lam):
        problems.append(f"min_lambda is {ev['min_lambda']!r:.40}, re-derived {lam}")
    if claim["verdict"] == "refuted":
        return problems + ["a Lemma 4 lower bound is never refuted"]
    if t == 0:
        if claim["verdict"] != "unknown":
            problems.append("no nonzero diagonal: the verdict must be unknown")
        if (ev["frobenius_sq"], ev["bound"], ev["rank_lower"]) != ("0", "0", 0):
            problems.append("with t = 0 the frobenius_sq, bound and rank_lower are 0")
        return problems
    same_rational(ev["frobenius_sq"], frob, "frobenius_sq")
    same_rational(ev["bound"], bound, "bound")
    if integer(ev["rank_lower"], "rank_lower") != math.ceil(bound):
        problems.append(f"rank_lower is {ev['rank_lower']}, Lemma 4 gives ceil({bound}) = {math.ceil(bound)}")
    if claim["verdict"] != "proved":
        problems.append(f"the bound is proved but the verdict is {claim['verdict']}")
    return problems
