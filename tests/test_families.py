import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.cli import families as families_cli
from certify.core import codes, families
from certify.core.errors import InputError
from certify.core.families import JUMP_COLUMNS, Family


@pytest.fixture(scope="module")
def p51():
    return families.paper51_family()


def test_paper51_counts(p51):
    c = p51.counts()
    assert (c["words"], c["inputs"], c["jumps"], c["n"], c["m"]) == (15, 1272, 424, 3, 24)
    assert c["query_tokens"] == 15


def test_paper51_jumps_are_lemma3_inputs(p51):
    J = p51.jumps
    col = {k: i for i, k in enumerate(JUMP_COLUMNS)}
    G = p51.tokens.astype(int) @ p51.tokens.T.astype(int)
    assert np.all(G[J[:, col["x"]], J[:, col["y"]]] == J[:, col["t"]])
    assert np.all(G[J[:, col["x"]], J[:, col["z"]]] == J[:, col["u"]])
    assert np.all(J[:, col["u"]] - J[:, col["t"]] >= 3)
    for j in J[:5]:
        x, y, z, t, u = (int(j[col[k]]) for k in "xyztu")
        Y, Z, M = (p51.inputs[j[col[f"input_{r}"]]].tolist() for r in "yzm")
        assert (Y, Z, M) == ([x, y, y], [x, z, z], [x, y, z])
        tgt = [p51.targets[j[col[f"input_{r}"]], 0] for r in "yzm"]
        assert tgt == [t, u, t]
    # chains start at overlap 0 (the complement) and end at D = |S \ U|
    D = codes.directed_distances(p51.words)
    last = {}
    for j in J:
        last[(j[0], j[1])] = j
    for (s, u), j in last.items():
        assert j[col["u"]] == D[s, u]
    assert len(last) == 210


@settings(derandomize=True, max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(2, 5), st.data())
def test_multilevel_overlap_identity_and_targets(s, q, data):
    M, h = 2 * (s + 3), s + 3
    spec = families.multilevel_spec(M, s, h, min(q, 3))
    T = spec.tokens.astype(int)
    qn = spec.q
    for i in range(qn):
        for j in range(qn):
            for k in range(s + 1):
                d = T[qn + j * (s + 1) + k]
                U, S = spec.words[j], spec.words[i]
                assert T[i] @ d == int(((U == 1) & (S == 0)).sum()) + k
            if i != j:
                assert T[i] @ T[j] >= s + 1
    kappa = np.array([data.draw(st.lists(st.integers(0, s), min_size=qn, max_size=qn))])
    assert spec.targets(kappa)[0, :qn].tolist() == kappa[0].tolist()


def test_multilevel_lazy_enumeration():
    spec = families.multilevel_spec(12, 2, 6, 4)
    assert spec.num_assignments == 81
    A = spec.assignments()
    assert A.shape == (81, 4) and len({tuple(a) for a in A}) == 81
    assert np.array_equal(spec.assignments(10, 20), A[10:20])
    assert np.array_equal(spec.assignment_index(A), np.arange(81))
    with pytest.raises(InputError, match="exceeds the code size"):
        families.multilevel_spec(12, 2, 6, 50)


def test_ood_pools_disjoint_and_targets_binary():
    tr, te = families.ood_families(8, 6, train_size=64, test_size=64, seed=1)
    for f in (tr, te):
        assert f.n == 12 and f.m == 10
        assert set(np.unique(f.targets[f.scored]).tolist()) <= {0, 1}
        assert (f.scored.sum(axis=1) == 6).all()
    # assignments: the pattern of query targets per input, up to position shuffle,
    # cannot be compared directly; the builder splits the assignment set in two
    a_tr = {tuple(sorted(r)) for r in tr.targets[tr.scored].reshape(-1, 6).tolist()}
    assert a_tr  # non-empty
    tr2, te2 = families.ood_families(8, 6, train_size=64, test_size=64, seed=1)
    assert tr2.sha256 == tr.sha256 and te2.sha256 == te.sha256


