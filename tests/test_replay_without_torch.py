"""Read only what is certified, replay without torch.

A safetensors checkpoint's canonical features need no torch: layout detection
reads names and shapes, the certified layer's tensors (and the embedding) are
read when the features are computed, each once; the features are the ones the
torch state dict gives, bit for bit (fp32 and bf16); ``verify
--replay-extraction`` of a committed safetensors certificate exits 0 in a
process where torch cannot be imported, and a torch pickle's replay names the
``[models]`` extra. torch is hidden by a ``sitecustomize`` on ``PYTHONPATH`` that
makes every import of torch (and of the libraries built on it) fail, in the
verify process and in its replay worker alike.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from certify.core.errors import InputError
from certify.sources import weights as weights_mod
from certify.sources.thirdparty import head_kernel, load_model
from certify.sources.weights import read_config, read_weights

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "reports" / "gallery"
MODELS = GALLERY / "models"

NO_TORCH = '''import sys
BLOCKED = {"torch", "performer_pytorch", "linear_attention_transformer", "fla", "einops", "triton"}
class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Blocked())
'''


@pytest.fixture(scope="module")
def no_torch_env(tmp_path_factory):
    """An environment whose Python processes cannot import torch."""
    d = tmp_path_factory.mktemp("no-torch")
    (d / "sitecustomize.py").write_text(NO_TORCH)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(d), str(ROOT)]), "OMP_NUM_THREADS": "1"}


def _python(code: str, env, cwd=ROOT):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def _source(cert: Path) -> str:
    doc = json.loads(cert.read_text())
    return doc["claims"][0]["parameters"]["source"]


SAFETENSORS_CERTS = sorted(c for c in GALLERY.glob("*/certificate.json") if _source(c).endswith(".safetensors"))
PICKLE_CERTS = sorted(c for c in GALLERY.glob("*/certificate.json") if not _source(c).endswith(".safetensors"))


def test_torch_is_not_importable_there(no_torch_env):
    r = _python("import importlib.util as u\ntry:\n    import torch\n    print('imported')\n"
                "except ModuleNotFoundError as e:\n    print('missing', e.name)", no_torch_env)
    assert r.stdout.split() == ["missing", "torch"], r.stdout + r.stderr


@pytest.mark.skipif(not SAFETENSORS_CERTS, reason="no committed gallery")
def test_safetensors_certificates_replay_to_exit_0_without_torch(no_torch_env):
    """Every gallery certificate of a safetensors checkpoint (layouts of five libraries,
    fp32, fp16 and bf16 weights, an adapter spec) replays bit for bit without torch."""
    assert len(SAFETENSORS_CERTS) >= 8
    r = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction",
                        *[str(c.relative_to(ROOT)) for c in SAFETENSORS_CERTS]], cwd=ROOT, env=no_torch_env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "assuming" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(not PICKLE_CERTS, reason="no committed gallery")
def test_a_torch_pickle_replay_names_the_models_extra(no_torch_env):
    cert = PICKLE_CERTS[0]
    r = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction",
                        str(cert.relative_to(ROOT))], cwd=ROOT, env=no_torch_env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 4, r.stderr[-2000:]
    assert ("the replay of extraction needs the [models] extra for this source (no module torch): "
            "pip install 'certify-attention[models]'") in r.stderr
    assert "Traceback" not in r.stderr


# ---------------------------------------------------------------- the same bits with and without torch

def _bf16_copy(src: Path, dst: Path) -> Path:
    """The model folder ``src`` with every float tensor rounded to bf16 (by torch, as users save)."""
    import torch
    from safetensors.torch import save_file
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    sd = read_weights(src).torch()
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}, str(dst / "model.safetensors"))
    return dst


def _torch_path_features(path: Path, heads: int, tokens: str | None) -> list[tuple[bytes, bytes]]:
    """The features as the torch state dict gives them (every tensor read into torch,
    half precision converted to float32 first): the path before stored weights."""
    from certify.core.kernel import parse_tokens
    from models.layouts import detect
    sd = read_weights(path).torch()
    cfg, _ = read_config(weights_mod.weights_file(path))
    det = detect(sd, cfg, name=str(path))
    L = det.layers[0]
    out = []
    for h in L.heads[:heads]:
        if tokens is None:
            toks = det.embedding
        elif tokens.startswith("cube:"):                        # the kernel's order: bit j of row i
            m = int(tokens[5:])
            toks = ((np.arange(1 << m)[:, None] >> np.arange(m)) & 1).astype(np.uint8)
        else:
            toks = parse_tokens(tokens)[2]
        q, k = h.canonical_features(toks)
        out.append((q.tobytes(), k.tobytes()))
    return out


NO_TORCH_FEATURES = '''
import json, sys
import numpy as np
from certify.sources.thirdparty import head_kernel, load_model
model = load_model(sys.argv[1])
out = []
for h in range(int(sys.argv[2])):
    kern = head_kernel(model, layer=0, head=h, compare=False, tokens=sys.argv[3] if len(sys.argv) > 3 else None)
    qs, ks = zip(*kern.feature_batches(1 << 14))
    q, k = np.concatenate(qs), np.concatenate(ks)
    out.append([q.tobytes().hex(), k.tobytes().hex(), str(q.dtype)])
print(json.dumps({"features": out, "torch": "torch" in sys.modules}))
'''


@pytest.mark.parametrize("name, heads, tokens", [("fla-linear-attn", 2, None), ("lat", 2, "cube:6"),
                                                  ("width24", 2, "paper-5.1")])
@pytest.mark.parametrize("dtype", ["stored", "bfloat16"])
def test_features_without_torch_equal_the_torch_path_bit_for_bit(tmp_path, no_torch_env, name, heads, tokens,
                                                                 dtype):
    """fla (embedding, RMSNorm, hedgehog), linear-attention-transformer (fp16, LayerNorm)
    and performer (cube tokens), as stored and rounded to bf16."""
    path = MODELS / name
    if dtype == "bfloat16":
        path = _bf16_copy(path, tmp_path / name)
    want = _torch_path_features(path, heads, tokens)
    script = tmp_path / "features.py"
    script.write_text(NO_TORCH_FEATURES)
    r = subprocess.run([sys.executable, str(script), str(path), str(heads), *([tokens] if tokens else [])],
                       cwd=ROOT, env=no_torch_env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["torch"] is False
    assert len(got["features"]) == heads
    for (q, k), (gq, gk, dt) in zip(want, got["features"]):
        assert dt == "float64"
        assert bytes.fromhex(gq) == q and bytes.fromhex(gk) == k


# ---------------------------------------------------------------- only the certified layer is read

@pytest.fixture
def reads(monkeypatch):
    """Every ``(tensor, lo, hi)`` byte range read from a weights file."""
    seen: list[tuple[int, int, int]] = []
    orig = weights_mod.StoredTensor.read

    def read(self, lo, hi):
        seen.append((id(self), lo, hi))
        return orig(self, lo, hi)
    monkeypatch.setattr(weights_mod.StoredTensor, "read", read)
    return seen


def _names(model, seen) -> list[str]:
    by_id = {id(t): n for n, t in model.weights.tensors.items()}
    return [by_id[i] for i, _, _ in seen]


def test_detection_reads_no_bytes_and_a_head_reads_only_its_layer(tmp_path, reads):
    """A two-layer fla model (bf16): detection reads no tensor's bytes; the features of
    every head of layer 0 read the embedding, layer 0's norm, projections and maps,
    each byte range once, and nothing of layer 1 or of the LM head."""
    import torch
    from safetensors.torch import save_file
    src = MODELS / "fla-linear-attn"
    cfg = json.loads((src / "config.json").read_text())
    sd = read_weights(src).torch()
    two = dict(sd)
    for k, v in sd.items():
        if ".layers.0." in k:
            two[k.replace(".layers.0.", ".layers.1.")] = v.clone() * 2
    cfg["num_hidden_layers"] = 2
    d = tmp_path / "two"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in two.items()}, str(d / "model.safetensors"))
    reads.clear()
    model = load_model(d)
    assert len(model.detected.layers) == 2
    assert reads == []                                          # names and shapes only
    heads = len(model.detected.layers[0].heads)
    for h in range(heads):
        head_kernel(model, layer=0, head=h, compare=False).feature_batches(1 << 14).__next__()
    names = _names(model, reads)
    assert names and all(n == "model.embeddings.weight" or n.startswith("model.layers.0.attn") for n in names), \
        sorted(set(names))
    assert "model.embeddings.weight" in names and "model.layers.0.attn.q_proj.weight" in names
    assert len(reads) == len(set(reads))                        # each range read once
    before = len(reads)
    for h in range(heads):                                      # a second pass reads nothing again
        head_kernel(model, layer=0, head=h, compare=False).feature_batches(1 << 14).__next__()
    assert len(reads) == before


# ---------------------------------------------------------------- the library check and bad input

def test_the_library_check_without_torch_is_not_run_and_says_why(no_torch_env):
    code = ("import json\nfrom certify.sources.thirdparty import load_head_kernel\n"
            f"k = load_head_kernel({str(MODELS / 'fla-linear-attn')!r}, compare=True)\n"
            "print(json.dumps(k.provenance.details['library_check']))")
    r = _python(code, no_torch_env)
    assert r.returncode == 0, r.stderr[-2000:]
    check = json.loads(r.stdout)
    assert check["status"] == "not run"
    assert "needs the [libraries] extra" in check["reason"]


def test_a_file_the_safetensors_package_refuses_is_refused(tmp_path):
    """Bytes after the last tensor: this reader's header check passes, the format's
    own reader refuses the file; one InputError line, nothing read."""
    import torch
    from safetensors.torch import save_file
    f = tmp_path / "w.safetensors"
    save_file({"a.weight": torch.ones(2, 2)}, str(f))
    with open(f, "ab") as fh:
        fh.write(b"\0" * 8)
    with pytest.raises(InputError) as e:
        read_weights(f)
    assert "w.safetensors is not a readable safetensors file (safetensors:" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_header_read_differently_is_refused(tmp_path, monkeypatch):
    """Should the two readers ever disagree on a tensor's shape, the file is refused."""
    import torch
    from safetensors.torch import save_file
    f = tmp_path / "w.safetensors"
    save_file({"a.weight": torch.ones(2, 3)}, str(f))
    orig = weights_mod.safetensors_header

    def lying(path):
        meta, off = orig(path)
        meta = {k: (dict(v, shape=[3, 2]) if k == "a.weight" else v) for k, v in meta.items()}
        return meta, off
    monkeypatch.setattr(weights_mod, "safetensors_header", lying)
    with pytest.raises(InputError, match="reads another header than this reader"):
        read_weights(f)


