"""Exact numbers and the few exact algorithms of the reference checker: ranks,
characteristic polynomials and root counts (python-flint), content hashes.

Two exceptions carry every outcome that is not a pass: :class:`Fails` (the
claim does not hold; the message says why) and :class:`Refused` (the input is
not read at all: a size above a limit or a value that cannot be read exactly;
``certify verify --reference`` exit 2)."""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from typing import Any, Sequence

import flint

from certify.reference.limits import MAX_CHARPOLY_DEGREE, MAX_MATRIX_ENTRIES


class Fails(Exception):
    """The claim does not hold (the message is the reason)."""


class Refused(Exception):
    """The input is refused before any work (exit 2, one line)."""


def canonical_sha256(obj: Any) -> str:
    """sha256 (hex) of the canonical JSON text of ``obj``: keys sorted, no spaces."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are one value as JSON (``1``, ``1.0`` and ``true`` are three;
    Python's ``==`` would make them one)."""
    try:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return False


def num(v: Any, what: str) -> Fraction:
    """An exact rational from a JSON int or a ``"p"`` / ``"p/q"`` string (q > 0)."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise Fails(f"{what} must be an int or a 'p/q' string, got {v!r:.60}")
    if isinstance(v, int):
        return Fraction(v)
    a, sep, b = v.strip().partition("/")
    try:
        p, q = int(a), (int(b) if sep else 1)
    except ValueError:
        raise Fails(f"{what} is not an exact rational: {v!r:.60}") from None
    if q <= 0:
        raise Fails(f"{what} has a denominator <= 0: {v!r:.60}")
    return Fraction(p, q)


def whole(v: Any, what: str, lo: int | None = None) -> int:
    """A JSON integer (not a bool), at least ``lo``."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise Fails(f"{what} must be an integer, got {v!r:.60}")
    if lo is not None and v < lo:
        raise Fails(f"{what} = {v} < {lo}")
    return v


def int_rows(v: Any, what: str) -> list[list[int]]:
    """A rectangular, non-empty list of integer rows."""
    if not isinstance(v, list) or not v or not all(isinstance(r, list) for r in v):
        raise Fails(f"{what} must be a non-empty list of rows")
    if len({len(r) for r in v}) != 1 or not v[0]:
        raise Fails(f"{what} has rows of different or zero length")
    return [[whole(x, what) for x in r] for r in v]


def ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def floor(x: Fraction) -> int:
    return x.numerator // x.denominator


def q_text(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


# ---------------------------------------------------------------- matrices

def check_size(rows: int, cols: int, what: str) -> None:
    if rows * cols > MAX_MATRIX_ENTRIES:
        raise Refused(f"{what} is {rows} x {cols} = {rows * cols} entries, above the reference "
                      f"checker's limit of {MAX_MATRIX_ENTRIES} entries")


def integer_form(rows: Sequence[Sequence[Fraction]]) -> tuple[list[list[int]], Fraction]:
    """``(N, s)`` with ``rows = N s`` exactly: ``N`` integer, ``s = 1 / lcm(denominators)``."""
    den = 1
    for r in rows:
        for x in r:
            d = x.denominator
            if den % d:
                den = den * d // _gcd(den, d)
    return [[x.numerator * (den // x.denominator) for x in r] for r in rows], Fraction(1, den)


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def fmpz(rows: Sequence[Sequence[int]]) -> Any:
    n, m = len(rows), len(rows[0]) if rows else 0
    return flint.fmpz_mat(n, m, [int(x) for r in rows for x in r])


def fmpq(rows: Sequence[Sequence[Fraction]]) -> Any:
    n, m = len(rows), len(rows[0]) if rows else 0
    return flint.fmpq_mat(n, m, [flint.fmpq(x.numerator, x.denominator) for r in rows for x in r])


def rank(rows: Sequence[Sequence[int]]) -> int:
    """The rank over Q of an integer matrix (flint, exact)."""
    check_size(len(rows), len(rows[0]) if rows else 0, "a matrix to rank")
    return int(fmpz(rows).rank())


# ---------------------------------------------------------------- characteristic polynomials

def charpoly(M: Any) -> Any:
    """The characteristic polynomial of a square flint matrix, as an ``fmpq_poly``."""
    if M.nrows() > MAX_CHARPOLY_DEGREE:
        raise Refused(f"a characteristic polynomial of degree {M.nrows()}, above the reference "
                      f"checker's limit of {MAX_CHARPOLY_DEGREE}")
    return flint.fmpq_poly([flint.fmpq(c) if not isinstance(c, flint.fmpq) else c
                            for c in M.charpoly().coeffs()])


def _sign_changes(p: Any) -> int:
    signs = [1 if c > 0 else -1 for c in p.coeffs() if c != 0]
    return sum(1 for a, b in zip(signs, signs[1:]) if a != b)


def _fq(x: Fraction) -> Any:
    return flint.fmpq(x.numerator, x.denominator)


def roots_above(p: Any, c: Fraction) -> int:
    """Roots of the real-rooted ``p`` strictly above ``c``, with multiplicity: the
    sign changes of ``p(x + c)`` (Descartes' rule, exact when every root is real)."""
    return _sign_changes(p(flint.fmpq_poly([_fq(c), 1])))


def roots_below(p: Any, c: Fraction) -> int:
    """Roots of the real-rooted ``p`` strictly below ``c``: sign changes of ``p(c - x)``."""
    return _sign_changes(p(flint.fmpq_poly([_fq(c), -1])))


def degree(p: Any) -> int:
    return int(p.degree())


def is_psd(M: Any) -> bool:
    """A symmetric rational matrix is positive semidefinite: no root of its
    characteristic polynomial below 0."""
    if M != M.transpose():
        return False
    return roots_below(charpoly(M), Fraction(0)) == 0
