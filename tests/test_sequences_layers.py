"""Every layer of an fla ``linear_attn`` LM on stated token sequences (``checkpoint --sequences``).

Small models with fla's own initialisation (3 layers, hidden 64, 4 heads, vocabulary
40): fla's default configuration, unnormalized, with the ``t2r`` map (and with fla's default
``elementwise_product``, whose signed kernel is refuted nonnegative: exit 1), and a normalized
``hedgehog`` one (``norm_feature_map``). Every head of every layer is certified on the inputs to its
layer at every position of the sequences (exit 0), replayed (exit 0); the canonical
hidden states agree with fla's own forward at float32 tolerance, and a planted mistake in
the canonical forward is caught by that comparison; weights of layer 2 (and of layer 3 of a
4-layer model) changed after certification fail the replay on that layer's claims alone; bad
sequence files and texts end with one line and exit 2 before any work; ``--text`` certifies
the ids of a text under the model's tokenizer; the report draws the heads' eps-rank as a
layer x head map; the lean forward (one layer's features at a time, continued from its last
block) gives the bits of the plain one.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

# found, not imported: importing fla (about 5 CPU s) at collection would cost every test
# worker that much, though only the worker that runs this file needs it
if importlib.util.find_spec("fla") is None:
    pytest.skip("flash-linear-attention is not installed", allow_module_level=True)

from library_support import lean_forward_is_the_plain_one, replay_fails_on_layer  # noqa: E402 (after the skip: it imports torch)
from library_support import run_cli as _run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LAT = ROOT / "reports" / "gallery" / "models" / "lat"
#: fla's defaults (unnormalized: norm_feature_map False) with a nonnegative map, and a normalized model
CONFIGS = {"unnormalized": {"feature_map": "t2r"},
           "hedgehog": {"feature_map": "hedgehog", "norm_feature_map": True}}


def _make(path: Path, **kw) -> Path:
    import torch
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(0)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        cfg = LinearAttentionConfig(hidden_size=64, num_hidden_layers=3, num_heads=4, vocab_size=40,
                                    intermediate_size=128, **kw)
        LinearAttentionForCausalLM(cfg).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("fla-lm")
    return {name: _make(d / name, **kw) for name, kw in CONFIGS.items()}


@pytest.fixture(scope="module")
def certified(models, tmp_path_factory):
    """Each model certified on the seeded probe, and its certificate folder."""
    out = {}
    for name, path in models.items():
        folder = tmp_path_factory.mktemp("out") / name
        run = _run(["checkpoint", str(path), "--sequences", "random:3,16,0", "--out", str(folder), "--json",
                    "--no-progress"])
        out[name] = (run, folder)
    return out


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_layer_is_certified_and_replayed(certified, name):
    run, folder = certified[name]
    assert run.returncode == 0, run.stderr[-2000:]
    res = json.loads(run.stdout)
    rows = res["heads"]
    assert [(r["layer"], r["head"], r["status"]) for r in rows] == \
        [(L, h, "certified") for L in range(3) for h in range(4)]
    assert {r["token_set"] for r in rows} == {"positions:3x16"}
    for r in rows:
        chk = r["library_check"]
        assert chk["status"] == "agrees" and chk["max_error"] <= 1e-4
        hs = chk["hidden_states"]
        assert hs["status"] == "agrees" and hs["max_error"] <= 1e-4
        # the inputs of a deeper layer went through fla's float32 blocks: not the same bits, close
        assert (hs["max_error"] == 0.0) == (r["layer"] == 0)
    cert = json.loads((folder / "certificate.json").read_text())
    claims = [c for c in cert["claims"] if c["parameters"]["layer"] == 2]
    said = ("the 48 inputs to layer 2 at every position of 3 token sequences of length 16 "
            "(the seeded random probe random:3,16,0, ids sha256 ")
    assert claims and all(said in c["statement"] for c in claims)
    assert all(c["parameters"].get("normalized", True) is (name == "hedgehog") for c in claims)
    ver = _run(["verify", "--replay-extraction", str(folder / "certificate.json")])
    assert ver.returncode == 0, ver.stdout[-2000:] + ver.stderr[-2000:]
    # without the replay the features are the named assumption, as for layer 0
    assert _run(["verify", str(folder / "certificate.json")]).returncode == 4


def test_fla_default_map_is_certified_and_found_signed(tmp_path):
    """fla's default configuration as it is (``elementwise_product``): every claim is made on
    layer 2's inputs, the ranks proved and nonnegativity refuted with a pair of positions."""
    ck = _make(tmp_path / "default")
    run = _run(["checkpoint", str(ck), "--sequences", "random:2,8,5", "--layer", "2", "--json",
                "--no-progress"])
    assert run.returncode == 1, run.stderr[-2000:]
    claims = json.loads(run.stdout)["claims"]
    assert {(c["kind"], c["verdict"]) for c in claims} == {("exact_rank", "proved"), ("eps_rank", "proved"),
                                                            ("nonnegative", "refuted")}
    assert all(c["layer"] == 2 for c in claims)


