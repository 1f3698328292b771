"""``--workers N`` on forked local processes (certify/core/engine.py): chosen when the
predicted work pays for their start-up (tens of milliseconds) and no Ray runs here;
results in the order of the tasks, from other processes; a worker killed mid-run has
its batch run again, nothing lost or counted twice; a task's error reaches the caller.
The merged claims equal one process's (a feasibility sweep, a transcript range)."""

import json
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from certify.core import engine as eng
from certify.core.engine import Engine

pytestmark = pytest.mark.skipif(not eng.can_fork(), reason="forked workers need Linux's fork")


def _pid_square(x):
    return x * x, os.getpid()


def _fail_on_three(x):
    if x == 3:
        raise ValueError("task 3 fails")
    return x


def _square_first_attempt_waits(x, folder):
    """Record this attempt (pid) and return x^2; the first attempt of task 0 waits to
    be killed (900 s: a hang guard)."""
    first = x == 0 and not any(f.name.startswith("0-") for f in Path(folder).iterdir())
    Path(folder, f"{x}-{os.getpid()}-{uuid.uuid4().hex}").write_text(str(os.getpid()))
    if first:
        time.sleep(900)
    return x * x


def _forking_engine():
    e = Engine(2, progress=False)
    assert e.prepare([10.0] * 4, label="t")           # 20 s of work: forking pays
    assert e.forks and e.distributes and not e.uses_ray
    return e


@pytest.fixture(autouse=True)
def _no_ray():
    ray_mod = sys.modules.get("ray")
    if ray_mod is not None and ray_mod.is_initialized():
        pytest.skip("a Ray runs in this process: the engine does not fork")


def test_prediction_picks_forked_processes_over_ray_and_says_so(capsys):
    _forking_engine()
    err = capsys.readouterr().err
    assert "4 task(s) of t predicted 40 CPU s in this process" in err
    assert "on 2 forked processes" in err and err.rstrip().endswith("forking local processes")
    # the forked prediction: start-up, then the work over min(workers, cores) processes
    w = min(2, eng.cores())
    assert eng.pays([10.0] * 4, 2, eng.PROCESS_START_S, eng.PROCESS_TASK_S)[2] == \
        pytest.approx(eng.PROCESS_START_S + (40.0 + 4 * eng.PROCESS_TASK_S) / w)
    # tiny work stays here even though forking is cheap
    e2 = Engine(2, progress=False)
    assert not e2.prepare([0.001] * 4) and not e2.distributes
    assert "running them here" in capsys.readouterr().err


def test_forked_map_keeps_order_and_runs_elsewhere():
    e = _forking_engine()
    out = e.map(_pid_square, [(i,) for i in range(11)])
    assert [v for v, _ in out] == [i * i for i in range(11)]
    pids = {p for _, p in out}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert eng._FORKED is None                         # nothing left behind for later maps


def test_tasks_without_predicted_costs_are_forked_at_once(capsys):
    e = Engine(2, progress=False)
    out = e.map(_pid_square, [(i,) for i in range(5)], label="sq")
    assert [v for v, _ in out] == [0, 1, 4, 9, 16]
    assert os.getpid() not in {p for _, p in out}      # none timed here first
    assert "5 task(s) of sq without a predicted cost: forking" in capsys.readouterr().err
    assert not e.forks                                 # a decision for this map only
    assert e.map(_pid_square, [(7,)])[0] == (49, os.getpid())   # one task: here


def test_a_task_error_reaches_the_caller():
    e = _forking_engine()
    with pytest.raises(ValueError, match="task 3 fails"):
        e.map(_fail_on_three, [(i,) for i in range(8)])
    assert e.map(_pid_square, [(2,)])[0][0] == 4       # the engine still works after it


