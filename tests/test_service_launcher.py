"""The job launcher loads torch only for jobs that read a model: a server that verifies
and searches never pays torch's import (seconds of CPU and hundreds of MB per server);
the first checkpoint, rank or transcript job makes the launcher import it, once, before
it forks, so that later model jobs start without it."""

import json
from pathlib import Path

from waits import wait_until

from certify.service.launcher import MODEL_COMMANDS, Launcher


def _maps_torch(pid: int) -> bool:
    return "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text()


def _job(launcher: Launcher, folder: Path, key: str, command: str) -> None:
    folder.mkdir()
    (folder / "job.json").write_text(json.dumps({"command": command}))   # an invalid job: it fails at once
    launcher.launch(key, folder)
    wait_until(lambda: launcher.status(key) is not None, f"job {key} to end")


def test_torch_is_loaded_for_the_first_model_job_only(tmp_path):
    assert MODEL_COMMANDS == {"checkpoint", "rank", "transcript"}
    launcher = Launcher(nice=0)
    try:
        for i, command in enumerate(("verify", "feasibility")):
            _job(launcher, tmp_path / command, f"k{i}", command)
        first = launcher.pid
        assert first is not None and not _maps_torch(first)
        _job(launcher, tmp_path / "checkpoint", "k2", "checkpoint")
        assert launcher.pid == first and _maps_torch(first)      # the same launcher, now with torch
    finally:
        launcher.stop()
