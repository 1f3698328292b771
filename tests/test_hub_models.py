"""Models by hub id, from a local Hugging Face cache built here (no network), and
certificates that replay wherever their model files are found by sha256.

The cache has the hub's layout (``$HF_HOME/hub/models--org--name/`` with
``snapshots/<commit>/`` files symlinked into ``blobs/`` and ``refs/main``
holding the commit), filled with a gallery model."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAT = ROOT / "reports" / "gallery" / "models" / "lat"
GALLERY_CERT = ROOT / "reports" / "gallery" / "lat" / "certificate.json"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def make_cache(home: Path, repo: str, model: Path, commit: str = COMMIT) -> Path:
    """A Hugging Face cache under ``home`` holding ``model``'s files as ``repo`` at ``commit``."""
    rf = home / "hub" / ("models--" + repo.replace("/", "--"))
    (rf / "blobs").mkdir(parents=True)
    (rf / "refs").mkdir()
    snap = rf / "snapshots" / commit
    snap.mkdir(parents=True)
    for f in sorted(model.iterdir()):
        sha = hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copyfile(f, rf / "blobs" / sha)
        os.symlink(f"../../blobs/{sha}", snap / f.name)
    (rf / "refs" / "main").write_text(commit)
    return snap


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    return {**env, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "CERTIFY_NO_PROGRESS": "1",
            "PYTHONPATH": str(ROOT)}


