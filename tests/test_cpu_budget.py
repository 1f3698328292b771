"""``--time-limit`` counts CPU seconds (certify.core.budget), so a verdict does not
depend on the machine's load; the claim records the budget it was reached under."""

import subprocess
import sys
import time

import numpy as np
import pytest

from certify.checkers import feasibility as checker
from certify.cli.feasibility import main
from certify.core.budget import CpuBudget
from certify.core.certificate import Certificate
from certify.core.families import chain_family, paper51_family
from certify.feasibility.decide import decide
from certify.feasibility.model import Features
from certify.feasibility.result import Outcome


@pytest.fixture(scope="module")
def paper():
    return paper51_family()


def test_budget_counts_cpu_not_wall():
    """Waiting (as a process does on a loaded machine) spends wall time, not the budget;
    computing spends it."""
    b = CpuBudget(0.05)
    time.sleep(0.3)
    assert not b.exhausted() and b.used() < 0.05
    x = 0
    while not b.exhausted():
        x += 1
    assert b.used() >= 0.05 and b.left() <= 0
    assert b.spent().startswith("CPU-second budget of 0.05 s exhausted")
    rec = b.record()
    assert rec["kind"] == "cpu_seconds" and rec["limit_s"] == 0.05 and rec["used_s"] >= 0.05


def test_part_of_a_budget_never_exceeds_what_is_left():
    b = CpuBudget(10.0)
    assert b.part(3.0).seconds == 3.0
    assert CpuBudget(1.0, start=b.start - 5).part(3.0).seconds == 0.0     # overspent


def test_unknown_names_the_exhausted_budget_and_stops_between_solves(paper):
    """Rank 14 needs 4 LPs (test below); a budget smaller than one LP lets exactly one
    run (checked between solves, never inside one), so the verdict is unknown and
    its reason and info say which budget ran out."""
    res = decide(paper, 14, Features.REAL, time_limit=0.01, seed=0)
    assert res.outcome is Outcome.UNKNOWN
    assert "CPU-second budget of 0.01 s exhausted" in res.reason
    claim = res.to_claim()
    assert claim.info["lps"] == 1
    assert claim.info["budget"]["kind"] == "cpu_seconds" and claim.info["budget"]["limit_s"] == 0.01


def test_iteration_budget_is_recorded_as_such(paper):
    res = decide(paper, 14, Features.REAL, iterations=1, seed=0)
    assert res.outcome is Outcome.UNKNOWN
    assert "budget of 1 LPs per rank step used" in res.reason
    assert res.to_claim().info["budget"] == {"kind": "lp_iterations", "limit": 1}


def _busy(n: int, seconds: float) -> list[subprocess.Popen]:
    """``n`` busy-loop processes, each ending by itself after ``seconds``."""
    code = f"import time\nt = time.monotonic()\nwhile time.monotonic() - t < {seconds}: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


#: seven weight-6 words of length 12; their chain family's real rank 4 is not excluded
#: by the chain bounds (they stop at 2) and is found by the alternating LPs with seed 0
#: after 55 LPs (46 restarts), about 0.5 CPU s
WORDS = [(0, 1, 2, 3, 6, 7), (0, 1, 4, 6, 7, 11), (0, 3, 4, 5, 9, 10), (1, 2, 3, 7, 9, 11),
         (1, 3, 4, 5, 9, 11), (2, 7, 8, 9, 10, 11), (3, 5, 6, 7, 8, 11)]


@pytest.mark.slow
def test_same_verdict_and_witness_at_load_and_under_four_busy_processes(tmp_path, capsys):
    """A 2 CPU-second budget for a search that needs about 0.5 CPU s: the same
    witness (the same 55 LPs) on the machine as it is and while four busy loops
    compete for its cores. A wall-clock limit of 2 s ran out under that load on the
    shared two-core machine this was written on."""
    words = np.zeros((len(WORDS), 12), dtype=np.uint8)
    for i, s in enumerate(WORDS):
        words[i, list(s)] = 1
    fam = tmp_path / "seven.json"
    chain_family(words, n=3, g=3, name="seven-words").save(fam)
    argv = ["--family", str(fam), "--rank", "4", "--time-limit", "2", "--no-progress",
            "--seed", "0"]
    quiet = tmp_path / "quiet.json"
    assert main([*argv, "--out", str(quiet)]) == 0
    procs = _busy(4, 60.0)
    try:
        loaded = tmp_path / "loaded.json"
        assert main([*argv, "--out", str(loaded)]) == 0
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    capsys.readouterr()
    a, b = (Certificate.read(p).claims[0] for p in (quiet, loaded))
    assert a.verdict.value == b.verdict.value == "proved" and a.kind.value == "feasible"
    assert a.evidence["witness"] == b.evidence["witness"]            # the same LP path
    assert a.info["lps"] == b.info["lps"] == 55
    for c in (a, b):
        assert c.info["budget"]["kind"] == "cpu_seconds" and c.info["budget"]["limit_s"] == 2.0
        assert c.info["budget"]["used_s"] < 2.0
        assert checker.check(c.to_json(), Certificate(claims=[c]).to_json()) == []
    print(f"loaded run: {b.info['budget']['used_s']} CPU s")


def test_a_budget_that_ends_above_the_target_rank_gives_no_witness(monkeypatch, paper):
    """The descent searches ranks 14, 13, ... down to the target; when the budget runs
    out after an intermediate rank succeeded, that rank's witness is not the target's
    (it was once returned as one, and the certificate's own check then refused it)."""
    from certify.feasibility import lp_search
    from certify.feasibility.model import build_problem
    calls = []

    def fake(problem, r, features, **kw):
        calls.append(r)
        return "res", f"witness of rank {r}", "check", ("P", "Q")

    class TwoSteps:                          # budget left for two rank steps, then none
        n = 0

        def left(self):
            self.n += 1
            return 1.0 if self.n <= 2 else 0.0

    monkeypatch.setattr(lp_search, "search_witness", fake)
    problem = build_problem(paper, "paper")
    out = lp_search._descend(problem, 12, Features.REAL, TwoSteps(), 0, False, None, 15)
    assert calls == [14, 13] and out == ("res", None, None)
