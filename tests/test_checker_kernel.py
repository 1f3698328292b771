"""The checker's trusted kernel (certify/checkers/kernel/): each primitive on a
planted case that a wrong implementation gets wrong."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import flint
import numpy as np

from certify.checkers import kernel
from certify.checkers.kernel import (
    canonical_sha256,
    det_nonzero_mod_p,
    is_positive_definite,
    is_psd,
    minor_nonzero_mod_p,
)

ROOT = Path(__file__).resolve().parent.parent


def test_psd_by_exact_elimination_on_planted_matrices():
    rng = np.random.default_rng(4)
    A = rng.integers(-9, 9, (7, 3))
    G = (A @ A.T).tolist()                       # PSD, rank 3: zero pivots with zero columns
    assert is_psd(G) and not is_positive_definite(G)
    # one tiny negative eigenvalue: subtract 1/10^12 on a direction of the null space
    N = flint.fmpz_mat(A.T.tolist()).nullspace()[0]
    n = [int(N[i, 0]) for i in range(7)]
    eps = Fraction(1, 10 ** 12)
    H = [[Fraction(G[i][j]) - eps * n[i] * n[j] for j in range(7)] for i in range(7)]
    assert not is_psd(H)                         # x = n gives x^T H x = -eps |n|^4 < 0
    assert is_psd([[Fraction(G[i][j]) + eps * n[i] * n[j] for j in range(7)] for i in range(7)])
    assert not is_psd([[0, 1], [1, 5]])          # a zero pivot with a nonzero column
    assert not is_psd([[1, 2], [3, 4]])          # not symmetric
    assert is_positive_definite([[2, -1, 0], [-1, 2, -1], [0, -1, 2]])
    assert is_psd(flint.fmpz_mat([[4, 2], [2, 1]])) and not is_positive_definite(flint.fmpz_mat([[4, 2], [2, 1]]))
    assert is_psd([["1/2", "1/3"], ["1/3", "2/9"]])          # det = 1/9 - 1/9 = 0


def test_a_minor_zero_modulo_p_but_not_over_the_integers_is_not_nonzero_mod_p():
    p = 1000003
    F = flint.fmpz_mat([[p, 0], [0, 1]])         # det = p: nonzero over Z, zero mod p
    assert not minor_nonzero_mod_p(F, p, [0, 1], [0, 1])
    assert minor_nonzero_mod_p(F, 1000033, [0, 1], [0, 1])
    assert not det_nonzero_mod_p(F, p) and det_nonzero_mod_p(F, 1000033)
    assert minor_nonzero_mod_p(F, p, [1], [1]) and minor_nonzero_mod_p(F, p, [], [])
    for R, C, q in (([0, 0], [0, 1], 1000033), ([0], [0, 1], 1000033), ([2], [0], 1000033),
                    ([1], [1], 1000001), ([1], [1], True), ([1], [1], 1)):
        assert not minor_nonzero_mod_p(F, q, R, C), (R, C, q)   # not a minor, or q not a prime


def test_hash_binding_is_the_canonical_json():
    obj = {"b": [1, "2/3"], "a": {"y": None, "x": True}}
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    import hashlib
    assert canonical_sha256(obj) == hashlib.sha256(text.encode()).hexdigest()
    assert canonical_sha256({"a": 1}) != canonical_sha256({"a": "1"}) != canonical_sha256({"a": 1.0})


def _python_code_lines(text: str) -> int:
    """Lines of Python code: no blank line, comment or docstring (a string statement)."""
    import ast
    import io
    import tokenize
    doc: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            doc.update(range(node.lineno, node.end_lineno + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENDMARKER):
            code.update(line for line in range(tok.start[0], tok.end[0] + 1) if line not in doc)
    return len(code)


def _c_code_lines(text: str) -> int:
    """Lines of C code: no blank line and no comment (``/* */`` or ``//``)."""
    import re
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return sum(1 for line in text.splitlines() if line.split("//")[0].strip())


def test_the_kernel_is_small_and_documented():
    """The trusted kernel's budget counts code (Python and C together), not prose: 1,500 lines
    of code without docstrings, comments or blank lines; every exported name in the README."""
    folder = ROOT / "certify/checkers/kernel"
    py = sum(_python_code_lines(f.read_text()) for f in sorted(folder.glob("*.py")))
    c = sum(_c_code_lines(f.read_text()) for f in sorted(folder.glob("*.c")))
    assert py + c < 1500, (py, c)
    assert _python_code_lines('"""doc\nmore"""\n# c\nx = 1  # y\n\ndef f():\n    """d"""\n    return x\n') == 3
    assert _c_code_lines("/* a\n b */\nint x; // c\n\n// d\nreturn;\n") == 2
    readme = (folder / "README.md").read_text()
    for name in kernel.__all__:
        assert f"`{name}" in readme, name


def _long_lines(text: str, limit: int = 110) -> list[int]:
    """The numbers of the lines of ``text`` longer than ``limit`` columns."""
    return [i for i, line in enumerate(text.splitlines(), 1) if len(line) > limit]


def test_every_kernel_line_is_within_110_columns():
    """The kernel is written to be read, not packed to a line count: every line of its Python and
    C is within the house's 110 columns (ruff's line-length; E501 is not enforced elsewhere)."""
    folder = ROOT / "certify/checkers/kernel"
    files = sorted(folder.glob("*.py")) + sorted(folder.glob("*.c"))
    assert {"span.py", "gram.py", "_spankernel.c"} <= {f.name for f in files}
    over = {f.name: _long_lines(f.read_text()) for f in files}
    assert {name: lines for name, lines in over.items() if lines} == {}
    assert _long_lines("x = 1\n" + "y" * 111 + "\n" + "z" * 110 + "\n") == [2]     # a planted long line


def test_exact_products_catch_a_residue_that_floats_would_round_away():
    from certify.checkers.kernel import product_identity, product_min
    big = 2 ** 60
    A = [[big, 1], [1, 0]]
    B = [[1], [1]]
    assert product_identity(A, B, [[big + 1], [1]]) and not product_identity(A, B, [[big], [1]])
    assert product_identity(A, [[2], [2]], [[big + 1], [1]], 2)            # A B = 2 C
    assert not product_identity(A, B, [[big + 1]])                         # wrong shape
    Q, K = [[big, 1]], [[1, -big]]                                         # <q, k> = 0 exactly
    assert product_min(Q, K) == 0 and product_min(Q, [[1, -big - 1]]) == -1
    assert product_min([], [[1, 2]]) is None


def test_kernel_imports_only_stdlib_numpy_flint_and_itself():
    import ast
    import sys
    allowed = set(sys.stdlib_module_names) | {"numpy", "flint", "__future__"}
    for f in sorted((ROOT / "certify/checkers/kernel").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for n in names:
                assert n.split(".")[0] in allowed or n.startswith("certify.checkers.kernel"), (f.name, n)


def test_pivot_minor_is_canonical_and_its_choice_is_not_the_producers():
    from certify.checkers.kernel import pivot_minor_mod_p
    F = flint.fmpz_mat([[0, 2, 4], [0, 1, 2], [1, 0, 1]])                # rank 2
    assert pivot_minor_mod_p(F, 101) == ([0, 2], [0, 1])
    assert minor_nonzero_mod_p(F, 101, [0, 2], [0, 1])
    assert minor_nonzero_mod_p(F, 101, [1, 2], [0, 1])                    # also nonsingular, not canonical
    assert pivot_minor_mod_p(F, 101) != ([1, 2], [0, 1])
    G = flint.fmpz_mat([[2, 0], [0, 1]])                                  # rank 2 over Q, 1 mod 2
    assert pivot_minor_mod_p(G, 2) == ([1], [1]) and pivot_minor_mod_p(G, 3) == ([0, 1], [0, 1])
    assert pivot_minor_mod_p(flint.fmpz_mat(2, 2), 7) == ([], [])


def test_gram_identity_with_dyadic_scales_is_off_by_one_exponent_sensitive():
    from certify.checkers.kernel import product_identity
    A = flint.fmpz_mat([[1, 1], [1, 0]])
    G = flint.fmpz_mat([[2, 1], [1, 1]])                                  # A^T A = G
    assert product_identity(A.transpose(), A, G) and product_identity(A.transpose() * 2, A, G * 2)
    assert product_identity(A.transpose(), A, G, 1) and not product_identity(A.transpose(), A, G, 2)
    assert product_identity(A.transpose() * 4, A, G, 1) is False and product_identity(A.transpose() * 4, A, G, 4)


def test_box_minimum_takes_the_right_end_point_for_each_sign():
    from certify.checkers.kernel import box_minimum
    c = [Fraction(2), Fraction(-3), Fraction(0)]
    lo, hi = [Fraction(-1), Fraction(0), Fraction(5)], [Fraction(1), Fraction(1, 2), Fraction(9)]
    assert box_minimum(c, lo, hi) == Fraction(-2) + Fraction(-3, 2)   # 2 at lo, -3 at hi
    assert box_minimum([Fraction(1)], [Fraction(1, 3)], [Fraction(1)]) == Fraction(1, 3)
    assert box_minimum([], [], []) == 0
    try:
        box_minimum([1, 2], [0], [1])
    except ValueError:
        pass
    else:
        raise AssertionError("unequal lengths must be refused")


#: names whose call (or attribute) is exact algebra or a matrix product: only the kernel uses them
_ALGEBRA = {"matmul", "dot", "einsum", "tensordot", "inner", "outer", "linalg", "charpoly", "solve", "inv",
            "det", "rref", "rank", "nullspace", "eigh", "eigvalsh", "svd"}
#: the kernel's own modules, whose functions a kind calls by these names (``roots.charpoly``)
_KERNEL_MODULES = {"roots", "inertia", "freivalds", "span", "kgram"}
#: not yet routed through the kernel (certify/checkers/kernel/README.md, "Not yet in the kernel")
_NOT_YET: set[str] = set()


def algebra_outside_kernel(source: str) -> list[tuple[int, str]]:
    """The lines of ``source`` that form a matrix product (``@``) or call an exact
    algebra routine by name (:data:`_ALGEBRA`) other than through a kernel module."""
    import ast
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            out.append((node.lineno, "@"))
        elif isinstance(node, ast.Attribute) and node.attr in _ALGEBRA and not (
                isinstance(node.value, ast.Name) and node.value.id in _KERNEL_MODULES):
            out.append((node.lineno, node.attr))
    return out


def test_the_kinds_do_no_matrix_algebra_outside_the_kernel():
    """The rule the kernel's README states and the import contract cannot see:
    outside ``certify/checkers/kernel/`` no checker module forms a matrix product or
    calls an elimination, inverse, solve, determinant, characteristic polynomial or
    eigen-decomposition (python-flint's or numpy's); the kinds route evidence to the
    kernel's primitives. Planted violations are caught."""
    found = {}
    for f in sorted((ROOT / "certify/checkers").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if "/kernel/" in rel or rel in _NOT_YET:
            continue
        hits = algebra_outside_kernel(f.read_text())
        if hits:
            found[rel] = hits
    assert not found, found
    assert algebra_outside_kernel("C = A @ B\n") == [(1, "@")]
    assert algebra_outside_kernel("P = M.charpoly()\nY = M.solve(B)\n") == [(1, "charpoly"), (2, "solve")]
    assert sorted(algebra_outside_kernel("x = np.linalg.eigh(M)\n")) == [(1, "eigh"), (1, "linalg")]
    assert algebra_outside_kernel("P = roots.charpoly(M)\n") == []


def test_the_two_matrix_hashes_agree_on_int64_data_and_differ_beyond():
    """``matrix_sha256`` (rows as lists, the embedded form) and the kernel's
    ``array_sha256`` (int64 arrays, the re-read form) bind the same matrix to the same
    hash, so a claim checked on either form names one matrix; a matrix with an entry
    beyond int64 is hashed as JSON and can never collide with an int64 hash."""
    from certify.checkers.kernel import array_sha256
    from certify.checkers.rank.evidence import matrix_sha256
    rng = np.random.default_rng(9)
    A = rng.integers(-(1 << 62), 1 << 62, (5, 7), dtype=np.int64)
    scale = {"kind": "dyadic", "exponent": -3}
    assert matrix_sha256(A.tolist(), scale) == array_sha256(A, scale)
    assert matrix_sha256(A.tolist(), {"kind": "dyadic", "exponent": -2}) != array_sha256(A, scale)
    B = A.copy()
    B[4, 6] ^= 1
    assert matrix_sha256(B.tolist(), scale) != array_sha256(A, scale)
    big = A.tolist()
    big[0][0] = 1 << 63
    assert matrix_sha256(big, scale).startswith("json:")


def test_psd_through_a_definite_principal_part_of_the_same_rank():
    """A singular Gram is proved PSD through the pivot principal part of its rank; a
    matrix of the same rank with a negative direction is not, and neither is one
    whose definite part is not of its full rank."""
    from certify.checkers.kernel import fmpz_matrix
    from certify.checkers.kernel.psd import is_psd_by_rank
    rng = np.random.default_rng(11)
    A = rng.integers(-50, 50, (30, 6))
    G = (A.T @ A)
    G = np.block([[G, G[:, :2]], [G[:2, :], G[:2, :2]]])          # 8 x 8, rank 6: PSD, singular
    seen = []

    def part(S):
        seen.append(list(S))
        return is_positive_definite([[int(G[i][j]) for j in S] for i in S])
    assert is_psd_by_rank(fmpz_matrix(G.tolist()), part) and len(seen[0]) == 6
    D = np.diag([1, 1, 1, 1, 1, -1]).astype(np.int64)
    H = A[:6].T @ D @ A[:6]                                          # indefinite, rank <= 6
    H = np.block([[H, H[:, :2]], [H[:2, :], H[:2, :2]]])
    assert not is_psd_by_rank(fmpz_matrix(H.tolist()),
                              lambda S: is_positive_definite([[int(H[i][j]) for j in S] for i in S]))
    assert not is_psd(H.tolist())
    assert not is_psd_by_rank(fmpz_matrix(G.tolist()), lambda S: False)  # the part must be proved


def test_block_elimination_decides_large_matrices_as_pivots_do():
    """Above 32 rows the elimination goes by Schur complements of definite leading
    blocks: a 70 x 70 Gram of rank 70 is positive definite, one of rank 69 is PSD and
    not PD, and subtracting 1/10^30 on a null direction of the rank-69 Gram makes it
    indefinite; the pivot-by-pivot elimination on the same matrices agrees."""
    from certify.checkers.kernel.psd import _pivots, _rows
    rng = np.random.default_rng(5)
    A = rng.integers(-9, 9, (80, 70))
    G = (A.T @ A).tolist()
    assert is_positive_definite(G) and is_psd(G)
    A2 = A.copy()
    A2[:, 69] = A2[:, 3] - 2 * A2[:, 5]                              # rank 69: singular PSD Gram
    G2 = (A2.T @ A2).tolist()
    assert is_psd(G2) and not is_positive_definite(G2)
    v = np.zeros(70, dtype=np.int64)
    v[3], v[5], v[69] = 1, -2, -1                                     # G2 v = 0
    bad = [[Fraction(G2[i][j]) - Fraction(int(v[i] * v[j]), 10 ** 30) for j in range(70)] for i in range(70)]
    assert not is_psd(bad)
    for M, psd in ((G, True), (G2, True), (bad, False)):
        assert _pivots(_rows(M), False) is psd


def test_attention_outputs_decide_the_error_exactly_at_one_part_in_ten_to_the_thirty():
    """The one evaluator of feasibility and audit: an output 1/10^30 inside the error
    bound is correct, one exactly on it is not (strict), and with integer values scaled
    by b the decision is the same; a zero or negative denominator has no output."""
    from certify.checkers.kernel import attention as head
    tiny = Fraction(1, 10 ** 30)
    half = Fraction(1, 2)
    alpha = {0: Fraction(1), 1: Fraction(3), 2: Fraction(0)}
    for off, ok in ((half - tiny, True), (half, False), (-half + tiny, True), (-half, False)):
        g = {0: 2 + off, 1: 2 + off, 2: Fraction(7)}      # t_hat = 2 + off (alpha(2) = 0 drops g(2))
        N, D = head.output(alpha, g, [0, 1, 1, 2])
        assert D == 7 and N == 7 * (2 + off)
        assert head.within(N, D, 2, half) is ok and head.error(N, D, 2) == abs(off)
        b = (2 + off).denominator                           # integer values G = b g
        Nb, Db = head.output({z: 5 * a for z, a in alpha.items()}, {z: v * b for z, v in g.items()}, [0, 1, 1, 2])
        assert head.within(Nb, Db, 2, half, b) is ok and head.error(Nb, Db, 2, b) == abs(off)
    assert not head.within(0, 0, 0, half) and head.error(0, 0, 0) is None
    assert not head.within(-1, -1, 1, half) and head.error(-1, -1, 1) is None   # t_hat = 1 but D < 0
    assert head.kernel_value([Fraction(1, 3), 2], [3, 0.5]) == 2
    try:
        head.kernel_value([1, 2], [1])
    except ValueError:
        pass
    else:
        raise AssertionError("rows of different lengths must be refused")


def test_lemma3_and_lemma4_formulas_and_the_strict_rank_at_an_integral_bound():
    from certify.checkers.kernel.attention import lemma3, lemma4_rank, trace_rank_bound
    assert lemma3(5, Fraction(1, 2), 2) == (Fraction(4, 3), Fraction(3))            # (n-2)(d-1) at eps 1/2
    assert lemma3(3, Fraction(1, 10), Fraction(1)) == (Fraction(2, 5), Fraction(4))
    assert lemma4_rank(4, Fraction(4), False) == (4, 4) and lemma4_rank(4, Fraction(4), True) == (4, 5)
    assert lemma4_rank(3, Fraction(4), False) == (Fraction(9, 4), 3) == lemma4_rank(3, Fraction(4), True)
    kept, frob, lam, bound = trace_rank_bound([[2, 1, 0], [0, 0, 5], [1, 0, 4]])
    assert kept == [0, 2] and frob == 2 + Fraction(1, 16) and lam == 4 and bound == Fraction(64, 33)


def test_balls_decide_or_say_undecided_never_a_wrong_answer():
    """A ball across the threshold is undecided, never a pass: ``e^x - 1`` at ``x = 10^-30``
    is the 53-bit ball ``[+/- 1.0000000032e-30]``, so ``>= 10^-30`` (true) and ``>= 1.000000001e-30``
    (false) are both undecided, and a ball whose midpoint is 10^-30 above 1/2 with a
    radius of 2^-70 does not pass ``>= 1/2``. Decided comparisons, cells and zeros agree
    with the exact values; exact Fractions decide everything."""
    import flint

    from certify.checkers.kernel.replay import Numbers, Undecided
    ops = Numbers("exp")
    x = ops.num(Fraction(1, 10 ** 30))
    mid = flint.arb(flint.fmpq(10 ** 30 + 2, 2 * 10 ** 30)) + flint.arb(0, 2.0 ** -70)
    for y, c in ((ops.f(x) - 1, Fraction(1, 10 ** 30)), (ops.f(x) - 1, Fraction(1000000001, 10 ** 39)),
                 (mid, Fraction(1, 2))):
        try:
            ops.at_least(y, c)
        except Undecided:
            pass
        else:
            raise AssertionError("a ball across the threshold decided")
    assert not ops.at_least(ops.f(x) - 1, Fraction(11, 10 ** 30))           # decided: below
    e = ops.f(ops.num(Fraction(1)))
    assert ops.at_least(e, Fraction(2718, 1000)) and not ops.at_least(e, Fraction(2719, 1000))
    lo, hi = ops.ends(e)
    assert lo < Fraction(2718281828459045, 10 ** 15) < hi and hi - lo < Fraction(1, 10 ** 12)
    floor = lambda v: v.numerator // v.denominator
    assert ops.cell(e, floor) == 2
    try:
        ops.cell(flint.arb(3) + flint.arb(0, 2.0 ** -80), floor)   # a ball around a cell boundary
    except Undecided:
        pass
    else:
        raise AssertionError("a ball across a cell boundary got a symbol")
    for z, want in ((flint.arb(0), True), (flint.arb(1, 0.5), False)):
        assert ops.is_zero(z) is want
    try:
        ops.is_zero(flint.arb(0, 2.0 ** -60))
    except Undecided:
        pass
    else:
        raise AssertionError("a ball around 0 decided a denominator")
    elu = Numbers("elu1")
    y = elu.f(flint.arb(0, 0.25))                                     # [-1/4, 1/4] -> [e^-1/4, 5/4]
    lo, hi = elu.ends(y)
    assert Fraction(7788, 10000) < lo <= Fraction(778801, 10 ** 6) and Fraction(5, 4) <= hi < Fraction(1251, 1000)
    ex = Numbers("relu")
    assert ex.f(Fraction(-1, 3)) == 0 and ex.f(Fraction(1, 3)) == Fraction(1, 3)
    assert not ex.at_least(Fraction(1, 2) - Fraction(1, 10 ** 30), Fraction(1, 2))
    assert ex.at_least(Fraction(1, 2), Fraction(1, 2)) and not ex.is_zero(Fraction(1, 10 ** 30))


def test_integer_products_and_sums_are_exact_where_int64_would_wrap():
    from certify.checkers.kernel.replay import product, sum_at_least
    rng = np.random.default_rng(3)
    A = rng.integers(-(1 << 40), 1 << 40, (3, 8, 5))
    B = rng.integers(-(1 << 40), 1 << 40, (5, 2))
    want = [[[sum(int(A[i, j, k]) * int(B[k, l]) for k in range(5)) for l in range(2)] for j in range(8)]
            for i in range(3)]
    got = product(A, B)                                   # 5 2^80 > 2^63: Python integers
    assert got.dtype == object and got.tolist() == want
    small = product(A % 1000, B % 1000)
    assert small.dtype == np.int64 and small.tolist() == product((A % 1000).astype(object), B % 1000).tolist()
    huge = np.array([[1 << 70, 1]], dtype=object)
    assert product(huge, np.zeros((2, 1), dtype=np.int64)).tolist() == [[0]]   # no int64 cast of 2^70
    try:
        product(np.ones((2, 2)), np.ones((2, 2), dtype=np.int64))
    except ValueError:
        pass
    else:
        raise AssertionError("a float array must be refused (its products are not exact)")
    # |N / D - 1/2|: exactly 1/2 is >= 1/2, 1/2 - 10^-30 is not, with and without wrapping
    for big in (1, 1 << 50):
        D = np.array([2 * 10 ** 30 * big, 2 * big], dtype=object)
        N = np.array([10 ** 30 * big - big, big], dtype=object)
        assert sum_at_least([(1, N, D)], Fraction(1, 2)).tolist() == [False, True]
        assert sum_at_least([(1, N, D), (-1, np.array([1, 1]), 1)], Fraction(1, 2)).tolist() == [True, True]
    M = rng.integers(-50, 50, (40,))
    Dm = rng.integers(1, 30, (40,)) * rng.choice([-1, 1], 40)
    got = sum_at_least([(3, M, Dm), (-7, M[::-1].copy(), 1)], Fraction(5, 3))
    want = [abs(Fraction(3 * int(M[i]), int(Dm[i])) - 7 * int(M[39 - i])) >= Fraction(5, 3) for i in range(40)]
    assert got.tolist() == want


def test_signs_of_an_enclosed_product_are_decided_exactly_where_floats_round_to_zero():
    """``<q, k> = -2^-60`` and ``+2^-60`` both round to a float product of 0: a sign read off
    the midpoint (or a test on ``P - E`` that rounds) calls both nonnegative; the kernel
    sends them to exact arithmetic and finds the negative one."""
    from certify.checkers.kernel.inertia import negative_pair, product_enclosure
    K = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    pos = np.array([[1.0, 2.0 ** -60, -1.0]])
    neg = np.array([[1.0, -(2.0 ** -60), -1.0]])
    C, _ = product_enclosure(neg, K)
    assert C[0, 0] == 0.0                                     # the float product cannot see it
    assert negative_pair(np.vstack([pos, pos]), K) == ()
    assert negative_pair(np.vstack([pos, neg]), K) == (1, 0)
    assert negative_pair(np.vstack([pos, neg]), K, rows=1) == (1, 0)
    assert negative_pair(np.array([[1.0, 1.0, 0.0], [1.0, -3.0, 0.0]]), K) == (1, 0)   # floats: C < -R
    assert negative_pair(np.vstack([pos, neg]), K, limit=0) is None       # too many left: undecided


def test_quadratic_summaries_bound_what_float_rounding_drops():
    """Float path: ``1 + 2^-54`` (the sum of squares of ``[1, 2^-27]``) rounds to 1, and a
    residual ``|w - x^2| = 2^-60`` rounds to 0; the bounds must still be at least the exact
    values (a bound without the rounding terms is below them). Exact path: integers times
    ``2^e`` give the exact maxima."""
    from certify.checkers.kernel.inertia import quadratic_summaries
    x = 1.0 + 2.0 ** -30
    w = 1.0 + 2.0 ** -29                                      # x^2 = 1 + 2^-29 + 2^-60 exactly
    X = np.array([[0.5, x, w], [0.75, 2.0 ** -27, 0.0]])      # constant, linear, quadratic (0, 0)
    quad = [[2, 0, 0]]
    got = quadratic_summaries(X, 0, 0, [1], quad, Fraction(1), Fraction(1))
    fx, fw = Fraction(x), Fraction(w)
    assert got["min_const"] == Fraction(1, 2)
    assert got["max_linear_sq"] >= fx * fx > Fraction(float(x * x))
    assert got["max_linear_sq"] - fx * fx < Fraction(1, 1 << 45)
    assert got["max_quadratic_sq"] >= fw * fw
    assert got["max_residual_sq"] >= (fw - fx * fx) ** 2 > 0 and got["max_residual_sq"] < Fraction(1, 1 << 90)
    rows = np.array([[3, 2, 5], [1, -4, 16]], dtype=object)  # times 2^-1: residual (5 - 2 * 4 / 2) / 2
    ex = quadratic_summaries(rows, -1, 0, [1], quad, Fraction(2), Fraction(1))
    assert ex == {"min_const": Fraction(1, 2), "max_linear_sq": Fraction(4), "max_quadratic_sq": Fraction(64),
                  "max_residual_sq": Fraction(1, 4)}
    for gd in (Fraction(1, 3), Fraction(2 ** 21)):          # not a double; beyond the bounds' range
        try:
            quadratic_summaries(X, 0, 0, [1], quad, gd, Fraction(1))
        except ValueError:
            pass
        else:
            raise AssertionError(f"g_diag = {gd} must be refused on floats")


def test_quadratic_margin_rounds_square_roots_up_and_refuses_its_missing_hypotheses():
    from certify.checkers.kernel.attention import quadratic_margin
    S = {f"{k}_{s}": Fraction(0) for k in ("min_const", "max_linear_sq", "max_quadratic_sq", "max_residual_sq")
         for s in "qk"}
    S.update(min_const_q=Fraction(3), min_const_k=Fraction(1), max_residual_sq_q=Fraction(2),
             max_quadratic_sq_k=Fraction(1))
    m = quadratic_margin(Fraction(1), Fraction(1), S)          # 3 - 1/2 - sqrt(2)
    s = Fraction(5, 2) - m
    assert s * s >= 2 and s - Fraction(14142135623730950488, 10 ** 19) < Fraction(1, 10 ** 18)
    S["max_residual_sq_q"] = Fraction(9, 4)                    # a square: sqrt exactly 3/2
    assert quadratic_margin(Fraction(1), Fraction(1), S) == 1
    S["max_linear_sq_q"], S["max_linear_sq_k"], S["max_residual_sq_k"] = Fraction(1), Fraction(2), Fraction(1)
    # c2 = 1/2 > g_diag^2 = 1/4: drift 1/4 * 1 * 2; sqrt(max(1/4, 1/2) * 1 * 1) = sqrt(1/2)
    m = quadratic_margin(Fraction(1, 2), Fraction(1), S)
    s = Fraction(5, 2) - Fraction(3, 2) - Fraction(1, 2) - m
    assert s * s >= Fraction(1, 2) and s * s - Fraction(1, 2) < Fraction(1, 10 ** 18)
    for bad in ({"min_const_k": Fraction(0)}, {"min_const_q": Fraction(-1)}):
        try:
            quadratic_margin(Fraction(1), Fraction(1), {**S, **bad})
        except ValueError:
            pass
        else:
            raise AssertionError(f"{bad}: the lemma does not apply")
    try:
        quadratic_margin(Fraction(1), Fraction(0), S)
    except ValueError:
        pass
    else:
        raise AssertionError("g_off = 0: no quadratic term")


def test_chain_ranks_lemma4_perron_and_packing_on_a_hand_computed_case():
    """Three queries, every chain factor 4: ``s = 3/8``, Lemma 4's bound ``9 / (27/8) = 8/3``
    (strict: rank 3 at least, so 2 excluded), ``rho = 1/4``, ``Delta(1) = 0`` (not excluded:
    the test is strict), ``Delta(2) = -135/16``, ``Delta(3) = 9/4``, ``kappa^2 = 1/16``."""
    from certify.checkers.kernel.attention import chain_ranks
    lam = {(i, j): 4 for i in range(3) for j in range(3) if i != j}
    got = chain_ranks(3, lam)
    assert got == {"sum_inverse_lambda_sq": Fraction(3, 8), "bound": Fraction(8, 3), "lemma4": 2,
                   "rho": Fraction(1, 4), "perron": 2, "discriminant": Fraction(-135, 16),
                   "kappa_sq": Fraction(1, 16), "packing": 2}
    lam[0, 1] = 1                                              # rho = 1: the refinement does not apply
    got = chain_ranks(3, lam)
    assert got["rho"] == 1 and got["perron"] == 0 and got["discriminant"] is None
    assert got["kappa_sq"] == Fraction(1, 4) and got["packing"] == 2
    lam = {(0, 1): 2, (1, 0): 3}                               # kappa^2 = 1/6: min(t - 1, 6) = 1
    got = chain_ranks(2, lam)
    assert got["packing"] == 1 and got["kappa_sq"] == Fraction(1, 6)
    # rho = 1/2: Delta(1) = 0 for every t (not < 0), Delta(2) = 25 - 24 = 1: nothing excluded
    assert got["perron"] == 0 and got["discriminant"] is None


def test_quantizer_cells_are_exact_floor_clamp_and_never_wrap():
    """``a + b clamp(floor((A + B) / g), 0, top)``: floor (not truncation) of negative sums,
    both clamps, and operands whose int64 sum or product would wrap (decided in Python
    integers)."""
    from certify.checkers.kernel.replay import cells
    A = np.array([[-7, 0, 5, 100]], dtype=np.int64)
    B = np.array([[0, -1, 1, 0]], dtype=np.int64)
    got = cells(A, B, 3, 4, 10, -2)                      # floor(-7/3) = -3 -> 0; -1/3 -> 0; 2; 33 -> 4
    assert got.dtype == np.int64 and got.tolist() == [[10, 10, 6, 2]]
    big = np.array([(1 << 62) + 3], dtype=np.int64)
    wide = cells(big, big, 1 << 61, 10, 0, 1)           # A + B = 2^63 + 6 wraps in int64
    assert wide.dtype == object and wide.tolist() == [4]
    assert cells(np.array([7]), np.array([0]), 2, 5, 1 << 62, 1 << 61).tolist() == [(1 << 62) + 3 * (1 << 61)]
    for a, b, x, y, g, top, want in ((-5, 3, 9, -2, 4, 7, -2), (0, 1, -1, -1, 1, 3, 0), (2, -1, 50, 50, 7, 9, -7)):
        assert cells(np.array([x]), np.array([y]), g, top, a, b).tolist() == [want]
    try:
        cells(A, B, 0, 4, 0, 1)
    except ValueError:
        pass
    else:
        raise AssertionError("a divisor 0 must be refused")


def test_gram_identity_across_limbs_and_the_whole_exponent_range():
    """``X^T X = W 2^we`` decided for the exact Gram (Fractions) of entries from the least subnormal to
    ``2^1000`` (about a hundred limbs), signs, and bits that straddle limb boundaries; the least change
    of any entry, of the exponent or of the shape is refused."""
    from certify.checkers.kernel.gram import gram_identity
    X = np.array([[2.0 ** 1000, 5e-324, -1.0], [-(1 + 2.0 ** -52), 3.0 * 2.0 ** -1060, (1 << 40) - 1.0],
                  [0.0, 1.0, 2.0 ** 19 + 2.0 ** -33], [7.5, -(2.0 ** -1022), 0.0]])
    for A in (X, X[:, 2:].astype(np.float32)):
        n = A.shape[1]
        want = [[sum((Fraction(float(A[k, i])) * Fraction(float(A[k, j])) for k in range(4)), Fraction(0))
                 for j in range(n)] for i in range(n)]
        e = -2 * 1074 - 2 * 60
        W = [[int(v * Fraction(2) ** -e) for v in row] for row in want]
        assert [[Fraction(v) * Fraction(2) ** e for v in row] for row in W] == want
        assert gram_identity(A, W, e)
        for i in range(n):
            for j in range(n):
                off = [row[:] for row in W]
                off[i][j] += 1
                assert not gram_identity(A, off, e), (i, j)
        assert not gram_identity(A, W, e + 1) and not gram_identity(A, W[:-1], e)


def test_the_modular_minors_equal_entry_by_entry_reductions():
    # pivot_minor_mod_p and minor_nonzero_mod_p reduce F once and select by products; the reference
    # reduces every entry of F[R, C] in Python and takes rref / det of what it built, on big-integer
    # matrices of planted rank (a small prime, so rank drops and singular minors occur too)
    import random

    from certify.checkers.kernel.modular import minor_nonzero_mod_p, pivot_minor_mod_p, rref_pivots
    rng = random.Random(5)
    seen = set()
    for _ in range(60):
        n1, n2, r, p = rng.randint(1, 9), rng.randint(1, 9), rng.randint(0, 6), rng.choice([2, 3, 7, 1000003])
        U = flint.fmpz_mat(n1, r, [rng.getrandbits(200) - (1 << 199) for _ in range(n1 * r)]) if r else None
        V = flint.fmpz_mat(r, n2, [rng.randint(-9, 9) for _ in range(r * n2)]) if r else None
        F = U * V if r else flint.fmpz_mat(n1, n2)
        ref = rref_pivots(flint.nmod_mat(n1, n2, [int(F[i, j]) % p for i in range(n1) for j in range(n2)], p))
        rows = rref_pivots(flint.nmod_mat(len(ref), n1, [int(F[i, j]) % p for j in ref for i in range(n1)], p)) \
            if ref else []
        assert pivot_minor_mod_p(F, p) == (rows, ref)
        k = rng.randint(1, min(n1, n2))
        R, C = sorted(rng.sample(range(n1), k)), sorted(rng.sample(range(n2), k))
        det = int(flint.fmpz_mat(k, k, [int(F[i, j]) for i in R for j in C]).det()) % p
        assert minor_nonzero_mod_p(F, p, R, C) == (det != 0)
        seen.add(det != 0)
    assert seen == {True, False}
    assert not minor_nonzero_mod_p(F, 1 << 70, [0], [0])            # not a prime, however large


def test_kernel_value_is_the_sum_of_fraction_products():
    """attention.kernel_value (integer sum over the common denominator) against the plain
    sum of Fraction products, on dyadic, rational, integer, float and bool entries."""
    import random

    from certify.checkers.kernel import attention as head
    rng = random.Random(7)

    def entry():
        kind = rng.randrange(5)
        if kind == 0:
            return Fraction(rng.randint(-2 ** 40, 2 ** 40), 2 ** rng.randint(0, 60))
        if kind == 1:
            return Fraction(rng.randint(-10 ** 9, 10 ** 9), rng.randint(1, 10 ** 6))
        if kind == 2:
            return rng.randint(-2 ** 70, 2 ** 70)
        return rng.uniform(-1e3, 1e3) if kind == 3 else rng.random() < 0.5

    for _ in range(600):
        n = rng.randint(0, 9)
        u, v = [entry() for _ in range(n)], [entry() for _ in range(n)]
        plain = sum((Fraction(a) * Fraction(b) for a, b in zip(u, v)), Fraction(0))
        got = head.kernel_value(u, v)
        assert type(got) is Fraction and got == plain