def test_sequence_file_and_probe_name_the_same_ids(models, tmp_path):
    from certify.sources.sequences import read_sequences
    probe = read_sequences("random:3,16,0", 40)
    np.save(tmp_path / "s.npy", probe.ids)
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in probe.ids.tolist()))
    a, b = read_sequences(str(tmp_path / "s.npy"), 40), read_sequences(str(tmp_path / "s.jsonl"), 40)
    assert a.sha256 == b.sha256 == probe.sha256 and a.file_sha256 != b.file_sha256
    assert read_sequences("random:3,16,1", 40).sha256 != probe.sha256
    folder = tmp_path / "out"
    run = _run(["checkpoint", str(models["unnormalized"]), "--sequences", str(tmp_path / "s.jsonl"),
                "--layer", "1", "--out", str(folder), "--no-progress"])
    assert run.returncode == 0, run.stderr[-2000:]
    cert = json.loads((folder / "certificate.json").read_text())
    assert cert["inputs"][str(tmp_path / "s.jsonl")] == b.file_sha256
    assert {c["parameters"]["sequences_sha256"] for c in cert["claims"]} == {probe.sha256}
    assert _run(["verify", "--replay-extraction", str(folder / "certificate.json")]).returncode == 0
    # another file with the same name and other ids: the replay does not find the certified one
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (probe.ids[::-1]).tolist()))
    bad = _run(["verify", "--replay-extraction", str(folder / "certificate.json")])
    assert bad.returncode != 0


def test_library_check_catches_a_planted_mistake(models, monkeypatch):
    """The hidden-state comparison is not vacuous: a canonical forward without the MLP's
    gate (swish replaced by the identity) disagrees with fla's own model from layer 1 on."""
    from certify.sources.sequences import read_sequences
    from certify.sources.thirdparty import load_model
    from models.layouts import fla_forward
    from models.layouts.reference import check_forward
    model = load_model(models["hedgehog"])
    seqs = read_sequences("random:2,12,3", 40)
    good = fla_forward.forward(model.detected, model.stored, seqs.ids)
    ok = check_forward(model.detected, model.tensors, seqs.ids, good.inputs)
    assert ok["status"] == "agrees" and ok["layers"][0] == 0.0 and max(ok["layers"]) < 1e-5
    monkeypatch.setattr(fla_forward, "cr_sigmoid", lambda g: np.ones_like(g))
    bad = fla_forward.forward(model.detected, model.stored, seqs.ids)
    got = check_forward(model.detected, model.tensors, seqs.ids, bad.inputs)
    assert got["status"] == "disagrees" and got["layers"][0] == 0.0 and min(got["layers"][1:]) > 1e-3


def _write_changed_layer(src: Path, dst: Path, layer: int) -> None:
    import shutil

    from safetensors.numpy import load_file, save_file
    shutil.copytree(src, dst)
    t = load_file(str(src / "model.safetensors"))
    key = f"model.layers.{layer}.attn.q_proj.weight"
    t[key] = (t[key] * np.float32(1.5)).astype(np.float32)
    save_file(t, str(dst / "model.safetensors"), metadata={"format": "pt"})


