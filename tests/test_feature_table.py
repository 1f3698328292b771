"""The feature-map table (:mod:`models.feature_table`): each entry's facts hold, the
places derived from it read it, and the checker's own short list agrees with it."""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from models import feature_table as ft
from models.canonical import maps as cm
from models.feature_table import TABLE, Nonnegativity

ROOT = Path(__file__).resolve().parent.parent
D = 6


def _params(e: ft.FeatureMap, g: torch.Generator) -> list[torch.Tensor]:
    """Random float64 parameters of a learned map over inputs of width D (5 or 7 rows)."""
    shapes = {"layer.weight": (5, D), "layer.bias": (5,), "layer1.weight": (5, D), "layer1.bias": (5,),
              "layer2.weight": (5, D), "layer2.bias": (5,), "gamma": (D,), "beta": (D,), "projection": (7, D)}
    return [torch.randn(shapes[k], generator=g, dtype=torch.float64) for k in (*e.learned, *e.optional)]


def _maps(e: ft.FeatureMap, torch_fn):
    """(torch map, canonical map) of an entry, a learned one with random parameters."""
    if not (e.learned or e.optional):
        return torch_fn, e.canonical, []
    p = _params(e, torch.Generator().manual_seed(1))
    return torch_fn(*p), e.canonical(*p), p


def _variants():
    for e in TABLE.values():
        yield pytest.param(e, e.torch, id=e.name)
        for lib, fn in e.library_torch.items():
            yield pytest.param(e, fn, id=f"{e.name}-{lib}")


