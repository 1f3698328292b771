"""``certify verify --reference`` where its first version left gaps, each closed and
pinned against the fast ``verify`` (the same exit code) and against a planted wrong
answer: the sentence, contradictions across claims, the built-in families rebuilt,
transcripts through exp / elu1 (arb balls), the enumeration assumption, and the
weights' canonical hash of a safetensors file.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from committed import ROOT

from certify.checkers import statements
from certify.checkers.verify import verify_many
from certify.cli.rank import main as rank_main
from certify.reference import builtin, files
from certify.reference import transcript as ref_transcript
from certify.reference.check import check_many
from certify.reference.exact import Fails, Refused, canonical_sha256
from certify.reference.families import bind_name

CKPTS = ROOT / "models" / "checkpoints"


def exits(*certs: tuple[str, dict, Path | None]) -> tuple[int, int]:
    """(fast verify's exit code, the reference's) of one call on ``certs``."""
    from certify.checkers.verify import combined_exit
    from certify.reference.check import combined_exit as ref_exit
    fast = combined_exit(verify_many(list(certs)))
    try:
        ref = ref_exit(check_many(list(certs)))
    except Refused:
        ref = 2
    return fast, ref


def rerender(claim: dict, cert: dict) -> None:
    claim["statement"] = statements.render(claim["kind"], claim["parameters"], claim["evidence"],
                                           cert["renderer"]).text


def produce(folder: Path, name: str, arrays: dict) -> dict:
    """A genuine ``certify rank`` certificate of an ``.npz`` file written in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / name, **arrays)
    out = folder / (name + ".cert.json")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert rank_main([str(folder / name), "--out", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def small_transcript():
    from certify.transcript.model import ModelRequest
    from certify.transcript.run import run_transcript
    return run_transcript(ModelRequest(bits=2), 6, 2, 3, 2).certificate.to_json()


# ---------------------------------------------------------------- 1. the sentence

def test_an_edited_sentence_fails_both_paths(small_transcript):
    cert = json.loads(json.dumps(small_transcript))
    assert exits(("c", cert, None)) == (0, 0)
    i = next(i for i, c in enumerate(cert["claims"]) if c["kind"] == "transcript")
    cert["claims"][i]["statement"] = cert["claims"][i]["statement"].replace("error < 1/2", "error < 1/4")
    assert cert["claims"][i]["statement"] != small_transcript["claims"][i]["statement"]
    assert exits(("c", cert, None)) == (1, 1)
    problems = check_many([("c", cert, None)])[0].claims[i].problems
    assert any("stored statement is not the one its parameters say" in p for p in problems)


def test_a_parameter_the_sentence_does_not_print_fails(small_transcript):
    """The field-table rule: a parameter of the kind's table that the rendering did not read."""
    cert = json.loads(json.dumps(small_transcript))
    i = next(i for i, c in enumerate(cert["claims"]) if c["kind"] == "bound")
    cert["claims"][i]["parameters"]["family"] = "paper-5.1"
    fast, ref = exits(("c", cert, None))
    assert fast == ref == 1


# ---------------------------------------------------------------- 2. contradictions

def test_two_ranks_of_one_absent_file_under_assumption_contradict(tmp_path):
    """Two certificates name one features file (its sha256) that is absent, each
    embedding other features (rank 3, rank 4): alone each holds under source:NAME
    (exit 4); together they say one kernel has rank 3 and rank 4 (exit 1, both paths)."""
    rng = np.random.default_rng(5)

    def feats(r):
        return {"phi_q": rng.integers(-3, 4, (8, r)).astype(np.float64),
                "phi_k": rng.integers(-3, 4, (8, r)).astype(np.float64)}
    a = produce(tmp_path / "a", "F.npz", feats(3))
    b = produce(tmp_path / "b", "F.npz", feats(4))
    ranks = {c["evidence"]["rank_upper"] for cert in (a, b) for c in cert["claims"] if c["kind"] == "exact_rank"}
    assert ranks == {3, 4}
    (tmp_path / "a" / "F.npz").unlink()
    (tmp_path / "b" / "F.npz").unlink()
    (name, sha), = a["inputs"].items()
    for c in b["claims"]:
        c["parameters"]["source"], c["parameters"]["source_sha256"] = name, sha
        rerender(c, b)
    b["inputs"] = dict(a["inputs"])
    A, B = ("a.json", a, tmp_path / "a"), ("b.json", b, tmp_path / "b")
    assert exits(A) == (4, 4) and exits(B) == (4, 4)
    assert exits(A, B) == (1, 1)
    out = check_many([A, B])
    assert any("contradiction" in p for r in out for c in r.claims for p in c.problems)
    assert exits(A, A) == (4, 4)              # a certificate does not contradict itself


def test_one_sentence_proved_and_refuted_contradicts(small_transcript):
    from certify.reference.contradictions import contradictions
    claim = next(c for c in small_transcript["claims"] if c["kind"] == "bound")
    other = {**claim, "verdict": "refuted"}
    found = contradictions([("x", 0, claim), ("y", 3, other)])
    assert set(found) == {("x", 0), ("y", 3)}
    assert contradictions([("x", 0, claim), ("y", 3, claim)]) == {}


# ---------------------------------------------------------------- 3. built-in families

@pytest.mark.parametrize("name", ["multilevel-M12-s3-h6-q4", "multilevel-M8-s1-h4-q3",
                                  "multilevel-M6-s2-h3-q2", "ood-6-4-8-train", "ood-6-4-8-test",
                                  "ood-12-4-8-test", "ood-24-2-4-train"])
def test_builtin_family_rebuilt_is_the_builders(name):
    """Each built-in name's content, rebuilt by the reference from its definition, has
    the sha256 of the family the project's builder makes."""
    from certify.core.families import load_family
    from certify.core.families.multilevel import multilevel_spec
    if name.startswith("multilevel"):
        M, s, h, q = (int(v) for v in builtin.MULTILEVEL.fullmatch(name).groups())
        fam = multilevel_spec(M, s, h, q).family()
    else:
        fam = load_family(name)
    assert fam.name == name
    body = builtin.rebuild(name)
    assert canonical_sha256(body) == fam.sha256
    assert bind_name(name, fam.sha256) == ([], [])
    assert bind_name(name, "0" * 64)[0]                       # another content under the name


def test_builtin_names_beyond_the_limits_or_of_no_family():
    assert bind_name("multilevel-M12-s1-h6-q17", "0" * 64) == ([], ["family:multilevel-M12-s1-h6-q17"])
    assert bind_name("ood-26-4-8-train", "0" * 64) == ([], ["family:ood-26-4-8-train"])
    for name in ("multilevel-M6-s0-h3-q2", "multilevel-M6-s1-h7-q2", "multilevel-M6-s5-h3-q3",
                 "ood-6-4-9-train", "ood-7-4-8-test"):
        problems, assumptions = bind_name(name, "0" * 64)
        assert problems and not assumptions, name
    with pytest.raises(Fails):
        builtin.multilevel("multilevel-M6-s5-h3-q3")        # the greedy code has one word


def test_splitmix64_is_the_published_stream():
    """SplitMix64 from seed 0: the first outputs of Vigna's reference implementation."""
    s = builtin.Stream(0)
    assert [s.draw() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


def test_transcript_code_must_be_the_greedy_one(small_transcript):
    cert = json.loads(json.dumps(small_transcript))
    i = next(i for i, c in enumerate(cert["claims"]) if c["kind"] == "transcript")
    words = cert["claims"][i]["evidence"]["family"]["words"]
    cert["claims"][i]["evidence"]["family"]["words"] = words[::-1]     # the same code, reordered
    fast, ref = exits(("c", cert, None))
    assert fast == ref == 1
    assert any("greedy" in p for p in check_many([("c", cert, None)])[0].claims[i].problems)


# ---------------------------------------------------------------- 4. exp and elu1 in balls

@pytest.mark.parametrize("fmap", ["elu1", "exp"])
@pytest.mark.parametrize("model", ["builtin-injective", "random"])
def test_ball_transcripts_agree(fmap, model):
    from certify.transcript.model import ModelRequest
    from certify.transcript.run import run_transcript
    cert = run_transcript(ModelRequest(bits=2, model=model, feature_map=fmap), 6, 2, 3, 2).certificate.to_json()
    t = next(c for c in cert["claims"] if c["kind"] == "transcript")
    assert t["evidence"]["type"] == {"builtin-injective": "all", "random": "collision"}[model]
    assert exits(("c", cert, None)) == (0, 0)


def test_an_undecided_ball_fails_as_in_verify(monkeypatch):
    """At two bits of precision the balls of a random exp model's sketch are too wide to
    decide a cell: the claim fails (exit 1), the outcome verify gives an undecided replay."""
    from certify.transcript.model import ModelRequest
    from certify.transcript.run import run_transcript
    cert = run_transcript(ModelRequest(bits=2, model="random", feature_map="exp"), 6, 2, 3,
                          2).certificate.to_json()
    assert check_many([("c", cert, None)])[0].exit_code() == 0
    monkeypatch.setattr(ref_transcript, "PRECISION", 2)
    out = check_many([("c", cert, None)])[0]
    assert out.exit_code() == 1
    assert any("not certain" in p for c in out.claims for p in c.problems)


# ---------------------------------------------------------------- 5. the enumeration assumption

def test_enumeration_assumption_where_the_format_replays_fails(small_transcript):
    cert = json.loads(json.dumps(small_transcript))
    i = next(i for i, c in enumerate(cert["claims"]) if c["kind"] == "transcript")
    assert cert["claims"][i]["evidence"]["type"] == "all"
    cert["claims"][i]["evidence"]["assumptions"] = ["replay:transcript-enumeration"]
    assert exits(("c", cert, None)) == (1, 1)


def test_enumeration_assumption_above_the_replay_limits_holds_under_it(small_transcript, monkeypatch):
    """With both replay limits below the family's 9 assignments, the named assumption
    holds (exit 4, the same name) after the seeded spot check; a model that errs at
    a spot-checked assignment fails."""
    from certify.checkers import transcript as fast_transcript
    for mod, names in ((fast_transcript, ("MAX_ALL", "MAX_INTEGER")),
                       (ref_transcript, ("REPLAYED", "INTEGER_REPLAYED"))):
        for n in names:
            monkeypatch.setattr(mod, n, 4)
    cert = json.loads(json.dumps(small_transcript))
    i = next(i for i, c in enumerate(cert["claims"]) if c["kind"] == "transcript")
    ev = cert["claims"][i]["evidence"]
    assert exits(("c", cert, None)) == (1, 1)                 # no assumption named: beyond both
    ev["assumptions"] = ["replay:transcript-enumeration"]
    assert exits(("c", cert, None)) == (4, 4)
    assert "replay:transcript-enumeration" in check_many([("c", cert, None)])[0].assumptions
    w = ev["model"]["weights"]["readout.bias"]
    w["ints"] = [w["ints"][0] + (7 << max(0, -w["exp"]))]     # every output off by 7
    ev["model"]["weights_sha256"] = canonical_sha256(ev["model"]["weights"])
    cert["claims"][i]["parameters"]["weights_sha256"] = ev["model"]["weights_sha256"]
    rerender(cert["claims"][i], cert)
    assert exits(("c", cert, None)) == (1, 1)


# ---------------------------------------------------------------- 6. the weights' canonical hash

@pytest.mark.parametrize("name", ["paper51-lookup-r8-s0", "ood-6-4-8-elu1-r8-s0"])
def test_safetensors_hash_is_the_checkers(name):
    from certify.checkers.tensors import safetensors_sha256
    path = CKPTS / (name + ".safetensors")
    assert files.safetensors_sha256(path) == safetensors_sha256(path)


def test_safetensors_sizes_checked_before_reading(tmp_path):
    src = (CKPTS / "paper51-lookup-r8-s0.safetensors").read_bytes()
    n = int.from_bytes(src[:8], "little")
    cases = {"long header": (len(src)).to_bytes(8, "little") + src[8:],
             "cut data": src[:-1],
             "not JSON": src[:8] + b"{" * n + src[8 + n:]}
    header = json.loads(src[8:8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["shape"] = [d + 1 for d in header[name]["shape"]]
    text = json.dumps(header).encode().ljust(n)
    cases["shape"] = src[:8] + text[:n] + src[8 + n:]
    for what, data in cases.items():
        p = tmp_path / f"{what}.safetensors"
        p.write_bytes(data)
        with pytest.raises(Fails):
            files.safetensors_sha256(p)


def test_a_weights_hash_that_is_not_the_files_fails(tmp_path):
    """A checkpoint head's claim naming other weights (its sentence re-rendered): the file
    beside it is re-hashed by both paths without any replay, and the claim fails."""
    cert = json.loads((ROOT / "reports" / "reference" / "checkpoint-paper51-lookup-r8-s0.json").read_text())
    for ext in (".json", ".safetensors"):
        shutil.copy(CKPTS / ("paper51-lookup-r8-s0" + ext), tmp_path)
    srcs = {c["parameters"].get("source") for c in cert["claims"]}
    assert any(str(s).endswith(".safetensors") for s in srcs)
    assert exits(("c", cert, tmp_path)) == (4, 4)
    i = next(i for i, c in enumerate(cert["claims"]) if "weights_sha256" in c["parameters"])
    cert["claims"][i]["parameters"]["weights_sha256"] = "ab" * 32
    rerender(cert["claims"][i], cert)
    assert exits(("c", cert, tmp_path)) == (1, 1)
    problems = check_many([("c", cert, tmp_path)])[0].claims[i].problems
    assert any("canonical sha256" in p for p in problems)


# ---------------------------------------------------------------- 7. what a replay finds

def test_a_replay_that_finds_other_stated_arguments_fails_both(tmp_path, monkeypatch):
    """Found by the oracle: a checkpoint certificate whose stated kernel argument is edited (its
    sentences re-rendered) holds under ``extraction:`` on both paths (exit 4, nothing replayed);
    with ``--replay-extraction`` the replay builds the head the config gives and answers
    "differs": fast verify failed the claim (exit 1), the reference took that answer for a
    replay that could not run and named the assumption (exit 4). Both fail it now."""
    from certify.cli import run
    monkeypatch.chdir(ROOT)                        # the certificate names its inputs from the root
    cert = json.loads((ROOT / "reports" / "gallery" / "lat" / "certificate.json").read_text())
    for c in cert["claims"]:
        c["parameters"]["stated"]["blindspot_size"]["value"] = 2
        rerender(c, cert)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cert))

    def verify(*args: str) -> int:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return run("verify", [*args, str(path)])
    assert (verify(), verify("--reference")) == (4, 4)
    assert (verify("--replay-extraction"), verify("--reference", "--replay-extraction")) == (1, 1)


def test_a_replay_of_features_in_another_dtype_answers_differs():
    """A claim whose features are said to be float32 where the extraction gives float64 is a
    claim about other features: the replay answers "differs" (both checkers fail the claim),
    not an error (which both would name as an assumption left open, exit 4)."""
    from certify.checkpoints.replay import replay
    job = {"key": "k", "source": "models.constructions.thm2_exact_features(4, 3)", "path": None,
           "source_sha256": None, "adapter": "construction", "token_set": "cube:4", "stated": None,
           "want": [["0" * 64, "0" * 64]]}
    same = replay([{**job, "dtype": "float64"}])["k"]["phi_q"]
    assert len(same) == 64 and set(same) <= set("0123456789abcdef")        # a hash: the features
    got = replay([{**job, "dtype": "float32"}])["k"]
    assert "error" not in got and got["phi_q"].startswith("differs: the features come out as float64")


def test_a_closed_form_power_too_large_to_form_ends_at_once_on_both():
    """Found by the bounded-work test: Thm 5's ``lam = mu^floor(delta/g)`` at ``delta = 4e9`` (a
    count the schema allows) took 15 CPU s of fast verify before failing, and the reference
    formed the same power. Both now refuse before forming it: verify fails the claim (exit 1),
    the reference refuses the size (exit 2, its convention for its limits, docs/trust.md)."""
    cert = json.loads((ROOT / "reports" / "reference" / "bounds.json").read_text())
    i = next(i for i, c in enumerate(cert["claims"]) if c["parameters"].get("bound") == "thm5")
    cert["claims"][i]["parameters"]["delta"] = 4 * 10 ** 9
    rerender(cert["claims"][i], cert)
    assert exits(("c.json", cert, None)) == (1, 2)