def test_chain_family_small_code_counts():
    w = codes.verify_code([[1, 1, 1, 0, 0, 0], [1, 0, 0, 1, 1, 0], [0, 1, 0, 1, 0, 1]], h=3, delta=2)
    f = families.chain_family(w, n=4, g=2)
    # every pair at D = 2: one jump 0 -> 2 per ordered pair: 6 jumps, 18 inputs
    assert f.jumps.shape[0] == 6 and f.inputs.shape[0] == 18 and f.n == 4
    assert f.inputs[f.jumps[0, 10]].tolist() == [f.jumps[0, 3], f.jumps[0, 4]] + [f.jumps[0, 5]] * 2
    assert set(f.jumps[:, 6].tolist()) == {0} and set(f.jumps[:, 7].tolist()) == {2}
    f3 = families.chain_family(np.vstack([w, 1 - w[:1]]), n=4, g=2)
    # the complement of word 0 is at D = 3 from it (levels 0 -> 3, one jump each way)
    # and at D = 1 < g from words 1 and 2 (no jump): 6 + 2 jumps
    D = codes.directed_distances(f3.words)
    assert (D[0, 3], D[1, 3], D[2, 3]) == (3, 1, 1) and f3.jumps.shape[0] == 8
    assert sorted(f3.jumps[f3.jumps[:, 0] == 0][:, 7].tolist()) == [2, 2, 3]


@pytest.mark.parametrize("kwargs,msg", [({"n": 2}, "n >= 3"), ({"g": 1}, "must exceed"),
                                        ({"eps": Fraction(3, 4)}, "eps")])
def test_chain_family_rejects_bad_parameters(kwargs, msg):
    with pytest.raises(InputError, match=msg):
        families.chain_family(codes.paper51_code(), **kwargs)


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_roundtrip(tmp_path, p51, suffix):
    path = tmp_path / f"f{suffix}"
    p51.save(path)
    g = Family.load(path)
    assert g.sha256 == p51.sha256 and np.array_equal(g.jumps, p51.jumps)


def test_corrupt_and_wrong_target_files_rejected(tmp_path, p51):
    obj = p51.to_json()
    obj["targets"][5][0] += 1
    obj.pop("sha256")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="not the Min-IP target"):
        Family.load(bad)
    obj = p51.to_json()
    obj["inputs"][0][1] = obj["inputs"][1][1]      # content changed, hash kept
    bad.write_text(json.dumps(obj))
    with pytest.raises(InputError):
        Family.load(bad)
    (tmp_path / "c.npz").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(InputError, match="corrupt"):
        Family.load(tmp_path / "c.npz")


def test_show_command_json_and_errors(tmp_path):
    out = subprocess.run([sys.executable, "-m", "certify", "families", "show", "paper-5.1", "--json"],
                         capture_output=True, text=True, check=True)
    obj = json.loads(out.stdout)
    assert (obj["words"], obj["tokens"], obj["inputs"], obj["jumps"]) == (15, 41, 1272, 424)
    assert len(obj["sha256"]) == 64
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "certify", "families", "show", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stdout == ""
    target = tmp_path / "out.json"
    r = subprocess.run([sys.executable, "-m", "certify", "families", "save", "nope", "--out",
                        str(target)], capture_output=True, text=True)
    assert r.returncode == 2 and not target.exists()


@pytest.mark.parametrize("args,msg", [
    (["build", "multilevel", "--M", "6", "--s", "1", "--h", "7", "--q", "2"], "h must satisfy"),
    (["build", "chain", "--code", "{good}", "--n", "2"], "n >= 3"),
    (["build", "multilevel", "--code", "{bad}", "--M", "6", "--s", "1", "--h", "3", "--q", "2"],
     "directed distance 1 < 2"),
    (["build", "chain", "--code", "{missing}"], "no code file"),
])
def test_build_bad_input_one_line_exit_2_nothing_written(tmp_path, args, msg):
    good = tmp_path / "good.json"
    good.write_text('["111000", "100110", "010101"]')
    bad = tmp_path / "bad.json"
    bad.write_text('["111000", "110100"]')
    out = tmp_path / "out.json"
    argv = [a.format(good=good, bad=bad, missing=tmp_path / "none.json") for a in args]
    r = subprocess.run([sys.executable, "-m", "certify", "families", *argv, "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and msg in r.stderr
    assert not out.exists() and list(tmp_path.glob("*.tmp")) == []


def test_build_chain_from_code_file(tmp_path):
    code = tmp_path / "c.json"
    code.write_text('["111000", "100110", "010101"]')
    out = tmp_path / "f.json"
    assert families_cli.main(["build", "chain", "--code", str(code), "--n", "4", "--out", str(out)]) == 0
    f = Family.load(out)
    assert f.jumps.shape[0] == 6 and f.n == 4