def test_a_tensor_cut_short_after_the_header_is_one_line(tmp_path):
    """The file shrinks between the header check and the read: one InputError line."""
    import torch
    from safetensors.torch import save_file
    f = tmp_path / "w.safetensors"
    save_file({"a.weight": torch.ones(4, 4)}, str(f))
    ws = read_weights(f)
    n = struct.unpack("<Q", f.read_bytes()[:8])[0]
    f.write_bytes(f.read_bytes()[:8 + n + 8])
    with pytest.raises(InputError, match="changed while it was read"):
        ws.tensors["a.weight"].read(0, 64)


def test_peak_memory_is_the_certified_layer_not_the_model(tmp_path):
    """A model whose second layer holds 24 MB (its feed-forward) and whose first layer
    and embedding hold a few kB: reading, detecting and computing every layer-0 head's
    features allocates well under the second layer's size (tracemalloc counts the
    bytes read and numpy's arrays). The reader before stored weights read every byte."""
    import tracemalloc

    import torch
    from safetensors.torch import save_file
    src = MODELS / "fla-linear-attn"
    cfg = json.loads((src / "config.json").read_text())
    sd = read_weights(src).torch()
    big = dict(sd)
    for k, v in sd.items():
        if ".layers.0.attn" in k or "layers.0.attn_norm" in k:
            big[k.replace(".layers.0.", ".layers.1.")] = v.clone()
    g = torch.Generator().manual_seed(0)
    wide = 1 << 18
    big["model.layers.1.mlp.gate_proj.weight"] = torch.randn(wide, 8, generator=g)
    big["model.layers.1.mlp.up_proj.weight"] = torch.randn(wide, 8, generator=g)
    big["model.layers.1.mlp.down_proj.weight"] = torch.randn(8, wide, generator=g)
    big["model.layers.1.mlp_norm.weight"] = torch.ones(8)
    cfg["num_hidden_layers"] = 2
    d = tmp_path / "big"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    save_file({k: v.contiguous() for k, v in big.items()}, str(d / "model.safetensors"))
    layer1 = sum(v.numel() * v.element_size() for k, v in big.items() if ".layers.1." in k)
    assert layer1 > 24 << 20
    warm = load_model(src)                       # the modules a first run imports are not what is measured
    next(head_kernel(warm, layer=0, head=0, compare=False).feature_batches(1 << 14))
    tracemalloc.start()
    try:
        model = load_model(d)
        for h in range(len(model.detected.layers[0].heads)):
            kern = head_kernel(model, layer=0, head=h, compare=False)
            q, k = next(kern.feature_batches(1 << 14))
            assert q.shape[0] == 12
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < layer1 // 8, (peak, layer1)


