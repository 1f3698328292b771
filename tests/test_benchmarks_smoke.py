"""Benchmarks cannot rot: every ``benchmarks/bench_*.py`` (found by the glob, so a new
one is covered without listing it) runs at its ``--smoke`` size, exits 0, prints its
ratio line and leaves ``reports/bench`` untouched; and the README's benchmark tables
are the ones ``benchmarks/report.py`` renders from the files in ``reports/bench``."""

import hashlib
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


@pytest.mark.parametrize("bench", BENCHES, ids=[p.stem for p in BENCHES])
def test_benchmark_smoke_run(bench, tmp_path):
    assert "--smoke" in bench.read_text(), f"{bench.name} has no --smoke size"
    before = _snapshot(ROOT / "reports" / "bench")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "CERTIFY_NO_PROGRESS": "1"}
    p = subprocess.run([sys.executable, str(bench), "--smoke"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=900)
    tail = (p.stdout[-2000:] + "\n--- stderr ---\n" + p.stderr[-3000:])
    assert p.returncode == 0, tail
    assert RATIO.search(p.stdout), "no ratio line in the output:\n" + tail
    assert _snapshot(ROOT / "reports" / "bench") == before, "the smoke run wrote into reports/bench"


def test_the_readme_quotes_only_what_the_result_files_hold():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import report
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    current = report.readme_current((ROOT / "README.md").read_text())
    rendered = report.readme_blocks()
    for key in report.MARKS:
        assert current[key] is not None, f"README: the {key} block's markers are missing"
        assert current[key] == rendered[key], (
            f"README's {key} block differs from what benchmarks/report.py renders from reports/bench "
            "(run `python benchmarks/report.py`)")
    assert rendered["summary"].count("\n") >= 2 and rendered["sweep"].count("\n") >= 2
