"""The committed gallery: every certificate verifies against its committed checkpoint."""

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
def test_gallery_covers_every_library_and_both_refusals():
    text = (GALLERY / "README.md").read_text()
    for lib in ("performer-pytorch", "linear-attention-transformer", "fla ", "zoology", "pytorch-fast-transformers"):
        assert lib in text
    assert text.count("| 3 | - | - |") == 2 and "FAVOR+" in text and "gating" in text