def _replay_changed(folder: Path, layer: int, tmp_path: Path) -> None:
    """Layer ``layer``'s query weights changed after certification: the replay fails exactly
    the claims of that layer, naming them (:func:`library_support.replay_fails_on_layer`)."""
    cert = json.loads((folder / "certificate.json").read_text())
    old_src = next(c["parameters"]["source"] for c in cert["claims"])
    new = tmp_path / "changed"
    _write_changed_layer(Path(old_src).parent, new, layer)
    replay_fails_on_layer(folder, new / "model.safetensors", layer, tmp_path)


def test_changed_layer_weights_fail_the_replay_on_that_layer(certified, tmp_path):
    _replay_changed(certified["hedgehog"][1], 2, tmp_path)


def test_changed_layer_3_weights_of_a_4_layer_model_fail_layer_3_alone(tmp_path):
    """The same on a 4-layer model (fla's defaults, t2r): layer 3's weights changed, the replay
    fails layer 3's claims and no other (the three layers before it replay)."""
    import torch
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(1)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        cfg = LinearAttentionConfig(hidden_size=32, num_hidden_layers=4, num_heads=2, vocab_size=40,
                                    intermediate_size=64, feature_map="t2r")
        LinearAttentionForCausalLM(cfg).save_pretrained(tmp_path / "four")
    folder = tmp_path / "out"
    run = _run(["checkpoint", str(tmp_path / "four"), "--sequences", "random:2,8,1", "--out", str(folder),
                "--no-progress"])
    assert run.returncode == 0, run.stderr[-2000:]
    cert = json.loads((folder / "certificate.json").read_text())
    assert {c["parameters"]["layer"] for c in cert["claims"]} == {0, 1, 2, 3}
    _replay_changed(folder, 3, tmp_path)


def _one_line(run: subprocess.CompletedProcess, words: str) -> None:
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert run.returncode == 2, run.stderr[-800:]
    assert len(lines) == 1 and words in lines[0], lines


def test_bad_sequences_are_one_line_before_any_work(models, tmp_path, monkeypatch):
    ck = str(models["unnormalized"])
    np.save(tmp_path / "far.npy", np.array([[1, 2, 40]]))
    np.save(tmp_path / "neg.npy", np.array([[1, -1]]))
    np.save(tmp_path / "float.npy", np.array([[1.0, 2.0]]))
    np.save(tmp_path / "ragged.npy", np.array([[1, 2], [3]], dtype=object), allow_pickle=True)
    np.save(tmp_path / "flat.npy", np.array([1, 2, 3]))
    np.save(tmp_path / "none.npy", np.zeros((0, 5), dtype=np.int64))
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "ragged.jsonl").write_text("[1, 2]\n[3]\n")
    (tmp_path / "floats.jsonl").write_text("[1.5, 2]\n")
    (tmp_path / "s.txt").write_text("1 2 3\n")
    with open(tmp_path / "huge.npy", "wb") as f:          # 10^8 ids declared: refused from the header
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False,
                                                 "shape": (10_000, 10_000)})
    cases = {"far.npy": "id 40 (sequence 0, position 2) is outside the vocabulary 0..39",
             "neg.npy": "id -1", "float.npy": "float64 values; token ids are integers",
             "ragged.npy": "object array (ragged sequences?)", "flat.npy": "give (S, T)",
             "none.npy": "no token ids", "empty.jsonl": "no token ids",
             "ragged.jsonl": "give sequences of one length",
             "floats.jsonl": "not a list of integer token ids", "s.txt": "give a .npy array",
             "huge.npy": "100000000 token ids is over the limit sequence_tokens"}
    for name, words in cases.items():
        run = _run(["checkpoint", ck, "--sequences", str(tmp_path / name), "--out", str(tmp_path / "o")])
        _one_line(run, words)
    _one_line(_run(["checkpoint", ck, "--sequences", "random:3,x,0"]), "random:S,T,SEED")
    _one_line(_run(["checkpoint", ck, "--sequences", "random:100000,1000,0"]), "over the limit")
    monkeypatch.setenv("CERTIFY_LIMIT_SEQUENCE_TOKENS", "10")       # a .jsonl: refused while it is read
    (tmp_path / "long.jsonl").write_text("[1, 2, 3, 4]\n" * 3)
    _one_line(_run(["checkpoint", ck, "--sequences", str(tmp_path / "long.jsonl")]), "12 token ids is over")
    assert not (tmp_path / "o").exists()


