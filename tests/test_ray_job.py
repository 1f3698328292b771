"""The Ray job recipes of docs/commands.md, tried on one machine: a Ray head started here
(`ray start --head --block`, loopback only, its own ports and temp folder); the
Sec. 5.2 sweep submitted with `ray job submit` and its rows compared with the
same sweep in one process; the `checkpoint --batch` recipe run as printed (a
refuted claim is a succeeded job with the verdict in its output). The head is stopped by ending the process this test
started (no `ray stop`: other Ray instances on the machine are left alone)."""

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from waits import wait_until

pytest.importorskip("ray")
RAY = Path(sys.executable).with_name("ray")
ROOT = Path(__file__).resolve().parents[1]


def _free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _rows(folder):
    with open(folder / "sec52_runs.csv") as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


@contextlib.contextmanager
def ray_head(tmp_path, env):
    """A Ray head on loopback with a job server (its own ports and temp folder); yields
    the job server's address; ended by ending the process group this started."""
    gcs, dash, client, agent, agent_grpc, metrics, renv = _free_ports(7)
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")    # short: the head's unix sockets live here
    log = open(tmp_path / "head.log", "w")
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--block", "--num-cpus", "2", "--node-ip-address", "127.0.0.1",
         "--port", str(gcs), "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash),
         "--include-dashboard", "true", "--ray-client-server-port", str(client),
         "--dashboard-agent-listen-port", str(agent), "--dashboard-agent-grpc-port", str(agent_grpc),
         "--metrics-export-port", str(metrics), "--runtime-env-agent-port", str(renv),
         "--temp-dir", temp],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        address = f"http://127.0.0.1:{dash}"

        def job_server_answers() -> bool:             # it answers once the head is up
            return subprocess.run([str(RAY), "job", "list", "--address", address], env=env,
                                  capture_output=True, text=True, timeout=600).returncode == 0
        wait_until(job_server_answers, "the Ray head's job server", proc=head,
                   output=tmp_path / "head.log", pause=2)
        yield address
    finally:
        if head.poll() is None:
            os.killpg(head.pid, signal.SIGTERM)      # the head and the processes it started
            try:
                head.wait(timeout=60)             # a clean stop, else the kill below
            except subprocess.TimeoutExpired:
                os.killpg(head.pid, signal.SIGKILL)
                head.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _env():
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
def test_sec52_sweep_submitted_as_a_ray_job_equals_one_process(tmp_path):
    pytest.importorskip("aiohttp")                   # the job server is ray[default]'s dashboard
    sweep = ["-m", "models.train", "sec52", "--smoke", "--seeds", "0,1", "--no-progress"]
    env = _env()
    one = subprocess.run([sys.executable, *sweep, "--out", str(tmp_path / "one")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, one.stderr[-2000:]
    with ray_head(tmp_path, env) as address:
        job = subprocess.run(
            [str(RAY), "job", "submit", "--address", address, "--",
             sys.executable, *sweep, "--ray-address", "auto", "--out", str(tmp_path / "job")],
            env=env, capture_output=True, text=True, timeout=900)
        assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
        assert "succeeded" in job.stdout + job.stderr
    rows = _rows(tmp_path / "one")
    assert len(rows) == 6 and rows == _rows(tmp_path / "job")


def recipe() -> str:
    """The `ray job submit` line of docs/commands.md that certifies a folder of models."""
    text = (ROOT / "docs" / "commands.md").read_text()
    (line,) = [ln for ln in re.sub(r"\\\n\s*", " ", text).splitlines()
               if ln.startswith("ray job submit") and "--batch" in ln]
    return line


@pytest.mark.slow
def test_the_batch_recipe_runs_as_printed_and_a_refuted_claim_is_a_successful_job(tmp_path):
    """docs/commands.md's `ray job submit` line, with the cluster's address, the venv's
    python and the folders put in: a batch whose project checkpoint has a refuted claim
    (paper51-lookup-r8-s0: exit 1 on its own) is a SUCCEEDED job whose output holds the
    verdict and the summary table, and its certificates are written."""
    pytest.importorskip("aiohttp")
    models = tmp_path / "models"
    models.mkdir()
    for suf in (".json", ".safetensors"):
        shutil.copyfile(ROOT / "models" / "checkpoints" / f"paper51-lookup-r8-s0{suf}",
                        models / f"paper51-lookup-r8-s0{suf}")
    shutil.copytree(ROOT / "reports" / "gallery" / "models" / "lat", models / "lat")
    env = _env()
    with ray_head(tmp_path, env) as address:
        line = recipe().replace("http://HEAD:8265", address).replace("/opt/certify/.venv/bin/python",
                                                                       sys.executable)
        line = line.replace("/shared/models", str(models)).replace("/shared/certs", str(tmp_path / "certs"))
        shell_env = {**env, "PATH": f"{RAY.parent}{os.pathsep}{env.get('PATH', '')}"}   # the venv's `ray`
        job = subprocess.run(line, shell=True, env=shell_env, capture_output=True, text=True, timeout=1200)
    out = job.stdout + job.stderr
    assert job.returncode == 0 and "succeeded" in out, out[-3000:]
    assert "certify checkpoint: verdict: exit 1" in out and "| refuted | 1 |" in out
    assert "| lat | linear-attention-transformer | 2 / 0 / 2 | 6 | proved | 0 |" in out
    cert = json.loads((tmp_path / "certs" / "paper51-lookup-r8-s0" / "certificate.json").read_text())
    assert any(c["verdict"] == "refuted" for c in cert["claims"])
    assert (tmp_path / "certs" / "lat" / "certificate.json").is_file()
