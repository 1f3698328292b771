"""``--workers N`` starts a local Ray only when it pays (certify/core/engine.py): the
engine compares the tasks' predicted CPU seconds in one process with Ray's start-up
and per-task cost, and otherwise runs them here and says so. No Ray is started here."""

import sys

from certify.core import engine as eng
from certify.core.engine import Engine


def _square(x):
    return x * x


def test_workers_fall_back_to_one_process_when_ray_would_not_pay(capsys, monkeypatch):
    """Predicted small tasks: no Ray is started, the tasks run here in order and one
    line on stderr says why, with the predicted seconds of both."""
    monkeypatch.delitem(sys.modules, "ray", raising=False)     # no Ray running in this process
    e = Engine(2, progress=False)
    assert e.parallel and not e.uses_ray
    assert e.map(_square, [(i,) for i in range(6)], cost_s=[0.01] * 6, label="sq") == \
        [i * i for i in range(6)]
    assert not e.uses_ray
    err = capsys.readouterr().err
    assert "--workers 2: 6 task(s) of sq predicted 0.06 CPU s in this process" in err
    assert "running them here" in err and e.fallback in err
    # without predictions and without fork the first task is run here and timed: tiny, so
    # the rest too (with fork they are forked at once: tests/test_engine_forked.py)
    monkeypatch.setattr(eng, "can_fork", lambda: False)
    assert e.map(_square, [(i,) for i in range(4)], label="sq") == [0, 1, 4, 9]
    assert "3 task(s) of sq" in capsys.readouterr().err and not e.uses_ray
    worth, serial, par = eng.pays([100.0] * 4, 2, 30.0)
    assert serial == 400.0 and par == 30.0 + (400.0 + 4 * eng.RAY_TASK_S) / min(2, eng.cores())
    assert worth == (eng.cores() >= 2)                         # 230 s against 400 s on two cores
    assert not eng.pays([1.0] * 4, 2, 30.0)[0]
    assert eng.pays([50.0, 0.1], 2, 0.0)[2] >= 50.0            # never below the largest task