def _certify(*args, env, cwd):
    return subprocess.run([sys.executable, "-m", "certify", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_hub_id_resolves_in_the_cache_and_replays_after_the_cache_moves(tmp_path):
    home = tmp_path / "hf"
    make_cache(home, "myorg/lat", LAT)
    env = _env(home)
    r = _certify("checkpoint", "myorg/lat", "--out", "out", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    name = f"hf://myorg/lat@{COMMIT}/model.safetensors"
    want = {name: hashlib.sha256((LAT / "model.safetensors").read_bytes()).hexdigest(),
            f"hf://myorg/lat@{COMMIT}/config.json": hashlib.sha256((LAT / "config.json").read_bytes()).hexdigest()}
    assert cert["inputs"] == want                        # repo id, commit and every file's sha256
    assert cert["environment"]["hub"] == {"repo_id": "myorg/lat", "revision": None, "commit": COMMIT,
                                          "files": dict(sorted(want.items()))}
    assert all(name in c["statement"] for c in cert["claims"])
    assert str(home) not in json.dumps(cert)             # no machine path left
    assert f"hub model myorg/lat at commit {COMMIT}" in r.stderr and want[name] in r.stderr

    ok = _certify("verify", "--replay-extraction", "out/certificate.json", env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "in the local Hugging Face cache" in ok.stderr

    moved = tmp_path / "elsewhere"
    home.rename(moved)                                    # the cache moves: HF_HOME names nothing
    lost = _certify("verify", "--replay-extraction", "out/certificate.json", env=env, cwd=tmp_path)
    assert lost.returncode == 4, lost.stderr[-2000:]
    hint = [ln for ln in lost.stderr.splitlines() if "--weights DIR" in ln]
    assert len(hint) == 1 and name in hint[0] and "hf download myorg/lat" in hint[0]
    found = _certify("verify", "--replay-extraction", "--weights", moved, "out/certificate.json",
                     env=env, cwd=tmp_path)
    assert found.returncode == 0, found.stderr[-2000:]
    assert f"replay reads {name} from {moved}" in found.stderr


def test_a_model_not_in_the_cache_says_how_to_download_it(tmp_path):
    env = _env(tmp_path / "hf")
    for cmd in ("rank", "checkpoint", "extract"):
        extra = ["--out", "k.npz"] if cmd == "extract" else []
        r = _certify(cmd, "myorg/absent@v2", *extra, env=env, cwd=tmp_path)
        assert r.returncode == 2, (cmd, r.stderr)
        (line,) = r.stderr.strip().splitlines()
        assert "not in the local Hugging Face cache" in line
        assert "hf download myorg/absent --revision v2" in line
        assert not (tmp_path / "k.npz").exists()


def test_repo_folder_and_snapshot_folder_name_the_same_model(tmp_path, monkeypatch):
    from certify.sources.hub import from_cache_path, resolve_hub_id

    snap = make_cache(tmp_path / "hf", "myorg/lat", LAT)
    repo_folder = snap.parents[1]
    a, b, c = from_cache_path(repo_folder), from_cache_path(snap), from_cache_path(snap / "model.safetensors")
    assert (a.repo_id, a.commit, a.path) == ("myorg/lat", COMMIT, snap)
    assert (b.repo_id, b.commit, b.path) == ("myorg/lat", COMMIT, snap)
    assert (c.commit, c.path) == (COMMIT, snap / "model.safetensors")
    assert b.name(snap / "model.safetensors") == f"hf://myorg/lat@{COMMIT}/model.safetensors"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    d = resolve_hub_id(f"myorg/lat@{COMMIT}")
    assert (d.commit, d.revision, d.folder) == (COMMIT, COMMIT, snap)
    assert from_cache_path(tmp_path) is None


def test_rank_by_hub_id_names_the_commit(tmp_path):
    make_cache(tmp_path / "hf", "myorg/lat", LAT)
    r = _certify("rank", "myorg/lat@main", "--json", "--no-progress", env=_env(tmp_path / "hf"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["source"] == f"hf://myorg/lat@{COMMIT}/model.safetensors"
    assert doc["certificate"]["environment"]["hub"]["revision"] == "main"
    assert doc["rank_lower"] == doc["rank_upper"] == 3                    # the gallery's lat head 0


def test_a_certificate_copied_beside_its_model_files_replays(tmp_path):
    flat = tmp_path / "download"
    flat.mkdir()
    shutil.copyfile(GALLERY_CERT, flat / "certificate.json")
    for f in LAT.iterdir():
        shutil.copyfile(f, flat / f.name)
    env = _env(tmp_path / "hf")
    r = _certify("verify", "--replay-extraction", "certificate.json", env=env, cwd=flat)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "beside the certificate" in r.stderr
    # a file beside the certificate with the right name and other bytes is not used
    (flat / "config.json").write_text(json.dumps({**json.loads((LAT / "config.json").read_text()), "heads": 1}))
    bad = _certify("verify", "--replay-extraction", "certificate.json", env=env, cwd=flat)
    assert bad.returncode == 1, bad.stderr[-2000:]                       # its input hash differs
    assert "MISMATCH" in bad.stderr and "holds: all" not in bad.stderr


def test_locate_checks_every_file_by_sha256(tmp_path):
    from certify.checkers.sources import Places, locate

    data = b"weights"
    sha = hashlib.sha256(data).hexdigest()
    (tmp_path / "cert").mkdir()
    (tmp_path / "w" / "deep").mkdir(parents=True)
    (tmp_path / "w" / "deep" / "renamed.bin").write_bytes(data)
    (tmp_path / "w" / "model.bin").write_bytes(b"other bytes, same name")
    got = locate("a/b/model.bin", sha, Places(tmp_path / "cert", [tmp_path / "w"]))
    assert got is not None and got.path == tmp_path / "w" / "deep" / "renamed.bin" and got.matches
    assert locate("a/b/model.bin", "0" * 64, Places(tmp_path / "cert", [tmp_path / "w"])) is None
    (tmp_path / "cert" / "model.bin").write_bytes(data)
    near = locate("a/b/model.bin", sha, Places(tmp_path / "cert", [tmp_path / "w"]))
    assert near.path == tmp_path / "cert" / "model.bin" and near.how == "beside the certificate"


@pytest.mark.parametrize("name", ["hf://org/x@" + "0" * 40 + "/../../etc/passwd", "hf://org/x@main/a.bin"])
def test_hub_names_outside_their_snapshot_are_not_hub_names(name):
    from certify.checkers.sources import hub_name
    assert hub_name(name) is None