def test_extract_of_a_file_the_safetensors_package_refuses_is_one_line_exit_2(tmp_path):
    """The command line: one line on stderr naming the file, exit 2, nothing written."""
    import contextlib
    import io

    import torch
    from safetensors.torch import save_file

    from certify.cli import extract as extract_cli
    from certify.core.errors import run_command
    f = tmp_path / "w.safetensors"
    save_file({"q_proj.weight": torch.ones(4, 4), "k_proj.weight": torch.ones(4, 4)}, str(f))
    with open(f, "ab") as fh:
        fh.write(b"\0" * 8)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run_command("certify extract", extract_cli.main, [str(f), "--out", str(tmp_path / "k.npz")])
    lines = err.getvalue().strip().splitlines()
    assert rc == 2 and len(lines) == 1, err.getvalue()
    assert "w.safetensors is not a readable safetensors file (safetensors:" in lines[0]
    assert not (tmp_path / "k.npz").exists()


def test_a_file_rewritten_after_its_header_was_read_is_refused(tmp_path):
    """Same size, another tensor value, a later time: the lazy read refuses it rather
    than mix bytes of two files under one hash."""
    import torch
    from safetensors.torch import save_file
    f = tmp_path / "w.safetensors"
    save_file({"a.weight": torch.ones(4, 4)}, str(f))
    ws = read_weights(f)
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    st = f.stat()
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(InputError, match="changed while it was read"):
        ws.tensors["a.weight"].read(0, 64)


def test_the_replay_extra_is_safetensors_and_no_torch():
    """[replay] holds what a safetensors replay needs beyond the base (safetensors), never
    torch; [models] includes it; a missing safetensors names [replay]."""
    import tomllib

    from certify.core.extras import EXTRA_OF
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [r.split(">")[0] for r in extras["replay"]] == ["safetensors"]
    assert "certify-attention[solvers,replay]" in extras["models"]
    assert EXTRA_OF["safetensors"] == "replay" and EXTRA_OF["torch"] == "models"
