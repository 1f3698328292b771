"""The notebook API (certify.api.notebook): the example of docs/api.md runs as
printed, a factor-form kernel's matrix is its features' product, and the
singular values come as outward-rounded floats around the exact enclosures."""

from __future__ import annotations

import math
import re
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_page_example_runs_as_printed(tmp_path, monkeypatch, capsys):
    (block,) = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    (tmp_path / "reports" / "gallery" / "models").mkdir(parents=True)
    shutil.copytree(ROOT / "reports" / "gallery" / "models" / "lat", tmp_path / "reports" / "gallery" / "models" / "lat")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/api.md", "exec"), {"__name__": "__example__"})
    out = capsys.readouterr().out
    assert "factor (64, 64)" in out and "verify: 0" in out
    assert "exactly 3 values exceed eps = 1/1000" in out              # the gallery's lat head 0: eps-rank 3
    assert (tmp_path / "singular_values.png").stat().st_size > 0
    assert (tmp_path / "lat-report" / "report.md").is_file()


def test_a_factor_form_matrix_is_the_product_of_its_features():
    from certify.core.kernel import Provenance, from_features
    q = np.array([[1.0, 2.0], [0.5, 0.0], [0.0, 3.0]])
    k = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, 0.25]])
    kern = from_features(q, k, Provenance("memory", None, "memory", "float64"), tokens=None, token_set="index")
    assert kern.matrix is not None and kern.matrix.tolist() == (q @ k.T).tolist()
    assert kern.matrix is kern.matrix                                # computed once, kept
    with pytest.raises(ValueError):
        kern.matrix[0, 0] = 7.0                                       # read only


@pytest.mark.parametrize("q", [Fraction(2), Fraction(1, 3), Fraction(10**40 + 1, 7), Fraction(1, 10**30),
                               Fraction(4), Fraction(0)])
def test_singular_value_floats_enclose_the_exact_square_roots(q):
    from certify.api.notebook import _sqrt_down, _sqrt_up
    lo, hi = _sqrt_down(q), _sqrt_up(q)
    assert Fraction(lo) ** 2 <= q <= Fraction(hi) ** 2                   # outward, checked exactly
    assert q == 0 or Fraction(math.nextafter(lo, math.inf)) ** 2 > q   # and tight
    assert q == 0 or Fraction(math.nextafter(hi, 0.0)) ** 2 < q
    assert (q == 4) <= (lo == hi == 2.0)


def test_singular_values_of_a_features_certificate(tmp_path):
    from certify import api
    from certify.core.kernel import Provenance, from_features
    q = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])           # alpha = diag(2, 1, 0) with these keys
    kern = from_features(q, q.copy(), Provenance("memory", None, "memory", "float64"), tokens=None,
                         token_set="index")
    cert = api.certify_kernel(kern, eps="1/2", progress=False)
    (s,) = api.singular_values(cert)
    assert s.k == 2 and s.eps == Fraction(1, 2) and s.claim == 1
    assert [round(v.value, 9) for v in s.values] == [4.0, 1.0]        # sigma(diag(4, 1, 0)): the Gram PhiQ PhiK^T
    for v, exact in zip(s.values, (4, 1)):
        assert v.lower <= exact <= v.upper and v.sq_lower <= exact ** 2 <= v.sq_upper
    assert api.verify(cert, base=tmp_path).exit_code() == 0
    assert api.load_certificate(cert.dumps()).to_json()["claims"] == cert.to_json()["claims"]
