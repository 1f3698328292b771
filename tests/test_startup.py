"""What ``certify rank`` and ``certify verify`` load for a matrix file: numpy and
python-flint, never torch, cvxpy, Ray, scipy (optimize or otherwise), HiGHS or
matplotlib (read from ``sys.modules`` in a fresh process, not from a clock)."""

import json
import subprocess
import sys

import numpy as np

HEAVY = ("torch", "cvxpy", "ray", "scipy", "highspy", "matplotlib", "safetensors", "mpmath")

#: the command line's own function (``python -m certify`` ends the process in it without returning)
_RUN = """
import json, sys
import certify.__main__
from certify.cli import main
code = main(sys.argv[1:])
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _modules(args, cwd):
    p = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, cwd=cwd,
                       timeout=600)
    out = json.loads(p.stderr.strip().splitlines()[-1])
    return out["exit"], {m.split(".")[0] for m in out["modules"]}, set(out["modules"])


def test_rank_and_verify_of_a_matrix_file_load_no_heavy_library(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "small.npy", (rng.integers(-8, 8, (64, 8)) @ rng.integers(-8, 8, (8, 64))).astype(float))
    code, top, mods = _modules(["rank", "small.npy", "--out", "c.json", "--no-progress"], tmp_path)
    assert code == 0 and json.loads((tmp_path / "c.json").read_text())["claims"][0]["evidence"]["rank_upper"] == 8
    assert {"numpy", "flint", "certify", "solvers"} <= top            # the run did load the library
    assert not top & set(HEAVY), sorted(top & set(HEAVY))
    assert not any(m.startswith("certify.cli.") and m not in ("certify.cli.rank", "certify.cli.common",
                                                              "certify.cli.log") for m in mods), sorted(m for m in mods if m.startswith("certify.cli."))
    # a valid certificate is schema-checked without jsonschema (certify.checkers.schema.conforms); the
    # factor-form, nonnegativity and third-party modules stay unloaded for a matrix file
    assert "jsonschema" not in top and not mods & UNUSED, sorted(mods & UNUSED)
    for args in (["verify", "c.json"], ["rank", "small.npy", "--upper-bound", "freivalds", "--json"]):
        code, top, mods = _modules(args, tmp_path)
        assert code == 0 and not top & set(HEAVY), (args, sorted(top & set(HEAVY)))
        assert "jsonschema" not in top and not mods & UNUSED, (args, sorted(mods & UNUSED))


#: modules a matrix file's rank and verify do not use
UNUSED = {"solvers.exact.gram", "certify.rank.summary", "certify.rank.nonnegative", "certify.sources.thirdparty",
          "certify.sources.weights", "certify.checkers.rank.eps", "certify.checkers.rank.code",
          "certify.checkers.rank.nonnegative", "certify.checkers.gram"}
