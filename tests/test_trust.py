"""A certificate says exactly what it names: every field a sentence reads is bound.

Built fresh from the project's own commands, then edited as a skeptical reader
would: each forgery must fail ``certify verify`` with its reason, and the
enumerating test mutates every field the renderer's own field table lists for
each claim kind (parameters and evidence alike).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from fractions import Fraction
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from committed import report_json

from certify.checkers import contradictions, kinds, scratch, statements, verify
from certify.checkers import transcript as transcript_checker
from certify.checkers.binding import token_list_sha256
from certify.checkers.common import canonical_sha256
from certify.checkers.families import PAPER51_CODE
from certify.core.certificate import Certificate

ROOT = Path(__file__).resolve().parents[1]
CKPTS = ROOT / "models" / "checkpoints"


def _rerender(claim, renderer=statements.RENDERER):
    """What a forger does after an edit: render the statement again, so that the
    statement check alone cannot be what catches the edit."""
    try:
        claim["statement"] = statements.render(claim["kind"], claim["parameters"],
                                               claim["evidence"], renderer).text
    except statements.RenderError:
        pass


def _verify(*certs, base=None, replayed=None):
    return verify.verify_many([(f"cert{i}", c, base) for i, c in enumerate(certs)],
                              replayed=replayed or {})


def _problems(r) -> list[str]:
    return [p for c in r.claims for p in c.problems]


# ---------------------------------------------------------------- the certificates

@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("trust")


@pytest.fixture(scope="module")
def checkpoint_certs(work):
    """The r8 (refuted on paper-5.1) and r32 (solves it) committed checkpoints,
    certified here, copied beside their certificates so verify re-reads them."""
    import os

    from certify.checkpoints.run import certify_checkpoint
    out = {}
    here = os.getcwd()
    os.chdir(work)                       # sources named relative to the certificates' folder
    try:
        for name in ("paper51-lookup-r8-s0", "paper51-lookup-r32-s0"):
            for ext in (".json", ".safetensors"):
                shutil.copy(CKPTS / (name + ext), work / (name + ext))
            res = certify_checkpoint(name, families=["paper-5.1"])
            out[name] = res.certificate.to_json()
    finally:
        os.chdir(here)
    return out


@pytest.fixture(scope="module")
def rank_cert(work):
    """exact_rank, eps_rank, code_rank and nonnegative on a factor kernel whose 41
    tokens are an explicit list (a kernel file with tokens), and on the cube."""
    from certify.core.codes import paper51_code
    from certify.core.families import paper51_family
    from certify.rank.options import RankOptions
    from certify.rank.run import certify_rank
    from certify.sources.load import load_kernel
    rng = np.random.default_rng(3)
    toks = paper51_family().tokens
    np.savez(work / "f.npz", phi_q=np.abs(rng.normal(size=(41, 5))),
             phi_k=np.abs(rng.normal(size=(41, 5))), tokens=toks)
    k = load_kernel(str(work / "f.npz"))
    opt = RankOptions(eps=Fraction(1, 100), code=paper51_code(), code_name="paper-5.1",
                      require_nonnegative=True)
    cert = certify_rank(k, opt).certificate.to_json()
    other = certify_rank(k, RankOptions(code=paper51_code()[:10], code_name="ten-words"))
    cert["claims"] += [c for c in other.certificate.to_json()["claims"] if c["kind"] == "code_rank"]
    return cert


@pytest.fixture(scope="module")
def feasibility_cert():
    from certify.core.families import load_family
    from certify.feasibility.decide import decide
    from certify.feasibility.model import Features
    fam = load_family("paper-5.1")
    claims = [decide(fam, r, Features.REAL, time_limit=5).to_claim() for r in (8, 15)]
    return Certificate(claims=claims, inputs={f"family:{fam.name}": fam.sha256}).to_json()


@pytest.fixture(scope="module")
def transcript_cert():
    from certify.transcript.model import ModelRequest
    from certify.transcript.run import run_transcript
    run = run_transcript(ModelRequest(bits=2), 12, 3, 6, 4)
    return run.certificate.to_json()


@pytest.fixture(scope="module")
def transcript_small():
    """The same check on a 9-assignment family (every edit re-checks it)."""
    from certify.transcript.model import ModelRequest
    from certify.transcript.run import run_transcript
    return run_transcript(ModelRequest(bits=2), 6, 2, 3, 2).certificate.to_json()


@pytest.fixture(scope="module")
def bound_cert():
    from certify.core import bounds
    return Certificate(claims=[bounds.bound_claim(bounds.thm6(200)),
                               bounds.bound_claim(bounds.lemma3(3, "1/2", 3))]).to_json()


# ---------------------------------------------------------------- every field, every kind

#: the parameters a sentence prints as names (declared so in certify/checkers/kinds.py): any
#: edit that changes the sentence must fail
NAME_FIELDS = kinds.name_fields()


def _lies(kind: str, where: str, key: str, value, claim):
    """Edits of a field that make its sentence false (a value field edited so that
    the sentence still holds is no forgery: e.g. 'no rank-9 head' where the
    evidence excludes every rank up to 11)."""
    ev, verdict = claim["evidence"], claim["verdict"]
    if kind == "bound" and where == "parameters":   # a closed form's inputs: re-derived at
        return                                      # other inputs the sentence may hold
    if where == "evidence" or key in NAME_FIELDS:
        yield from _edits(key, value)
        return
    if verdict == "unknown":        # asserts nothing of its values (a budget ran out at rank 12:
        return                      # "unknown at rank 11" is no lie); its names are bound above
    if key == "rank" and isinstance(value, int):                # (a theorem on the cube has none)
        yield value + 30 if kind == "infeasible" else value - 1
    elif key == "eps" and kind == "eps_rank":
        yield str(Fraction(value) * 10 ** 9)
    elif key == "eps" and verdict == "proved" and ev.get("max_error") not in (None, "0"):
        yield ev["max_error"]                                   # error < max_error is false
    elif key == "error":
        yield "1/4"
    # features / class / scope: whether a witness is also nonnegative, or a bound
    # also holds in the other class, is decided by the feasibility checker from
    # the witness itself (tests/test_feasibility.py); an edit here can be true.


def _edits(key: str, value):
    """Any other value of a name field (or a re-derived evidence value)."""
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield value + 1
        yield value * 2 + 3
    elif isinstance(value, str):
        if value.startswith("cube:"):
            yield f"cube:{int(value[5:]) + 1}"
            yield "tokens"
        elif key == "token_set":
            yield "cube:24"
            yield "family:ood-6-4-8-test"          # a built-in family with other tokens
        elif len(value) == 64 and all(c in "0123456789abcdef" for c in value):
            yield ("0" if value[0] != "0" else "1") + value[1:]
        elif "/" in value and value.replace("/", "").replace("-", "").isdigit():
            q = Fraction(value)
            yield str(q / 2)
            yield str(q * 2)
        elif key == "code":
            yield "paper-5.1" if value != "paper-5.1" else "greedy-12-6-3"
        else:
            yield value + "x"
            yield "paper51-lookup-r32-s0.safetensors"
    elif isinstance(value, list):
        yield [v + 1 if isinstance(v, int) else v for v in value]
    elif isinstance(value, dict):
        if "bits" in value:
            yield {**value, "bits": value["bits"] + 1}
            yield {**value, "hi": str(Fraction(value["hi"]) * 2)}
        elif "inputs" in value:                 # an embedded family: one input fewer
            fam = {**value, "inputs": value["inputs"][:-1], "scored": value["scored"][:-1],
                   "targets": value["targets"][:-1]}
            fam["sha256"] = canonical_sha256({k: v for k, v in fam.items() if k != "sha256"})
            yield fam


@pytest.fixture(scope="module")
def theorem_cert():
    """Thm 1 (exact and balls), Thm 6 part 1 and Thm 8 on a small chain family with positions."""
    from certify.audit.theorems import cube_claim, positional_claim
    from certify.core.families import chain_family
    from certify.core.families.positional import causal_family
    from models.constructions import thm8_positional_lookup
    from tests.oracle.genuine import small_chain_code
    fam = causal_family(chain_family(small_chain_code(), name="greedy-10-5-3"))
    claims = [cube_claim("thm1", 2, 3), cube_claim("thm1", 2, 3, tau="2"), cube_claim("thm6", 2, 2),
              positional_claim(fam, thm8_positional_lookup(fam))]
    return Certificate(claims=claims, inputs={f"family:{fam.name}": fam.sha256}).to_json()


def _cases(request):
    certs = [request.getfixturevalue(n) for n in
             ("rank_cert", "feasibility_cert", "transcript_small", "bound_cert", "theorem_cert")]
    ck = request.getfixturevalue("checkpoint_certs")
    certs += list(ck.values())
    return certs


def test_the_field_table_covers_what_each_sentence_reads(request):
    """Rendering every claim records the fields it reads: all are in FIELDS."""
    for cert in _cases(request):
        for c in cert["claims"]:
            if c["kind"] == "bound":
                continue
            reads: set = set()
            statements.render(c["kind"], c["parameters"], c["evidence"], reads=reads)
            missing = reads - set(statements.FIELDS[c["kind"]])
            assert not missing, f"{c['kind']} reads {missing} outside its field table"


def _forge_every_field(cert: dict, base: Path, covered: dict[str, set]) -> None:
    """Every lie of :func:`_lies` in every printed field of every claim of ``cert``: each
    one that changes the sentence must fail ``verify``; ``covered`` collects the fields."""
    for i, c in enumerate(cert["claims"]):
        kind = c["kind"]
        fields = statements.FIELDS.get(kind)
        if fields is None:                                   # bound: every input
            fields = [("parameters", k) for k in c["parameters"]] + \
                     [("evidence", k) for k in c["evidence"]]
        for where, key in fields:
            value = c[where].get(key)
            for new in _lies(kind, where, key, value, c):
                # the claim with the one field changed (the rest shared, never written)
                fc = {**c, where: {**c[where], key: new}}
                forged = {**cert, "claims": [*cert["claims"][:i], fc, *cert["claims"][i + 1:]]}
                before = c["statement"]
                _rerender(fc)
                if fc["statement"] == before:
                    continue                       # the sentence says the same thing
                r = verify.check_claim(i, fc, forged, base)
                # holding only under an assumption that names the edited value is exit 4, the
                # edit printed (a construction's name, say, when the extraction is not replayed)
                named = isinstance(new, str) and any(new in a for a in r.assumptions)
                assert not r.holds or named, \
                    f"{kind}: {where}.{key} = {new!r:.60} changed the sentence and verify " \
                    f"accepted it: {fc['statement'][:200]}"
                covered.setdefault(kind, set()).add(f"{where}.{key}")


@pytest.mark.parametrize("committed", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["every-edit", "every-edit-committed"])
def test_every_printed_field_of_every_kind_is_bound(request, work, capsys, committed):
    """For each claim kind and each field its sentence reads (the renderer's own
    table): every edit of a name (a source, token set, code, model, family, hash or
    count) and of a re-derived evidence value, and an edit of each value
    parameter that makes the sentence false, either fails verify or leaves the
    sentence unchanged. The default suite edits every field of every claim of the
    certificates made here (one or more per claim shape); ``--runslow`` also every
    claim of every committed certificate."""
    covered: dict[str, set] = {}
    cases = [(cert, work) for cert in _cases(request)]
    if committed:
        from committed import report_json
        for path in report_json():
            doc = json.loads(path.read_text())
            if str(doc.get("schema", "")).startswith("certify-attention/certificate/"):
                cases.append((doc, path.parent))
    for cert, base in cases:
        untouched = json.dumps(cert, sort_keys=True)        # the forgeries share its parts
        with scratch.session():      # one scratch for a certificate's forgeries, as verify shares
            _forge_every_field(cert, base, covered)   # one for its claims (keys: complete content)
        assert json.dumps(cert, sort_keys=True) == untouched, "verify wrote into a certificate"
    with capsys.disabled():
        for kind in sorted(covered):
            print(f"\n  {kind}: {', '.join(sorted(covered[kind]))}", end="")
    assert set(covered) >= {"exact_rank", "eps_rank", "code_rank", "nonnegative", "feasible",
                            "infeasible", "correctness", "gap_domination", "transcript", "bound",
                            "theorem"}
    kernel = {"parameters.source", "parameters.source_sha256", "parameters.token_set",
              "parameters.num_tokens", "parameters.tokens_sha256"}
    for kind in ("exact_rank", "eps_rank", "code_rank", "nonnegative"):
        assert kernel <= covered[kind], (kind, kernel - covered[kind])
    assert {"parameters.code", "parameters.code_sha256"} <= covered["code_rank"]
    assert {"parameters.source", "parameters.weights_sha256", "parameters.family"} \
        <= covered["correctness"]
    assert {"parameters.weights_sha256", "parameters.quantizer"} <= covered["transcript"]
    assert {"parameters.family", "parameters.head_sha256", "parameters.rank", "parameters.eps",
            "evidence.sequences", "evidence.effective_rank", "evidence.rank_bound"} <= covered["theorem"]


# ---------------------------------------------------------------- the forgeries of the issue

def _relabel_model(cert, src_name, work):
    """Make every claim of ``cert`` about the checkpoint ``src_name`` (its file, the
    file's sha256 and the canonical hash of its weights), keeping the evidence."""
    from certify.checkers.tensors import safetensors_sha256
    from certify.core.files import sha256_file
    f = work / (src_name + ".safetensors")
    forged = copy.deepcopy(cert)
    forged["inputs"] = {str(f.name): sha256_file(f), **{k: v for k, v in forged["inputs"].items()
                                                       if k.startswith("family:")}}
    for c in forged["claims"]:
        if "source" in c["parameters"]:
            c["parameters"].update(source=f.name, source_sha256=sha256_file(f))
            if "weights_sha256" in c["parameters"]:
                c["parameters"]["weights_sha256"] = safetensors_sha256(f)
        _rerender(c)
    return forged


def test_a_relabelled_model_is_caught(checkpoint_certs, work):
    """r8's refuted correctness claim relabelled as r32's: the sentence now names
    r32's file and weights. Alone it only holds assuming the extraction (never exit
    0); the replay re-derives r32's head and fails it; beside r32's certificate it
    contradicts the proved claim of the same sentence."""
    r8, r32 = checkpoint_certs["paper51-lookup-r8-s0"], checkpoint_certs["paper51-lookup-r32-s0"]
    forged = _relabel_model(r8, "paper51-lookup-r32-s0", work)
    corr = next(c for c in forged["claims"] if c["kind"] == "correctness")
    assert "paper51-lookup-r32-s0.safetensors" in corr["statement"]
    alone = verify.verify_certificate(forged, base=work)
    assert alone.exit_code() != 0
    both = _verify(forged, _relabel_model(r32, "paper51-lookup-r32-s0", work), base=work)
    # the sentence names r8's tables beside r32's weights: the same head by its weights
    assert any("contradiction" in p and "same head" in p for p in _problems(both[0]))
    # a label of the v1 kind that names another file than the one bound
    v1 = copy.deepcopy(r8)
    c = next(c for c in v1["claims"] if c["kind"] == "correctness")
    c["parameters"]["model"] = "paper51-lookup-r32-s0"
    r = verify.verify_certificate(v1, base=work)
    assert any("not the name of the weights file" in p for p in r.claims[v1["claims"].index(c)].problems)
    # the weights hash is re-derived from the present safetensors file
    w = copy.deepcopy(r8)
    c = next(c for c in w["claims"] if c["kind"] == "correctness")
    c["parameters"]["weights_sha256"] = "0" * 64
    _rerender(c)
    r = verify.verify_certificate(w, base=work)
    assert any("canonical sha256" in p for p in r.claims[w["claims"].index(c)].problems)


def test_a_relabelled_token_set_is_caught(rank_cert, work):
    """alpha >= 0 on 41 tokens relabelled 'the whole cube {0,1}^24'."""
    forged = copy.deepcopy(rank_cert)
    i = next(i for i, c in enumerate(forged["claims"]) if c["kind"] == "nonnegative")
    c = forged["claims"][i]
    c["parameters"].update(token_set="cube:24", num_tokens=1 << 24)
    c["parameters"].pop("tokens_sha256", None)
    _rerender(c)
    assert "{0,1}^24" in c["statement"]
    r = verify.verify_certificate(forged, base=work)
    assert any("token counts disagree" in p for p in r.claims[i].problems)
    # or as another token list of the same size
    forged = copy.deepcopy(rank_cert)
    c = forged["claims"][i]
    other = ["1" * 24] + rank_cert["claims"][i]["evidence"]["tokens"][1:]
    c["parameters"]["tokens_sha256"] = token_list_sha256(other)
    _rerender(c)
    r = verify.verify_certificate(forged, base=work)
    assert any("tokens_sha256 is not the hash" in p for p in r.claims[i].problems)


def test_a_relabelled_code_is_caught(rank_cert, work):
    """A Lemma 4 claim on another code relabelled paper-5.1."""
    forged = copy.deepcopy(rank_cert)
    i = next(i for i, c in enumerate(forged["claims"]) if c["kind"] == "code_rank")
    c = forged["claims"][i]
    words = list(c["evidence"]["words"])
    words[0], words[1] = words[1], words[0]                  # another word order: another list
    c["evidence"]["words"] = words
    c["parameters"]["code_sha256"] = PAPER51_CODE[1]
    _rerender(c)
    assert "code paper-5.1" in c["statement"]
    r = verify.verify_certificate(forged, base=work)
    assert any("not the hash of the embedded words" in p for p in r.claims[i].problems)


def _gated_model():
    """The built-in injective model of multilevel (12, 3, 6, 4) with word 0's key
    feature reading the level vector through c = (1, -1, 0): on the family's level
    vectors u_k = 1^k 0^(3-k) the feature is 1 + c.u_k in {1, 2} and the output is
    still k exactly (2-bit sketches), so the model solves all 256 inputs; on the
    rearranged vector (0, 1, 0) -- weight 1, not an input of the family -- the
    feature is 0, the denominator vanishes and the output 0 misses the target 1."""
    from certify.core.families import multilevel_spec
    from certify.transcript.model import QuantizedSketchModel
    from models.sketch import builtin_uniform_quantizer, injective_model
    spec = multilevel_spec(12, 3, 6, 4)
    cfg, W = injective_model(spec.words, spec.M, spec.s)
    W = {k: v.copy() for k, v in W.items()}
    lv = 2 + spec.M                                           # first level coordinate
    W["layers.0.heads.0.k.weight"][0, lv] += 1.0
    W["layers.0.heads.0.k.weight"][0, lv + 1] -= 1.0
    return spec, QuantizedSketchModel(cfg, W, builtin_uniform_quantizer(2), "gated")


def test_a_counterexample_outside_the_family_is_caught():
    """A model that solves every input of the family (proved here, exactly) errs
    on a sequence whose level vector has the right weight but not the family's
    arrangement; a refutation built on that sequence fails: it is not an input."""
    from certify.core.certificate import Certificate
    from certify.transcript.run import check_transcript
    spec, model = _gated_model()
    res = check_transcript(spec, model, progress=False)
    assert res.verdict.value == "proved"
    cert = Certificate(claims=list(res.claims)).to_json()
    j = next(i for i, c in enumerate(cert["claims"]) if c["kind"] == "transcript")
    ev = cert["claims"][j]["evidence"]
    cfg = ev["model"]["config"]
    W = transcript_checker._weights(ev["model"], cfg)
    quant = transcript_checker._Quant(ev["model"]["quantizer"])
    words = [[int(b) for b in w] for w in ev["family"]["words"]]
    q, s = 4, 3
    kappa = [1, 0, 0, 0]
    bad = transcript_checker._canonical_input(kappa, words, 12, s, q)
    bad[q][14:] = [0, 1, 0]                                   # weight 1, other arrangement
    _, ys, ops = transcript_checker.replay(cfg, W, quant, bad)
    t = transcript_checker._min_ip(bad)[:q]
    assert t == kappa and ys[0] == 0 and ops.at_least(abs(ys[0] - t[0]), Fraction(1, 2))
    # the weight-only test that this checker once used would have accepted it
    assert all(sum(bad[q + i][14:]) == kappa[i] for i in range(q))
    c = cert["claims"][j]
    c["verdict"], c["reason"] = "refuted", "an input errs"
    c["evidence"] = {k: v for k, v in ev.items() if k in ("capacity", "family", "model")}
    c["evidence"].update({"type": "error", "kappa": kappa,
                          "index": transcript_checker._index(kappa, s),
                          "input": ["".join(map(str, r)) for r in bad], "position": 0,
                          "target": t[0], "output": str(ys[0])})
    _rerender(c)
    r = verify.verify_certificate(cert)
    assert any("not a multilevel input" in p for p in r.claims[j].problems)


def test_one_sentence_proved_and_refuted_fails_both(checkpoint_certs, work):
    """r32's proved correctness claim relabelled as r8's: each certificate holds
    alone (assuming the extraction), together they say one sentence is proved and
    refuted: both claims fail, each naming the other."""
    r8 = checkpoint_certs["paper51-lookup-r8-s0"]
    forged = _relabel_model(checkpoint_certs["paper51-lookup-r32-s0"], "paper51-lookup-r8-s0", work)
    assert verify.verify_certificate(forged, base=work).holds              # alone: exit 4
    a, b = _verify(forged, r8, base=work)
    ia = next(i for i, c in enumerate(forged["claims"]) if c["kind"] == "correctness")
    ib = next(i for i, c in enumerate(r8["claims"]) if c["kind"] == "correctness")
    assert any(f"claim {ib} of cert1" in p for p in a.claims[ia].problems)
    assert any(f"claim {ia} of cert0" in p for p in b.claims[ib].problems)


def test_correctness_and_transcript_contradictions_across_certificates(checkpoint_certs,
                                                                       transcript_cert, work):
    """The same head proved at eps and refuted at a larger eps; one transcript model
    proved and refuted (the sentences differ, the objects are the same)."""
    r8 = checkpoint_certs["paper51-lookup-r8-s0"]
    proved = _relabel_model(checkpoint_certs["paper51-lookup-r32-s0"], "paper51-lookup-r8-s0", work)
    for c in proved["claims"]:
        if c["kind"] == "correctness":
            c["parameters"]["eps"] = "1/4"             # re-checked: r32's tables pass at 1/4?
            _rerender(c)
    a, b = _verify(proved, r8, base=work)
    ia = next(i for i, c in enumerate(proved["claims"]) if c["kind"] == "correctness")
    if a.claims[ia].verdict == "proved" and not [p for p in a.claims[ia].problems
                                                 if "contradiction" not in p]:
        assert any("refutes correctness of the same head" in p for p in a.claims[ia].problems)
    t = copy.deepcopy(transcript_cert)
    j = next(i for i, c in enumerate(t["claims"]) if c["kind"] == "transcript")
    key = contradictions._transcript_key(t["claims"][j]["parameters"], t["claims"][j]["evidence"])
    assert key is not None and key == contradictions._transcript_key(
        transcript_cert["claims"][j]["parameters"], transcript_cert["claims"][j]["evidence"])


def test_nonnegative_proved_on_a_set_and_refuted_on_a_subset_contradict():
    """Token sets compared through their tokens: a kernel proved >= 0 on {0,1}^3
    and refuted at a pair of its tokens (another claim on an explicit token list)."""
    base = {"source": "m.safetensors", "source_sha256": "a" * 64, "stated": {}, "layer": 0, "head": 0,
            "adapter": "layout:lib:Attention layer 0 head 0"}
    proved = {"kind": "nonnegative", "verdict": "proved", "statement": "s1",
              "parameters": {**base, "token_set": "cube:3"}, "evidence": {}}
    toks = ["101", "011"]
    refuted = {"kind": "nonnegative", "verdict": "refuted", "statement": "s2",
               "parameters": {**base, "token_set": "tokens", "tokens_sha256": token_list_sha256(toks)},
               "evidence": {"tokens": toks, "pair": [0, 1]}}
    out = verify.contradictions([("a", 0, proved), ("b", 0, refuted)])
    assert ("a", 0) in out and ("b", 0) in out
    refuted["evidence"]["tokens"] = ["1010", "0110"]                 # not tokens of {0,1}^3
    assert verify.contradictions([("a", 0, proved), ("b", 0, refuted)]) == {}


def test_eps_rank_above_the_exact_rank_contradicts():
    key = {"matrix_sha256": "int64:" + "b" * 64}
    src = {"token_set": "index", "source": "m.npy", "source_sha256": "a" * 64,
           "adapter": "matrix-file", "num_tokens": 4}
    r = {"kind": "exact_rank", "verdict": "proved", "statement": "r",
         "parameters": src, "evidence": {**key, "rank_lower": 3, "rank_upper": 3}}
    e = {"kind": "eps_rank", "verdict": "proved", "statement": "e",
         "parameters": {**src, "eps": "1/10"}, "evidence": {**key, "k": 4}}
    out = verify.contradictions([("a", 0, r), ("a", 1, e)])
    assert "singular values above eps" in out[("a", 1)][0]


def test_trusted_data_without_a_derivable_size_cannot_be_trusted(rank_cert, work):
    """A factor claim on an index set (no tokens) whose features are dropped and
    declared trusted: nothing re-derives its size, so nothing may be trusted."""
    from certify.rank.options import RankOptions
    from certify.rank.run import certify_rank
    from certify.sources.load import load_kernel
    rng = np.random.default_rng(5)
    np.savez(work / "g.npz", phi_q=rng.normal(size=(41, 8)), phi_k=rng.normal(size=(41, 8)))
    cert = certify_rank(load_kernel(str(work / "g.npz")), RankOptions()).certificate.to_json()
    c = cert["claims"][0]
    assert c["parameters"]["token_set"] == "index"
    ev = c["evidence"]
    ev.pop("features", None)
    ev["trusted"] = ["gram_q", "gram_k", "num_tokens"]
    ev["num_tokens"] = 100000                                  # a declared size, ignored
    c["parameters"].update(num_tokens=100000, shape=[100000, 100000])
    _rerender(c)
    r = verify.verify_certificate(cert)
    probs = r.claims[0].problems
    assert any("token counts disagree" in p or "must be embedded" in p for p in probs), probs


def test_integer_replay_with_a_large_rank_never_wraps():
    """A one-layer relu model with r = 96 features and entries near 2^40: the
    int64 path would wrap (r max|P| max|L| >> 2^63); the integer replay must give
    the exact verdict of the Fraction replay on every assignment."""
    from certify.core.families import multilevel_spec
    from models.quantize import UniformQuantizer
    from models.sketch import SketchConfig, random_model
    spec = multilevel_spec(6, 1, 3, 2)
    cfg = SketchConfig(m=spec.m, d=spec.m, layers=1, heads=1, rank=96, dv=1, feature_map="relu")
    Wt = random_model(cfg, 7, scale=2.0 ** 40)
    quant = UniformQuantizer(bits=3, lo=Fraction(0), hi=Fraction(7))
    from certify.transcript.model import QuantizedSketchModel
    model = QuantizedSketchModel(cfg, Wt, quant)
    ev = model.evidence()
    W = transcript_checker._weights(ev["model"] if "model" in ev else ev, cfg.to_json())
    q_ = transcript_checker._Quant(quant.to_json())
    words = [[int(b) for b in w] for w in ["".join(map(str, w)) for w in spec.words.tolist()]]
    got = transcript_checker._integer_all(cfg.to_json(), W, q_, spec.M, spec.s, spec.q, words)
    want = []
    for kappa in product(range(spec.s + 1), repeat=spec.q):
        toks = transcript_checker._canonical_input(list(kappa), words, spec.M, spec.s, spec.q)
        _, ys, ops = transcript_checker.replay(cfg.to_json(), W, q_, toks)
        bad = [i for i in range(spec.q) if ops.at_least(abs(ys[i] - list(kappa)[i]), Fraction(1, 2))]
        if bad:
            want = [f"assignment {list(kappa)}: query {bad[0]} errs by >= 1/2 (integer replay)"]
            break
    assert got == want
    big = max(abs(int(v)) for w in ev["weights"].values() for v in w["ints"]) \
        if "weights" in ev else None
    assert big is None or big > 1 << 30


def test_every_committed_certificate_verifies_as_its_readme_says():
    """Every certificate under reports/: exit 0, or 4 where its README says the
    claims hold assuming the extraction (checkpoint weights read by torch)."""
    bad = []
    for path in report_json():
        try:
            doc = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(doc, dict) or doc.get("schema") != verify.SCHEMA:
            continue
        r = verify.verify_certificate(doc, base=path.parent)
        code = r.exit_code()
        extraction = all(a.startswith("extraction:") for a in r.open_assumptions)
        if code == 0 or (code == 4 and extraction):
            continue
        bad.append((str(path.relative_to(ROOT)), code, [p for c in r.claims for p in c.problems][:2],
                    r.open_assumptions))
    assert bad == []


def test_verify_words_cannot_be_misread(checkpoint_certs, work, tmp_path):
    """A refuted claim is printed verdict first, never with a mark of approval; an
    --assume naming no assumption is exit 2 naming the ones that exist."""
    r8 = checkpoint_certs["paper51-lookup-r8-s0"]
    p = work / "r8.json"
    p.write_text(json.dumps(r8))
    out = subprocess.run([sys.executable, "-m", "certify", "verify", str(p)], cwd=work,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 4
    line = next(l for l in out.stderr.splitlines() if " correctness:" in l)
    assert "REFUTED (the sentence is false): the head of" in line and "[ok" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "certify", "verify", str(p), "--assume",
                          "EXTRACTION"], cwd=work, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "matches no assumption" in out.stderr
    assert "extraction:" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = subprocess.run([sys.executable, "-m", "certify", "verify", str(p), "--assume",
                          "extraction"], cwd=work, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0
