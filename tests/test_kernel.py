"""Kernel sources, files and the extract command."""

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from certify.cli.extract import main as extract_main
from certify.core.errors import InputError
from certify.core.kernel import Form, Provenance, from_feature_fn
from certify.sources.load import load_kernel

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def run(*args):
    return subprocess.run([PY, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_matrix_files_agree(tmp_path):
    A = np.array([[1.5, -2.0, 0.25], [3.0, 0.0, 1e-3]])
    np.save(tmp_path / "a.npy", A)
    np.savez(tmp_path / "a.npz", matrix=A)
    from safetensors.numpy import save_file
    save_file({"matrix": A}, str(tmp_path / "a.safetensors"))
    for name in ("a.npy", "a.npz", "a.safetensors"):
        k = load_kernel(tmp_path / name)
        assert k.form is Form.MATRIX and np.array_equal(k.matrix, A) and k.provenance.source_sha256


def test_csv_and_json_are_exact_rationals(tmp_path):
    (tmp_path / "a.csv").write_text("0.1, 1/3\n-2, 1e-3\n")
    (tmp_path / "a.json").write_text(json.dumps({"matrix": [["1/10", "1/3"], ["-2", "1/1000"]]}))
    for name in ("a.csv", "a.json"):
        k = load_kernel(tmp_path / name)
        assert k.rational == ((Fraction(1, 10), Fraction(1, 3)), (Fraction(-2), Fraction(1, 1000)))


@pytest.mark.parametrize("name,content", [
    ("ragged.csv", "1,2\n3\n"), ("empty.csv", "\n"), ("nan.csv", "1,nan\n2,3\n"),
    ("float.json", json.dumps({"matrix": [[0.5, 1]]})), ("bad.json", "{not json"),
    ("corrupt.npz", "PK\x03\x04garbage"), ("corrupt.safetensors", "\x10\x00\x00\x00\x00\x00\x00\x00{bad"),
    ("what.xyz", "1"), ("model.pt", "x")])
def test_bad_files_are_input_errors(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError):
        load_kernel(tmp_path / name)


def test_object_npy_is_refused(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([[{"a": 1}]], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="pickle"):
        load_kernel(tmp_path / "obj.npy")


def _elu_fn(W):
    def fn(t):
        u = torch.from_numpy(t.astype(np.float32)) @ W.T
        f = torch.nn.functional.elu(u) + 1
        return f.numpy(), (f * 2).numpy()
    return fn


def test_factor_kernel_roundtrip_npz_and_json(tmp_path):
    W = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    k = from_feature_fn(_elu_fn(W), "cube:4", Provenance("memory", None, "memory", "float32"), rank=3)
    k.save(tmp_path / "k.npz")
    k.save(tmp_path / "k.json")
    a, b = load_kernel(tmp_path / "k.npz"), load_kernel(tmp_path / "k.json")
    ref = k.materialize()
    assert a.token_set == "cube:4" and a.phi_q.dtype == np.float32
    assert np.array_equal(a.phi_q, ref.phi_q) and np.array_equal(b.phi_k, ref.phi_k.astype(np.float64))


def test_extract_checkpoint_end_to_end(tmp_path):
    from models.checkpoint import save_checkpoint
    from models.heads import KernelHead
    head = KernelHead(m=5, rank=4, dv=3, feature_map="elu1", generator=torch.Generator().manual_seed(1))
    save_checkpoint(head, tmp_path / "ck")
    out = tmp_path / "k.npz"
    assert extract_main([str(tmp_path / "ck.json"), "--out", str(out), "--tokens", "cube:5"]) == 0
    k = load_kernel(out)
    q, kk = head.feature_matrices(torch.from_numpy(k.token_batch(0, 32)))
    assert k.provenance.adapter == "models.checkpoint" and k.guarantee == "features_nonnegative"
    # the certified features: float64, canonical (the torch forward's maps up to its float32 rounding)
    cq, ck = head.canonical_features(k.token_batch(0, 32))
    assert k.phi_q.dtype == np.float64 and np.array_equal(k.phi_q, cq) and np.array_equal(k.phi_k, ck)
    np.testing.assert_allclose(k.phi_q, q.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert not np.array_equal(k.phi_q, q.detach().double().numpy())     # not the float32 torch values


def test_extract_bad_input_exit_2_nothing_written(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"\x93NUMPY garbage")
    out = tmp_path / "k.npz"
    r = run("certify", "extract", str(tmp_path / "x.npy"), "--out", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and not out.exists()
