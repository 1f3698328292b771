"""One program name, --help text for every option, one path resolution order,
output-folder rules, limits and one-line OS errors."""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from certify.cli import COMMANDS
from certify.cli import feasibility as feasibility_cli
from certify.cli import rank as rank_cli
from certify.core import limits, outputs
from certify.core.errors import InputError, public_path, run_command
from certify.sources.paths import resolve_source

ROOT = Path(__file__).resolve().parent.parent
CKPT = ROOT / "models" / "checkpoints" / "paper51-lookup-r8-s0"


class _Got(Exception):
    pass


def _parser_of(command: str) -> argparse.ArgumentParser:
    module = importlib.import_module(COMMANDS[command][0])
    got = []
    orig = argparse.ArgumentParser.parse_args

    def grab(self, *a, **k):
        got.append(self)
        raise _Got()
    argparse.ArgumentParser.parse_args = grab
    try:
        with pytest.raises(_Got):
            module.main([])
    finally:
        argparse.ArgumentParser.parse_args = orig
    return got[0]


def _all_parsers(p: argparse.ArgumentParser):
    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                yield from _all_parsers(sub)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_one_program_name_and_help_for_every_option(command):
    for p in _all_parsers(_parser_of(command)):
        assert p.prog.startswith(f"certify {command}"), p.prog
        missing = [a.option_strings or a.dest for a in p._actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
                   and not a.help]
        assert not missing, f"certify {command}: no --help text for {missing}"


def test_python_dash_m_module_keeps_working_with_the_one_name(tmp_path):
    p = subprocess.run([sys.executable, "-m", "certify.feasibility", "--rank", "0"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2
    assert p.stderr.startswith("certify feasibility: error: --rank must be >= 1"), p.stderr


def test_contradictory_rank_and_sweep_rejected():
    with pytest.raises(InputError, match="not both"):
        feasibility_cli.main(["--rank", "13", "--sweep", "8:9"])


def test_resolution_order(tmp_path):
    # 1. the path as given
    assert resolve_source(str(CKPT) + ".json") == Path(str(CKPT) + ".json")
    # 3. a known suffix added: the stem of a checkpoint resolves to its config
    assert resolve_source(str(CKPT)) == Path(str(CKPT) + ".json")
    # 2. a folder holding one config and its safetensors
    d = tmp_path / "model"
    d.mkdir()
    for suf in (".json", ".safetensors"):
        (d / ("m" + suf)).write_bytes(Path(str(CKPT) + suf).read_bytes())
    assert resolve_source(d) == d / "m.json"
    (tmp_path / "k.npy").write_bytes(b"")
    assert resolve_source(tmp_path / "k") == tmp_path / "k.npy"
    with pytest.raises(InputError, match="no such file"):
        resolve_source(tmp_path / "nothing")


def test_rank_and_checkpoint_take_a_checkpoint_without_its_suffix():
    assert run_command("certify rank", rank_cli.main, [str(CKPT), "--family", "paper-5.1"]) == 0


def test_limits_refuse_before_work_and_are_overridable(monkeypatch):
    with pytest.raises(InputError, match="exponent"):
        limits.parse_exact("1e999999999", "x")
    with pytest.raises(InputError, match="exponent"):
        limits.parse_eps("1e-999999999")
    assert limits.parse_exact("-1/7", "x") == limits.Fraction(-1, 7)
    assert limits.parse_exact("1e-3", "x") == limits.Fraction(1, 1000)
    for bad in ("nan", "inf", "abc", "1/0", ""):
        with pytest.raises(InputError):
            limits.parse_exact(bad, "x")
    for t in (float("nan"), float("inf"), -1.0, 0.0, 1e300):
        with pytest.raises(InputError):
            limits.check_time_limit(t)
    assert limits.check_time_limit(0.5) == 0.5
    # the scale targets are admitted by default
    limits.check_int("family_q", 24, "q")
    limits.check_int("cube_m", 24, "m")
    limits.check_matrix_shape(8192, 8192)
    with pytest.raises(InputError, match="CERTIFY_LIMIT_MATRIX_N"):
        limits.check_matrix_shape(8193, 2)
    monkeypatch.setenv("CERTIFY_LIMIT_MATRIX_N", "9000")
    limits.check_matrix_shape(8193, 2)


def test_os_errors_are_one_line_naming_the_path(capsys):
    def boom(argv):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/.out.stage.ab12cd/new/report.md")
    assert run_command("certify report", boom, []) == 2
    err = capsys.readouterr().err
    assert err == "certify report: error: /data/out/report.md: no space left on the device\n"
    assert public_path("/x/.cert.json.k2j4h5g6.tmp") == "/x/cert.json"


# ---------------------------------------------------------------- output folders and files

def _fill(files):
    def f(folder: Path):
        for n, t in files.items():
            (folder / n).write_text(t)
    return f


def test_output_folder_rules(tmp_path):
    out = tmp_path / "rep"
    outputs.write_dir(out, "report", _fill({"report.md": "# a"}))
    man = json.loads((out / outputs.MANIFEST).read_text())
    assert man["command"] == "report" and man["files"] == ["report.md"]
    # a previous output of the same command is replaced
    outputs.write_dir(out, "report", _fill({"report.md": "# b"}))
    assert (out / "report.md").read_text() == "# b"
    # another command's folder, and a folder with a user's file, are refused before work
    with pytest.raises(InputError, match="certify report"):
        outputs.check_out_dir(out, "checkpoint")
    (out / "thesis.tex").write_text("mine")
    with pytest.raises(InputError, match="did not write"):
        outputs.write_dir(out, "report", _fill({"report.md": "# c"}))
    assert (out / "thesis.tex").read_text() == "mine" and (out / "report.md").read_text() == "# b"
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("x")
    with pytest.raises(InputError):
        outputs.check_out_dir(user, "report")
    with pytest.raises(InputError):
        outputs.check_out_dir(".", "report")
    # nothing left next to the folders
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "rep"]


def test_output_file_rules(tmp_path):
    mine = tmp_path / "notes.json"
    mine.write_text('{"mine": 1}')
    with pytest.raises(InputError, match="not written by certify"):
        outputs.check_out_file(mine)
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="folder"):
        outputs.check_out_file(tmp_path / "d")
    cert = tmp_path / "c.json"
    cert.write_text(json.dumps({"schema": "certify-attention/certificate/1", "claims": []}))
    outputs.write_file(cert, "{}")        # one of ours: replaced
    assert cert.read_text() == "{}"
    with pytest.raises(InputError, match="cannot write"):
        outputs.check_out_file("/proc/certify-test.json")


