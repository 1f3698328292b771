"""The differential oracle: genuine certificates made by the project's own producers, every
field of every claim mutated, adversarial numbers written into their source files, batches
with duplicate relative names and in every order, each case given to ``certify verify`` and,
where the build has it, to ``certify verify --reference``; their exit codes must agree
(without the reference: the exit code the case must have, :mod:`tests.oracle.runner`).

Default suite: a seeded Hypothesis sample (a few hundred cases). ``--runslow``: every
(field, operation) site of every certificate, every adversarial source number, and a large
Hypothesis sample; the counts per kind are printed (``-s``) and written to
``oracle-counts.txt`` in the session's temporary folder.
"""

from __future__ import annotations

import itertools
import json
import shutil
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.oracle import genuine as gen
from tests.oracle import mutations as mu
from tests.oracle.runner import HAS_REFERENCE, Tally, combined, verify_exit, write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="session")
def runslow(request) -> bool:
    return bool(request.config.getoption("--runslow"))


@pytest.fixture(scope="session")
def made(tmp_path_factory, runslow) -> list[gen.Genuine]:
    """The genuine certificates, made once per session (producing is the slow part)."""
    base = tmp_path_factory.mktemp("oracle")
    return gen.quick(base) + gen.slow(base, everything=runslow)


#: kinds whose verify takes a fraction of a second (a 260 x 260 matrix re-read): every case on
#: them runs with --runslow, a sample in the default suite
HEAVY = ("rank-large-npy", "rank-freivalds")


@pytest.fixture(scope="session")
def tally(request, tmp_path_factory):
    t = Tally()
    yield t
    text = t.summary()
    (tmp_path_factory.getbasetemp() / "oracle-counts.txt").write_text(text + "\n")
    print("\n" + text)


@lru_cache(maxsize=None)
def _sites(path: Path) -> tuple[mu.Site, ...]:
    return tuple(mu.sites(json.loads(path.read_text())))


def test_genuine_certificates_verify_with_their_documented_code(made, tally):
    kinds = {g.kind for g in made}
    assert {"rank-npy-int", "rank-npy-float", "rank-npy-gauss", "rank-npz", "rank-csv", "rank-json", "rank-factor-npz",
            "rank-large-npy", "rank-freivalds", "bounds", "transcript", "feasibility", "checkpoint-lat",
            "construction", "theorems"} <= kinds
    for g in made:
        assert tally.check("genuine", g.kind, [g.path], expected=g.exit) == g.exit, g.kind


def _mutant(g: gen.Genuine, site: mu.Site) -> Path:
    m = mu.apply(g.cert(), site.path, site.op)
    assert m is not None
    return write(m, g.path.parent / "mutant.json")


def _check_site(tally: Tally, g: gen.Genuine, site: mu.Site) -> None:
    case = f"{g.kind} {site.op} {'.'.join(map(str, site.path))}"
    tally.check(f"mutation:{g.kind}", case, [_mutant(g, site)], nonzero=site.changes_meaning(g.cert()),
                documented=g.exit if mu.documented_difference(site.path) else None)


