"""Genuine certificates, made in a folder by the project's own commands (in this process).

Each :class:`Genuine` is one certificate file with the exit code ``certify verify`` must give
it (docs/commands.md: 0 every verdict re-derived, 4 holds under named assumptions, e.g. a
checkpoint's extraction) and the source files it names, relative to its folder where the
producer was given a relative path. :func:`quick` makes the small ones,
:func:`slow` the LP search's, the gallery checkpoints' (torch) and a construction's.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Genuine:
    kind: str                    # the producer and source form, e.g. "rank-npy-int"
    path: Path                   # the certificate
    exit: int                    # what verify must answer for it (0 or 4)
    sources: tuple[str, ...] = field(default=())   # matrix files it names (relative to its folder)
    command: tuple[str, ...] = field(default=())   # the producer's command and arguments, run in its folder

    def cert(self) -> dict:
        return json.loads(self.path.read_text())


def _run(command: str, args: list[str], cwd: Path) -> int:
    """``certify <command> args`` in this process, from ``cwd``, output swallowed."""
    from certify.cli import run
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return run(command, args)
    finally:
        os.chdir(old)


def low_rank(rng: np.random.Generator, n1: int, n2: int, r: int, lo: int = -3, hi: int = 4) -> np.ndarray:
    """An integer ``n1 x n2`` matrix of rank ``r`` (a product of random factors; rank checked)."""
    while True:
        A = rng.integers(lo, hi, (n1, r)) @ rng.integers(lo, hi, (r, n2))
        import flint
        if flint.fmpz_mat(A.tolist()).rank() == r:
            return A.astype(np.int64)


def _rank(folder: Path, kind: str, name: str, write: Callable[[Path], None], *extra: str,
          want: int = 0) -> Genuine:
    folder.mkdir(parents=True, exist_ok=True)
    write(folder / name)
    args = (name, "--eps", "1/100", *extra)
    rc = _run("rank", [*args, "--out", "c.json", "--no-progress"], folder)
    assert rc in (0, 1), (kind, rc)
    return Genuine(kind, folder / "c.json", want, (name,), ("rank", *args))


def remake(g: Genuine, folder: Path) -> dict | None:
    """``g``'s producer run again in ``folder`` (on the files there), its certificate; None when
    the producer refuses them."""
    rc = _run(g.command[0], [*g.command[1:], "--out", "remade.json", "--no-progress"], folder)
    out = folder / "remade.json"
    return json.loads(out.read_text()) if rc in (0, 1) and out.is_file() else None


def small_chain_code() -> np.ndarray:
    """A 6-word code of weight 5 in 10 coordinates at directed distance >= 3 (the greedy packing):
    every ordered pair has a Lemma 3 chain, so Thm 8's bound on its family with positions exists."""
    from certify.core.codes import greedy_packing
    return greedy_packing(10, 5, 3)


def _theorems(folder: Path) -> Genuine:
    """``certify bounds --constructions --positional``: the bounds at m = 2, Thm 1 at tau = 2 (arb
    balls) and Thm 6 part 1 on {0,1}^2, Thm 8 on a chain family file with positions."""
    from certify.core.families import chain_family
    folder.mkdir(parents=True, exist_ok=True)
    chain_family(small_chain_code(), name="greedy-10-5-3").save(folder / "chain.json")
    rc = _run("bounds", ["--m", "2", "--constructions", "--tau", "2", "--positional", "chain.json",
                         "--out", "c.json"], folder)
    assert rc == 0, rc
    return Genuine("theorems", folder / "c.json", 0)