def _u(scale: float = 2.0) -> torch.Tensor:
    return torch.randn(64, D, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * scale


@pytest.mark.parametrize("entry,torch_fn", list(_variants()))
def test_torch_and_canonical_functions_are_the_same_map(entry, torch_fn):
    """In float64 the torch function and the canonical one agree to 1e-9 of the row's
    scale (the canonical one correctly rounded, torch's within a few ulps; torch's
    softplus is linear above 20, off by less than exp(-20))."""
    tf, cf, _ = _maps(entry, torch_fn)
    u = _u()
    want = tf(u).numpy()
    got = cf(u.numpy())
    assert got.dtype == np.float64 and got.shape == want.shape, entry.name
    scale = np.maximum(np.abs(want).max(axis=-1, keepdims=True), 1e-300)
    assert np.max(np.abs(got - want) / scale) <= 1e-9, entry.name


@pytest.mark.parametrize("entry", TABLE.values(), ids=list(TABLE))
def test_rank_is_the_number_of_features(entry):
    _, cf, p = _maps(entry, entry.torch)
    assert cf(_u().numpy()).shape == (64, entry.rank(D, *p))
    assert entry.elementwise == (entry.rank(D, *p) == D and not p and entry.name != "softmax")


@pytest.mark.parametrize("entry", TABLE.values(), ids=list(TABLE))
def test_nonnegativity_structure_holds_and_is_not_claimed_where_it_fails(entry):
    """features: every canonical feature >= 0; kernel: every <phi(x), phi(z)> >= 0 with
    some feature negative; signed: some kernel value is negative on these inputs."""
    _, cf, _ = _maps(entry, entry.torch)
    phi = cf(_u(3.0).numpy())                                   # (64, r)
    gram = phi @ phi.T                                          # float check of the claim's content only
    if entry.structure is Nonnegativity.FEATURES_NONNEGATIVE:
        assert phi.min() >= 0 and entry.nonnegative
    elif entry.structure is Nonnegativity.KERNEL_NONNEGATIVE:
        assert phi.min() < 0 and gram.min() >= -1e-9 * np.abs(gram).max() and not entry.nonnegative
    else:
        assert gram.min() < 0 and not entry.nonnegative


def test_elu_is_two_maps_each_in_its_own_column():
    """fla's feature_map="elu" is elu + 1 (positive; fla's elu_p1 in torch), performer's
    kernel_fn ELU is elu itself (signed): the canonical meaning of each is unchanged."""
    fla_elu, perf_elu = ft.named("fla", "elu"), ft.named("performer-pytorch", "ELU")
    assert fla_elu.name == "elu1" and fla_elu.canonical is cm.elu_p1 and fla_elu.torch_for("fla") is ft.elu_p1
    assert ft.named("pytorch-fast-transformers", "elu+1") is fla_elu and fla_elu.torch is ft.elu1
    assert perf_elu.name == "elu" and perf_elu.canonical is cm.elu and perf_elu.structure is Nonnegativity.SIGNED
    u = np.array([[-2.0, -0.5, 0.0, 0.75, 3.0]])
    assert (fla_elu.canonical(u) - perf_elu.canonical(u))[0, 2:].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(Exception, match="unknown fla feature map 'elu1'"):
        ft.named("fla", "elu1")


def test_every_library_spelling_selects_one_map():
    for lib in ft.LIBRARIES:
        names = ft.names_in(lib)
        assert names and len(names) == len(set(names)), lib
    assert {lib for e in TABLE.values() for lib in e.names} == set(ft.LIBRARIES)
    assert all(set(e.library_torch) <= set(e.names) for e in TABLE.values())


# ---------------------------------------------------------------- the places derived from the table

def test_fla_layout_reads_its_maps_from_the_table():
    from models.layouts import fla
    assert fla.PARAM_FREE == ft.param_free("fla") and fla.LEARNED == ft.learned("fla")
    assert set(fla.PARAM_FREE) | set(fla.LEARNED) == set(ft.names_in("fla"))
    for name, keys in fla.LEARNED.items():                       # the keys decide the map
        local = fla.QKVO | {f"feature_map_{c}.{k}" for c in "qk" for k in keys}
        assert fla.fits("LinearAttention", local, {}) is None
        assert fla.fits("LinearAttention", local, {"feature_map": name}) is None
        other = next(n for n in fla.PARAM_FREE)
        assert "does not fit the keys" in fla.fits("LinearAttention", local, {"feature_map": other})
    for name in fla.PARAM_FREE:
        phi, r, nonneg, canon = fla._fixed_map(name, D)
        e = ft.named("fla", name)
        assert (phi, r, nonneg, canon) == (e.torch_for("fla"), e.rank(D), e.nonnegative, e.canonical)


def test_other_places_read_the_table():
    from models import adapters, feature_maps, sketch
    from models.layouts import defaults, lucidrains, reference
    assert set(lucidrains.KERNEL_FNS) == {n.lower() for n in ft.names_in("performer-pytorch")}
    assert all(isinstance(reference._kernel_module(n), getattr(torch.nn, n)) for n in ft.names_in("performer-pytorch"))
    assert set(adapters._MAPS) == set(ft.names_in("adapter"))
    assert set(feature_maps.REGISTRY) == set(ft.names_in("project")) | set(ft.names_in("project-lookup"))
    for name, s in feature_maps.REGISTRY.items():
        lib = "project-lookup" if s.kind is feature_maps.MapKind.LOOKUP else "project"
        assert s.guarantee is ft.named(lib, name).structure
    assert sketch.FEATURE_MAPS == ft.names_in("sketch")
    assert set(sketch.RATIONAL_MAPS) == {n for n in sketch.FEATURE_MAPS if ft.named("sketch", n).rational}
    prose = defaults.KERNEL_ARGS[("fla", "LinearAttention")]["feature_map"]
    assert all(re.search(rf"\b{n}\b", prose) for n in ft.param_free("fla"))
    assert all(n in defaults.KERNEL_ARGS[("performer-pytorch", "Performer")]["kernel_fn"]
               for n in ft.names_in("performer-pytorch"))


def test_docs_table_is_the_tables_rendering():
    """docs/layouts.md's feature-map table is :func:`models.feature_table.markdown`
    (``python benchmarks/report.py --pages`` rewrites it)."""
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import report
    page = (ROOT / "docs" / "layouts.md").read_text()
    assert report.blocks_in(page, report.LAYOUTS_MARKS) == report.layouts_blocks()
    assert report.layouts_blocks()["feature maps"] == ft.markdown()
    for e in TABLE.values():
        assert f"| `{e.name}` |" in page


# ---------------------------------------------------------------- the checker's own list

def _checker_sketch_maps() -> tuple[str, ...]:
    """The names the checker's replay numbers accept, read from its source (the checker
    keeps its own list and imports nothing of models/)."""
    from certify.checkers.kernel import replay
    cls = next(n for n in ast.parse(Path(replay.__file__).read_text()).body
               if isinstance(n, ast.ClassDef) and n.name == "Numbers")
    for node in ast.walk(cls):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.NotIn) \
                and isinstance(node.comparators[0], ast.Tuple):
            return tuple(c.value for c in node.comparators[0].elts)
    raise AssertionError("no list of feature maps in certify.checkers.kernel.replay.Numbers")


