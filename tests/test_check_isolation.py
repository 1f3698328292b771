"""No state crosses a check, and every hash binds its whole object.

Two classes of false sentence that once verified at exit 0, rebuilt here from genuine
certificates the tests make:

* **state across checks**: a 260 x 260 matrix of rank 52 and the 52 x 1300 matrix
  with the same 67,600 numbers (rank 11) hashed alike (``matrix_sha256`` bound the
  entries, not the shape), and the checker's per-process memo of the canonical minor
  was keyed by that hash: once the first was checked, a claim "the second has rank
  exactly 52" (its smaller dimension: a trivial upper bound) with the first's minor
  verified, both in ``verify A B`` and inside one certificate holding both claims;
* **replay identity**: ``verify --replay-extraction d1/c.json d2/c.json`` keyed its
  replay jobs by the source's relative name, so the second certificate was compared
  with the first model's features: a model whose query weights are zero (a rank-1
  kernel) verified with the first model's rank-8 claims, and two honest certificates
  of different models at the same relative path made the second fail.

Also: ``verify A B C`` gives each certificate of the committed reports the exit it gets
alone, in random orders and pairs; and no checker module holds state at module level
(every mutable global unchanged by a check, no ``functools`` cache, no ``global``
statement, the scratch variable back at its default).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib
import json
import pkgutil
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from committed import report_json

import certify.checkers
from certify.checkers import scratch, verify
from certify.checkers.kernel.hashing import array_sha256
from certify.checkers.statements import render
from certify.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent


def _committed() -> list[Path]:
    """The committed certificates (not the manifests and data files beside them)."""
    return [p for p in report_json()
            if str(json.loads(p.read_text()).get("schema", "")).startswith("certify-attention/certificate/")]


def _rerender(claim: dict) -> None:
    claim["statement"] = render(claim["kind"], claim["parameters"], claim["evidence"]).text


# ---------------------------------------------------------------- the hash binds the shape

def test_matrix_hash_binds_dtype_shape_and_entries():
    a = np.arange(36, dtype=np.int64)
    scale = {"kind": "dyadic", "exponent": 0}
    h66, h49 = array_sha256(a.reshape(6, 6), scale), array_sha256(a.reshape(4, 9), scale)
    assert h66 != h49 and h66.startswith("int64:")
    assert array_sha256(a.reshape(6, 6), {"kind": "dyadic", "exponent": 1}) != h66
    with pytest.raises(TypeError):                   # another dtype is never cast silently
        array_sha256(a.reshape(6, 6).astype(np.float64), scale)
    assert scratch.array_key(a.reshape(6, 6)) != scratch.array_key(a.reshape(4, 9))
    assert scratch.array_key(a.reshape(6, 6)) != scratch.array_key(a.reshape(6, 6).astype(np.int32))


# ---------------------------------------------------------------- two shapes, one set of numbers

@pytest.fixture(scope="module")
def two_shapes(tmp_path_factory):
    """Genuine certificates of A (260 x 260, rank 52: 52 random rows, then zeros) and of
    B = A.reshape(52, 1300) (rank 11: A's numbers fill its first 11 rows). Both have more
    entries than a certificate embeds (65,536), so both are re-read from their files: the
    array path whose memo the hash keyed."""
    d = tmp_path_factory.mktemp("shapes")
    rng = np.random.default_rng(7)
    A = np.zeros((260, 260), dtype=np.int64)
    A[:52] = rng.integers(-4, 4, (52, 260))
    B = A.reshape(52, 1300)
    np.save(d / "a.npy", A)
    np.save(d / "b.npy", B)
    for name in ("a", "b"):
        code = cli(["rank", str(d / f"{name}.npy"), "--upper-bound", "exact", "--out", str(d / f"{name}.json"),
                    "--no-progress"])
        assert code == 0
    ca, cb = (json.loads((d / f"{n}.json").read_text()) for n in ("a", "b"))
    assert ca["claims"][0]["evidence"]["rank_lower"] == 52 and cb["claims"][0]["evidence"]["rank_lower"] == 11
    assert "matrix" not in ca["claims"][0]["evidence"] and "matrix" not in cb["claims"][0]["evidence"]
    # the forgery: B "has rank exactly 52" (= min(52, 1300): the trivial upper bound), with
    # A's minor (its rows < 52, its columns < 260 < 1300) and prime
    forged = copy.deepcopy(cb)
    ev, eva = forged["claims"][0]["evidence"], ca["claims"][0]["evidence"]
    for k in ("prime", "minor_rows", "minor_cols", "rank_lower", "rank_upper"):
        ev[k] = eva[k]
    ev["upper_witness"] = "trivial"
    assert max(ev["minor_rows"]) < 52
    _rerender(forged["claims"][0])
    (d / "forged.json").write_text(json.dumps(forged))
    return d, ca, cb, forged


def test_a_certificate_checked_after_another_gets_its_own_exit(two_shapes):
    d, ca, cb, forged = two_shapes
    alone = verify.verify_certificate(forged, base=d)
    assert alone.exit_code() == 1
    assert any("pivot minor" in p or "singular" in p for p in alone.claims[0].problems)
    a_then_forged = verify.verify_many([("a", ca, d), ("forged", forged, d)])
    assert [v.exit_code() for v in a_then_forged] == [0, 1]
    honest = verify.verify_many([("a", ca, d), ("b", cb, d)])
    assert [v.exit_code() for v in honest] == [0, 0]
    # the command line, both files in one call
    out = subprocess.run([sys.executable, "-m", "certify", "verify", "a.json", "forged.json"], cwd=d,
                         capture_output=True, text=True)
    assert out.returncode == 1 and "FAILS" in out.stdout + out.stderr
    ref = subprocess.run([sys.executable, "-m", "certify", "verify", "--reference", "a.json", "forged.json"],
                         cwd=d, capture_output=True, text=True)
    assert ref.returncode == 1


def test_two_claims_of_one_certificate_share_nothing_but_content(two_shapes):
    d, ca, cb, forged = two_shapes
    both = copy.deepcopy(ca)
    both["claims"].append(copy.deepcopy(forged["claims"][0]))
    both["inputs"].update(forged["inputs"])
    r = verify.verify_certificate(both, base=d)
    assert r.claims[0].holds and not r.claims[1].holds and r.exit_code() == 1
    (d / "both.json").write_text(json.dumps(both))
    ref = subprocess.run([sys.executable, "-m", "certify", "verify", "--reference", "both.json"], cwd=d,
                         capture_output=True, text=True)
    assert ref.returncode == 1, ref.stderr[-500:]
    honest = copy.deepcopy(ca)
    honest["claims"].append(copy.deepcopy(cb["claims"][0]))
    honest["inputs"].update(cb["inputs"])
    assert verify.verify_certificate(honest, base=d).exit_code() == 0


# ---------------------------------------------------------------- replays keyed by content

@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """The same relative layout twice (``dN/model/``, ``dN/c.json``): d1 the gallery's custom
    head (elu+1 features), d2 the same with the head's query weights and bias set to zero
    (phi_q constant: a rank-1 kernel). Each certified in its own folder."""
    from safetensors.numpy import load_file, save_file
    root = tmp_path_factory.mktemp("models")
    src = ROOT / "reports" / "gallery" / "models" / "custom"
    for n in ("d1", "d2"):
        (root / n / "model").mkdir(parents=True)
        shutil.copy(src / "spec.json", root / n / "model" / "spec.json")
    shutil.copy(src / "model.safetensors", root / "d1" / "model" / "model.safetensors")
    t = load_file(str(src / "model.safetensors"))
    spec = json.loads((src / "spec.json").read_text())
    t[spec["query_weight"]][:] = 0
    t[spec["query_bias"]][:] = 0
    save_file(t, str(root / "d2" / "model" / "model.safetensors"))
    from certify.api import certify_checkpoint
    for n in ("d1", "d2"):                  # certified in process from the folder (no report)
        with contextlib.chdir(root / n):
            certify_checkpoint("model/model.safetensors", spec="model/spec.json").write(root / n / "c.json")
    c1, c2 = (json.loads((root / n / "c.json").read_text()) for n in ("d1", "d2"))
    ranks = [[c["evidence"]["rank_lower"] for c in cert["claims"] if c["kind"] == "exact_rank"]
             for cert in (c1, c2)]
    assert ranks[1] == [1] and ranks[0][0] > 1, ranks
    # the forgery: d1's claims (its features' hashes and ranks), bound to d2's files
    forged = copy.deepcopy(c1)
    forged["inputs"] = c2["inputs"]
    for c in forged["claims"]:
        c["parameters"]["source_sha256"] = c2["claims"][0]["parameters"]["source_sha256"]
        _rerender(c)
    (root / "d2" / "forged.json").write_text(json.dumps(forged))
    return root


def _verify(root: Path, *files: str, reference: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction", "--json", *files]
                          + (["--reference"] if reference else []), cwd=root, capture_output=True, text=True)


#: the reference checker's replay of the same batches (two subprocess replays each) with ``--runslow``
BOTH_PATHS = [pytest.param(False, id="fast"), pytest.param(True, id="reference", marks=pytest.mark.slow)]


@pytest.mark.parametrize("reference", BOTH_PATHS)
def test_two_honest_models_at_one_relative_path_both_replay(two_models, reference):
    out = _verify(two_models, "d1/c.json", "d2/c.json", reference=reference)
    assert out.returncode == 0, out.stdout[-800:]


@pytest.mark.parametrize("reference", BOTH_PATHS)
def test_a_replay_compares_each_certificate_with_its_own_model(two_models, reference):
    out = _verify(two_models, "d1/c.json", "d2/forged.json", reference=reference)
    assert out.returncode == 1
    if not reference:
        assert "the replayed features' sha256 is not the certificate's" in out.stdout
    alone = _verify(two_models, "d2/forged.json", reference=reference)
    assert alone.returncode == 1


def test_the_replay_worker_refuses_a_file_that_is_not_the_named_source(two_models):
    from certify.checkpoints.replay import replay
    c2 = json.loads((two_models / "d2" / "c.json").read_text())
    job = {"key": "k", "path": str(two_models / "d1" / "model" / "model.safetensors"),
           "source_sha256": c2["claims"][0]["parameters"]["source_sha256"], "want": [["x", "y"]]}
    got = replay([job])["k"]
    assert "not the certificate's source" in got.get("error", "")


# ---------------------------------------------------------------- batches: each its own exit

@pytest.mark.slow  # every committed certificate verified twice (8 CPU s); the crafted pairs run by default
def test_each_committed_certificate_gets_its_alone_exit_in_any_order_and_pair():
    certs = [(str(p), verify.read_certificate(p), p.parent) for p in _committed()]
    assert len(certs) >= 30
    alone = {label: verify.verify_many([(label, c, b)])[0].exit_code() for label, c, b in certs}
    rng = random.Random(50)
    orders = [rng.sample(certs, len(certs))]
    orders += [rng.sample(certs, 2) for _ in range(4)]
    for order in orders:
        got = verify.verify_many(order)
        assert {label: v.exit_code() for (label, _, _), v in zip(order, got)} == \
            {label: alone[label] for label, _, _ in order}


# ---------------------------------------------------------------- no state at module level

def _checker_modules() -> list:
    """Every module of the fast checker and of the reference checker."""
    import certify.reference as reference
    mods = []
    for pkg in (certify.checkers, reference):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith("._spankernel"):
                continue
            mods.append(importlib.import_module(info.name))
    return mods


def _snapshot(mods) -> dict:
    out = {}
    for m in mods:
        for name, v in vars(m).items():
            if isinstance(v, (dict, list, set, bytearray)) and not name.startswith("__"):
                try:
                    out[(m.__name__, name)] = copy.deepcopy(v)
                except TypeError:                   # holds objects that cannot be copied (flint's)
                    out[(m.__name__, name)] = ("uncopyable", id(v), len(v), repr(v)[:10000])
    return out


def test_no_checker_module_holds_state(two_shapes):
    d, ca, cb, forged = two_shapes
    mods = _checker_modules()
    assert len(mods) > 20
    before = _snapshot(mods)
    from certify.reference.check import check_many
    for cert in (ca, forged, cb, ca):
        verify.verify_certificate(cert, base=d)
    check_many([("a", ca, d), ("forged", forged, d)], assume=(), replay=False)
    for p in [p for p in _committed() if p.parent.name in ("reference", "transcript")][:6]:
        verify.verify_file(p)
    after = _snapshot(mods)
    changed = [k for k in before if before[k] != after.get(k)]
    assert not changed, changed
    assert scratch.current() is None
    for m in mods:
        for name, v in vars(m).items():
            assert not hasattr(v, "cache_info"), f"{m.__name__}.{name} is a functools cache"
        src = Path(m.__file__)
        if src.suffix == ".py":
            tree = ast.parse(src.read_text())
            assert not any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(tree)), m.__name__


def test_the_state_rule_catches_a_planted_memo(two_shapes):
    """The snapshot comparison above sees a module-level dict a check writes into."""
    d, ca, _, _ = two_shapes
    from certify.checkers.rank import span
    mods = _checker_modules()
    before = _snapshot(mods)
    span._PLANTED = {}                                  # type: ignore[attr-defined]
    before[("certify.checkers.rank.span", "_PLANTED")] = {}
    real = span.column_span

    def remembering(A, R, C, **kw):
        span._PLANTED[len(span._PLANTED)] = True          # type: ignore[attr-defined]
        return real(A, R, C, **kw)
    span.column_span = remembering
    try:
        verify.verify_certificate(ca, base=d)
        after = _snapshot(mods)
        assert [k for k in before if before[k] != after.get(k)] == [("certify.checkers.rank.span", "_PLANTED")]
    finally:
        span.column_span = real
        del span._PLANTED                                 # type: ignore[attr-defined]
