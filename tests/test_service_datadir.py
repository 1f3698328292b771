"""Ownership by manifest. certify serve at start: its data folder is its own by manifest (a
folder holding a user's files is refused and left as it was), one server per data folder and
per SQLite database (a second exits 2 naming the holder), and every bad option, address, token
or database is one line and exit 2 before anything is served or written (the servers are real
processes; the refusals run through the command front in this process, with serving made a
failure, and three of them as real processes too). An ``--out`` folder likewise: a user's
README.md that begins like certify's is not taken for certify's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from service_support import Server, env, free_port, serve_exit


def _one_line_exit_2(p: subprocess.CompletedProcess, *needles: str) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("certify serve: error: "), p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


class _Port:
    """A fresh free port each time it is formatted (the cases run at once)."""

    def __str__(self) -> str:
        return str(free_port())


def _tree(d: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(d.rglob("*"))}


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """One server holding its data folder and port while the refusals run."""
    base = tmp_path_factory.mktemp("held")
    with Server(base / "data", "--read-rate", "0") as s:
        yield s


def _serve_in_process(args: list[str], cwd: Path | None, monkeypatch, capsys) -> SimpleNamespace:
    """``certify serve ARGS`` through the command front in this process; reaching the point
    where the server would start serving fails (an internal error, exit 1) instead of serving."""
    import certify.service.server as server
    from certify.cli import run as run_cli

    def reached(*_a, **_k):
        raise AssertionError("certify serve got past its checks: it would serve now")
    with monkeypatch.context() as m:
        m.setattr(server, "recover", reached)
        if cwd is not None:
            m.chdir(cwd)
        capsys.readouterr()
        code = run_cli("serve", args)
    return SimpleNamespace(returncode=code, stderr=capsys.readouterr().err)


#: the refusals also run as real processes (the exit status and stderr of the process itself)
AS_PROCESSES = ("is in use by certify serve pid", "printable ASCII", "--job-seconds")


def test_refusals_at_start(running, tmp_path, monkeypatch, capsys):
    """Each case: exit 2, one line naming the problem, nothing created or changed."""
    proj = tmp_path / "proj"
    (proj / "work").mkdir(parents=True)
    (proj / "work" / "thesis.tex").write_text("\\documentclass{article}% mine\n")
    (proj / "notes.md").write_text("# certify notes\n")
    old = tmp_path / "old-layout"                 # a service folder without a manifest
    (old / "uploads").mkdir(parents=True)
    (old / "certificates").mkdir()
    (old / "certify.db").write_bytes(b"SQLite format 3\x00")
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "bin.token").write_bytes(bytes(range(256)))
    (tmp_path / "short.token").write_text("abc\n")
    (tmp_path / "ok.token").write_text("a-fine-token-0123456789\n")
    before = {d: _tree(d) for d in (proj, old)}
    held_db = f"sqlite:///{running.data / 'certify.db'}"
    new = lambda name: str(tmp_path / name)        # noqa: E731 - folders that must stay absent
    port = _Port()
    cases = [
        ((["--data", "."], proj), ("--data .", "notes.md, work", "no service manifest")),
        ((["--data", str(proj / "work")], None), ("thesis.tex",)),
        ((["--data", str(old)], None), ("no service manifest",)),
        ((["--data", str(afile)], None), ("is a file",)),
        ((["--data", str(running.data), "--port", port], None), ("is in use by certify serve pid",
                                                                 str(running.proc.pid))),
        ((["--data", new("d1"), "--db", held_db, "--port", port], None), ("in use by another",)),
        ((["--data", new("d2"), "--port", str(running.port)], None), (f"--port {running.port}",
                                                                       "in use")),
        ((["--data", new("d3"), "--host", "256.1.1.1"], None), ("--host 256.1.1.1",)),
        ((["--data", new("d4"), "--host", "no-such-host.invalid"], None), ("cannot resolve",)),
        ((["--data", new("d5"), "--host", "192.0.2.199", "--port", port], None),
         ("not an address of this machine",)),
        ((["--data", new("d6"), "--port", port, "--db", "postgresql://postgres@127.0.0.1:1/x"], None),
         ("cannot use the database", "Connection refused")),
        ((["--data", new("d7"), "--port", port, "--db", "postgresql://u:secret@127.0.0.1:1/x"], None),
         ("u:***@",)),
        ((["--data", new("d8"), "--port", port, "--db", "sqlite:////proc/nope/x.db"], None),
         ("--db sqlite:////proc/nope/x.db",)),
        ((["--data", new("d9"), "--port", port, "--db", "mysql://x"], None), ("--db must be",)),
        ((["--data", new("d10"), "--port", port, "--token-file", str(tmp_path / "bin.token")], None),
         ("printable ASCII",)),
        ((["--data", new("d11"), "--port", port, "--token-file", str(tmp_path / "short.token")], None),
         ("shorter than 16",)),
        ((["--data", new("d12"), "--port", port, "--token-file", str(tmp_path / "missing")], None),
         ("cannot read",)),
    ]
    for opt, v in (("--job-seconds", "nan"), ("--job-seconds", "inf"), ("--max-upload-mb", "nan"),
                   ("--max-upload-mb", "1e30"), ("--max-unpacked-mb", "-1"),
                   ("--max-storage-mb", "inf"), ("--job-memory-mb", "nan"), ("--workers", "0"),
                   ("--workers", "100000"), ("--lease-seconds", "nan"), ("--lease-seconds", "0.1"),
                   ("--job-attempts", "0"), ("--open-submit-rate", "-1"), ("--port", "0"),
                   ("--port", "70000")):
        cases.append(((["--data", new("d-" + opt.strip("-") + v), "--port", port, opt, v], None),
                      (opt,)))

    processes = 0
    for (args, cwd), needles in cases:
        argv = [str(a) for a in args]
        _one_line_exit_2(_serve_in_process(argv, cwd, monkeypatch, capsys), *needles)
        if needles[0] in AS_PROCESSES and processes < len(AS_PROCESSES):
            _one_line_exit_2(serve_exit(*argv, cwd=cwd), *needles)
            processes += 1
    assert processes == len(AS_PROCESSES)
    for d, tree in before.items():
        assert _tree(d) == tree, d                 # the user's folders are exactly as they were
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("d")]
    assert running.proc.poll() is None             # the holder serves on


def test_a_data_folder_is_recognised_by_its_manifest_and_foreign_entries_are_left_alone(tmp_path):
    data = tmp_path / "svc"
    s = Server(data, "--read-rate", "0").start()
    s.stop()
    manifest = json.loads((data / ".certify-manifest.json").read_text())
    assert manifest["format"] == "certify-attention/service-data/1" and len(manifest["node"]) == 32
    (data / "my-notes.txt").write_text("mine\n")
    (data / "work" / "results.csv").write_text("1,2\n")
    (data / "work" / "0123456789abcdef0123456789abcdef").mkdir()   # looks like a claim, unrecorded
    s.start()
    s.stop()
    assert (data / "my-notes.txt").read_text() == "mine\n"
    assert (data / "work" / "results.csv").read_text() == "1,2\n"
    assert (data / "work" / "0123456789abcdef0123456789abcdef").is_dir()
    assert json.loads((data / ".certify-manifest.json").read_text())["node"] == manifest["node"]


def test_serve_help_documents_the_bounds(capsys):
    from certify.cli import main
    try:
        code = main(["serve", "--help"])
    except SystemExit as e:                      # argparse's --help
        code = e.code
    assert code == 0
    out = capsys.readouterr().out
    for opt in ("--lease-seconds", "--max-storage-mb", "--open-submit-rate", "--read-rate",
                "--max-anonymous-queued", "--keep-uploads", "--keep-work"):
        assert opt in out, opt


def test_an_out_folder_is_owned_by_its_manifest_alone(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "certify", *a], cwd=tmp_path,   # noqa: E731
                                    env=env(), capture_output=True, text=True, timeout=600)
    assert run("bounds", "--m", "8", "--out", "b.json").returncode == 0
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# certify-attention: my notes on the paper\n")
    p = run("report", "b.json", "--out", "notes")
    assert p.returncode == 2 and "without certify's manifest" in p.stderr, p.stderr
    assert (notes / "README.md").read_text() == "# certify-attention: my notes on the paper\n"
    assert sorted(x.name for x in notes.iterdir()) == ["README.md"]
    # certify's own folder (by its manifest) is replaced as documented
    assert run("report", "b.json", "--out", "mine").returncode == 0
    assert run("report", "b.json", "--out", "mine").returncode == 0


def test_bounds_state_their_true_range(capsys):
    """``--workers`` is bounded by this machine's cores (4 per core), for the
    service and for every command's local Ray; ``--retention-days`` states its
    real minimum, one minute (1/1440 day), which is itself accepted."""
    from certify.cli import main
    from certify.core.engine import cores, max_local_workers
    from certify.core.errors import InputError
    from certify.service.config import ServiceConfig

    top = max_local_workers()
    assert top == 4 * cores()
    base = dict(data=Path("unused"), db="", token="t" * 16)
    assert ServiceConfig(**base, workers=top).workers == top
    with pytest.raises(InputError, match=rf"--workers must be an integer in 1\.\.{top} \(4 per core"):
        ServiceConfig(**base, workers=top + 1)
    assert ServiceConfig(**base, retention_days=1 / 1440).retention_days == 1 / 1440
    with pytest.raises(InputError) as e:
        ServiceConfig(**base, retention_days=0.0001)
    assert str(e.value) == ("--retention-days must be a finite number in 1/1440..36500 "
                            "(days; 1/1440 is one minute), got 0.0001")
    with pytest.raises(InputError, match=r"--max-upload-mb must be a finite number in 1/1024\.\.4096"):
        from certify.service.config import megabytes
        megabytes(0.0, "--max-upload-mb", 1 / 1024, 4096)
    # a command's --workers: refused before any work (no Ray is started), exit 2
    assert main(["feasibility", "--sweep", "8:9", "--workers", str(top + 1)]) == 2
    err = capsys.readouterr().err
    assert f"--workers {top + 1}: at most {top} here" in err and len(err.strip().splitlines()) == 1
