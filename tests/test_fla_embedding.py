"""A bare fla layer under a user's embedding: config.json states the wiring
(``"embedding": "token_emb.weight"``), never guessed from key names. The layer then
reads the vocabulary's rows: certified on ``vocab:V``, the statement names the stated
embedding, the library's own module runs on the same rows, and the replay re-derives
the certificate. A wrong statement is one line, exit 2, nothing written."""

from __future__ import annotations

import json

import pytest
from library_support import save_st

torch = pytest.importorskip("torch")


def _model(folder, config_extra, vocab=40, hidden=32, heads=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    fd = 16
    sd = {"token_emb.weight": torch.randn(vocab, hidden, generator=g),
          "pos_emb.weight": torch.randn(vocab, 8, generator=g)}           # not the layer's width
    for name, rows in (("q_proj", heads * fd), ("k_proj", heads * fd), ("v_proj", hidden), ("o_proj", hidden)):
        sd[f"attn.{name}.weight"] = torch.randn(rows, hidden, generator=g) * 0.3
    return save_st(sd, folder, {"class": "BasedLinearAttention", "feature_dim": fd, "num_heads": heads,
                                "num_key_value_heads": heads, **config_extra})


def test_a_stated_embedding_makes_the_layer_read_the_vocabulary(tmp_path, capsys):
    pytest.importorskip("fla")
    from certify.cli import main
    d = _model(tmp_path / "based", {"embedding": "token_emb.weight"}, heads=1)
    out = tmp_path / "out"
    assert main(["checkpoint", str(d), "--out", str(out), "--no-progress", "--json"]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    ranks = [c for c in cert["claims"] if c["kind"] == "exact_rank"]
    assert len(ranks) == 1
    for c in ranks:
        assert c["parameters"]["token_set"] == "vocab:40"
        assert c["evidence"]["rank_lower"] == c["evidence"]["rank_upper"] == 40     # 40 rows < 153 features
        assert c["parameters"]["stated"]["embedding"] == {"value": "token_emb.weight", "from": "config.json"}
        assert "embedding = token_emb.weight (config.json)" in c["statement"]
        assert c["info"]["library_check"]["status"] == "agrees"
    capsys.readouterr()
    assert main(["verify", "--replay-extraction", str(out / "certificate.json")]) == 0


def test_without_the_statement_the_layer_reads_vectors(tmp_path, capsys):
    from certify.cli import main
    d = _model(tmp_path / "based", {})
    out = tmp_path / "out"
    # width 32: no finite token set without the embedding (the old reading, exit 3)
    assert main(["checkpoint", str(d), "--out", str(out), "--no-progress"]) == 3
    assert not out.exists()


@pytest.mark.parametrize("value, words", [
    ("emb.weight", "is not a tensor of the checkpoint"),
    ("pos_emb.weight", "has shape (40, 8): an embedding feeding the layer is (vocabulary, 32)"),
    (["token_emb.weight"], "is not a tensor of the checkpoint"),
])
def test_a_wrong_embedding_statement_is_one_line_exit_2(tmp_path, capsys, value, words):
    from certify.cli import main
    d = _model(tmp_path / "based", {"embedding": value})
    out = tmp_path / "out"
    assert main(["checkpoint", str(d), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert not out.exists()