def test_other_families_are_refused_and_deeper_layers_name_the_command(models):
    run = _run(["checkpoint", str(LAT), "--sequences", "random:2,8,0"])       # a stack, not an LM
    _one_line(run, "--sequences on linear-attention-transformer: the canonical forward runs a "
                   "LinearAttentionTransformerLM (token_emb.weight with its stack of layers)")
    assert "without --sequences, its first layer's heads are certified on what they read" in run.stderr
    for name in ("fla-based", "zoology"):
        run = _run(["checkpoint", str(LAT.parent / name), "--sequences", "random:2,8,0"])
        _one_line(run, "is a layer, not a language model: fla 0.6.0 has no model class built of Based or "
                       "ReBased layers and zoology is not installed")
        assert "without --sequences the first layer's heads are certified on what they read" in run.stderr
    run = _run(["checkpoint", str(LAT.parent / "softmax"), "--sequences", "random:2,8,0"])
    _one_line(run, "--sequences certifies every layer of fla linear_attn language models (config.json "
                   "model_type 'linear_attn'); performer-pytorch PerformerLM")
    res = _run(["checkpoint", str(models["unnormalized"]), "--json", "--no-progress"])
    assert res.returncode == 0
    rows = json.loads(res.stdout)["heads"]
    assert [r["status"] for r in rows] == ["certified"] * 4 + ["out of reach"] * 8
    assert all(f"certify checkpoint {models['unnormalized']} --sequences FILE.npy|FILE.jsonl|random:S,T,SEED"
               in r["reason"] for r in rows[4:])


def test_the_forward_is_the_same_bits_without_the_compiled_kernel(models, monkeypatch):
    """The plain twin: the pure path of models.canonical (numpy loops and arb) gives the
    forward's hidden states and every head's features bit for bit."""
    from certify.sources.sequences import read_sequences
    from certify.sources.thirdparty import load_model
    from models.canonical import arith
    from models.layouts import fla_forward
    model = load_model(models["hedgehog"])
    seqs = read_sequences("random:1,5,9", 40)
    fast = fla_forward.forward(model.detected, model.stored, seqs.ids)
    monkeypatch.setattr(arith, "_KERNEL", [None])
    plain = fla_forward.forward(load_model(models["hedgehog"]).detected, model.stored, seqs.ids)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(fast.inputs, plain.inputs))
    assert fast.features.keys() == plain.features.keys()
    assert all(fast.features[k][i].tobytes() == plain.features[k][i].tobytes()
               for k in fast.features for i in (0, 1))


def test_report_draws_the_eps_rank_of_every_layer_and_head(certified):
    """The report's heat map holds one cell per head of every layer, each the count of its
    eps-rank claim (the producer's own head table says the same), and report.tex shows it."""
    from certify.report import build as report
    run, folder = certified["hedgehog"]
    rows = json.loads(run.stdout)["heads"]
    grids = report.eps_rank_grids(report.load([folder / "certificate.json"]))
    assert len(grids) == 1 and grids[0]["eps"] == "1/1000"
    cells = grids[0]["cells"]
    assert sorted(cells) == [(L, h) for L in range(3) for h in range(4)]
    for r in rows:
        k, verdict, exact = cells[(r["layer"], r["head"])]
        assert r["eps_rank"] == f"{'' if exact else '>= '}{k} (eps 1/1000) {verdict}"
    assert grids[0]["r"] >= max(k for k, _, _ in cells.values())
    assert (folder / "eps_rank_heads.png").stat().st_size > 1000
    assert "eps_rank_heads" in (folder / "report.tex").read_text()
    assert "![eps_rank_heads](eps_rank_heads.png)" in (folder / "report.md").read_text()


