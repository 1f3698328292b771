"""Parallel engine (certify/core/engine.py): in process and on a local Ray with two
workers. The merged results do not depend on the worker count; a worker killed
mid-run has its task retried, nothing lost or counted twice.

The default suite starts one local Ray and runs the retry, a feasibility sweep and a
transcript range on it; the Sec. 5.1/5.2 training sweeps, the checkpoint batch and the
factor Gram pass on two workers run with ``--runslow`` (each is seconds of Ray start-up and
scheduling for an equality the three above already show)."""

import csv
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest

from certify.core.engine import Engine, init_local

pytest.importorskip("ray")


def _square_slowly(x, folder, seconds=1.0):
    """Record this attempt (pid), sleep, return x^2."""
    Path(folder, f"{x}-{os.getpid()}-{uuid.uuid4().hex}").write_text(str(os.getpid()))
    time.sleep(seconds)
    return x * x


def _square_first_attempt_waits(x, folder):
    """Record this attempt (pid) and return x^2; the first attempt of task 0 waits
    to be killed (900 s: a hang guard), so the kill lands on it whatever the load."""
    first = x == 0 and not any(f.name.startswith("0-") for f in Path(folder).iterdir())
    Path(folder, f"{x}-{os.getpid()}-{uuid.uuid4().hex}").write_text(str(os.getpid()))
    if first:
        time.sleep(900)
    return x * x


@pytest.fixture(scope="module")
def ray2():
    import ray
    old = os.environ.get("PYTHONPATH")
    here = str(Path(__file__).resolve().parent)          # workers import this module's helpers
    os.environ["PYTHONPATH"] = here + (os.pathsep + old if old else "")
    try:
        init_local(2)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    yield
    ray.shutdown()


def test_in_process_map_keeps_order(tmp_path):
    e = Engine(1, progress=False)
    assert not e.uses_ray
    assert e.map(_square_slowly, [(i, str(tmp_path), 0.0) for i in (3, 1, 2)]) == [9, 1, 4]


def test_killed_worker_task_is_retried_once_and_counted_once(tmp_path, ray2):
    folder = tmp_path / "attempts"
    folder.mkdir()
    killed = []

    def killer():
        while not killed:
            files = [f for f in folder.iterdir() if f.name.startswith("0-")]
            if files:
                pid = int(files[0].read_text())
                os.kill(pid, signal.SIGKILL)          # the Ray worker running task 0's first attempt
                killed.append((files[0].name, pid))
            time.sleep(0.05)

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    with Engine(2, progress=False) as e:
        assert e.uses_ray
        out = e.map(_square_first_attempt_waits, [(i, str(folder)) for i in range(8)])
    th.join(5)
    assert out == [i * i for i in range(8)]
    assert killed
    attempts = [f.name.split("-")[0] for f in folder.iterdir()]
    victim = killed[0][0].split("-")[0]
    assert victim == "0" and attempts.count("0") == 2     # the killed task ran again, once
    assert len(attempts) >= 9


def _claims(path):
    cert = json.loads(Path(path).read_text())
    out = []
    for c in cert["claims"]:
        c = dict(c)
        c.pop("timings", None)
        info = dict(c.pop("info", {}) or {})
        out.append((c, {k: v for k, v in info.items() if "second" not in k}))
    return out


def test_feasibility_sweep_with_two_workers_equals_one_process(tmp_path, ray2):
    from certify.cli.feasibility import main
    args = ["--sweep", "11:12", "--features", "real", "--iterations", "2", "--no-progress"]
    main(args + ["--out", str(tmp_path / "one.json")])
    main(args + ["--workers", "2", "--out", str(tmp_path / "two.json")])
    one, two = _claims(tmp_path / "one.json"), _claims(tmp_path / "two.json")
    assert len(one) == 2 and one == two


@pytest.mark.slow
def test_sec51_reduced_sweep_with_two_workers_equals_one_process(tmp_path, ray2):
    from certify.cli.train import main
    base = ["sec51", "--smoke", "--seeds", "0,1", "--no-progress"]
    assert main(base + ["--out", str(tmp_path / "one")]) == 0
    assert main(base + ["--workers", "2", "--out", str(tmp_path / "two")]) == 0

    def rows(d):
        with open(d / "sec51_runs.csv") as f:
            return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]
    assert len(rows(tmp_path / "one")) == 4
    assert rows(tmp_path / "one") == rows(tmp_path / "two")
    assert (tmp_path / "one" / "sec51_ratios.csv").read_text() == \
        (tmp_path / "two" / "sec51_ratios.csv").read_text()


def test_transcript_shards_on_two_workers_give_the_same_claims(tmp_path, ray2):
    from certify.cli.transcript import main
    args = ["--M", "14", "--s", "1", "--h", "7", "--q", "17", "--bits", "1", "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "one.json")]) == 0
    assert main(args + ["--workers", "2", "--out", str(tmp_path / "two.json")]) == 0
    one, two = _claims(tmp_path / "one.json"), _claims(tmp_path / "two.json")
    assert one == two and one[-1][0]["verdict"] == "proved"


@pytest.mark.slow
def test_checkpoint_batch_on_two_workers_equals_one_process(tmp_path, ray2):
    import shutil

    from certify.cli.checkpoint import main
    src = Path(__file__).resolve().parent.parent / "models" / "checkpoints"
    d = tmp_path / "ck"
    d.mkdir()
    for n in ("paper51-lookup-r8-s0.json", "paper51-lookup-r8-s0.safetensors"):
        shutil.copy(src / n, d / n)
    (d / "notes.json").write_text("{}")                      # ignored: not a checkpoint
    assert main(["--batch", str(d), "--out", str(tmp_path / "one")]) == 1   # refuted model
    assert main(["--batch", str(d), "--workers", "2", "--out", str(tmp_path / "two")]) == 1
    one = _claims(tmp_path / "one" / "paper51-lookup-r8-s0" / "certificate.json")
    two = _claims(tmp_path / "two" / "paper51-lookup-r8-s0" / "certificate.json")
    assert one == two and len(one) > 3


@pytest.mark.slow
def test_factor_gram_pass_on_two_workers_equals_one_process(ray2):
    from test_rank_fast import _cube_kernel

    from certify.rank.summary import summarize_features
    k = _cube_kernel()
    a = summarize_features(k, batch_size=512, keep_limit=0)
    with Engine(2, progress=False) as e:
        b = summarize_features(k, batch_size=512, keep_limit=0, engine=e)
    assert (a.eq, a.ek, a.sha_q, a.sha_k) == (b.eq, b.ek, b.sha_q, b.sha_k)
    assert (a.gram_q == b.gram_q).all() and (a.gram_k == b.gram_k).all()


@pytest.mark.slow
def test_sec52_reduced_sweep_with_two_workers_equals_one_process(tmp_path, ray2):
    """Sec. 5.2 on the engine: per-task seeds and one torch thread per task, so the
    rows (timings aside) are the same with one process and with two workers."""
    from certify.cli.train import main
    base = ["sec52", "--smoke", "--seeds", "0,1", "--no-progress"]
    assert main(base + ["--out", str(tmp_path / "one")]) == 0
    assert main(base + ["--workers", "2", "--out", str(tmp_path / "two")]) == 0

    def rows(d):
        with open(d / "sec52_runs.csv") as f:
            return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]
    assert len(rows(tmp_path / "one")) == 6
    assert rows(tmp_path / "one") == rows(tmp_path / "two")

