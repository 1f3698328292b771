"""The exact statements of reports/feasibility/rank12/ (real rank 12 on paper-5.1):
each checker replays its file in rational arithmetic; the values are the ones the
README and brackets.md quote, and a corrupted certificate must be rejected."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "reports" / "feasibility" / "rank12"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(name: str, *args: str) -> subprocess.CompletedProcess:
    """A checker as a reader runs it: exit 0 checked, exit 1 with one line on stderr."""
    return subprocess.run([sys.executable, str(HERE / f"{name}.py"), *args],
                          capture_output=True, text=True, timeout=600)


def _fails(name: str, cert: dict, tmp_path: Path, match: str = "") -> None:
    bad = tmp_path / f"bad-{name}.json"
    bad.write_text(json.dumps(cert))
    res = _run(name, str(bad))
    assert res.returncode == 1, res.stdout
    assert res.stderr.startswith("FAILED") and res.stderr.count("\n") == 1 and match in res.stderr


def test_theorem_d_bound_is_exactly_the_lp_value():
    """The certificate is the LP optimum in Q(sqrt 5): t >= (sqrt 5 - 1)/5 exactly."""
    mod = _load("check_delsarte")
    bound = mod.main()
    assert (bound.a, bound.b) == (Fraction(-1, 5), Fraction(1, 5))      # (sqrt 5 - 1)/5
    assert bound < Fraction(1, 4) and bound > Fraction(23576, 100000)    # below 1/4, above Perron
    # strictly above every rational the earlier certificate gave
    assert bound > Fraction(10000000000, 40450849727)
    assert _run("check_delsarte").returncode == 0


def test_theorem_d_rejects_wrong_certificates(tmp_path):
    cert = json.loads((HERE / "delsarte_certificate.json").read_text())
    bad = json.loads(json.dumps(cert))
    bad["a0"] = ["26/100", "0"]                # E changes: the factorization no longer matches
    _fails("check_delsarte", bad, tmp_path, "k (x - r)^2")
    bad = json.loads(json.dumps(cert))
    bad["E_factor"]["s"] = ["2", "0"]          # s > 0 (with E re-expanded it would dip below 0)
    _fails("check_delsarte", bad, tmp_path)
    bad = json.loads(json.dumps(cert))
    bad["claim"]["t_at_least"] = ["1/4", "0"]  # a claim the certificate does not reach
    _fails("check_delsarte", bad, tmp_path, "stated value")
    bad = json.loads(json.dumps(cert))
    bad["a4"] = ["5/28", "3/28"]               # a4 > 0 violates the sign condition
    _fails("check_delsarte", bad, tmp_path)
    old = {"format": "certify-attention/research/delsarte-nullity3/1", "n_max": 15}
    _fails("check_delsarte", old, tmp_path, "format")


def test_theorem_d_factorization_is_checked_exactly():
    """E(x) = k (x - 1/sqrt 5)^2 (x - 1)(x - s): a certificate whose E dips below 0 by a
    hair is caught because the polynomial identity is compared coefficient by coefficient."""
    mod = _load("check_delsarte")
    Q5 = mod.Q5
    a0, a2, a4 = Q5(Fraction(1, 12), Fraction(1, 12)), Q5(Fraction(5, 21), Fraction(1, 42)), \
        Q5(Fraction(5, 28), Fraction(-3, 28))
    E = mod.poly_E(a0, a2, a4)
    r, s = Q5(0, Fraction(1, 5)), Q5(-1, Fraction(-2, 5))
    prod = [Q5(Fraction(25, 32), Fraction(-15, 32))]
    for root in (r, r, Q5(1), s):
        prod = mod.poly_mul(prod, [-root, Q5(1)])
    assert prod == E
    E[0] = E[0] - Fraction(1, 10**12)          # E(1/sqrt 5) = -1e-12 < 0
    assert prod != E


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


def _octahedron_configuration(claim: dict) -> dict:
    """A valid weighted isotropic configuration far below the ceiling: the octahedron's
    axes with 3, 2, 2 copies per end, weight 1/k each (axis totals equal, so isotropic);
    summed R = 9/4 and least row ratio 2."""
    pts, ws = [], []
    for axis, k in enumerate((3, 2, 2)):
        for sign in ("1", "-1"):
            for _ in range(k):
                v = ["0", "0", "0"]
                v[axis] = sign
                pts.append(v)
                ws.append(f"1/{k}")
    return {"format": "certify-attention/research/isotropic-ceiling/2", "n": len(pts), "u": pts,
            "w": ws, "claim": claim}


def test_isotropic_ceilings_assert_their_claimed_values(tmp_path):
    mod = _load("check_iso_ceiling")
    for name in ("iso_ceiling.json", "iso_rows_ceiling.json"):
        cert = json.loads((HERE / name).read_text())
        low = _octahedron_configuration(cert["claim"])
        path = tmp_path / "low.json"
        path.write_text(json.dumps(low))
        with pytest.raises(AssertionError, match="does not reach"):
            mod.main(str(path))
        _fails("check_iso_ceiling", low, tmp_path, "does not reach")
        # the same configuration with its own (true) value as the claim: not the stated value
        key = "tau_at_least" if cert["claim"]["kind"] == "rows" else "R_at_least"
        low["claim"] = {**cert["claim"], key: "2/1" if key == "tau_at_least" else "9/4"}
        _fails("check_iso_ceiling", low, tmp_path, "stated value")
        # the stored configuration with a claim above what it reaches
        high = {**cert, "claim": {**cert["claim"], key: "4/1"}}
        _fails("check_iso_ceiling", high, tmp_path)
        assert _run("check_iso_ceiling", str(HERE / name)).returncode == 0


def test_sum_barrier_asserts_its_claimed_value(tmp_path):
    cert = json.loads((HERE / "sum_barrier.json").read_text())
    bad = json.loads(json.dumps(cert))
    bad["B"] = [[0 if i == j else (1 if (i + j) % 2 else 0) for j in range(15)] for i in range(15)]
    _fails("check_sum_barrier", bad, tmp_path, "does not reach")
    bad = json.loads(json.dumps(cert))
    bad["claim"]["value_at_least"] = "12/1"
    _fails("check_sum_barrier", bad, tmp_path, "stated value")
    assert _run("check_sum_barrier").returncode == 0


def test_witness_files_assert_their_stated_ratio(tmp_path):
    for name, fname in (("check_witness16", "witness16.json"), ("check_lemma_s", "core_rank12_exact.json")):
        cert = json.loads((HERE / fname).read_text())
        cert["t"] = "1/5"                           # a smaller ratio than the stated one
        _fails(name, cert, tmp_path, "stated value")
        assert _run(name).returncode == 0


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
    weighted three-point relaxation (T1)-(T4) at R = (1 + sqrt 5)/(12 D2) = 4.02496 > 4,
    so that relaxation cannot reach t >= 1/4 (exactly; per-atom versions not covered)."""
    R = _load("check_three_point_ceiling").main()
    assert (R.a, R.b) == (Fraction(1000, 804), Fraction(1000, 804))
    assert R > Fraction(402496, 100000) > 4
    assert 4.02496 < float(R) < 4.024961


