"""Output folders are owned by manifest, per command: every command that
writes ``--out DIR`` replaces its own earlier folder and refuses every other
command's (nothing touched). The full matrix as real subprocesses is in the
harness (``tests/harness/run_cases.py --filter ownership``); here the rules
themselves, and the commands whose folders were once mislabelled, in process."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from certify.core import outputs
from certify.core.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
CKPT = ROOT / "models" / "checkpoints" / "paper51-lookup-r8-s0"
PERFORMER = ROOT / "reports" / "gallery" / "models" / "performer" / "model.pt"


def tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the manifest included) by its sha256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _fill(name: str):
    def f(folder: Path):
        (folder / name).write_text(name)
    return f


@pytest.mark.parametrize("owner", outputs.COMMANDS)
def test_each_command_replaces_its_own_folder_and_no_other(tmp_path, owner):
    out = tmp_path / "out"
    outputs.write_dir(out, owner, _fill("a.md"))
    first = os.stat(out).st_ino
    outputs.write_dir(out, owner, _fill("b.md"))          # its own: replaced
    assert os.stat(out).st_ino != first
    assert sorted(os.listdir(out)) == [outputs.MANIFEST, "b.md"]
    man = json.loads((out / outputs.MANIFEST).read_text())
    assert man == {"format": outputs.MANIFEST_FORMAT, "command": owner, "files": ["b.md"]}
    before = tree(out)
    for other in outputs.COMMANDS:
        if other == owner:
            continue
        with pytest.raises(InputError, match=f"holds the output of 'certify {owner}', "
                                             f"not 'certify {other}'"):
            outputs.write_dir(out, other, _fill("c.md"))
        assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]      # no stage left


def test_one_manifest_writer_names_only_known_commands(tmp_path):
    with pytest.raises(ValueError):
        outputs.write_manifest(tmp_path, "reprot")
    with pytest.raises(ValueError):
        outputs.check_out_dir(tmp_path / "x", "reprot")
    (tmp_path / "f").write_text("x")
    m = outputs.write_manifest(tmp_path, "demo")
    assert m["files"] == ["f"] and outputs.read_manifest(tmp_path) == m


def test_folders_of_the_earlier_manifest_format(tmp_path):
    """Format 1 labelled a third-party checkpoint's folder 'report': its
    heads.json (never written by report) tells it apart; a batch folder had no
    manifest of its own, only its subfolders'."""
    heads = tmp_path / "heads"
    heads.mkdir()
    names = ["certificate.json", "heads.json", "heads.md", "report.md"]
    for n in names:
        (heads / n).write_text(n)
    (heads / outputs.MANIFEST).write_text(json.dumps(
        {"format": "certify-attention/output-folder/1", "command": "report", "files": names}))
    outputs.check_out_dir(heads, "checkpoint")
    with pytest.raises(InputError, match="'certify checkpoint', not 'certify report'"):
        outputs.check_out_dir(heads, "report")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "report.md").write_text("r")
    (plain / outputs.MANIFEST).write_text(json.dumps(
        {"format": "certify-attention/output-folder/1", "command": "report", "files": ["report.md"]}))
    outputs.check_out_dir(plain, "report")
    batch = tmp_path / "batch"
    batch.mkdir()
    shutil.copytree(heads, batch / "m1")
    outputs.check_out_dir(batch, "checkpoint --batch")
    with pytest.raises(InputError):
        outputs.check_out_dir(batch, "checkpoint")
    (batch / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="without certify's manifest"):
        outputs.check_out_dir(batch, "checkpoint --batch")


def test_out_names_that_cannot_be_built_are_refused_before_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(InputError, match="longer than 239 bytes"):
        outputs.check_out_dir("x" * 240, "checkpoint")
    with pytest.raises(InputError, match="longer than 255 bytes"):
        outputs.check_out_dir("y" * 256 + "/r", "report")
    outputs.write_dir("z" * 239, "report", _fill("r.md"))
    with pytest.raises(InputError, match="not the file system's root"):
        outputs.check_out_dir("/", "report")
    monkeypatch.chdir(tmp_path / "sub")
    with pytest.raises(InputError, match="not a folder that holds the current one"):
        outputs.check_out_dir("..", "report")
    with pytest.raises(InputError, match=r"not the current folder\)"):
        outputs.check_out_dir(".", "report")


def test_third_party_checkpoint_rerun_and_report_refused(tmp_path, capsys):
    """The data-loss path: checkpoint output was labelled 'report', so a rerun
    exited 2 and `certify report` then replaced it. (The certification runs
    once; the folder is written twice as the command writes it.)"""
    from certify.checkpoints import heads
    from certify.checkpoints.dispatch import certify_path
    from certify.cli import report
    kind, res = certify_path(str(PERFORMER))
    assert kind == "weights"
    out = tmp_path / "performer"
    heads.write_out(res, str(out))
    assert json.loads((out / outputs.MANIFEST).read_text())["command"] == "checkpoint"
    outputs.check_out_dir(out, "checkpoint")               # the command's own check passes
    inode = os.stat(out).st_ino
    heads.write_out(res, str(out))
    assert os.stat(out).st_ino != inode
    before = tree(out)
    assert {"certificate.json", "heads.md", "heads.json"} <= set(before)
    with pytest.raises(InputError, match="holds the output of 'certify checkpoint'"):
        report.main([str(out / "certificate.json"), "--out", str(out)])
    assert tree(out) == before


@pytest.mark.slow            # certifies a batch of checkpoints (about 14 s): make test-all
def test_batch_owns_its_folder_and_survives_a_corrupt_checkpoint(tmp_path, capsys):
    from certify.cli import checkpoint
    src = tmp_path / "ckpts"
    src.mkdir()
    for suf in (".json", ".safetensors"):
        shutil.copy(str(CKPT) + suf, src / f"good{suf}")
        shutil.copy(str(CKPT) + suf, src / f"bad{suf}")
    w = (src / "bad.safetensors").read_bytes()
    (src / "bad.safetensors").write_bytes(w[: len(w) // 3])
    out = tmp_path / "out"
    capsys.readouterr()
    assert checkpoint.main(["--batch", str(src), "--out", str(out), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    rows = {r["checkpoint"]: r for r in doc["checkpoints"]}
    assert rows["bad"]["exit_code"] == 2 and rows["bad"]["verdict"] is None and rows["bad"]["error"]
    assert rows["good"]["exit_code"] == 1 and rows["good"]["out"] == str(out / "good")
    man = json.loads((out / outputs.MANIFEST).read_text())
    assert man["command"] == "checkpoint --batch" and man["files"] == ["good", "summary.md"]
    assert json.loads((out / "good" / outputs.MANIFEST).read_text())["command"] == "checkpoint"
    assert (out / "good" / "certificate.json").is_file()
    outputs.check_out_dir(out, "checkpoint --batch")     # a rerun's check passes
    before = tree(out)
    with pytest.raises(InputError, match="'certify checkpoint --batch', not 'certify checkpoint'"):
        checkpoint.main([str(CKPT), "--out", str(out)])
    assert tree(out) == before