#: a text of 32 words and a word-level tokenizer of its 22 distinct words (ids 0..21, [UNK] 22) for the 40-id models
TEXT = ("the kernel of every head is certified on the hidden states of real text at every layer and "
        "the rank of each head is proved exactly while the eps rank is enclosed\n")


def _tokenizer(folder: Path, extra_words: int = 0) -> Path:
    import tokenizers
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    words = list(dict.fromkeys(TEXT.split())) + [f"w{i}" for i in range(extra_words)]
    vocab = {w: i for i, w in enumerate(words)} | {"[UNK]": len(words)}
    tok = tokenizers.Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def test_text_is_tokenized_certified_on_every_layer_and_replayed(models, tmp_path):
    """``--text FILE``: the model folder's tokenizer.json gives the ids (the tokenizers
    library's own encoding, cut into sequences of --text-length), every head of every layer
    is certified on them, the ids are written beside the certificate, named by their sha256,
    and the replay re-derives every layer's features from that file."""
    import shutil

    import tokenizers
    ck = tmp_path / "model"
    shutil.copytree(models["unnormalized"], ck)
    tok = _tokenizer(ck)
    (tmp_path / "t.txt").write_text(TEXT + TEXT[:40], encoding="utf-8")
    stream = tokenizers.Tokenizer.from_file(str(tok)).encode(TEXT + TEXT[:40], add_special_tokens=False).ids
    S = len(stream) // 7
    folder = tmp_path / "out"
    run = _run(["checkpoint", str(ck), "--text", str(tmp_path / "t.txt"), "--text-length", "7", "--out", str(folder),
                "--json", "--no-progress"])
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(run.stdout)["heads"]
    assert [(r["layer"], r["head"], r["status"], r["token_set"]) for r in rows] == \
        [(L, h, "certified", f"positions:{S}x7") for L in range(3) for h in range(4)]
    ids = [json.loads(line) for line in (folder / "sequences.jsonl").read_text().splitlines()]
    assert ids == [stream[i * 7:(i + 1) * 7] for i in range(S)] and len(stream) - 7 * S > 0
    cert = json.loads((folder / "certificate.json").read_text())
    import hashlib
    assert cert["inputs"]["sequences.jsonl"] == hashlib.sha256((folder / "sequences.jsonl").read_bytes()).hexdigest()
    env = cert["environment"]["text"]
    assert (env["S"], env["T"], env["tokens"], env["dropped"]) == (S, 7, len(stream), len(stream) - 7 * S)
    assert all("the sequences file sequences.jsonl" in c["statement"] for c in cert["claims"])
    assert "tokenized by" in (folder / "heads.md").read_text()
    assert _run(["verify", "--replay-extraction", str(folder / "certificate.json")]).returncode == 0
    # the same ids given as a file name the same token set: the content hash, not the route
    from certify.sources.sequences import read_sequences
    assert {c["parameters"]["sequences_sha256"] for c in cert["claims"]} == \
        {read_sequences(str(folder / "sequences.jsonl"), 40).sha256}


def test_bad_text_is_one_line_before_any_work(models, tmp_path):
    import shutil
    ck = tmp_path / "model"
    shutil.copytree(models["unnormalized"], ck)
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (tmp_path / "empty.txt").write_text("")
    out = ["--out", str(tmp_path / "o")]
    _one_line(_run(["checkpoint", str(ck), "--text", str(tmp_path / "t.txt"), *out]),
              "the model folder has no tokenizer.json")
    _tokenizer(ck, extra_words=30)                     # 53 ids against a vocabulary of 40
    _one_line(_run(["checkpoint", str(ck), "--text", str(tmp_path / "t.txt")]), "give --out DIR")
    _one_line(_run(["checkpoint", str(ck), "--text", str(tmp_path / "t.txt"), "--sequences", "random:1,2,3", *out]),
              "either --sequences or --text")
    _one_line(_run(["checkpoint", str(ck), "--text", str(tmp_path / "latin1.txt"), *out]), "not UTF-8 text (byte 3)")
    _one_line(_run(["checkpoint", str(ck), "--text", str(tmp_path / "empty.txt"), *out]), "no tokens")
    _one_line(_run(["checkpoint", str(ck), "--text", str(tmp_path / "t.txt"), "--text-length", "0", *out]),
              "give T >= 1")
    (tmp_path / "w.txt").write_text(TEXT + " w29", encoding="utf-8")
    _one_line(_run(["checkpoint", str(ck), "--text", str(tmp_path / "w.txt"), *out]),
              "the tokenizer gives id 51 (sequence 0, position 32)")
    assert not (tmp_path / "o").exists()