def quick(base: Path) -> list[Genuine]:
    """The certificates made in the default suite (a few CPU seconds in all)."""
    rng = np.random.default_rng(20260)
    out = []
    A = low_rank(rng, 6, 7, 3)
    out.append(_rank(base / "npy-int", "rank-npy-int", "m.npy", lambda p: np.save(p, A)))
    F = (low_rank(rng, 5, 5, 2) / 8.0).astype(np.float64)
    out.append(_rank(base / "npy-float", "rank-npy-float", "m.npy", lambda p: np.save(p, F)))
    g = np.random.default_rng(7)
    out.append(_rank(base / "npy-gauss", "rank-npy-gauss", "m.npy",
                     lambda p: np.save(p, g.standard_normal((9, 3)) @ g.standard_normal((3, 8)))))
    B = low_rank(rng, 5, 6, 4)
    out.append(_rank(base / "npz", "rank-npz", "m.npz", lambda p: np.savez(p, matrix=B)))
    C = low_rank(rng, 4, 4, 2)
    out.append(_rank(base / "csv", "rank-csv", "m.csv",
                     lambda p: p.write_text("\n".join(",".join(f"{v}/3" for v in row) for row in C.tolist()) + "\n")))
    D = low_rank(rng, 4, 5, 3)
    out.append(_rank(base / "json", "rank-json", "m.json",
                     lambda p: p.write_text(json.dumps([[f"{v}/7" for v in row] for row in D.tolist()]))))
    q, k = rng.integers(0, 3, (16, 3)).astype(np.float64), rng.integers(0, 3, (16, 3)).astype(np.float64)
    out.append(_rank(base / "factor", "rank-factor-npz", "f.npz",
                     lambda p: np.savez(p, phi_q=q, phi_k=k), "--tokens", "cube:4"))
    E = low_rank(rng, 260, 260, 5)                   # over the embedding limit: verify re-reads the file
    out.append(_rank(base / "large", "rank-large-npy", "m.npy", lambda p: np.save(p, E)))
    G = low_rank(rng, 300, 240, 6)
    out.append(_rank(base / "freivalds", "rank-freivalds", "m.npy", lambda p: np.save(p, G),
                     "--upper-bound", "freivalds"))
    (base / "bounds").mkdir(parents=True, exist_ok=True)
    assert _run("bounds", ["--m", "6", "--out", "c.json"], base / "bounds") == 0
    out.append(Genuine("bounds", base / "bounds" / "c.json", 0))
    out.append(_theorems(base / "theorems"))
    (base / "transcript").mkdir(parents=True, exist_ok=True)
    assert _run("transcript", ["--M", "12", "--s", "3", "--h", "6", "--q", "4", "--bits", "1",
                               "--no-progress", "--out", "c.json"], base / "transcript") in (0, 1)
    out.append(Genuine("transcript", base / "transcript" / "c.json", 0))
    return out


def slow(base: Path, everything: bool = True) -> list[Genuine]:
    """The certificates of the LP search, the gallery checkpoints (torch) and a construction;
    without ``everything`` one checkpoint (``lat``)."""
    out = []
    (base / "feasibility").mkdir(parents=True, exist_ok=True)
    assert _run("feasibility", ["--rank", "8", "--no-progress", "--out", "c.json"], base / "feasibility") in (0, 1)
    out.append(Genuine("feasibility", base / "feasibility" / "c.json", 0))
    for model in ("lat", "performer", "zoology", "fast-transformers", "fla-linear-attn")[:5 if everything else 1]:
        folder = base / f"checkpoint-{model}"
        rc = _run("checkpoint", [str(ROOT / "reports/gallery/models" / model), "--no-progress", "--out", str(folder)], base)
        assert rc in (0, 1, 3), (model, rc)       # 3: a head outside what can be certified (signed)
        if (folder / "certificate.json").is_file():
            out.append(Genuine(f"checkpoint-{model}", folder / "certificate.json", 4))
    from certify.api.demo import cube_kernel_certificate
    (base / "construction").mkdir(parents=True, exist_ok=True)
    cube_kernel_certificate(4).write(base / "construction" / "c.json")
    out.append(Genuine("construction", base / "construction" / "c.json", 4))
    return out