@settings(max_examples=45, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_claims_agree(made, tally, data):
    g = data.draw(st.sampled_from(made), label="certificate")
    site = data.draw(st.sampled_from(_sites(g.path)), label="site")
    _check_site(tally, g, site)


@pytest.mark.slow
def test_every_mutation_site_of_every_certificate(made, tally):
    """Every site of every certificate; of the heavy kinds (a 260 x 260 matrix re-read and
    ranked by both checkers per case, seconds under load) 160 sites evenly spread."""
    for g in made:
        sites = _sites(g.path)
        if g.kind in HEAVY:
            sites = sites[::max(1, len(sites) // 160)]
        for site in sites:
            _check_site(tally, g, site)
    assert not tally.disagreements, tally.summary()


@pytest.mark.slow
@settings(max_examples=3000, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_claims_agree_large(made, tally, data):
    """Pairs of mutations (two sites of one certificate, the heavy kinds left out)."""
    g = data.draw(st.sampled_from([g for g in made if g.kind not in HEAVY]), label="certificate")
    first, second = (data.draw(st.sampled_from(_sites(g.path)), label="site") for _ in range(2))
    m, applied = mu.apply(g.cert(), first.path, first.op), [first]
    try:
        both = mu.apply(m, second.path, second.op)
    except (KeyError, IndexError, TypeError):       # the first mutation removed the second's field
        both = None
    if both is not None:
        m, applied = both, [first, second]
    cert = g.cert()
    if mu.canonical(m) == mu.canonical(cert):        # the second undid the first
        return
    tally.check(f"mutation-pair:{g.kind}", " + ".join(map(str, applied)),
                [write(m, g.path.parent / "mutant.json")],
                nonzero=any(s.changes_meaning(cert) for s in applied),
                documented=_documented_exit(g, cert, applied))


def _documented_exit(g: gen.Genuine, cert: dict, applied: list[mu.Site]):
    """The reference's exit without the fast-only edits among ``applied`` (None: there is
    none): the genuine code when every edit is one, else the reference run on the other
    mutation alone."""
    rest = [s for s in applied if not mu.documented_difference(s.path)]
    if len(rest) == len(applied):
        return None
    if not rest:
        return g.exit
    alone = mu.apply(cert, rest[0].path, rest[0].op)
    return lambda: verify_exit([write(alone, g.path.parent / "other.json")], reference=True)


# ---------------------------------------------------------------- adversarial source numbers

def _array_sources(made: list[gen.Genuine]) -> list[gen.Genuine]:
    return [g for g in made if g.sources and g.sources[0].endswith((".npy", ".npz"))]


def _read(p: Path) -> np.ndarray:
    if p.suffix == ".npy":
        return np.load(p)
    with np.load(p) as z:
        return z["matrix"] if "matrix" in z.files else z["phi_q"]


def _save(p: Path, a: np.ndarray) -> None:
    if p.suffix == ".npy":
        np.save(p, a, allow_pickle=False)
        return
    with np.load(p) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["matrix" if "matrix" in arrays else "phi_q"] = a
    np.savez(p, **arrays)


def _exact(a: np.ndarray):
    from fractions import Fraction
    if a.dtype.kind not in "biuf" or a.dtype.itemsize > 8 or a.size == 0:
        return None
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return None
    return a.shape, [Fraction(v) for v in a.ravel().tolist()]


def _rehash(cert: dict, name: str, folder: Path) -> dict:
    """The certificate re-bound to the rewritten file (sha256 in inputs and parameters,
    statements re-rendered): what a forger does after editing the source."""
    import hashlib

    from certify.checkers.statements import render
    sha = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    cert["inputs"] = {**cert["inputs"], name: sha}
    for c in cert["claims"]:
        if c.get("parameters", {}).get("source") == name:
            c["parameters"]["source_sha256"] = sha
            c["statement"] = render(c["kind"], c["parameters"], c["evidence"]).text
    return cert


def _check_adversarial(tally: Tally, g: gen.Genuine, name: str, rehash: bool, tmp: Path) -> None:
    folder = tmp / f"{g.kind}-{name}-{int(rehash)}"
    shutil.copytree(g.path.parent, folder)
    src = folder / g.sources[0]
    a = _read(src)
    try:
        b = mu.ADVERSARIAL[name](a)
    except (ValueError, TypeError, OverflowError):
        return
    try:
        _save(src, b)
    except ValueError:                     # numpy refuses to write it without pickles
        return
    cert = g.cert()
    same = _exact(a) == _exact(b) and _exact(b) is not None and src.read_bytes() == (g.path.parent / g.sources[0]).read_bytes()
    changed = _exact(b) is None or _exact(a) != _exact(b)
    case = f"{g.kind} {name} {'rehashed' if rehash else 'stale'}"
    if rehash and not changed and any("freivalds" in c["evidence"] for c in cert["claims"]):
        # a Freivalds test draws its vectors from the claim, source sha256 included: re-bound to a
        # file of the same numbers (another layout or byte order), the stale test fails the fast
        # path and not the reference (it reads no witness), so the producer makes the re-bound
        # certificate; where the numbers changed, matrix_sha256 fails both
        remade = gen.remake(g, folder)
        if remade is not None:
            tally.check(f"source:{g.kind}", case + " (remade)", [write(remade, folder / "c.json")])
            return
    if rehash:
        cert = _rehash(cert, g.sources[0], folder)
    tally.check(f"source:{g.kind}", case, [write(cert, folder / "c.json")],
                expected=g.exit if same else None, nonzero=not same and (changed or not rehash))


@pytest.mark.parametrize("name", sorted(mu.ADVERSARIAL))
def test_adversarial_source_numbers(made, tally, tmp_path, name, runslow):
    for g in _array_sources(made):
        for rehash in (False, True):
            # the heavy kinds with --runslow only (each case re-reads and ranks a 260 x 260 matrix)
            if runslow or g.kind not in HEAVY:
                _check_adversarial(tally, g, name, rehash, tmp_path)


# ---------------------------------------------------------------- batches

def test_duplicate_relative_names_in_one_batch(made, tally, tmp_path, runslow):
    """Two folders holding ``c.json`` about different files both named ``m.npy``: each is
    bound to its own folder's file, the batch's code is the combination of the two."""
    npy = [g for g in made if g.sources == ("m.npy",) and (runslow or g.kind not in HEAVY)]
    assert len(npy) >= 2
    for a, b in itertools.combinations(npy, 2):
        d1, d2 = tmp_path / f"{a.kind}+{b.kind}" / "d1", tmp_path / f"{a.kind}+{b.kind}" / "d2"
        shutil.copytree(a.path.parent, d1)
        shutil.copytree(b.path.parent, d2)
        paths = [d1 / "c.json", d2 / "c.json"]
        tally.check("batch:duplicate-names", f"{a.kind} + {b.kind}", paths, expected=combined([a.exit, b.exit]))
        # and with the second certificate forged (its rank edited): the batch fails
        forged = json.loads(paths[1].read_text())
        site = next((s for s in _sites(b.path) if s.path[-1] == "rank_upper" and s.op == "plus1"), None)
        if site is not None:
            write(mu.apply(forged, site.path, site.op), paths[1])
            tally.check("batch:duplicate-names", f"{a.kind} + forged {b.kind}", paths, nonzero=True)


def test_the_same_batch_in_every_order(made, tally, runslow):
    kinds = ("rank-npy-int", "bounds", "transcript", "checkpoint-lat")[:4 if runslow else 3]
    batch = [g for g in made if g.kind in kinds]
    want = combined([g.exit for g in batch])
    for order in itertools.permutations(batch):
        tally.check("batch:order", " ".join(g.kind for g in order), [g.path for g in order], expected=want)


def test_no_disagreement(made, tally):
    """Runs last in this file: every case above agreed (the counts are printed at the end)."""
    assert not tally.disagreements, tally.summary()


def test_reference_flag_is_compared_when_present():
    assert HAS_REFERENCE or verify_exit([Path("/nonexistent.json")]) == 2


# ---------------------------------------------------------------- disagreements found, pinned

def _rehashed_with(g: gen.Genuine, tmp: Path, a: np.ndarray) -> Path:
    """``g``'s folder copied, its source replaced by ``a`` and the certificate re-bound to it."""
    folder = tmp / g.kind
    shutil.copytree(g.path.parent, folder)
    _save(folder / g.sources[0], a)
    return write(_rehash(g.cert(), g.sources[0], folder), folder / "c.json")


def test_a_present_source_holding_another_matrix_fails_not_assumed(made, tmp_path):
    """Found by the oracle: a subnormal written into the source (certificate re-bound to the
    file's sha256) was "the source's entries are not the evidence's matrix", and the fast
    checker named it an assumption (exit 4) where the reference failed the claim (exit 1)."""
    g = next(g for g in made if g.kind == "rank-npy-int")
    a = _read(g.path.parent / g.sources[0]).astype(np.float64)
    a.flat[0] = 5e-324
    path = _rehashed_with(g, tmp_path, a)
    assert verify_exit([path]) == 1
    if HAS_REFERENCE:
        assert verify_exit([path], reference=True) == 1


@pytest.mark.parametrize("dtype", ["complex128", "longdouble", "datetime64[s]"])
def test_a_certified_source_of_inexact_numbers_is_refused_by_both(made, tmp_path, dtype):
    """Found by the oracle: the fast checker failed the claim (exit 1) where the reference
    refuses the source (exit 2, docs/trust.md); both now refuse it with one line, exit 2."""
    g = next(g for g in made if g.kind == "rank-npy-int")
    a = _read(g.path.parent / g.sources[0]).astype(np.int64).astype(dtype)
    path = _rehashed_with(g, tmp_path, a)
    assert verify_exit([path]) == 2
    if HAS_REFERENCE:
        assert verify_exit([path], reference=True) == 2


@pytest.mark.skipif(not HAS_REFERENCE, reason="no reference checker in this checkout")
def test_reference_hashes_a_matrix_as_this_release_does(made):
    """Found by the oracle: the reference hashed certificate/2's header; no workaround is left."""
    from certify.reference import kernels
    ref_hash = kernels.matrix_sha256
    g = next(g for g in made if g.kind == "rank-npy-int")
    ev = g.cert()["claims"][0]["evidence"]
    assert ref_hash(ev["matrix"], ev["scale"]) == ev["matrix_sha256"]


def _edited(g: gen.Genuine, tmp: Path, path: tuple, value) -> Path:
    """``g`` with the JSON value at ``path`` replaced by ``value``, written beside its sources."""
    cert = g.cert()
    mu.get(cert, path[:-1])[path[-1]] = value
    return write(cert, g.path.parent / f"edited-{tmp.name}.json")


def _both(path: Path) -> tuple[int, int | None]:
    return verify_exit([path]), (verify_exit([path], reference=True) if HAS_REFERENCE else None)


@pytest.mark.parametrize("kind", ["rank-npy-int", "rank-csv"])
def test_a_parameters_dtype_that_is_not_the_files_fails_both(made, tmp_path, kind):
    """Found by the oracle: ``parameters.dtype`` of a matrix-file claim (not printed: the content
    hash names the values) was read by neither checker, so an edited dtype verified at exit 0 on
    both paths. Both now bind it to the dtype the re-read file holds (``rational`` for CSV)."""
    g = next(g for g in made if g.kind == kind)
    assert _both(_edited(g, tmp_path, ("claims", 0, "parameters", "dtype"), "int32")) == \
        (1, 1 if HAS_REFERENCE else None)


def test_features_restated_in_another_dtype_fail_both(made, tmp_path):
    """A float64 features file whose values all fit float32, certified as float32 features
    (``features_sha256`` re-hashed in float32, ``parameters.dtype`` float32): both checkers
    hashed the file's values in the stated dtype and verified it at exit 0; the stated dtype
    is now the file's or the claim fails."""
    import hashlib

    from certify.checkers.statements import render
    g = next(g for g in made if g.kind == "rank-factor-npz")
    with np.load(g.path.parent / g.sources[0]) as z:
        q, k = z["phi_q"], z["phi_k"]
    assert q.dtype == np.float64 and (q.astype(np.float32) == q).all()
    cert = g.cert()
    for c in cert["claims"]:
        c["evidence"]["features_sha256"].update(
            dtype="float32", **{n: hashlib.sha256(a.astype("<f4").tobytes()).hexdigest()
                                for n, a in (("phi_q", q), ("phi_k", k))})
        if "dtype" in c["parameters"]:
            c["parameters"]["dtype"] = "float32"
        c["statement"] = render(c["kind"], c["parameters"], c["evidence"]).text
    assert _both(write(cert, g.path.parent / "float32.json")) == (1, 1 if HAS_REFERENCE else None)


@pytest.mark.parametrize("where,value", [
    (("evidence", "model", "quantizer", "bits"), True),
    (("evidence", "model", "config", "layers"), True),
    (("evidence", "targets_a", 0), True),
    (("evidence", "index_a"), "float"),
])
def test_a_transcript_integer_that_is_not_a_json_integer_fails_both(made, tmp_path, where, value):
    """Found by the oracle: ``true`` for the model's quantizer bits or layer count (1) verified at
    exit 0 on the fast path (Python's ``True == 1``) and failed the reference (exit 1); a target
    ``true`` or an index written as a float passed both. Both now read the model's integers as JSON
    integers and compare a claim's parameters and the evidence's values with the re-derived ones
    as JSON values."""
    g = next(g for g in made if g.kind == "transcript")
    i = next(i for i, c in enumerate(g.cert()["claims"]) if c["kind"] == "transcript")
    path = ("claims", i) + where
    if value == "float":
        value = float(mu.get(g.cert(), path))
    assert _both(_edited(g, tmp_path, path, value)) == (1, 1 if HAS_REFERENCE else None)


def test_a_float_in_an_open_evidence_object_fails_both(made, tmp_path):
    """Found by the oracle: an infeasibility derivation's ``perron.rank`` written as ``11.0``
    failed the fast path and verified on the reference (its ``==`` took it for 11). The format's
    numbers are exact: a float at any depth of a claim's parameters or evidence is refused by the
    schema's reading, shared by both (``certify.checkers.schema.inexact_values``)."""
    from certify.checkers import schema
    g = next(g for g in made if g.kind == "feasibility")
    cert = g.cert()
    i, c = next((i, c) for i, c in enumerate(cert["claims"])
                if "perron" in c["evidence"].get("derivation", {}))
    path = ("claims", i, "evidence", "derivation", "perron", "rank")
    rank = mu.get(cert, path)
    assert isinstance(rank, int) and schema.inexact_values(c, i) == []
    mu.get(cert, path[:-1])["rank"] = float(rank)
    assert "perron.rank" in schema.inexact_values(cert["claims"][i], i)[0]
    assert _both(write(cert, g.path.parent / "float.json")) == (1, 1 if HAS_REFERENCE else None)


@pytest.mark.skipif(not HAS_REFERENCE, reason="no reference checker in this checkout")
def test_a_malformed_rank_witness_is_a_documented_difference_never_hidden(made, tmp_path):
    """The reference reads no rank witness (docs/trust.md): a cube-kernel construction whose
    ``minor_rows`` is emptied fails the fast path (exit 1) and holds on the reference under the
    construction's assumption (exit 4, its genuine code). The Tally counts that as a documented
    difference only when the reference gives exactly the code it gives without the edit."""
    g = next(g for g in made if g.kind == "construction")
    path = _edited(g, tmp_path, ("claims", 0, "evidence", "minor_rows"), [])
    assert _both(path) == (1, 4) and g.exit == 4
    t = Tally()
    t.check("witness", "minor_rows []", [path], documented=g.exit)
    assert (t.documented["witness"], t.disagreements) == (1, [])
    t.check("witness", "minor_rows [] (another code expected)", [path], documented=0)
    assert t.disagreements == [("witness", "minor_rows [] (another code expected)", 1, 4)]


def test_a_fortran_order_source_of_the_same_matrix_verifies_on_both(made, tmp_path):
    """Found by the oracle: the 260 x 260 source rewritten in Fortran order (the same int64
    numbers; certificate re-bound to the file's sha256) failed the fast path with "ndarray is not
    C-contiguous" (its compiled elimination read the rows in place) and verified on the
    reference. Both verify it now."""
    g = next(g for g in made if g.kind == "rank-large-npy")
    a = np.asfortranarray(_read(g.path.parent / g.sources[0]))
    assert not a.flags["C_CONTIGUOUS"]
    assert _both(_rehashed_with(g, tmp_path, a)) == (0, 0 if HAS_REFERENCE else None)
