"""Benchmarks cannot rot: every ``benchmarks/bench_*.py`` (found by the glob, so a new
one is covered without listing it) runs at its ``--smoke`` size, exits 0, prints its
ratio line and leaves ``reports/bench`` untouched (the heavy ones, :data:`HEAVY_SMOKE`,
with ``--runslow``); and the benchmark tables of
``docs/benchmarks.md`` and the README's headline figures are the ones
``benchmarks/report.py`` renders from the files in ``reports/`` (the suite's time from
``reports/suite-times.json``, which ``make suite-times`` writes)."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHES = sorted((ROOT / "benchmarks").glob("bench_*.py"))
RATIO = re.compile(r"ratio[^\n]*\d", re.IGNORECASE)


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_glob_finds_the_benchmarks():
    names = {p.name for p in BENCHES}
    assert {"bench_rank.py", "bench_rank_sweep.py", "bench_transcript.py"} <= names


#: smoke arguments beyond ``--smoke`` in the default suite: the real-size benchmark builds and
#: certifies one model there, the user LM (each model is two commands with torch imported); the fla LM with
#: ``--runslow`` (test_real_size_smoke_of_every_model)
EXTRA = {"bench_realsize": ["--only", "performer-user-lm"]}


def _smoke(bench: Path, tmp_path: Path, extra: list[str]) -> None:
    assert "--smoke" in bench.read_text(), f"{bench.name} has no --smoke size"
    before = _snapshot(ROOT / "reports" / "bench")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "CERTIFY_NO_PROGRESS": "1"}
    p = subprocess.run([sys.executable, str(bench), "--smoke", *extra], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=900)
    tail = (p.stdout[-2000:] + "\n--- stderr ---\n" + p.stderr[-3000:])
    assert p.returncode == 0, tail
    assert RATIO.search(p.stdout), "no ratio line in the output:\n" + tail
    assert _snapshot(ROOT / "reports" / "bench") == before, "the smoke run wrote into reports/bench"


#: benchmarks whose smoke run builds a library model, runs a solver sweep, starts Ray or
#: times several baselines (2-9 CPU s each, a fresh process importing torch, fla or Ray): run with ``--runslow``; the default suite runs every other
#: benchmark's smoke size (the pipelines these exercise have their own tests in the default suite)
HEAVY_SMOKE = {"bench_based", "bench_canonical", "bench_layers", "bench_realsize", "bench_feasibility",
               "bench_transcript", "bench_rank_sweep", "bench_parallel", "bench_cr_functions",
               "bench_factor_files"}


def _marked(bench: Path):
    return pytest.param(bench, id=bench.stem, marks=[pytest.mark.slow] if bench.stem in HEAVY_SMOKE else [])


@pytest.mark.parametrize("bench", [_marked(b) for b in BENCHES])
def test_benchmark_smoke_run(bench, tmp_path):
    _smoke(bench, tmp_path, EXTRA.get(bench.stem, []))


def test_the_heavy_smoke_runs_are_benchmarks_that_exist():
    assert HEAVY_SMOKE <= {p.stem for p in BENCHES}


@pytest.mark.slow
@pytest.mark.parametrize("model", ["fla-hedgehog"])
def test_real_size_smoke_of_every_model(model, tmp_path):
    _smoke(ROOT / "benchmarks" / "bench_realsize.py", tmp_path, ["--only", model])


def _report():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import report
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return report


def test_the_benchmarks_page_quotes_only_what_the_result_files_hold():
    report = _report()
    current = report.blocks_in((ROOT / "docs" / "benchmarks.md").read_text(), report.MARKS)
    rendered = report.page_blocks()
    for key in report.MARKS:
        assert current[key] is not None, f"docs/benchmarks.md: the {key} block's markers are missing"
        assert current[key] == rendered[key], (
            f"docs/benchmarks.md's {key} block differs from what benchmarks/report.py renders from "
            "reports/bench (run `python benchmarks/report.py --pages`)")
    assert rendered["summary"].count("\n") >= 2 and rendered["sweep"].count("\n") >= 2


def test_the_readme_headline_figures_are_what_the_files_hold():
    report = _report()
    current = report.blocks_in((ROOT / "README.md").read_text(), report.README_MARKS)["headline"]
    assert current is not None, "README: the headline block's markers are missing"
    assert current == report.readme_blocks()["headline"], (
        "README's headline figures differ from what benchmarks/report.py renders from reports/ "
        "(run `python benchmarks/report.py --pages`)")
    rank = json.loads((ROOT / "reports" / "bench" / "rank.json").read_text())
    top = max(rank["matrix"], key=lambda r: r["n"])
    assert f"{top['exact_median_s']:.2f}" in current and f"{top['numpy_median_s']:.2f}" in current


def test_the_suite_time_is_quoted_from_its_file(tmp_path):
    """The README's suite time is the one ``make suite-times`` wrote, or says it is not measured."""
    report = _report()
    missing = report.suite_times_line(tmp_path / "none.json")
    assert "not measured" in missing and "make suite-times" in missing
    s = {"tests": ["tests"], "passed": 1018, "pytest_s": 171.4, "cpu_s": 338.6, "cores": 2,
         "loadavg_start": [0.1, 0.2, 0.3]}
    (tmp_path / "s.json").write_text(json.dumps(s))
    line = report.suite_times_line(tmp_path / "s.json")
    assert "1,018 tests passed in 171 s of pytest time, 339 CPU s, on 2 cores" in line
    assert "the default suite" in line


def test_suite_times_reads_pytest_output():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import suite_times
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    out = ("....\n============================= slowest 15 durations =============================\n"
           "12.51s call     tests/test_a.py::test_x\n0.40s setup    tests/test_b.py::test_y[1]\n"
           "3.00s teardown tests/test_a.py::test_z\n"
           "========== 1018 passed, 3 skipped, 1 warning in 320.45s (0:05:20) ==========\n")
    r = suite_times.parse(out)
    assert (r["passed"], r["skipped"], r["failed"], r["pytest_s"]) == (1018, 3, 0, 320.45)
    assert [d["seconds"] for d in r["slowest"]] == [12.51, 3.0, 0.40]
    assert r["slowest"][0] == {"seconds": 12.51, "phase": "call", "test": "tests/test_a.py::test_x"}
    assert suite_times.parse("7 passed in 1.68s\n")["pytest_s"] == 1.68          # pytest -q prints no rule
    with pytest.raises(ValueError):
        suite_times.parse("no summary")