def test_stale_stage_of_a_dead_run_is_cleaned_a_live_one_kept(tmp_path):
    out = tmp_path / "rep"
    dead = tmp_path / ".rep.stage.dead0001"
    live = tmp_path / ".rep.stage.live0001"
    for st in (dead, live):
        (st / "new").mkdir(parents=True)
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()                                               # a pid that has ended
    (dead / outputs.LOCK).write_text(json.dumps({"pid": p.pid, "start": "1"}))
    (dead / "old").mkdir()
    (dead / "old" / "report.md").write_text("previous output")
    (live / outputs.LOCK).write_text(json.dumps({"pid": os.getpid(),
                                                 "start": outputs._start_time(os.getpid())}))
    removed = outputs.clean_stale(out)
    assert removed == [dead] and live.is_dir() and not dead.exists()
    # the dead run had moved the old folder aside: it is put back
    assert (out / "report.md").read_text() == "previous output"


def test_unwritable_folder_is_refused_before_work(tmp_path, monkeypatch):
    """Permission denied (what a non-root user meets in a read-only folder) is one
    line naming the folder; root is let through by chmod, so the OS answer is staged."""
    import tempfile

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(tempfile, "mkstemp", denied)            # the output folder's staging
    monkeypatch.setattr(outputs, "exclusive_temp", denied)      # the probe
    with pytest.raises(InputError, match="cannot write in folder .*permission denied"):
        outputs.check_out_file(tmp_path / "x.json")
    with pytest.raises(InputError, match="permission denied"):
        outputs.check_out_dir(tmp_path / "new" / "rep", "report")
