"""The checker's trusted kernel (certify.checkers.kernel): each primitive against a
planted case that a plausible wrong implementation gets wrong, and the kernel's
import rule (standard library, numpy, python-flint, itself)."""

import ast
import hashlib
import sys
from fractions import Fraction
from pathlib import Path

import flint
import pytest

from certify.checkers import kernel
from certify.checkers.kernel import (box_minimum, canonical_sha256, columns_in_span, fmpz_mat,
                                     is_positive_definite, is_psd, minor_nonzero_mod_p,
                                     pivot_minor_mod_p, product_equals, product_is_zero,
                                     products_nonnegative, scaled_product_equals)

KERNEL = Path(kernel.__file__).parent


def test_kernel_imports_only_stdlib_numpy_flint_and_itself():
    allowed = set(sys.stdlib_module_names) | {"numpy", "flint", "__future__"}
    for f in sorted(KERNEL.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for n in names:
                assert n.split(".")[0] in allowed or n.startswith("certify.checkers.kernel"), (f.name, n)


def test_kernel_is_under_1200_lines_and_every_module_states_its_mathematics():
    files = sorted(KERNEL.glob("*.py"))
    assert sum(len(f.read_text().splitlines()) for f in files) < 1200
    for f in files:
        doc = ast.get_docstring(ast.parse(f.read_text()))
        assert doc and (f.name == "__init__.py" or "Statement" in doc), f.name


# ---------------------------------------------------------------- PSD, one method

def test_psd_catches_one_tiny_negative_eigenvalue():
    tiny = Fraction(1, 10 ** 40)
    M = [[1, 1, 0], [1, 1, 0], [0, 0, 1]]                 # eigenvalues 0, 1, 2: PSD, singular
    assert is_psd(M) and not is_positive_definite(M)
    bad = [[1, 1, 0], [1, 1 - tiny, 0], [0, 0, 1]]        # eigenvalue ~ -tiny/2: floats call it PSD
    assert not is_psd(bad)
    assert is_psd([[1, 1, 0], [1, 1 + tiny, 0], [0, 0, 1]])
    assert is_positive_definite([[1, 1, 0], [1, 1 + tiny, 0], [0, 0, 1]])


def test_psd_needs_every_coefficient_not_only_the_diagonal_or_the_determinant():
    assert not is_psd([[0, 1], [1, 0]])                   # diagonal >= 0, det = -1
    assert not is_psd([[-1, 0, 0], [0, -1, 0], [0, 0, 1]])  # det = 1 > 0, trace = -1
    assert not is_psd([[1, 2], [2, 1]])                   # positive entries, eigenvalue -1
    assert not is_psd([[1, 0], [1, 1]])                   # not symmetric: refused
    assert not is_psd([[1, 0, 0], [0, 1, 0]])             # not square
    assert is_psd([]) and is_positive_definite([])
    assert is_psd([[Fraction(0)] * 3 for _ in range(3)]) and not is_positive_definite([[0]])


def test_psd_takes_flint_matrices_and_large_integers():
    big = 10 ** 30
    assert is_positive_definite(flint.fmpz_mat([[big, big - 1], [big - 1, big]]))
    assert not is_psd(flint.fmpz_mat([[big, big + 1], [big + 1, big]]))     # det = -2 big - 1
    assert is_psd(flint.fmpq_mat([[flint.fmpq(1, 3), 0], [0, 0]]))


# ---------------------------------------------------------------- minors modulo p

def test_minor_zero_mod_p_but_not_over_z_is_not_a_proof():
    F = fmpz_mat([[7, 0], [0, 1]])                        # det 7: nonzero over Z, zero mod 7
    assert minor_nonzero_mod_p(F, 5, [0, 1], [0, 1])
    assert not minor_nonzero_mod_p(F, 7, [0, 1], [0, 1])


def test_minor_refuses_a_composite_modulus_and_bad_indices():
    F = fmpz_mat([[1, 2], [3, 4]])                        # det -2
    assert not minor_nonzero_mod_p(F, 9, [0, 1], [0, 1])  # det != 0 mod 9, but 9 is no prime
    assert minor_nonzero_mod_p(F, 5, [0, 1], [0, 1])
    assert not minor_nonzero_mod_p(F, 2, [0, 1], [0, 1])
    assert not minor_nonzero_mod_p(F, 5, [0, 0], [0, 1])  # a repeated row
    assert not minor_nonzero_mod_p(F, 5, [0, 1], [0])     # not square
    assert not minor_nonzero_mod_p(F, 5, [0, 2], [0, 1])  # out of range
    assert not minor_nonzero_mod_p(F, True, [0], [0]) and not minor_nonzero_mod_p(F, "5", [0], [0])
    assert minor_nonzero_mod_p(F, 5, [], [])              # the empty minor: rank >= 0


def test_pivot_minor_is_canonical():
    F = fmpz_mat([[0, 2, 4], [0, 1, 2], [1, 0, 1]])       # rank 2; column 0 and 1 are pivots
    assert pivot_minor_mod_p(F, 101) == ([0, 2], [0, 1])
    assert minor_nonzero_mod_p(F, 101, [0, 2], [0, 1])
    assert pivot_minor_mod_p(fmpz_mat([[0, 0], [0, 0]]), 7) == ([], [])


# ---------------------------------------------------------------- identities and span witnesses

def test_integer_identities_are_exact_not_floating_point():
    big = 2 ** 60
    A, B = fmpz_mat([[big, 1]]), fmpz_mat([[big], [1]])
    assert product_equals(A, B, fmpz_mat([[big * big + 1]]))
    assert not product_equals(A, B, fmpz_mat([[big * big]]))       # equal in float64
    assert not product_equals(A, B, fmpz_mat([[1, 2]]))             # shape
    assert product_is_zero(fmpz_mat([[1, -1]]), fmpz_mat([[1], [1]]))
    assert not product_is_zero(fmpz_mat([[1, -1]]), fmpz_mat([[1], [2]]))
    G = fmpz_mat([[2, 1], [1, 1]])
    A = fmpz_mat([[1, 1], [1, 0]])                                  # A^T A = G
    assert scaled_product_equals(A.transpose(), A, 4, G, 4)
    assert scaled_product_equals(A.transpose(), A, 2, G * 4, 0)     # 4 G = 4 G
    assert not scaled_product_equals(A.transpose(), A, 2, G * 4, 1)
    assert scaled_product_equals(A.transpose(), A, 0, G * 2, -1)    # G = 2 G / 2
    assert not scaled_product_equals(A.transpose(), A, 0, G * 2, 0)   # off by one in the exponent
    assert not scaled_product_equals(A.transpose(), A, 1, G, 0)


def test_column_span_witness_catches_a_column_off_by_one_unit():
    F = fmpz_mat([[1, 0, 1], [0, 1, 1], [1, 1, 2]])                 # col 2 = col 0 + col 1: rank 2
    assert columns_in_span(F, [0, 1], [0, 1])
    G = fmpz_mat([[1, 0, 1], [0, 1, 1], [1, 1, 3]])                 # one unit off: rank 3
    assert not columns_in_span(G, [0, 1], [0, 1])
    assert not columns_in_span(F, [0, 0], [0, 1])                   # a repeated row
    assert columns_in_span(fmpz_mat([[2, 4], [1, 2]]), [0], [0])       # rank 1, minor 2
    assert not columns_in_span(fmpz_mat([[0, 1], [0, 1]]), [0], [0])    # singular minor
    assert columns_in_span(fmpz_mat([[0, 0]]), [], []) and not columns_in_span(fmpz_mat([[0, 1]]), [], [])


def test_column_span_blocks_do_not_skip_a_column():
    n = 300                                                         # more than one block of 256
    rows = [[1, 0] + [j % 5 for j in range(n)], [0, 1] + [(2 * j) % 7 for j in range(n)]]
    rows.append([a + b for a, b in zip(*rows)])
    assert columns_in_span(fmpz_mat(rows), [0, 1], [0, 1])
    rows[2][-1] += 1                                                # the very last column leaves the span
    assert not columns_in_span(fmpz_mat(rows), [0, 1], [0, 1])


# ---------------------------------------------------------------- products, box minima, hashes

def test_products_nonnegative_sees_one_negative_product():
    Q, K = [[1, 0], [2, 3]], [[0, 1], [5, -1]]                      # <(2,3),(5,-1)> = 7, <(1,0),(5,-1)> = 5
    assert products_nonnegative(Q, K)
    assert not products_nonnegative([[1, 0], [0, 3]], K)            # <(0,3),(5,-1)> = -3
    assert products_nonnegative([[1, -1]], [[2, 2]])                # negative entries, zero product
    assert not products_nonnegative([], K) and not products_nonnegative([[1, 2]], [[1]])


def test_box_minimum_takes_the_right_end_point_for_each_sign():
    c = [Fraction(2), Fraction(-3), Fraction(0)]
    lo, hi = [Fraction(-1), Fraction(0), Fraction(5)], [Fraction(1), Fraction(1, 2), Fraction(9)]
    assert box_minimum(c, lo, hi) == Fraction(-2) + Fraction(-3, 2)
    assert box_minimum([1], [Fraction(1, 3)], [1]) == Fraction(1, 3)
    with pytest.raises(ValueError):
        box_minimum([1, 2], [0], [1])


def test_canonical_hash_ignores_key_order_and_sees_one_changed_entry():
    a = {"b": [1, 2, 3], "a": "x"}
    assert canonical_sha256(a) == canonical_sha256({"a": "x", "b": [1, 2, 3]})
    assert canonical_sha256(a) != canonical_sha256({"a": "x", "b": [1, 2, 4]})
    assert canonical_sha256({"a": [1, 2]}) == hashlib.sha256(b'{"a":[1,2]}').hexdigest()   # no spaces
