"""The committed gallery: every certificate verifies against its committed checkpoint,
with the extraction replayed bit for bit (exit 0), and the README records it."""

import subprocess
import sys
from pathlib import Path

import pytest

from certify.checkers import verify

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "reports" / "gallery"
CERTS = sorted(GALLERY.glob("*/certificate.json")) if GALLERY.is_dir() else []


@pytest.mark.skipif(not CERTS, reason="no committed gallery")
@pytest.mark.parametrize("path", CERTS, ids=[p.parent.name for p in CERTS])
def test_gallery_certificate_verifies(path, monkeypatch):
    monkeypatch.chdir(ROOT)                  # checkpoints are named relative to the repository
    r = verify.verify_file(path)
    assert r.holds and r.inputs and all(i.holds for i in r.inputs), \
        [(c.index, c.problems) for c in r.claims if not c.holds]


@pytest.mark.skipif(not CERTS, reason="no committed gallery")
def test_gallery_replays_to_exit_0():
    """Every certificate of the gallery, with the extraction re-run in a separate
    process: nothing left to assume."""
    p = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction",
                        *[str(c.relative_to(ROOT)) for c in CERTS]], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-1500:]
    assert "assuming" not in p.stderr


@pytest.mark.skipif(not CERTS, reason="no committed gallery")
def test_gallery_covers_every_library_and_the_refusals():
    text = (GALLERY / "README.md").read_text()
    for lib in ("performer-pytorch", "linear-attention-transformer", "fla ", "zoology", "pytorch-fast-transformers"):
        assert lib in text
    rows = [r for r in text.splitlines() if r.startswith("| `reports/gallery/models/")]
    certified = [r for r in rows if r.split(" | ")[2] in ("0", "1")]
    assert len(certified) == len(CERTS) and all(r.split(" | ")[4] == "0" for r in certified)
    assert text.count("| 3 | - | - |") == 3 and "FAVOR+" in text and "gating" in text
    assert "softmax attention is not a finite-rank kernel" in text
    assert text.count("| 2 | - | - |") == 1 and '"class"' in text
    for ways in ("training checkpoint", "fp16", "bfloat16", "shards", "save_pretrained", "torch.save"):
        assert ways in text