def test_the_whole_model_check_streams_the_blocks_of_the_plain_model(models):
    """The library check's model holds one block's tensors at a time (built on the meta device,
    each block's tensors assigned just before the library's forward calls it and dropped just
    after): the same hidden states, bit for bit, as its twin, the plain construction with a
    strict copy of every tensor; afterwards no block holds a tensor; a tensor of another dtype
    is refused, never run."""
    import torch
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM

    from certify.sources.sequences import read_sequences
    from certify.sources.thirdparty import load_model
    from models.layouts import reference
    model = load_model(models["hedgehog"])
    det = model.detected
    cfg = LinearAttentionConfig(**{k: v for k, v in det.config.items() if k not in ("library", "class")})
    sub = reference._strip(model.tensors, det.prefix)
    if cfg.tie_word_embeddings and "lm_head.weight" not in sub:
        sub["lm_head.weight"] = sub["model.embeddings.weight"]
    plain = reference._load(LinearAttentionForCausalLM(cfg), sub)
    ids = torch.as_tensor(read_sequences("random:2,8,3", 40).ids)
    with reference._fla_references(), torch.no_grad():
        hb = plain.model(ids, use_cache=False, output_hidden_states=True).hidden_states
        with reference._streamed(LinearAttentionForCausalLM, cfg, model.tensors, det.prefix) as fast:
            ha = fast.model(ids, use_cache=False, output_hidden_states=True).hidden_states
            assert all(t.is_meta for t in fast.model.layers.parameters())      # every block dropped again
            assert not fast.model.embeddings.weight.is_meta
    assert len(ha) == 4 and all(torch.equal(x, y) for x, y in zip(ha, hb))
    key = next(k for k in model.tensors if k.endswith("layers.1.attn.q_proj.weight"))
    wrong = {**model.tensors, key: sub[key[len(det.prefix):]].to(torch.float64)}
    with reference._fla_references(), torch.no_grad(), pytest.raises(ValueError, match="does not fill"):
        with reference._streamed(LinearAttentionForCausalLM, cfg, wrong, det.prefix) as fast:
            fast.model(ids, use_cache=False, output_hidden_states=True)


def test_the_replay_hashes_a_source_shared_by_every_head_once(certified, monkeypatch):
    """The replay's jobs (one per head of every layer) name the same weights file: within one
    replay it is hashed once while unchanged (the check's scratch), not once per head (a
    24-layer model's 1.6 GB file 384 times); a second replay hashes it afresh."""
    from certify.checkers import sources
    from certify.checkpoints import replay as rp
    _, folder = certified["hedgehog"]
    sent: list[str] = []                       # the jobs verify sends to its replay process
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: sent.append(k.get("input", "")) or real_run(*a, **k))
    assert _run(["verify", "--replay-extraction", str(folder / "certificate.json")]).returncode == 0
    jobs = json.loads(sent[-1])
    assert len(jobs) >= 12 and len({j["path"] for j in jobs}) == 1
    hashed: list[int] = []
    real_sha = sources.hashlib.sha256

    class Counting:
        @staticmethod
        def sha256(*a):
            hashed.append(1)
            return real_sha(*a)
    monkeypatch.setattr(sources, "hashlib", Counting)
    got = rp.replay(jobs)
    assert all("error" not in r for r in got.values()), got
    first = len(hashed)
    rp.replay(jobs)
    assert first >= 1 and len(hashed) == 2 * first and first < len(jobs)


