"""Replay certificates in a second environment: other numpy and python-flint versions, no torch.

``python benchmarks/second_environment.py [--cert PATH --cwd DIR ...]`` makes (or reuses) a
virtual environment (``--venv``, default ``.venv-second``) with the base install and the
``[replay]`` extra only -- no torch, no solvers -- pinned to ``--numpy`` and ``--flint``
(default numpy 1.26.4 and python-flint 0.7.1, older than the development environment's), then
runs ``certify verify --replay-extraction`` there on each certificate: by default the gallery's
models stored as safetensors (``reports/gallery/*/certificate.json``, from the repository's root,
where their model files are); ``--cert PATH --cwd DIR`` adds one (e.g. the 24-layer model of
``bench_layers.py``). The extraction is recomputed from the weights in that environment and
compared with the certificate's feature hashes: exit 0 means the same bits on both.

Each run: exit code, the verdict line, CPU seconds and peak RSS of the command and its
descendants, and the versions the environment reports. Results in
``reports/bench/second_environment.json`` (``--smoke``: one gallery model, nothing written).
Making the environment needs the package index (or local wheels, ``PIP_FIND_LINKS``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_realsize import measured  # noqa: E402
from certify.core.files import sha256_file  # noqa: E402

#: gallery models whose weights are torch pickles: their replay needs the [models] extra (torch)
NEEDS_TORCH = ("performer", "performer-user-module")


def environment(venv: Path, numpy: str, flint: str) -> dict:
    """The environment at ``venv`` (made when absent) and the versions it reports."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", f"numpy=={numpy}", f"python-flint=={flint}",
                        "-e", f"{ROOT}[replay]"], check=True)
    probe = ("import json, importlib.util, numpy, flint, safetensors, sys; print(json.dumps({"
             "'python': sys.version.split()[0], 'numpy': numpy.__version__, 'python-flint': flint.__version__, "
             "'safetensors': safetensors.__version__, 'torch': importlib.util.find_spec('torch') is not None}))")
    versions = json.loads(subprocess.run([str(py), "-c", probe], check=True, capture_output=True,
                                         text=True).stdout)
    if (versions["numpy"], versions["python-flint"]) != (numpy, flint):
        raise SystemExit(f"{venv} holds numpy {versions['numpy']} and python-flint "
                         f"{versions['python-flint']}, not {numpy} / {flint}: remove it or name another --venv")
    return {"python_path": str(py), **versions}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv-second")
    ap.add_argument("--numpy", default="1.26.4")
    ap.add_argument("--flint", default="0.7.1")
    ap.add_argument("--cert", action="append", default=[], type=Path,
                    help="a certificate to replay too (repeatable; with --cwd, its folder of inputs)")
    ap.add_argument("--cwd", action="append", default=[], type=Path,
                    help="the folder each --cert is verified from (default: the repository's root)")
    ap.add_argument("--smoke", action="store_true", help="one gallery model; write nothing")
    a = ap.parse_args(argv)
    env = environment(a.venv, a.numpy, a.flint)
    gallery = sorted(p for p in (ROOT / "reports" / "gallery").glob("*/certificate.json")
                     if p.parent.name not in NEEDS_TORCH)
    jobs = [(p, ROOT) for p in (gallery[:1] if a.smoke else gallery)]
    jobs += [(c, (a.cwd[i] if i < len(a.cwd) else ROOT)) for i, c in enumerate(a.cert)]
    print(f"second environment: numpy {env['numpy']}, python-flint {env['python-flint']}, "
          f"torch {'present' if env['torch'] else 'absent'}; load average {os.getloadavg()}", flush=True)
    rows = []
    for cert, cwd in jobs:
        r = measured(["verify", "--replay-extraction", str(cert.resolve())], cwd.resolve(),
                     python=env["python_path"])
        verdict = [ln for ln in r.pop("tail").splitlines() if ln and not ln.startswith(" ")][-1:]
        rows.append({"certificate": str(cert.resolve().relative_to(ROOT)) if cert.resolve().is_relative_to(ROOT)
                     else str(cert), "sha256": sha256_file(cert), "bytes": cert.stat().st_size, **r,
                     "verdict": verdict[0] if verdict else ""})
        print(f"{rows[-1]['certificate']}: exit {r['rc']}, {r['cpu_s']:.1f} CPU s, peak {r['peak_rss_mb']:.0f} MB; "
              f"{rows[-1]['verdict'][:160]}", flush=True)
    ok = all(r["rc"] == 0 for r in rows)
    print(f"{sum(r['rc'] == 0 for r in rows)} of {len(rows)} replayed to exit 0 in the second environment",
          flush=True)
    if not a.smoke:
        out = ROOT / "reports" / "bench" / "second_environment.json"
        env.pop("python_path")
        out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                   "environment": env, "seconds": "cpu (user + system), one thread",
                                   "runs": rows}, indent=1) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