def test_the_checkers_list_agrees_with_the_table():
    """Names and rational-or-not: the checker replays the sketch maps with Fractions
    exactly where the table calls them rational, and with arb balls elsewhere; its
    feature map gives the table's canonical value (exactly, or inside a ball a few
    ulps wide); its nonnegative-claim methods name the table's structures."""
    from certify.checkers import transcript
    from certify.checkers.kernel.replay import Numbers
    from certify.checkers.kinds import BY_NAME
    names = ft.names_in("sketch")
    assert set(_checker_sketch_maps()) == set(names)
    assert set(transcript._EXACT_MAPS) == {n for n in names if ft.named("sketch", n).rational}
    with pytest.raises(ValueError):
        Numbers("elu")                                          # performer's elu is not a sketch map
    xs = [-3.25, -0.5, -2.0 ** -30, 0.0, 0.125, 2.5, 7.0]
    for n in names:
        e, ops = ft.named("sketch", n), Numbers(n)
        assert ops.balls == (not e.rational), n
        canon = e.canonical(np.array([xs]))[0]
        for x, c in zip(xs, canon):
            v = ops.f(ops.num(Fraction(x)))
            if e.rational:
                assert v == Fraction(float(c)), (n, x)
            else:
                lo, hi = ops.ends(v)
                assert lo - abs(lo) * 2 ** -50 <= Fraction(float(c)) <= hi + abs(hi) * 2 ** -50, (n, x)
    methods = set(BY_NAME["nonnegative"].trusted)
    assert {Nonnegativity.FEATURES_NONNEGATIVE.value, "quadratic_kernel", "all_products"} <= methods


_ADD_A_MAP = r"""
import json
import numpy as np
import torch
from models import feature_table as ft
from models.canonical.arith import f64, linear, relu
new = ft.FeatureMap("relu_squared", "relu(u)^2", lambda u: torch.relu(u) ** 2, lambda u: relu(u) * relu(u), True,
                    ft.Nonnegativity.FEATURES_NONNEGATIVE, "relu(u)^2 >= 0", lambda d, *_: d,
                    {"fla": ("relu_squared",), "adapter": ("relu_squared",)}, elementwise=True)
ft.TABLE = {**ft.TABLE, new.name: new}          # the one edit: an entry in the table
from models.adapters import AdaptedHead, parse_spec
from models.layouts import detect
g = torch.Generator().manual_seed(0)
sd = {f"{n}_proj.weight": torch.randn(4, 4, generator=g) for n in "qkvo"}
cfg = {"class": "LinearAttention", "feature_map": "relu_squared", "num_heads": 2, "do_feature_map_norm": True,
       "norm_q": False, "norm_k": False, "output_norm": "identity"}
head = detect(sd, cfg).layers[0].heads[1]
x = np.array([[0, 1, 1, 0], [1, 0, 1, 1], [1, 1, 1, 1]], dtype=np.float64)
q, k = head.canonical_features(x)
uk = linear(x, f64(sd["k_proj.weight"][2:]), None)
spec = parse_spec({"layout": "generic", "query_weight": "q_proj.weight", "key_weight": "k_proj.weight",
                   "heads": 2, "head": 1, "feature_map": "relu_squared"})
aq, ak = AdaptedHead(spec, sd).canonical_features(x)
print(json.dumps({"map": head.feature_map, "nonneg": head.guarantee, "rank": head.rank,
                  "k": k.tolist() == (relu(uk) * relu(uk)).tolist(), "adapter": ak.tolist() == k.tolist(),
                  "torch": float(abs(head.feature_matrices(torch.from_numpy(x).float())[1].double().numpy()
                                     - k).max())}))
"""


def test_adding_a_map_is_one_table_entry(tmp_path):
    """A new entry (relu squared, named by fla and the adapter spec) and nothing else:
    an fla layer with feature_map="relu_squared" is detected, its features are the
    entry's canonical function, and the adapter spec takes the name too."""
    import json
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _ADD_A_MAP], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["map"] == "fla-relu_squared" and got["nonneg"] == "features_nonnegative" and got["rank"] == 2
    assert got["k"] and got["adapter"] and got["torch"] < 1e-5


def test_torch_functions_survive_the_trip_to_a_worker():
    """Ray sends a head's maps to its workers with cloudpickle: each torch function (a
    closure over the lazily imported torch, for a learned map) comes back computing the same."""
    import pickle
    cloudpickle = pytest.importorskip("cloudpickle")
    u = _u()
    for e in TABLE.values():
        tf, _, _ = _maps(e, e.torch)
        back = pickle.loads(cloudpickle.dumps(tf))
        assert torch.equal(back(u), tf(u)), e.name
