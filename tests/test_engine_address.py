"""--ray-address fails fast: a malformed or unreachable address, or one where
something else answers, is one line and exit 2 while the arguments are read,
ended by the documented connect bound (CERTIFY_RAY_CONNECT_SECONDS), never by
Ray's retries; with a real Ray head (slow) both HOST:PORT and ray://HOST:PORT
join it and give the same certificate as one process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from service_support import ROOT, env, free_port
from waits import cpu_run, wait_until

from certify.core import ray_address
from certify.core.errors import InputError


@pytest.mark.parametrize("text, why", [
    ("nonsense", "expected HOST:PORT"), ("ray://", "expected HOST:PORT"),
    ("host:99999", "outside 1..65535"), ("256.1.1.1:6379", "not an IPv4 address"),
    ("[::1", "not a host name"), ("a b:1", "expected HOST:PORT"), ("h:p", "expected HOST:PORT"),
    ("http://h:1", "expected HOST:PORT"), ("-h:1", "not a host name")])
def test_malformed_addresses_are_refused_by_their_form(text, why):
    with pytest.raises(InputError, match=why):
        ray_address.parse(text)


def test_well_formed_addresses_parse():
    a = ray_address.parse("ray://head.example:10001")
    assert (a.client, a.host, a.port, a.target) == (True, "head.example", 10001, "head.example:10001")
    b = ray_address.parse("[::1]:6379")
    assert (b.client, b.host, b.target) == (False, "::1", "[::1]:6379")


def test_auto_is_the_cluster_ray_would_join(monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    a = ray_address.parse("auto")
    assert (a.text, a.host, a.port, a.client) == ("auto", "10.1.2.3", 6379, False)
    monkeypatch.delenv("RAY_ADDRESS")
    recorded = tmp_path / "ray_current_cluster"
    monkeypatch.setattr(ray_address, "CURRENT_CLUSTER_FILE", str(recorded))
    with pytest.raises(InputError, match="no Ray cluster on this node"):
        ray_address.parse("auto")
    recorded.write_text("127.0.0.1:6380\n")
    assert ray_address.parse("auto").port == 6380
    recorded.write_text("garbage")
    with pytest.raises(InputError, match="expected HOST:PORT"):
        ray_address.parse("auto")


def test_the_connect_bound_is_configurable_and_checked(monkeypatch):
    assert ray_address.connect_seconds() == 10.0
    monkeypatch.setenv("CERTIFY_RAY_CONNECT_SECONDS", "2.5")
    assert ray_address.connect_seconds() == 2.5
    for bad in ("nan", "inf", "0", "1e9", "x"):
        monkeypatch.setenv("CERTIFY_RAY_CONNECT_SECONDS", bad)
        with pytest.raises(InputError, match="CERTIFY_RAY_CONNECT_SECONDS"):
            ray_address.connect_seconds()


def _silent_server() -> tuple[int, threading.Event]:
    """A TCP port that accepts connections and never says a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()

    def loop():
        conns = []
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass
        for c in conns:
            c.close()
        srv.close()
    threading.Thread(target=loop, daemon=True).start()
    return srv.getsockname()[1], stop


def _run(*args: str, seconds: str = "1") -> tuple[subprocess.CompletedProcess, float]:
    """``certify ARGS``: the completed process and its CPU seconds."""
    return cpu_run([sys.executable, "-m", "certify", *args], cwd=ROOT,
                   env={**env(), "CERTIFY_RAY_CONNECT_SECONDS": seconds})


#: CPU seconds of a refused run: Python's start-up, the argument parsing and one connection
#: attempt (about 0.3 s here); starting or joining Ray would cost more
REFUSAL_CPU_S = 10.0


