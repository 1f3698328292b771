"""Every failure is one line: inputs of the fuzz sets that once reached "internal error"
(a malformed ``.npy`` header, a re-declared shape, ``{"schema": []}``, an fp16 NaN
weight, a float32 Inf weight, a zero-row embedding) end with exit 2 and one line on
stderr naming the problem, no traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
FLA = ROOT / "reports" / "gallery" / "models" / "fla-linear-attn"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify", *args], cwd=cwd, capture_output=True, text=True)


def _one_line(run: subprocess.CompletedProcess, code: int, words: str) -> None:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == code, run.stderr[-800:]
    assert len(lines) == 1 and words in lines[0], lines
    assert "internal error" not in run.stderr and "Traceback" not in run.stderr


def _npy_files(d: Path) -> dict[str, Path]:
    np.save(d / "ok.npy", np.eye(3, dtype=np.int64))
    b = (d / "ok.npy").read_bytes()
    files = {"garbled header": b[:10] + b"{garbage" + b[18:], "re-declared shape": b.replace(b"(3, 3)", b"(3, 4)"),
             "cut header": b[:60]}
    out = {}
    for i, (what, data) in enumerate(files.items()):
        (d / f"bad{i}.npy").write_bytes(data)
        out[what] = d / f"bad{i}.npy"
    return out


def test_malformed_npy_files_are_one_line(tmp_path):
    for path in _npy_files(tmp_path).values():
        _one_line(_run(["rank", path.name], tmp_path), 2, "not a readable .npy file")


@pytest.mark.parametrize("doc", [{"schema": []}, {"schema": {}}, {"schema": None, "claims": []}, [], "x", 3])
def test_a_schema_of_another_type_is_not_a_certificate(tmp_path, doc):
    (tmp_path / "c.json").write_text(json.dumps(doc))
    _one_line(_run(["verify", "c.json"], tmp_path), 2, "c.json")


def _model(tmp_path: Path, name: str, edit) -> Path:
    from safetensors.numpy import load_file, save_file
    d = tmp_path / name
    d.mkdir()
    shutil.copy(FLA / "config.json", d / "config.json")
    t = load_file(str(FLA / "model.safetensors"))
    edit(t)
    save_file(t, str(d / "model.safetensors"), metadata={"format": "pt"})
    return d


def test_non_finite_weights_and_an_empty_vocabulary_are_one_line(tmp_path):
    def fp16_nan(t):
        for k in t:
            t[k] = t[k].astype(np.float16)
        t["model.layers.0.attn.q_proj.weight"][0, 0] = np.nan

    def fp32_inf(t):
        t["model.layers.0.attn.k_proj.weight"][1, 2] = np.inf

    def no_rows(t):
        t["model.embeddings.weight"] = t["model.embeddings.weight"][:0]
        t["lm_head.weight"] = t["lm_head.weight"][:0]

    for name, edit, words in (("nan", fp16_nan, "Inf or NaN"), ("inf", fp32_inf, "Inf or NaN"),
                              ("empty", no_rows, "embedding has no rows")):
        d = _model(tmp_path, name, edit)
        _one_line(_run(["checkpoint", d.name, "--out", f"out-{name}", "--no-progress"], tmp_path), 2, words)
        assert not (tmp_path / f"out-{name}").exists()          # nothing half-written
