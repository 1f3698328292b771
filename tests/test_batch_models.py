"""`certify checkpoint --batch DIR` on a folder of third-party models: every model
folder or weights file a detector recognises gets its certificate, every other
one its one-line reason, and one summary table lists them all. The expected exit
code of each gallery model is the gallery's own table (reports/gallery/README.md,
made by `certify checkpoint PATH` one model at a time)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "reports" / "gallery" / "models"


def gallery_exits() -> dict[str, int]:
    """model folder -> the `checkpoint` exit code the gallery's table states."""
    out = {}
    for line in (ROOT / "reports" / "gallery" / "README.md").read_text().splitlines():
        m = re.match(r"^\| `reports/gallery/models/([^`/]+)[^`]*` \|[^|]*\| (\d) \|", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def test_gallery_table_lists_every_gallery_model():
    assert set(gallery_exits()) == {p.name for p in MODELS.iterdir() if p.is_dir()}
    assert sorted(set(gallery_exits().values())) == [0, 2, 3]


def test_find_models_recognises_folders_specs_weights_files_and_ours(tmp_path):
    from certify.checkpoints.batch import find_models
    for name in ("lat", "custom", "softmax"):
        shutil.copytree(MODELS / name, tmp_path / name)
    shutil.copyfile(MODELS / "performer-default" / "attn.pt", tmp_path / "attn.pt")
    ours = ROOT / "models" / "checkpoints" / "paper51-lookup-r8-s0"
    for suf in (".json", ".safetensors"):
        shutil.copyfile(str(ours) + suf, tmp_path / ("r8" + suf))
    (tmp_path / "notes.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    items, ignored = find_models(str(tmp_path))
    assert [(i.name, i.path.relative_to(tmp_path).as_posix(), i.spec and i.spec.name) for i in items] == [
        ("attn.pt", "attn.pt", None), ("custom", "custom/model.safetensors", "spec.json"),
        ("lat", "lat", None), ("r8", "r8", None), ("softmax", "softmax", None)]
    assert ignored[0].startswith("empty/ (") and ignored[1:] == ["notes.json"]


def test_batch_of_third_party_models_one_certificate_each_and_a_summary(tmp_path, capsys):
    from certify.cli import checkpoint
    src = tmp_path / "models"
    for name in ("lat", "custom", "softmax", "fla-qkvo-no-config"):
        shutil.copytree(MODELS / name, src / name)
    out = tmp_path / "out"
    code = checkpoint.main(["--batch", str(src), "--out", str(out), "--json", "--no-progress"])
    doc = json.loads(capsys.readouterr().out)
    rows = {r["checkpoint"]: r for r in doc["checkpoints"]}
    want = gallery_exits()
    assert {n: r["exit_code"] for n, r in rows.items()} == {n: want[n] for n in rows}
    assert code == max(want[n] for n in rows) == 3
    assert (rows["lat"]["library"], rows["lat"]["heads_certified"], rows["lat"]["heads_out_of_reach"]) == \
        ("linear-attention-transformer", 2, 2)
    assert rows["custom"]["heads_certified"] == 1                          # through its spec.json
    assert "softmax" in rows["softmax"]["error"] and "config.json" in rows["fla-qkvo-no-config"]["error"]
    for name in ("lat", "custom"):
        cert = json.loads((out / name / "certificate.json").read_text())
        assert all(c["verdict"] == "proved" for c in cert["claims"])
    assert (out / "lat" / "heads.md").is_file() and not (out / "softmax").exists()
    summary = (out / "summary.md").read_text()
    assert summary.count("\n| ") == 1 + len(rows)                          # header and one row per model
    assert "| lat | linear-attention-transformer | 2 / 0 / 2 | 6 | proved | 0 |" in summary


@pytest.mark.slow            # every gallery model, two workers (about 40 CPU s)
def test_batch_certifies_every_gallery_model_in_one_command(tmp_path, capsys):
    from certify.cli import checkpoint
    out = tmp_path / "out"
    code = checkpoint.main(["--batch", str(MODELS), "--out", str(out), "--json", "--no-progress",
                            "--workers", "2"])
    doc = json.loads(capsys.readouterr().out)
    got = {r["checkpoint"]: r["exit_code"] for r in doc["checkpoints"]}
    assert got == gallery_exits() and code == 3 and doc["ignored"] == []
    for name, c in got.items():
        assert (out / name / "certificate.json").is_file() == (c == 0)
