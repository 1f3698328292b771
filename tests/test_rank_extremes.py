"""Matrices at the ends of the float range: ``certify rank`` of entries +-1e308
writes a certificate that its own checker and ``certify verify`` accept (the
dyadic scaling once overflowed a float in the checker's fast path, so the
command ended "internal error ... OverflowError" while ``--json`` exited 0)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from certify.cli import rank as rank_cli
from certify.cli import verify as verify_cli


def exact_rank(a: np.ndarray) -> int:
    """Rank over Q by Gaussian elimination in Fractions (the test's own oracle)."""
    rows = [[Fraction(float(v)) for v in r] for r in a]
    r = 0
    for c in range(a.shape[1]):
        p = next((i for i in range(r, len(rows)) if rows[i][c] != 0), None)
        if p is None:
            continue
        rows[r], rows[p] = rows[p], rows[r]
        for i in range(r + 1, len(rows)):
            f = rows[i][c] / rows[r][c]
            rows[i] = [x - f * y for x, y in zip(rows[i], rows[r])]
        r += 1
    return r


@pytest.mark.parametrize("seed", [0, 1])
def test_rank_of_entries_near_the_largest_float(tmp_path, capsys, seed):
    a = np.random.default_rng(seed).choice([1e308, -1e308, 0.0, 2.0 ** 1023], size=(6, 6))
    a[5] = a[0] + 0.0                 # a repeated row: the rank is below 6
    np.save(tmp_path / "huge.npy", a)
    want = exact_rank(a)
    assert want < 6
    out = tmp_path / "c.json"
    code = rank_cli.main([str(tmp_path / "huge.npy"), "--out", str(out)])
    cert = json.loads(out.read_text())
    (claim,) = [c for c in cert["claims"] if c["kind"] == "exact_rank"]
    assert claim["verdict"] == "proved" and code == 0
    assert claim["evidence"]["rank_lower"] == claim["evidence"]["rank_upper"] == want
    capsys.readouterr()
    assert rank_cli.main([str(tmp_path / "huge.npy"), "--json"]) == 0
    assert verify_cli.main([str(out)]) == 0
