"""A gallery certificate replays on any machine: the replay of its extraction
gives the same features' hashes, and `verify --replay-extraction` exits 0,
whatever kernels torch, numpy and the BLAS pick (ATEN_CPU_CAPABILITY,
NPY_DISABLE_CPU_FEATURES, MKL/oneDNN/OpenBLAS instruction sets, 1 or 2
threads). The control: torch's own forward of the same heads changes under at
least one of these settings, so the settings do change the kernels run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_canonical import ROOT, settings_env

GALLERY = ROOT / "reports" / "gallery"

_CHILD = r"""
import hashlib, json, sys
from pathlib import Path
from numpy._core._multiarray_umath import __cpu_features__ as feats
import torch
from certify.checkers.sources import find
from certify.checkpoints.replay import replay
from certify.sources.thirdparty import load_model
jobs, torch_hashes = {}, {}
for name in sys.argv[1:]:
    cert = json.loads(Path(name).read_text())
    base = Path(name).parent
    specs = [str(find(n, base)) for n in cert["inputs"] if n.endswith(".json") and find(n, base)]
    for c in cert["claims"]:
        p, fs = c["parameters"], c["evidence"].get("features_sha256")
        if not isinstance(fs, dict) or p.get("adapter") in (None, "matrix-file"):
            continue
        key = f"{name} {p['adapter']} {p['token_set']}"
        jobs[key] = {"key": key, "source": p["source"], "path": str(find(p["source"], base)),
                     "adapter": p["adapter"], "token_set": p["token_set"], "dtype": fs["dtype"],
                     "want": [[fs["phi_q"], fs["phi_k"]]], "heads": [], "specs": specs,
                     "stated": p.get("stated"),           # a third-party head's kernel arguments
                     "normalized": [p.get("normalized", True)],   # what the sentence calls the head
                     "certified": [fs["phi_q"], fs["phi_k"]]}
    src = next((c["parameters"]["source"] for c in cert["claims"]
                if str(c["parameters"].get("adapter", "")).startswith("layout:")), None)
    if src is not None:                      # the control: torch's own features of every head
        model = load_model(find(src, base))
        L = model.layer(None)
        x = model.detected.embedding if model.detected.embedding is not None else \
            ((torch.arange(1 << L.m)[:, None] >> torch.arange(L.m)) & 1).float()
        with torch.no_grad():
            for h in L.heads:
                if hasattr(h, "feature_matrices"):
                    q, k = h.feature_matrices(x)
                    torch_hashes[f"{name} {h.details.get('head')}"] = hashlib.sha256(
                        q.numpy().tobytes() + k.numpy().tobytes()).hexdigest()
got = replay(list(jobs.values()))
print(json.dumps({"replayed": {k: [v.get("phi_q"), v.get("phi_k"), v.get("error")] for k, v in got.items()},
                  "certified": {k: j["certified"] for k, j in jobs.items()},
                  "torch": torch_hashes, "features": {k: v for k, v in feats.items() if v},
                  "capability": torch.backends.cpu.get_cpu_capability()}))
"""


def _certificates() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in GALLERY.glob("*/certificate.json"))


def _run(certs: list[str], names: set[str] | None = None) -> None:
    from numpy._core._multiarray_umath import __cpu_dispatch__
    assert certs
    envs = [(n, e) for n, e in settings_env() if names is None or n in names]
    got = {}
    for name, env in envs:
        got[name] = _child(certs, env)
        v = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction", *certs],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200)
        assert v.returncode == 0, (name, v.stderr[-1500:])
    ref = next(iter(got.values()))
    assert ref["replayed"] and all(v[2] is None for v in ref["replayed"].values()), ref["replayed"]
    for name, g in got.items():
        assert g["replayed"] == ref["replayed"], name                       # the same bits everywhere
        for key, (q, k, _) in g["replayed"].items():
            assert [q, k] == g["certified"][key], (name, key)                # ... and the certified ones
    if "numpy-baseline" in got:
        for f in __cpu_dispatch__:
            assert not got["numpy-baseline"]["features"].get(f), f
    if "aten-default" in got:
        assert got["aten-default"]["capability"] == "DEFAULT"
    assert any(g["torch"] != ref["torch"] for g in got.values()), \
        "torch's own features are the same under every setting: the settings proved nothing"


def _child(certs: list[str], env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, *certs], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_one_gallery_certificate_replays_under_other_kernels():
    """The short version: fla's hedgehog model (RMSNorm, softmax) and performer's
    (LayerNorm, relu features), under torch's default kernels and numpy without
    its dispatched SIMD."""
    certs = [c for c in _certificates() if "/fla-linear-attn/" in c or "/performer/" in c]
    _run(certs, {"aten-default", "numpy-baseline"})


@pytest.mark.slow
def test_every_gallery_certificate_replays_under_every_setting():
    _run(_certificates())
