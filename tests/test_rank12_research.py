"""The exact statements of reports/feasibility/rank12/ (real rank 12 on paper-5.1):
each checker replays its file in rational arithmetic; the values are the ones the
README and brackets.md quote, and a corrupted certificate must be rejected."""

from __future__ import annotations

import importlib.util
import json
from fractions import Fraction
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "reports" / "feasibility" / "rank12"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_theorem_d_bound_is_below_one_quarter_and_above_perron():
    bound = _load("check_delsarte").main()
    assert bound == Fraction(10000000000, 40450849727)
    assert Fraction(23576, 100000) < bound < Fraction(1, 4)
    # (sqrt 5 - 1)/5 = 0.24721359...: the certificate sits just below the LP optimum
    assert abs(float(bound) - (5 ** 0.5 - 1) / 5) < 1e-9


def test_theorem_d_rejects_a_polynomial_that_dips_below(tmp_path):
    cert = json.loads((HERE / "delsarte_certificate.json").read_text())
    cert["a0"] = "26/100"                      # E(1/sqrt 5) < 0: g no longer dominates (c)_-
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(cert))
    with pytest.raises(AssertionError):
        _load("check_delsarte").main(str(bad))


def test_witnesses_and_barrier_replay_exactly(capsys):
    _load("check_witness16").main()
    _load("check_lemma_s").main()
    assert _load("check_sum_barrier").main() > 12
    out = capsys.readouterr().out
    assert "rank(I + C) = 13" in out and "inertia(S + I) = (neg 3, zero 0, pos 12)" in out


def test_witness16_with_a_perturbed_entry_fails(tmp_path):
    w = json.loads((HERE / "witness16.json").read_text())
    row = w["C"][1]
    j = next(j for j, v in enumerate(row) if v != "0/1" and j != 1)
    p, q = map(int, row[j].split("/"))
    row[j] = f"{p + 1}/{q}"
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps(w))
    with pytest.raises(AssertionError):
        _load("check_witness16").main(str(bad))


def test_isotropic_ceiling_is_above_one_quarter_and_below_the_core_value():
    """iso_ceiling.json: an exact weighted isotropic 15-point configuration on which
    Theorem D's relaxation holds at t = 0.2508452: no argument confined to that
    relaxation proves more; 1/4 lies below, so the relaxation is not refuted."""
    ceiling = _load("check_iso_ceiling").main()
    assert Fraction(1, 4) < ceiling < Fraction(2551557, 10000000)
    assert abs(float(ceiling) - 0.25084522303959) < 1e-12
    assert ceiling > _load("check_delsarte").main()


def test_isotropic_ceiling_rejects_a_configuration_off_isotropy(tmp_path):
    cert = json.loads((HERE / "iso_ceiling.json").read_text())
    p, q = map(int, cert["w"][0].split("/"))
    cert["w"][0] = f"{p + 1}/{q}"                 # one weight moved: sum w u u^T no longer s I
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(cert))
    with pytest.raises(AssertionError, match="isotropic"):
        _load("check_iso_ceiling").main(str(bad))
    cert = json.loads((HERE / "iso_ceiling.json").read_text())
    cert["u"][3][0] = "1/2"                       # no longer a unit vector
    bad.write_text(json.dumps(cert))
    with pytest.raises(AssertionError, match="unit"):
        _load("check_iso_ceiling").main(str(bad))


def test_theorem_d_equality_case_needs_five_quarter_copies_of_the_icosahedron():
    """The LP value 15 (1 + sqrt 5)/12 is attained by the icosahedron with mass 5/4
    (so no polynomial improves Theorem D), the 12- and 24-row icosahedral cores meet
    the bound exactly, and the value is 4.0450850 = 1/0.2472136."""
    mod = _load("check_equality_case")
    R = mod.main()
    assert (R.a, R.b) == (Fraction(5, 4), Fraction(5, 4))
    assert abs(float(R) - 15 * (1 + 5 ** 0.5) / 12) < 1e-12


def test_equality_case_fails_with_a_wrong_icosahedron(monkeypatch):
    mod = _load("check_equality_case")
    monkeypatch.setattr(mod, "PHI", mod.Q5(Fraction(3, 2)))   # not the golden ratio
    with pytest.raises(AssertionError):
        mod.main()


def test_weighted_three_point_relaxation_is_feasible_above_four():
    """check_three_point_ceiling: the 5/4-fold icosahedron at D2 = 67/1000 meets the
    weighted three-point relaxation with its weight-spread couplings at R = 4.02496 > 4,
    so that relaxation cannot reach t >= 1/4."""
    x = _load("check_three_point_ceiling").main()
    assert x == Fraction(277, 125) and x * x < 5            # sqrt 5 > 48 D2 - 1: R > 4
    assert 4.02 < (1 + 5 ** 0.5) / (12 * 0.067) < 4.03


def test_three_point_check_rejects_a_spread_too_small_for_the_band():
    # at D2 = (1/15)(1 + 1/1000) the weights are too equal: nu' at c = 1 leaves the band
    with pytest.raises(AssertionError, match="band"):
        _load("check_three_point_ceiling").main(Fraction(1001, 15000))


def test_row_wise_isotropic_ceiling():
    """iso_rows_ceiling.json: an exact isotropic configuration meeting every row inequality
    w_i <= t sum_j w_j (c_ij)_- at t = 0.2514420: tying the weights to the rows moves the
    ceiling of the isotropic relaxation from 0.2508452 up, but not to the core value 0.2551557."""
    mod = _load("check_iso_ceiling")
    rows = mod.main(str(HERE / "iso_rows_ceiling.json"), rows=True)
    summed = mod.main(str(HERE / "iso_rows_ceiling.json"))
    assert abs(float(rows) - 0.2514420) < 1e-7 and summed <= rows
    assert mod.main() < rows < Fraction(2551557, 10000000)