def test_a_layer_s_features_recomputed_are_the_forward_s_bits(models):
    """The checkpoint's forward keeps no features (one layer's at a time, recomputed from the
    hidden states entering it; a forward continued from an earlier one's last block): every
    head's features so recomputed are the bits the forward that keeps them all computed, and
    the hidden states are the same (the plain twin)."""
    from certify.sources.sequences import read_sequences
    lean_forward_is_the_plain_one(models["hedgehog"], read_sequences("random:2,8,4", 40).ids, 4)


def test_the_reference_checker_re_derives_every_layer_and_refuses_other_sequences(certified, tmp_path):
    """``verify --reference --replay-extraction``: the independent checker re-derives every
    claim of every layer from the replayed features (the worker re-reads the probe's ids and
    compares their hash); sequences of another shape, or another hash, fail there as in the
    fast path."""
    _, folder = certified["hedgehog"]
    ref = _run(["verify", "--reference", "--replay-extraction", str(folder / "certificate.json")])
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert "all 36 claims re-derived" in ref.stderr
    cert = json.loads((folder / "certificate.json").read_text())
    for name, edit in (("shape", {"sequences": "random:4,12,0"}), ("hash", {"sequences_sha256": "0" * 64})):
        bad = json.loads(json.dumps(cert))
        for c in bad["claims"]:
            c["parameters"].update(edit)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        for extra in (["--reference"], []):
            run = _run(["verify", *extra, "--replay-extraction", str(path)])
            assert run.returncode == 1, (name, extra, run.stderr[-1500:])


def _untimed(claims: list[dict]) -> list[dict]:
    """Claims without their ``timings`` (the seconds each step took: measured, not content)."""
    return [{k: v for k, v in c.items() if k != "timings"} for c in claims]


def _claims_without_run_facts(folder: Path) -> tuple[list, dict]:
    cert = json.loads((folder / "certificate.json").read_text())
    return _untimed(cert["claims"]), cert["inputs"]


def test_a_heads_claims_survive_the_trip_to_a_worker_and_back(models):
    """``--workers``: a head's claims are computed by :func:`head_claims` from its kernel and the
    options alone, which a worker receives pickled, and its claims come back pickled: the same
    claims (and the same JSON) as computed here."""
    import pickle

    from certify.checkpoints.heads import head_claims
    from certify.rank.run import RankOptions
    from certify.sources.sequences import read_sequences
    from certify.sources.thirdparty import load_model, positions_kernel
    model = load_model(str(models["hedgehog"]))
    seqs = read_sequences("random:3,16,0", 40)
    kernel = positions_kernel(model, seqs, layer=2, head=1)
    opt = RankOptions(seed=0, eps=__import__("fractions").Fraction(1, 1000), enclosure_fallback=False)
    here = head_claims(kernel, opt)
    there = pickle.loads(pickle.dumps(head_claims(*pickle.loads(pickle.dumps((kernel, opt))))))
    assert [c.kind.value for c in here] == ["exact_rank", "eps_rank", "nonnegative"]
    assert _untimed([c.to_json() for c in there]) == _untimed([c.to_json() for c in here])


@pytest.mark.slow
def test_workers_on_ray_give_the_certificate_of_one_process(models, certified, tmp_path):
    """``--workers 2`` on a local Ray (started here, so every layer's heads go to its workers):
    the same claims and inputs as the one-process run, and the replay exits 0."""
    import ray

    from certify.core.engine import init_local
    init_local(2)
    try:
        folder = tmp_path / "two"
        run = _run(["checkpoint", str(models["hedgehog"]), "--sequences", "random:3,16,0", "--workers", "2",
                    "--out", str(folder), "--no-progress"])
        assert run.returncode == 0, run.stderr[-2000:]
        assert "running them here" not in run.stderr
    finally:
        ray.shutdown()
    assert _claims_without_run_facts(folder) == _claims_without_run_facts(certified["hedgehog"][1])
    assert _run(["verify", "--replay-extraction", str(folder / "certificate.json")]).returncode == 0