def test_three_point_check_rejects_points_below_the_claim(tmp_path):
    cert = json.loads((HERE / "three_point_ceiling.json").read_text())
    bad = {**cert, "D2": "1001/15000"}          # weights too equal: nu' leaves the weight band
    _fails("check_three_point_ceiling", bad, tmp_path, "band")
    bad = {**cert, "D2": "6701/100000"}         # (T1)-(T4) hold, but R = 4.02436 < the claimed 4.02496
    _fails("check_three_point_ceiling", bad, tmp_path, "does not reach")
    bad = {**cert, "claim": {"R_at_least": "3/1"}}
    _fails("check_three_point_ceiling", bad, tmp_path, "stated value")
    assert _run("check_three_point_ceiling").returncode == 0


def test_row_wise_isotropic_ceiling():
    """iso_rows_ceiling.json: an exact isotropic configuration meeting every row inequality
    w_i <= t sum_j w_j (c_ij)_- at t = 0.2514420: tying the weights to the rows moves the
    ceiling of the isotropic relaxation from 0.2508452 up, but not to the core value 0.2551557."""
    mod = _load("check_iso_ceiling")
    rows = mod.main(str(HERE / "iso_rows_ceiling.json"), rows=True)
    summed = mod.main(str(HERE / "iso_rows_ceiling.json"))
    assert abs(float(rows) - 0.2514420) < 1e-7 and summed <= rows
    assert 1 / rows >= Fraction(39770610, 10**7)
    assert mod.main() < rows < Fraction(2551557, 10000000)