def test_killed_forked_worker_batch_runs_again_once(tmp_path):
    folder = tmp_path / "attempts"
    folder.mkdir()
    killed = []

    def killer():                                      # a daemon: ends with the test process
        while not killed:
            files = [f for f in folder.iterdir() if f.name.startswith("0-")]
            if files:
                pid = int(files[0].read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append((files[0].name, pid))
            time.sleep(0.02)

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    e = _forking_engine()
    out = e.map(_square_first_attempt_waits, [(i, str(folder)) for i in range(8)])
    th.join(5)
    assert out == [i * i for i in range(8)]
    assert killed and killed[0][1] != os.getpid()
    attempts = [f.name.split("-")[0] for f in folder.iterdir()]
    assert attempts.count("0") == 2                    # the killed task ran again, once
    assert all(attempts.count(str(i)) in (1, 2) for i in range(1, 8))


def _claims(path):
    cert = json.loads(Path(path).read_text())
    return [{k: v for k, v in c.items() if k not in ("timings", "info")} for c in cert["claims"]]


@pytest.fixture
def fork_anything(monkeypatch):
    """Forking predicted free, so the small runs below fork (the choice itself is tested above)."""
    monkeypatch.setattr(eng, "PROCESS_START_S", 0.0)
    monkeypatch.setattr(eng, "PROCESS_TASK_S", 0.0)


def test_feasibility_sweep_on_forked_processes_equals_one_process(tmp_path, capsys, fork_anything):
    from certify.cli.feasibility import main
    args = ["--sweep", "11:12", "--features", "real", "--iterations", "2", "--no-progress"]
    rc = main(args + ["--out", str(tmp_path / "one.json")])     # 1: rank 12 stays unknown
    capsys.readouterr()
    assert main(args + ["--workers", "2", "--out", str(tmp_path / "two.json")]) == rc
    assert "forking local processes" in capsys.readouterr().err
    one, two = _claims(tmp_path / "one.json"), _claims(tmp_path / "two.json")
    assert one == two and len(one) == 2


def test_transcript_range_on_forked_processes_equals_one_process(tmp_path, capsys, fork_anything):
    from certify.cli.transcript import main
    # q = 18: 2^18 assignments in 4 shards (one timed here, three forked)
    args = ["--M", "14", "--s", "1", "--h", "7", "--q", "18", "--bits", "1", "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "one.json")]) == 0
    capsys.readouterr()
    assert main(args + ["--workers", "2", "--out", str(tmp_path / "two.json")]) == 0
    assert "forking local processes" in capsys.readouterr().err
    one, two = _claims(tmp_path / "one.json"), _claims(tmp_path / "two.json")
    assert one == two and one


def test_checkpoint_batch_on_forked_processes_writes_the_same_folders(tmp_path, capsys):
    """The batch's models are forked at once (no predicted costs) and each worker writes
    its model's report folder into the batch's stage: the same folders and claims as
    one process, and the refused model's reason in the summary."""
    import shutil

    from certify.cli import checkpoint
    models = Path(__file__).resolve().parents[1] / "reports" / "gallery" / "models"
    src = tmp_path / "models"
    for name in ("custom", "softmax"):                  # certified through its spec; refused
        shutil.copytree(models / name, src / name)
    outs = []
    for extra in ([], ["--workers", "2"]):
        out = tmp_path / f"out{len(outs)}"
        code = checkpoint.main(["--batch", str(src), "--out", str(out), "--no-progress", *extra])
        assert code == 3                                   # softmax: nothing certifiable
        outs.append(out)
    assert "2 task(s) of checkpoints without a predicted cost: forking" in capsys.readouterr().err
    one, two = outs

    def files(d):
        return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())
    assert files(one) == files(two) and {"custom/heads.md", "custom/report.md"} <= set(files(two))
    assert _claims(one / "custom" / "certificate.json") == _claims(two / "custom" / "certificate.json")
    assert not (two / "softmax").exists()
    assert (one / "summary.md").read_text().replace(str(one), "") == \
        (two / "summary.md").read_text().replace(str(two), "")
