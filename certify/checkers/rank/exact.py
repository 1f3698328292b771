"""Checker of ``exact_rank`` claims (factor and matrix form): the lower bound's
minor modulo its prime, the upper bound's null-space basis or column-span
witness, exactly.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from certify.checkers.common import Bad, int_matrix, integer
from certify.checkers.kernel import column_span_rational, fmpz_matrix, product, product_identity
from certify.checkers.kinds import BY_NAME
from certify.checkers.rank.evidence import (
    _check_grams,
    _check_minor,
    _check_params,
    _get_matrix,
    _indices,
    _matrix_keys,
    _verdict_from_bounds,
)
from certify.checkers.rank.span import check_matrix_rank_array

#: an exact_rank claim's evidence forms (declared in certify.checkers.kinds)
_DECLARED = BY_NAME["exact_rank"]


def check_exact_rank(claim: Mapping[str, Any], cert: Mapping[str, Any], matrix: Any = None) -> list[str]:
    ev = claim["evidence"]
    if ev.get("form") == "factor":
        _DECLARED.form("factor").check_keys(ev, "factor evidence")
        GQ, GK, _, _, F = _check_grams(ev, cert, "exact_rank")
        _check_params(claim, cert, "factor", integer(ev["num_tokens"], "num_tokens"), F.dtype)
        core = product(GQ, GK)
        r = core.nrows()
        R, C = _indices(ev["minor_rows"], "minor_rows"), _indices(ev["minor_cols"], "minor_cols")
        problems = []
        lower = _check_minor(core, ev["prime"], R, C, "minor of the core")
        X = int_matrix(ev["null_basis"], "null_basis")
        upper = r
        if X:
            Xm = fmpz_matrix(X)
            k = Xm.ncols()
            NR, NC = _indices(ev["null_minor_rows"], "null_minor_rows"), _indices(ev["null_minor_cols"], "null_minor_cols")
            if Xm.nrows() != r or not product_identity(core, Xm, fmpz_matrix([[0] * k for _ in range(r)])):
                problems.append("null_basis does not satisfy core X = 0")
            elif _check_minor(Xm, ev["null_prime"], NR, NC, "null-basis minor") != k:
                problems.append("the null-basis minor does not have full column rank k")
            else:
                upper = r - k
            if ev["upper_witness"] != "null_space":
                problems.append("upper_witness must be null_space when a null basis is given")
        elif ev["upper_witness"] != "trivial" or ev["null_prime"] is not None \
                or ev["null_minor_rows"] != [] or ev["null_minor_cols"] != []:
            problems.append("without a null basis the upper witness is trivial with no null minor")
        return problems + _verdict_from_bounds(claim, lower, upper)
    if ev.get("form") != "matrix":
        return [f"unknown form {ev.get('form')!r}"]
    _matrix_keys(ev, _DECLARED.form("matrix"), matrix)
    fast = ev["upper_witness"] == "freivalds"
    if fast != ("freivalds" in ev) or fast != ("upper_bound" in claim["parameters"]):
        raise Bad("evidence.freivalds and parameters.upper_bound go with upper_witness 'freivalds' only")
    if fast and not (isinstance(matrix, np.ndarray) and matrix.dtype == np.int64):
        rows = _get_matrix(ev, matrix)               # embedded or re-read: the same check on int64
        if not rows or not rows[0]:
            raise Bad("the Freivalds witness needs a nonempty matrix")
        if any(abs(v) >= 1 << 62 for r in rows for v in r):
            raise Bad("matrix entries too large for the Freivalds check")
        matrix = np.array(rows, dtype=np.int64).reshape(ev["shape"])
    if isinstance(matrix, np.ndarray) and matrix.dtype == np.int64 and matrix.ndim == 2:
        found = check_matrix_rank_array(claim, cert, matrix)        # large: numpy, many primes
        if found is not None:
            return found
    if fast:
        raise Bad("the Freivalds witness needs a nonzero rank below min(shape) and a valid minor")
    rows = _get_matrix(ev, matrix)
    _check_params(claim, cert, "matrix", None, None)
    F = fmpz_matrix(rows)
    R, C = _indices(ev["minor_rows"], "minor_rows"), _indices(ev["minor_cols"], "minor_cols")
    problems = []
    lower = _check_minor(F, ev["prime"], R, C, "minor")
    n1, n2 = F.nrows(), F.ncols()
    upper = min(n1, n2)
    if ev["upper_witness"] == "column_span":
        if C and not lower:
            problems.append("column-span witness without a nonsingular minor")
        elif column_span_rational(F, R, C):
            upper = len(C)
        else:
            problems.append("an empty column-span witness, but the matrix is not zero" if not C
                            else "column-span witness fails: a column lies outside the span")
    elif ev["upper_witness"] != "trivial":
        problems.append(f"unknown upper_witness {ev['upper_witness']!r}")
    return problems + _verdict_from_bounds(claim, lower, upper)