def test_unreachable_or_silent_addresses_are_refused_before_any_work_with_exit_2():
    """The refusal is argparse's (the usage line, then one error line): it comes while
    the arguments are read, before Ray is started or joined, and the silent server's
    line names the connect bound that ended the attempt, not a retry of Ray's."""
    port, stop = _silent_server()
    try:
        cases = [("feasibility", "--sweep", "8:9", "--ray-address", "127.0.0.1:1"),
                 ("feasibility", "--sweep", "8:9", "--ray-address", f"127.0.0.1:{port}"),
                 ("transcript", "--M", "4", "--s", "1", "--h", "2", "--q", "2", "--bits", "2",
                  "--workers", "2", "--ray-address", f"ray://127.0.0.1:{port}")]
        results = []
        threads = [threading.Thread(target=lambda c=c: results.append((c, *_run(*c))))
                   for c in cases]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
    assert len(results) == len(cases)
    for case, p, cpu in results:
        err = [ln for ln in p.stderr.splitlines() if "error" in ln]
        assert p.returncode == 2 and len(err) == 1, (case, p.stderr)
        assert p.stderr.startswith(f"usage: certify {case[0]} ") and p.stderr.splitlines()[-1] == err[0]
        assert err[0].startswith(f"certify {case[0]}: error: argument --ray-address: "), err
        assert "Traceback" not in p.stderr
        assert cpu < REFUSAL_CPU_S, (case, cpu)
        if case[-1].endswith(f":{port}"):
            assert "did not answer within 1 s (CERTIFY_RAY_CONNECT_SECONDS)" in err[0], err
        else:
            assert "nothing listens there (connection refused)" in err[0], err


def _client_server_logs(temp: str) -> str:
    """The tails of the head's client-server logs (why a ``ray://`` connection failed)."""
    tails = []
    for f in sorted(Path(temp).glob("session_*/logs/ray_client_server*")):
        text = f.read_text(errors="replace").strip().splitlines()[-15:]
        tails.append(f"--- {f.name}\n" + "\n".join(text))
    return "\n".join(tails) or "no client-server logs"


@pytest.mark.slow
def test_a_real_ray_head_is_joined_by_gcs_and_by_client_address():
    """``ray start --head`` on loopback (its own session, killed by process group
    afterwards); the sweep's certificate is the same with and without Ray."""
    import shutil
    import signal
    import tempfile

    gcs, client = free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")      # Ray's socket paths must stay short
    log = open(Path(tmp) / "head.log", "w")
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
         "--ray-client-server-port", str(client), "--num-cpus", "2", "--include-dashboard", "false",
         "--disable-usage-stats", "--temp-dir", tmp],
        env={**env(), "RAY_USAGE_STATS_ENABLED": "0"}, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def joinable() -> bool:                   # both ports answer once the head is up
            ray_address.check(f"127.0.0.1:{gcs}", timeout=2)
            ray_address.check(f"ray://127.0.0.1:{client}", timeout=2)
            return True
        wait_until(joinable, "the Ray head", proc=head, output=Path(tmp) / "head.log", pause=1,
                   absent=(InputError,))
        base = ("feasibility", "--sweep", "8:9", "--iterations", "2", "--json", "--no-progress")
        outs = {}
        for name, extra in (("local", ()), ("gcs", ("--ray-address", f"127.0.0.1:{gcs}")),
                            ("client", ("--ray-address", f"ray://127.0.0.1:{client}"))):
            p, cpu = _run(*base, *extra, seconds="20")
            assert p.returncode in (0, 1), (name, p.stderr[-2000:], _client_server_logs(tmp))
            outs[name] = (p.returncode, json.loads(p.stdout))
            print(f"\n{name}: exit {p.returncode}, {cpu:.1f} CPU s of the command's own process tree")
        def verdicts(doc):                 # what the sweep decided (timings differ per run)
            return (doc["bracket"], [(r["rank"], r["features"], r["verdict"], r["lower_bound"])
                                     for r in doc["results"]])
        assert outs["gcs"][0] == outs["client"][0] == outs["local"][0]
        assert verdicts(outs["gcs"][1]) == verdicts(outs["local"][1]) == verdicts(outs["client"][1])
    finally:
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        head.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
