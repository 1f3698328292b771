"""A stored embedding's inputs to a head (its pre-norm and projections) are computed a
block of rows at a time (models/layouts/base.py, ``INPUT_BLOCK``) so that a whole
vocabulary's float64 decoding and the steps' temporaries are never held beside the
result; the features are bit for bit those of the whole array at once."""

from pathlib import Path

import numpy as np
import pytest

import models.layouts.base as base
from certify.sources.thirdparty import head_kernel, load_model

GALLERY = Path(__file__).resolve().parents[1] / "reports" / "gallery" / "models"

# a vocabulary and a pre-norm each; the bf16 and the normalized ones with --runslow
MODELS = ["fla-default-unnormalized",
          pytest.param("fla-linear-attn", marks=pytest.mark.slow),
          pytest.param("fla-sharded-bf16", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", MODELS)
def test_blocked_inputs_give_the_whole_arrays_bits(name, monkeypatch):
    calls = []
    blocked = base.FeatureHead._blocked_inputs

    def spy(self, tokens, f64):
        calls.append(tokens.shape)
        return blocked(self, tokens, f64)

    def features(block):
        monkeypatch.setattr(base, "INPUT_BLOCK", block)
        m = load_model(str(GALLERY / name), [])
        k = head_kernel(m, layer=0, head=0, tokens=None)
        return np.asarray(k.phi_q), np.asarray(k.phi_k)

    monkeypatch.setattr(base.FeatureHead, "_blocked_inputs", spy)
    whole = features(1 << 30)
    assert calls == []                           # one array at once
    parts = features(5)                          # blocks of 5 rows, the last one shorter
    assert calls and calls[0][0] > 5 and calls[0][0] % 5 != 0
    assert whole[0].dtype == np.float64 and whole[0].shape == parts[0].shape
    assert np.array_equal(whole[0], parts[0]) and np.array_equal(whole[1], parts[1])
    assert not np.array_equal(whole[0][:5], whole[0][5:10])      # rows that differ, in order


@pytest.mark.parametrize("name", MODELS)
def test_features_made_a_block_at_a_time_give_the_whole_arrays_bits(name, monkeypatch):
    """Above ``INPUTS_KEPT_BYTES`` a head's features are made a block at a time from the
    stored rows (steps, projection, feature map), nothing kept with the embedding."""
    def features(kept_bytes):
        monkeypatch.setattr(base, "INPUT_BLOCK", 5)
        monkeypatch.setattr(base, "INPUTS_KEPT_BYTES", kept_bytes)
        m = load_model(str(GALLERY / name), [])
        ks = [head_kernel(m, layer=0, head=h, tokens=None) for h in range(2)]
        emb = m.detected.embedding
        return [(np.asarray(k.phi_q), np.asarray(k.phi_k)) for k in ks], dict(getattr(emb, "derived", {}))

    kept, derived = features(1 << 40)
    assert derived                                     # the steps' output kept for the layer's heads
    streamed, none = features(0)
    assert not none                                    # nothing kept: each head made its own blocks
    for (q0, k0), (q1, k1) in zip(kept, streamed):
        assert np.array_equal(q0, q1) and np.array_equal(k0, k1)
    assert not np.array_equal(kept[0][0], kept[1][0])  # two heads, two feature sets
