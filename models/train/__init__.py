"""Training and the Sec. 5 sweeps, reproduced on CPU.

Commands (progress bars on stderr; outputs written atomically)::

    python -m models.train sec51 [--smoke] [--out DIR] [--save-checkpoints DIR]
    python -m models.train sec52 [--smoke] [--out DIR] [--save-checkpoints DIR]
    python -m models.train report [--out DIR]

``sec51``: lookup-table kernel heads (:class:`models.heads.LookupHead`, free
query/key feature tables through softplus and a free query-token table
``g_x(z)``) on the ``paper-5.1`` family, six ranks x five seeds; success =
max error < 1/2 at the scored query position. ``sec52``: one-layer one-head
positive-feature heads (``elu1`` over a linear projection, ``dv = 16``) at nine
ranks x five seeds plus a dense softmax control, at ``(M, q, n) = (6,4,8),
(8,6,12), (10,8,16)``, scored by exact-sequence accuracy on the joint-OOD test
pool; each run trains until its train exact-sequence accuracy stops improving
(:class:`Sec52Config`, ``budget="plateau"``; ``--budget fixed`` restores the
earlier fixed 2,000-step cosine protocol; ``--feature-map`` picks the kernel heads' map,
``--lr-dense`` the dense control's own initial rate, ``--unseen-pool`` trains without the
held-out words and scores each run on the unseen-token pool too, :mod:`models.train.unseen`).
Each sweep writes a per-run CSV into ``DIR`` (default ``reports/paper-sec5``), redraws its
figure and the README table. Sec. 5.1's README and Figure 1 mark the ranks the committed
feasibility certificates prove infeasible (``sec51_certified.json``, written by
:func:`write_certified` from :mod:`models.train.certified`).

Seeds are local (``torch.Generator``); the sweeps run with one torch thread
and restore the previous thread count. Both sweeps run on the parallel engine
(``--workers N`` for a local Ray, ``--ray-address`` for a cluster): each run
is a task with its own seeds and one torch thread, and the runs are merged in
task order, so the rows are the same for any number of workers.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from tqdm import tqdm

from certify.core.families import Family, ood_families, paper51_family
from certify.core.files import atomic_write_bytes, atomic_write_text
from models.heads import DenseSoftmaxHead, KernelHead, LookupHead

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "reports" / "paper-sec5"


# ---------------------------------------------------------------- configs

@dataclass(frozen=True)
class Sec51Config:
    ranks: tuple[int, ...] = (4, 8, 12, 15, 24, 32)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    steps: int = 5000
    lr_features: float = 0.05          # Adam, cosine decay to 0
    lr_table: float = 0.1              # the query-token table g_x(z)
    hinge_weight: float = 10.0         # loss = MSE + w * mean(relu(|e| - margin)^2)
    hinge_margin: float = 0.25
    feature_map: str = "lookup_softplus"
    init_scale: float = 1.0
    keep: tuple[tuple[int, int], ...] = ((8, 0), (32, 0))   # (rank, seed) saved as checkpoints


@dataclass(frozen=True)
class Sec52Config:
    """The Sec. 5.2 protocol. ``budget="plateau"`` (the default) trains each run until
    its train exact-sequence accuracy stops improving: every ``eval_every`` steps the
    accuracy on the whole train pool is measured; when the best value has not risen
    by more than ``min_delta`` over the last ``patience`` evaluations, the learning
    rate is divided by ``lr_factor`` (at most ``lr_drops`` times) and, at the next such
    plateau, training stops; a run that first fitted its train pool (accuracy 1)
    ``patience`` or more evaluations ago and fits it again now stops at once; ``steps`` is the cap. ``budget="fixed"``
    is the earlier protocol: exactly ``steps`` steps with cosine decay to 0.
    ``lr_by_rank`` overrides the initial learning rate per rank (rank 0 = dense)."""

    scales: tuple[tuple[int, int, int], ...] = ((6, 4, 8), (8, 6, 12), (10, 8, 16))
    ranks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    dense: bool = True
    steps: int = 20000                 # the cap (plateau) or the exact count (fixed)
    batch: int = 256
    lr: float = 0.01                   # Adam; loss MSE at query positions
    budget: str = "plateau"            # "plateau" or "fixed"
    eval_every: int = 250
    patience: int = 8                  # evaluations (8 x 250 = 2000 steps)
    min_delta: float = 0.005
    lr_drops: int = 2
    lr_factor: float = 10.0
    lr_by_rank: tuple[tuple[int, float], ...] = ()
    feature_map: str = "elu1"
    dv: int = 16
    unseen: bool = False               # train without the held-out words; score the unseen-token pool too
    held_out: int = 0                  # held-out words per scale (0: q + 2), see models.train.unseen
    train_size: int = 2048
    test_size: int = 1024
    data_seed: int = 0
    keep: tuple[tuple[int, int, int], ...] = ((6, 8, 0), (6, 32, 0))   # (M, rank, seed) saved

    def __post_init__(self) -> None:
        if self.budget not in ("plateau", "fixed"):
            raise ValueError(f"budget must be 'plateau' or 'fixed', got {self.budget!r}")
        if self.steps < 1 or self.eval_every < 1 or self.patience < 1 or self.lr_drops < 0:
            raise ValueError("steps, eval_every and patience must be >= 1, lr_drops >= 0")

    def initial_lr(self, rank: int | None) -> float:
        """The initial learning rate of a run at ``rank`` (``None`` = dense control)."""
        return dict(self.lr_by_rank).get(rank or 0, self.lr)


SMOKE_51 = Sec51Config(ranks=(4, 32), seeds=(0,), steps=40, keep=((4, 0), (32, 0)))
SMOKE_52 = Sec52Config(scales=((6, 4, 8),), ranks=(2, 8), seeds=(0,), steps=60, batch=64,
                       eval_every=10, patience=2, train_size=128, test_size=64, keep=((6, 8, 0),))


@dataclass(frozen=True)
class Run51:
    rank: int
    seed: int
    max_error: float
    mean_error: float
    accuracy: float          # fraction of scored positions with |err| < 1/2
    coverage: float          # fraction of ordered pairs whose every input is correct
    solved: bool             # max error < 1/2
    final_loss: float
    steps: int
    seconds: float


@dataclass(frozen=True)
class Run52:
    M: int
    q: int
    n: int
    model: str               # "kernel" or "dense"
    rank: int                # 0 for the dense control
    seed: int
    test_exact_seq_acc: float
    train_exact_seq_acc: float
    test_max_error: float
    final_loss: float
    steps: int               # steps taken
    seconds: float
    budget_steps: int = 0    # the cap (plateau budget) or the fixed count
    lr: float = 0.0          # initial learning rate
    lr_final: float = 0.0    # learning rate at the last step
    stop: str = ""           # "fit", "plateau", "cap" or "fixed"
    unseen_test_exact_seq_acc: float = float("nan")   # on the unseen-token pool (cfg.unseen)
    feature_map: str = ""


# ---------------------------------------------------------------- helpers

@contextmanager
def one_thread() -> Iterator[None]:
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def _cosine(opt: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))


def _family_tensors(fam: Family):
    return (torch.from_numpy(fam.tokens.copy()), torch.from_numpy(fam.inputs.copy()),
            torch.from_numpy(fam.targets.copy()), torch.from_numpy(fam.scored.copy()))


def write_csv(path: Path, rows: Sequence) -> None:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(asdict(rows[0])) if hasattr(rows[0], "__dataclass_fields__")
                           else list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow(asdict(r) if hasattr(r, "__dataclass_fields__") else r)
    atomic_write_text(path, buf.getvalue())


def read_csv(path: Path, cls):
    if not path.is_file():
        return []
    types = {f.name: str(f.type) for f in fields(cls)}       # annotations are strings (PEP 563)
    conv: dict[str, Callable[[str], object]] = {"int": int, "float": float, "str": str,
                                                "bool": lambda s: s == "True"}
    with open(path, newline="") as f:
        return [cls(**{k: conv[types[k]](v) for k, v in row.items()}) for row in csv.DictReader(f)]


# ---------------------------------------------------------------- Sec. 5.1

def train_lookup(fam: Family, rank: int, seed: int, cfg: Sec51Config) -> tuple[LookupHead, float]:
    """Train a lookup-table head on every input of ``fam`` (full batch)."""
    g = torch.Generator().manual_seed(seed)
    model = LookupHead(fam.tokens, rank, cfg.feature_map, generator=g, init_scale=cfg.init_scale)
    _, inputs, targets, scored = _family_tensors(fam)
    targets = targets.to(model.dtype)
    opt = torch.optim.Adam([{"params": [model.query_map.raw, model.key_map.raw], "lr": cfg.lr_features},
                            {"params": [model.g], "lr": cfg.lr_table}])
    sched = _cosine(opt, cfg.steps)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(cfg.steps):
        e = (model(inputs) - targets)[scored]                              # (P,)
        loss = (e * e).mean() + cfg.hinge_weight * (torch.relu(e.abs() - cfg.hinge_margin) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return model, loss.item()


def evaluate_lookup(model: LookupHead, fam: Family) -> dict:
    """Float metrics of a lookup head on ``fam``: errors, ordered-pair coverage and
    the chain endpoint ratios ``alpha(x, y_0) / alpha(x, y_k)`` per ordered pair."""
    _, inputs, targets, scored = _family_tensors(fam)
    with torch.no_grad():
        err = (model(inputs).double() - targets).abs().numpy()             # (I, n)
        PQ, PK = (t.double().numpy() for t in model.feature_matrices(fam.tokens))
    ok_input = ((err < 0.5) | ~fam.scored).all(1)                          # (I,)
    e = err[fam.scored]
    J = fam.jumps
    assert J is not None                    # a Sec. 5.1 family lists its jumps
    alpha = PQ @ PK.T                                                      # (K, K)
    pairs: dict[tuple[int, int], dict[str, Any]] = {}
    ratios: list[dict[str, Any]] = []
    for row in J:
        s, u, step, x, y, z = (int(v) for v in row[:6])
        good = bool(ok_input[row[8]] and ok_input[row[9]] and ok_input[row[10]])
        rec = pairs.setdefault((s, u), {"ok": True, "x": x, "first": None, "last": None, "k": 0})
        rec["ok"] &= good
        rec["k"] = max(rec["k"], step + 1)
        if step == 0:
            rec["first"] = y
        if rec["last"] is None or step + 1 >= rec["k"]:
            rec["last"] = z
    for (s, u), rec in sorted(pairs.items()):
        num, den = alpha[rec["x"], rec["first"]], alpha[rec["x"], rec["last"]]
        ratios.append({"word_s": s, "word_u": u, "steps": rec["k"],
                       "log2_ratio": float(np.log2(num / den)) if den > 0 and num > 0 else float("nan")})
    return {"max_error": float(e.max()), "mean_error": float(e.mean()),
            "accuracy": float((e < 0.5).mean()),
            "coverage": float(np.mean([rec["ok"] for rec in pairs.values()])),
            "ratios": ratios}


def _job51(fam: Family, rank: int, seed: int, cfg: Sec51Config):
    """One Sec. 5.1 run (module level: a parallel task). Returns the model too."""
    t = time.perf_counter()
    with one_thread():
        model, loss = train_lookup(fam, rank, seed, cfg)
        ev = evaluate_lookup(model, fam)
    run = Run51(rank, seed, ev["max_error"], ev["mean_error"], ev["accuracy"], ev["coverage"],
                ev["max_error"] < 0.5, loss, cfg.steps, time.perf_counter() - t)
    return run, ev, model


def sweep51(cfg: Sec51Config, out: Path, checkpoints: Path | None = None,
            progress: bool = True, engine=None) -> list[Run51]:
    """The Sec. 5.1 sweep; with an ``engine`` (:mod:`certify.core.engine`) the
    (rank, seed) runs are parallel tasks, merged in the same order."""
    from models.checkpoint import save_checkpoint
    from models.constructions import lookup_construction

    fam = paper51_family()
    runs: list[Run51] = []
    ratio_rows: list[dict] = []
    t0, c0 = time.perf_counter(), time.process_time()
    jobs = [(r, s) for r in cfg.ranks for s in cfg.seeds]
    if engine is not None and engine.parallel:
        done = engine.map(_job51, [(fam, r, s, cfg) for r, s in jobs], label="sec51")
    else:
        done = None
    with one_thread(), tqdm(jobs, desc="sec51", file=sys.stderr,
                            disable=not progress or done is not None) as bar:
        for j, (rank, seed) in enumerate(bar):
            run, ev, model = done[j] if done is not None else _job51(fam, rank, seed, cfg)
            runs.append(run)
            if rank == max(cfg.ranks):           # Figure 1(c) uses the largest rank
                ratio_rows += [{"rank": rank, "seed": seed, **r} for r in ev["ratios"]]
            bar.set_postfix(r=rank, seed=seed, max_err=f"{run.max_error:.3f}")
            if checkpoints is not None and (rank, seed) in cfg.keep:
                save_checkpoint(model, checkpoints / f"paper51-lookup-r{rank}-s{seed}", {
                    "seed": seed, "family": {"name": fam.name, "sha256": fam.sha256},
                    "training": {"command": "python -m models.train sec51", **_plain(cfg)},
                    "metrics": {"max_error": run.max_error, "coverage": run.coverage,
                                "solved": run.solved}})
            write_csv(out / "sec51_runs.csv", runs)
    write_csv(out / "sec51_ratios.csv", ratio_rows)
    con = lookup_construction(fam)
    chk = con.check_family(fam)
    if checkpoints is not None:
        save_checkpoint(con.to_lookup_head(), checkpoints / "paper51-lookup-construction-r15", {
            "family": {"name": fam.name, "sha256": fam.sha256},
            "training": {"construction": "models.constructions.lookup_construction",
                         "base": con.params["base"]},
            "metrics": {"exact_max_error": str(chk.max_error), "solved": chk.ok}})
    _record_timing(out, "sec51", time.perf_counter() - t0, time.process_time() - c0, cfg,
                   extra={"construction_rank": con.rank, "construction_ok": chk.ok,
                          "construction_max_error": str(chk.max_error)})
    write_certified(out)
    figure1(out)
    write_readme(out)
    return runs


# ---------------------------------------------------------------- Sec. 5.2

def exact_sequence_accuracy(model, fam: Family) -> tuple[float, float]:
    """(fraction of inputs whose every scored position has |err| < 1/2, max error)."""
    tokens, inputs, targets, scored = _family_tensors(fam)
    model.eval()
    with torch.no_grad():
        err = (model.forward_indexed(tokens, inputs).double() - targets).abs()
    ok = ((err < 0.5) | ~scored).all(1)
    return float(ok.double().mean()), float(err[scored].max())


def _train_exact_seq_acc(model, tokens, inputs, targets, scored, chunk: int = 1024) -> float:
    """Exact-sequence accuracy on a pool on the training path (torch features, no
    gradient): the stopping rule's measurement, cheaper than the canonical path."""
    ok = []
    with torch.no_grad():
        for i in range(0, len(inputs), chunk):
            err = (model.forward_indexed(tokens, inputs[i:i + chunk]) - targets[i:i + chunk]).abs()
            ok.append(((err < 0.5) | ~scored[i:i + chunk]).all(1))
    return float(torch.cat(ok).double().mean())


@dataclass(frozen=True)
class TrainLog:
    """How a Sec. 5.2 run used its budget."""

    steps: int
    stop: str                 # "fit", "plateau", "cap" or "fixed"
    lr: float                 # initial learning rate
    lr_final: float
    curve: tuple[tuple[int, float], ...]   # (step, train exact-sequence accuracy) per evaluation


def train_ood(train: Family, M: int, rank: int | None, seed: int, cfg: Sec52Config,
              log: list | None = None):
    """Train a kernel head (``rank``) or the dense control (``rank=None``) on the
    train pool with minibatches; MSE at the query positions; the budget is
    ``cfg.budget`` (see :class:`Sec52Config`). Returns ``(model, final loss)``;
    a :class:`TrainLog` is appended to ``log`` when one is given."""
    g = torch.Generator().manual_seed(seed)
    m = M + 2
    model: DenseSoftmaxHead | KernelHead
    if rank is None:
        model = DenseSoftmaxHead(m, m, cfg.dv, generator=g)
    else:
        model = KernelHead(m, rank, cfg.dv, cfg.feature_map, generator=g)
    tokens, inputs, targets, scored = _family_tensors(train)
    targets = targets.to(model.dtype)
    batch_gen = torch.Generator().manual_seed(10_000 + seed)
    lr0 = cfg.initial_lr(rank)
    opt = torch.optim.Adam(model.parameters(), lr=lr0)
    fixed = cfg.budget == "fixed"
    sched = _cosine(opt, cfg.steps) if fixed else None
    model.train()
    loss = torch.tensor(float("nan"))
    curve: list[tuple[int, float]] = []
    best, since, drops, stop, step = -1.0, 0, 0, ("fixed" if fixed else "cap"), 0
    while step < cfg.steps:
        idx = torch.randint(0, len(inputs), (min(cfg.batch, len(inputs)),), generator=batch_gen)
        e = (model.forward_indexed(tokens, inputs[idx]) - targets[idx])[scored[idx]]
        loss = (e * e).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if sched is not None:
            sched.step()
            continue
        if step % cfg.eval_every:
            continue
        acc = _train_exact_seq_acc(model, tokens, inputs, targets, scored)
        curve.append((step, acc))
        if acc > best + cfg.min_delta:
            best, since = acc, 0
        else:
            best, since = max(best, acc), since + 1
        if acc == 1.0 and best == 1.0 and since >= cfg.patience:
            stop = "fit"
            break
        if since >= cfg.patience:
            if drops == cfg.lr_drops:
                stop = "plateau"
                break
            drops, since = drops + 1, 0
            for grp in opt.param_groups:
                grp["lr"] /= cfg.lr_factor
    model.eval()
    if log is not None:
        log.append(TrainLog(step, stop, lr0, opt.param_groups[0]["lr"], tuple(curve)))
    return model, loss.item()


def _job52(train: Family, test: Family, scale: tuple[int, int, int], rank: int | None, seed: int,
           cfg: Sec52Config, unseen: Family | None = None):
    """One Sec. 5.2 run (module level: a parallel task): its own seeds (``seed`` for the
    initialisation, ``10000 + seed`` for the minibatches) and one torch thread, so the
    run is the same in any process. Returns the run and the trained model."""
    M, q, n = scale
    t = time.perf_counter()
    log: list[TrainLog] = []
    with one_thread():
        model, loss = train_ood(train, M, rank, seed, cfg, log)
        acc, max_err = exact_sequence_accuracy(model, test)
        train_acc, _ = exact_sequence_accuracy(model, train)
        unseen_acc = exact_sequence_accuracy(model, unseen)[0] if unseen is not None else float("nan")
    lg = log[0]
    run = Run52(M, q, n, "dense" if rank is None else "kernel", rank or 0, seed, acc,
                train_acc, max_err, loss, lg.steps, time.perf_counter() - t,
                cfg.steps, lg.lr, lg.lr_final, lg.stop, unseen_acc,
                "softmax" if rank is None else cfg.feature_map)
    return run, model


def _pools52(scale: tuple[int, int, int], cfg: Sec52Config) -> tuple[Family, Family, Family | None]:
    """(train, label-disjoint test, unseen-token test or None) at ``scale``: with
    ``cfg.unseen`` the train pool skips the held-out words' inputs
    (:func:`models.train.unseen.unseen_token_pools`), else it is the generator's."""
    M, q, _ = scale
    _, test = ood_families(*scale, train_size=cfg.train_size, test_size=cfg.test_size, seed=cfg.data_seed)
    if not cfg.unseen:
        train, _ = ood_families(*scale, train_size=cfg.train_size, test_size=cfg.test_size,
                                seed=cfg.data_seed)
        return train, test, None
    from models.train.unseen import unseen_token_pools
    train, unseen = unseen_token_pools(M, q, train_size=cfg.train_size, test_size=cfg.test_size,
                                       seed=cfg.data_seed, h=cfg.held_out or None)
    return train, test, unseen


def sweep52(cfg: Sec52Config, out: Path, checkpoints: Path | None = None,
            progress: bool = True, engine=None) -> list[Run52]:
    """The Sec. 5.2 sweep; with an ``engine`` on Ray the (scale, rank, seed) runs are
    parallel tasks (the pools are built once here and shipped with the tasks),
    merged in the same order: the runs' rows do not depend on the worker count."""
    from models.checkpoint import save_checkpoint

    runs: list[Run52] = []
    t0, c0 = time.perf_counter(), time.process_time()
    per_scale: dict[str, float] = {}
    models = list(cfg.ranks) + ([None] if cfg.dense else [])
    jobs = [(sc, r, s) for sc in cfg.scales for r in models for s in cfg.seeds]
    pools = {sc: _pools52(sc, cfg) for sc in cfg.scales}
    done = None
    if engine is not None and engine.parallel:
        done = engine.map(_job52, [(*pools[sc][:2], sc, r, s, cfg, pools[sc][2]) for sc, r, s in jobs],
                          label="sec52")
    with one_thread(), tqdm(jobs, desc="sec52", file=sys.stderr,
                            disable=not progress or done is not None) as bar:
        for j, ((M, q, n), rank, seed) in enumerate(bar):
            train, test, unseen = pools[(M, q, n)]
            run, model = (done[j] if done is not None
                          else _job52(train, test, (M, q, n), rank, seed, cfg, unseen))
            per_scale[f"{M}-{q}-{n}"] = per_scale.get(f"{M}-{q}-{n}", 0.0) + run.seconds
            runs.append(run)
            bar.set_postfix(scale=f"{M},{q},{n}", r=rank or "dense", acc=f"{run.test_exact_seq_acc:.3f}")
            if checkpoints is not None and rank is not None and (M, rank, seed) in cfg.keep:
                save_checkpoint(model, checkpoints / f"ood-{M}-{q}-{n}-{cfg.feature_map}-r{rank}-s{seed}", {
                    "seed": seed, "family": {"name": train.name, "sha256": train.sha256},
                    "training": {"command": "python -m models.train sec52", **_plain(cfg),
                                 "test_family": {"name": test.name, "sha256": test.sha256}},
                    "metrics": {"test_exact_seq_acc": run.test_exact_seq_acc,
                                "train_exact_seq_acc": run.train_exact_seq_acc,
                                "test_max_error": run.test_max_error}})
            write_csv(out / "sec52_runs.csv", runs)
    _record_timing(out, "sec52", time.perf_counter() - t0, time.process_time() - c0, cfg,
                   extra={"seconds_per_scale": {k: round(v, 1) for k, v in per_scale.items()},
                          "workers": engine.workers if done is not None else 1})
    figure2(out)
    write_readme(out)
    return runs


# ---------------------------------------------------------------- records, figures, README

def _plain(cfg) -> dict:
    return json.loads(json.dumps(asdict(cfg)))


def _record_timing(out: Path, name: str, seconds: float, cpu_seconds: float, cfg, extra: dict) -> None:
    path = out / "sweeps.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[name] = {"seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1),
                  "torch_threads": 1, "config": _plain(cfg), **extra}
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _ci95(vals: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% Student-t interval); half-width 0 for one value."""
    from scipy import stats

    v = np.asarray(vals, dtype=float)
    if len(v) < 2:
        return float(v.mean()), 0.0
    return float(v.mean()), float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))


def _save_figure(fig, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


CERTIFIED = "sec51_certified.json"


def write_certified(out: Path, cert_dir: Path | None = None) -> dict | None:
    """``sec51_certified.json``: the ranks the committed certificates decide for
    paper-5.1 (:mod:`models.train.certified`), per feature class, and for the runs of
    ``sec51_runs.csv`` which failures were certain (the rank is proved infeasible for
    the trained heads' class) and which were optimisation; Figure 1 and the README
    read this file. None (nothing written) when there are no Sec. 5.1 runs."""
    from models.train import certified as cz

    runs = read_csv(out / "sec51_runs.csv", Run51)
    if not runs:
        return None
    paths = sorted((cert_dir or cz.CERT_DIR).glob("*.json"))
    cert = cz.certified_ranks(paths)
    per_rank = {r: (sum(x.rank == r for x in runs), sum(x.solved for x in runs if x.rank == r))
                for r in sorted({x.rank for x in runs})}
    data = {"family": cz.FAMILY, "class": "paper", "trained_features": cz.TRAINED_CLASS,
            "folder": _rel(cert_dir or cz.CERT_DIR), "read_from": [p.name for p in paths],
            "classes": {k: v.to_json() for k, v in cert.items()},
            "runs": {str(r): v for r, v in cz.run_verdicts(per_rank, cert[cz.TRAINED_CLASS]).items()},
            "shaded_up_to": {k: v.infeasible_max for k, v in cert.items()}}
    atomic_write_text(out / CERTIFIED, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _read_certified(out: Path) -> dict:
    p = out / CERTIFIED
    return json.loads(p.read_text()) if p.is_file() else {}


def figure1(out: Path) -> None:
    """Figure 1: (a) max error vs rank, (b) ordered-pair coverage, (c) endpoint ratios.
    Shaded: the ranks ``sec51_certified.json`` records as proved infeasible, for the
    trained heads' (nonnegative) features and for real features; dotted: the paper's
    bound r < 8."""
    from matplotlib.figure import Figure

    runs = read_csv(out / "sec51_runs.csv", Run51)
    if not runs:
        return
    shade = _read_certified(out).get("shaded_up_to", {})
    ratios = list(csv.DictReader(open(out / "sec51_ratios.csv"))) if (out / "sec51_ratios.csv").is_file() else []
    timing = json.loads((out / "sweeps.json").read_text()).get("sec51", {}) if (out / "sweeps.json").is_file() else {}
    ranks = sorted({r.rank for r in runs})
    fig = Figure(figsize=(13, 3.8))
    axa, axb, axc = fig.subplots(1, 3)
    for ax, key, label in ((axa, "max_error", "maximum error"), (axb, "coverage", "ordered-pair coverage")):
        for r in ranks:
            vals = [getattr(x, key) for x in runs if x.rank == r]
            mean, hw = _ci95(vals)
            ax.errorbar([r], [mean], yerr=[hw], fmt="o", color="C0", capsize=4)
            ax.scatter([r] * len(vals), vals, s=10, color="C0", alpha=0.35)
        for feats, tone in (("nonnegative", "0.88"), ("real", "0.72")):
            if shade.get(feats):
                ax.axvspan(0, shade[feats] + 0.5, color=tone, zorder=0,
                           label=f"certified infeasible, {feats} features (r <= {shade[feats]})")
        ax.axvline(7.5, ls=":", color="0.4", lw=1, label="the paper's bound (r < 8)")
        ax.set_xlabel("feature rank r")
        ax.set_ylabel(label)
        ax.set_xlim(0, max(ranks) + 2)
    axa.axhline(0.5, ls=":", color="k", lw=1, label="error 1/2")
    if "construction_max_error" in timing:
        axa.plot([15], [float(Fraction(timing["construction_max_error"]))], marker="*", ms=14,
                 color="C3", ls="none", label="constructed r = 15 (exact)")
    axa.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    axa.set_title("(a) max error, mean and 95% t-interval", fontsize=9)
    axb.set_title("(b) ordered pairs fully correct", fontsize=9)
    rmax = max(ranks)
    pts = [(int(r["steps"]), float(r["log2_ratio"])) for r in ratios if int(r["rank"]) == rmax]
    if pts:
        rng = np.random.default_rng(0)
        k = np.array([p[0] for p in pts], dtype=float)
        axc.scatter(k + rng.uniform(-0.15, 0.15, len(k)), [p[1] for p in pts], s=8, alpha=0.4)
        ks = np.arange(0, int(k.max()) + 2)
        axc.plot(ks, ks, "k--", lw=1, label="factor two per step")
        axc.legend(fontsize=7)
    axc.set_xlabel("chain steps k")
    axc.set_ylabel("log2 alpha(x, y_0) / alpha(x, y_k)")
    axc.set_title(f"(c) r = {rmax} endpoint ratios, all seeds", fontsize=9)
    fig.tight_layout()
    _save_figure(fig, out / "figure1.png")


def figure2(out: Path) -> None:
    """Figure 2: joint-OOD exact-sequence accuracy vs rank per scale."""
    from matplotlib.figure import Figure

    runs = read_csv(out / "sec52_runs.csv", Run52)
    if not runs:
        return
    scales = sorted({(r.M, r.q, r.n) for r in runs})
    fig = Figure(figsize=(11, 3.8))
    axa, axb = fig.subplots(1, 2)
    for i, sc in enumerate(scales):
        kr = [r for r in runs if (r.M, r.q, r.n) == sc and r.model == "kernel"]
        ranks = sorted({r.rank for r in kr})
        stats_ = [_ci95([r.test_exact_seq_acc for r in kr if r.rank == k]) for k in ranks]
        label = f"(M,q,n) = {sc}"
        axa.plot(ranks, [s[0] for s in stats_], "o-", color=f"C{i}", label=label)
        axa.plot(ranks, [np.mean([r.train_exact_seq_acc for r in kr if r.rank == k]) for k in ranks],
                 "x:", color=f"C{i}", lw=1, label=f"{sc} train pool")
        axb.errorbar(ranks, [s[0] for s in stats_], yerr=[s[1] for s in stats_], fmt="o-",
                     color=f"C{i}", capsize=3, label=label)
        dense = [r.test_exact_seq_acc for r in runs if (r.M, r.q, r.n) == sc and r.model == "dense"]
        if dense:
            for ax in (axa, axb):
                ax.axhline(np.mean(dense), ls="--", color=f"C{i}", lw=1)
    for ax in (axa, axb):
        ax.set_xscale("log", base=2)
        ax.axhline(0.9, ls=":", color="k", lw=1)
        ax.set_xlabel("feature rank r")
        ax.set_ylabel("joint-OOD exact-sequence accuracy")
        ax.set_ylim(-0.02, 1.02)
    axa.legend(fontsize=7, loc="lower right")
    axa.set_title("(a) seed means, test (o) and train (x); dashed: dense; dotted: 90%", fontsize=9)
    axb.set_title("(b) means with 95% Student-t intervals", fontsize=9)
    fig.tight_layout()
    _save_figure(fig, out / "figure2.png")


def transition_rank(runs: Sequence[Run52], scale: tuple[int, int, int], level: float = 0.9,
                    interval: bool = False, pool: str = "test") -> int | None:
    """Least rank whose seed-mean test exact-sequence accuracy is >= level; with
    ``interval``, least rank whose whole 95% Student-t interval is >= level;
    ``pool="unseen"`` reads the unseen-token pool instead of the label-disjoint one."""
    attr = "unseen_test_exact_seq_acc" if pool == "unseen" else "test_exact_seq_acc"
    kr = [r for r in runs if (r.M, r.q, r.n) == scale and r.model == "kernel"]
    for k in sorted({r.rank for r in kr}):
        mean, hw = _ci95([getattr(r, attr) for r in kr if r.rank == k])
        if mean - (hw if interval else 0.0) >= level:
            return k
    return None


PAPER_TRANSITIONS = {(6, 4, 8): 8, (8, 6, 12): 16, (10, 8, 16): 64}


def _protocol52(c: dict) -> str:
    """The protocol sentence of the Sec. 5.2 section, from the recorded config."""
    head = (f"Protocol: one-layer one-head `KernelHead` with `{c.get('feature_map')}` features over a "
            f"learned projection of the (M+2)-bit tokens, affine values (dv = {c.get('dv')}) and a "
            "query-dependent affine readout; dense control `DenseSoftmaxHead` (dk = M+2, same dv). "
            f"Pools from `ood_families(M, q, train_size={c.get('train_size')}, "
            f"test_size={c.get('test_size')}, seed={c.get('data_seed')})` (the versioned generator of "
            "`certify.checkers.generators`). MSE at query positions, Adam, batch "
            f"{c.get('batch')}. ")
    if c.get("budget", "fixed") == "fixed":
        budget = f"Learning rate {c.get('lr')}, cosine decay, {c.get('steps')} steps for every run. "
    else:
        per = dict(tuple(x) for x in c.get("lr_by_rank", []))
        budget = (f"Budget per run (rank, scale and seed): train until the train exact-sequence accuracy "
                  f"stops improving. Every {c.get('eval_every')} steps the accuracy on the whole train "
                  f"pool is measured; when its best value has not risen by more than "
                  f"{c.get('min_delta')} over {c.get('patience')} evaluations, the learning rate "
                  f"(initially {c.get('lr')}"
                  + (f"; per rank {per}" if per else " for every rank and the dense control")
                  + f") is divided by {c.get('lr_factor'):g}, at most {c.get('lr_drops')} times, and "
                  f"the next such plateau stops the run; a run that has fitted its train pool (accuracy 1) "
                  f"for {c.get('patience')} evaluations and fits it again stops then; cap "
                  f"{c.get('steps')} steps. ")
    return (head + budget + "Exact-sequence accuracy = fraction of inputs whose every query has error "
            "< 1/2 (reported on the canonical path of the trained head)."
            + (" Unseen-token runs: the train pool skips every input holding a token of the "
               f"held-out words ({c.get('held_out') or 'q + 2'} per scale), and each run is also scored "
               "on the unseen-token pool built from those words (`models.train.unseen`)."
               if c.get("unseen") else ""))


def _unseen_rows(runs52: Sequence[Run52], scales, ranks, pick) -> list[str]:
    """The unseen-token pool's table and both pools' transitions (``cfg.unseen`` runs)."""
    L = ["", "Unseen-token pool (`models.train.unseen`: no token of it occurs in the train pool), "
         "test exact-sequence accuracy, mean ± 95% Student-t half-width:", "",
         "| (M,q,n) | " + " | ".join(f"r={k}" for k in ranks) + " | dense |",
         "|---|" + "---|" * (len(ranks) + 1)]
    for sc in scales:
        cells = []
        for rs in [pick(sc, "kernel", k) for k in ranks] + [pick(sc, "dense")]:
            m, hw = _ci95([r.unseen_test_exact_seq_acc for r in rs]) if rs else (float("nan"), 0.0)
            cells.append(f"{m:.3f} ± {hw:.3f}" if rs else "-")
        L.append(f"| {sc} | " + " | ".join(cells) + " |")
    L += ["", "| 90% transition (paper: " + " -> ".join(str(PAPER_TRANSITIONS.get(sc, "?")) for sc in scales)
          + ") | seed mean >= 0.9 | whole 95% interval >= 0.9 |", "|---|---|---|"]
    for pool, label in (("test", "label-disjoint pool"), ("unseen", "unseen-token pool")):
        by = [" -> ".join(str(t) if t is not None else f"> {max(ranks)}"
                          for t in (transition_rank(runs52, sc, interval=iv, pool=pool) for sc in scales))
              for iv in (False, True)]
        L.append(f"| {label} | {by[0]} | {by[1]} |")
    return L


def _sec52_section(runs52: Sequence[Run52], t52: dict) -> list[str]:
    c = t52.get("config", {})
    scales = sorted({(r.M, r.q, r.n) for r in runs52})
    ranks = sorted({r.rank for r in runs52 if r.model == "kernel"})
    seeds = sorted({r.seed for r in runs52})

    def pick(sc, model, rank=None):
        return [r for r in runs52 if (r.M, r.q, r.n) == sc and r.model == model
                and (rank is None or r.rank == rank)]

    stopped = ([f"**Partial sweep**: the rows of {', '.join(str(tuple(x)) for x in t52['completed_scales'])} "
                f"only; {t52['stopped']}.", ""] if t52.get("stopped") else [])
    L = ["## Sec. 5.2: joint-OOD feature-capacity scaling", "", _protocol52(c), "", *stopped,
         f"Test exact-sequence accuracy, mean ± 95% Student-t half-width over {len(seeds)} seeds:", "",
         "| (M,q,n) | " + " | ".join(f"r={k}" for k in ranks) + " | dense |",
         "|---|" + "---|" * (len(ranks) + 1)]
    for sc in scales:
        cells = []
        for rs in [pick(sc, "kernel", k) for k in ranks] + [pick(sc, "dense")]:
            if rs:
                m, hw = _ci95([r.test_exact_seq_acc for r in rs])
                cells.append(f"{m:.3f} ± {hw:.3f}")
            else:
                cells.append("-")
        L.append(f"| {sc} | " + " | ".join(cells) + " |")
    L += ["", "| paper (Sec. 5.2) | here |", "|---|---|"]
    trans = [transition_rank(runs52, sc) for sc in scales]
    L.append("| 90% transition at r = " + " -> ".join(str(PAPER_TRANSITIONS.get(sc, "?")) for sc in scales)
             + " | " + " -> ".join(str(t) if t is not None else f"> {max(ranks)}" for t in trans)
             + " (seed mean >= 0.9) |")
    if len(seeds) > 1:
        trans_ci = [transition_rank(runs52, sc, interval=True) for sc in scales]
        L.append("| (same, whole 95% interval above 0.9) | "
                 + " -> ".join(str(t) if t is not None else f"> {max(ranks)}" for t in trans_ci) + " |")
    dense = [r for r in runs52 if r.model == "dense"]
    exact = sum(r.test_exact_seq_acc == 1.0 for r in dense)
    L.append(f"| dense attention exact in every seed | {exact}/{len(dense)} dense runs at "
             "test exact-sequence accuracy 1.000 |")
    if any(not math.isnan(r.unseen_test_exact_seq_acc) for r in runs52):
        L += _unseen_rows(runs52, scales, ranks, pick)
    L += ["", "![Figure 2](figure2.png)", "",
          "Fitting against generalization, and the budget each run used (five-seed means; steps "
          "min-max; how the runs stopped):", "",
          "| (M,q,n) | model | train | test | train - test | steps used | stop |", "|---|---|---|---|---|---|---|"]
    for sc in scales:
        for k in ranks + [None]:
            rs = pick(sc, "kernel", k) if k is not None else pick(sc, "dense")
            if not rs:
                continue
            tr = float(np.mean([r.train_exact_seq_acc for r in rs]))
            te = float(np.mean([r.test_exact_seq_acc for r in rs]))
            st = [r.steps for r in rs]
            stops: dict[str, int] = {}
            for r in rs:
                stops[r.stop or "fixed"] = stops.get(r.stop or "fixed", 0) + 1
            L.append(f"| {sc} | {'dense' if k is None else f'r={k}'} | {tr:.3f} | {te:.3f} | {tr - te:+.3f} | "
                     f"{int(np.mean(st))} ({min(st)}-{max(st)}) | "
                     + ", ".join(f"{v} {n}" for n, v in sorted(stops.items())) + " |")
    L.append("")
    return L


def _status_cell(cz: dict, feats: str, rank: int) -> str:
    """A README cell: what the certificates (``sec51_certified.json``) prove at ``rank``."""
    c = cz.get("classes", {}).get(feats)
    if c is None:
        return "?"
    if c["infeasible_max"] is not None and rank <= c["infeasible_max"]:
        return "**infeasible** (certified)"
    if c["feasible_min"] is not None and rank >= c["feasible_min"]:
        return "feasible (certified)"
    return "open"


def _certified_paragraph(cz: dict) -> list[str]:
    """What the committed certificates prove about paper-5.1, class by class."""
    if not cz:
        return ["(No certificate record: run `python -m models.train report`.)"]
    out = [f"What the project's certificates prove about paper-5.1 in the paper's class, read by "
           f"`models.train.certified` from the proved `infeasible` / `feasible` claims of "
           f"`{cz['folder']}/*.json` into [`{CERTIFIED}`]({CERTIFIED}) (a rank proved infeasible "
           "makes every smaller rank infeasible, a witness every larger rank feasible: pad with zero "
           "features). The trained heads' `lookup_softplus` features are strictly positive on every "
           "token, so they are heads of the nonnegative class on the family's tokens, the scope of "
           "the infeasibility claims:", ""]
    for feats in ("nonnegative", "real"):
        c = cz["classes"][feats]
        lo, hi = c["infeasible_max"], c["feasible_min"]
        files = lambda d, r: ", ".join(f"`{f}`" for f in d.get(str(r), []))   # noqa: E731
        open_ = (f"; rank{'s' if hi - lo > 2 else ''} {', '.join(map(str, range(lo + 1, hi)))} open"
                 if lo is not None and hi is not None and hi - lo > 1 else "")
        out.append(f"- {feats} features: every rank <= {lo} infeasible (rank {lo}: {files(c['infeasible'], lo)})"
                   f", a witness at rank {hi} ({files(c['feasible'], hi)}){open_}.")
    return out


def _certified_rows(cz: dict, runs51: Sequence[Run51]) -> list[str]:
    """The comparison table's rows for the certified ranks and the two kinds of failure."""
    if not cz:
        return []
    c = cz["classes"][cz["trained_features"]]
    lo = c["infeasible_max"]
    v = cz["runs"].values()
    upto = [x for x in runs51 if lo is not None and x.rank <= lo]
    cannot, did_not = sum(x["cannot"] for x in v), sum(x["did_not"] for x in v)
    return [f"| (not in the paper) r <= {lo} certified infeasible for the trained heads' "
            f"{cz['trained_features']} features | {sum(not x.solved for x in upto)}/{len(upto)} runs at "
            f"r <= {lo} fail, as they must |",
            f"| (not in the paper) failures: capacity or optimisation | {cannot} cannot succeed "
            f"(certified), {did_not} did not succeed (optimisation: a witness at their rank is certified) |"]


def _transitions(runs: Sequence[Run52], scales, pool: str) -> tuple[str, str]:
    """The 90% transitions at ``scales`` by the seed mean and by the whole 95% interval (``> r``:
    no rank up to the largest run at that scale, ``r``, reaches it)."""
    top = {sc: max((r.rank for r in runs if (r.M, r.q, r.n) == sc and r.model == "kernel"), default=0)
           for sc in scales}
    return tuple(" -> ".join(str(t) if t is not None else f"> {top[sc]}"          # type: ignore[return-value]
                             for sc, t in ((sc, transition_rank(runs, sc, interval=iv, pool=pool))
                                           for sc in scales))
                 for iv in (False, True))


def _unseen_maps_section(out: Path) -> list[str]:
    """The unseen-token sweeps of ``out/unseen-<map>/`` side by side: each map's transitions on
    both test pools against the paper's, read from their CSV files."""
    folders = sorted(p for p in out.glob("unseen-*") if (p / "sec52_runs.csv").is_file())
    if not folders:
        return []
    L = ["## Sec. 5.2 with an unseen-token pool: three strictly positive feature maps", "",
         "One sweep per map (`unseen-<map>/`, each with its own README: tables, figure, budget). "
         "90% transitions of the test exact-sequence accuracy at (M,q,n) = (6,4,8), (8,6,12), "
         "(10,8,16), by the five-seed mean and by the whole 95% Student-t interval; the paper has "
         "8 -> 16 -> 64:", "",
         "| feature map | runs | label-disjoint pool, mean | label-disjoint pool, interval | unseen-token pool, "
         "mean | unseen-token pool, interval | dense exact (label-disjoint / unseen) |",
         "|---|---|---|---|---|---|---|"]
    matches = []
    for f in folders:
        runs = read_csv(f / "sec52_runs.csv", Run52)
        scales = sorted({(r.M, r.q, r.n) for r in runs})
        paper = " -> ".join(str(PAPER_TRANSITIONS.get(sc, "?")) for sc in scales)
        cells = [*_transitions(runs, scales, "test"), *_transitions(runs, scales, "unseen")]
        held = ", ".join(f"{sc}: {sum((r.M, r.q, r.n) == sc for r in runs)}" for sc in scales)
        dense = [r for r in runs if r.model == "dense"]
        ex = (sum(r.test_exact_seq_acc == 1.0 for r in dense), sum(r.unseen_test_exact_seq_acc == 1.0 for r in dense))
        fmap = f.name.removeprefix("unseen-")
        whole = set(scales) == set(PAPER_TRANSITIONS)             # a partial sweep matches nothing
        L.append(f"| [`{fmap}`]({f.name}/README.md) | {held} | "
                 + " | ".join(f"**{c}**" if whole and c == paper else c for c in cells)
                 + f" | {ex[0]}/{len(dense)} / {ex[1]}/{len(dense)} |")
        names = ("label-disjoint pool by the mean", "label-disjoint pool by the interval",
                 "unseen-token pool by the mean", "unseen-token pool by the interval")
        matches += [f"`{fmap}`, {n}" for n, c in zip(names, cells) if whole and c == paper]
    L += ["", "Transitions equal to the paper's (bold): " + ("; ".join(matches) if matches else "none") + ".", ""]
    return L


def write_readme(out: Path) -> None:
    """README.md: protocol, our numbers beside the paper's, wall-clock times."""
    runs51 = read_csv(out / "sec51_runs.csv", Run51)
    runs52 = read_csv(out / "sec52_runs.csv", Run52)
    timing = json.loads((out / "sweeps.json").read_text()) if (out / "sweeps.json").is_file() else {}
    L = ["# Sec. 5 reproduced: feature-rank sweeps on CPU", "",
         "Generated by `python -m models.train sec51|sec52|report` from the CSV files in this folder "
         "(`sec51_runs.csv`, `sec51_ratios.csv`, `sec52_runs.csv`, `sweeps.json`). Float metrics "
         "of the trained models; exact verdicts on committed checkpoints come from the certify commands.", ""]
    if runs51:
        t51 = timing.get("sec51", {})
        c = t51.get("config", {})
        L += ["## Sec. 5.1: lookup-table heads on `paper-5.1` (15 words, 1,272 inputs, 424 jumps)", "",
              f"Protocol: `LookupHead` with `{c.get('feature_map')}` query/key tables of rank r and a free "
              f"query-token table g_x(z), full batch, Adam (features lr {c.get('lr_features')}, "
              f"table lr {c.get('lr_table')}, cosine decay), {c.get('steps')} steps, loss MSE + "
              f"{c.get('hinge_weight')} * mean(relu(|e| - {c.get('hinge_margin')})^2). "
              "Success = max error < 1/2 at the scored query position.", "",
              "| r | runs | mean max error (95% t) | solved | mean ordered-pair coverage "
              "| rank r, nonnegative features (the trained heads') | rank r, real features "
              "| failed: cannot succeed (certified) | failed: did not succeed (optimisation) |",
              "|---|---|---|---|---|---|---|---|---|"]
        cz = _read_certified(out)
        verdicts = cz.get("runs", {})
        for r in sorted({x.rank for x in runs51}):
            rs = [x for x in runs51 if x.rank == r]
            me, hw = _ci95([x.max_error for x in rs])
            cov, _ = _ci95([x.coverage for x in rs])
            v = verdicts.get(str(r), {})
            L.append(f"| {r} | {len(rs)} | {me:.3f} ± {hw:.3f} | {sum(x.solved for x in rs)}/{len(rs)} "
                     f"| {cov:.3f} | {_status_cell(cz, 'nonnegative', r)} | {_status_cell(cz, 'real', r)} "
                     f"| {v.get('cannot', '?')} | {v.get('did_not', '?')}"
                     + (f" ({v['undecided']} at a rank certified neither way)" if v.get("undecided") else "")
                     + " |")
        L += [""] + _certified_paragraph(cz)
        below8 = [x for x in runs51 if x.rank < 8]
        upto15 = sorted({x.rank for x in runs51 if x.rank <= 15})
        means15 = {r: float(np.mean([x.max_error for x in runs51 if x.rank == r])) for r in upto15}
        r32 = [x for x in runs51 if x.rank == 32]
        L += ["", "| paper (Sec. 5.1) | here |", "|---|---|",
              f"| r < 8 excluded by the proof | {sum(not x.solved for x in below8)}/{len(below8)} "
              "runs at r < 8 fail, as they must |",
              *_certified_rows(cz, runs51),
              "| mean max error > 0.80 through r = 15 | "
              + ", ".join(f"r={r}: {v:.3f}" for r, v in means15.items())
              + (" (all > 0.80)" if means15 and min(means15.values()) > 0.8 else " (NOT all > 0.80)") + " |",
              f"| all five r = 32 runs solve | {sum(x.solved for x in r32)}/{len(r32)} solve |",
              f"| a constructed r = 15 solution exists | `lookup_construction`: rank "
              f"{t51.get('construction_rank')}, exact max error {t51.get('construction_max_error')}, "
              f"correct = {t51.get('construction_ok')} |", ""]
        L += ["![Figure 1](figure1.png)", "",
              "Figure 1 shades the ranks certified infeasible (light: nonnegative features, the trained "
              "heads' class; dark: real features) and marks the paper's bound r < 8 (dotted).", ""]
    if runs52:
        L += _sec52_section(runs52, timing.get("sec52", {}))
    L += _unseen_maps_section(out)
    if timing:
        L += ["## Wall-clock (one torch thread; the 2-core machine was shared with other jobs, "
              "so CPU time is the steadier figure)", ""]
        for name in ("sec51", "sec52"):
            if name in timing:
                t = timing[name]
                extra = (f" (per scale: {t['seconds_per_scale']})" if "seconds_per_scale" in t else "")
                L.append(f"- `{name}`: {t['seconds']:.0f} s wall, {t.get('cpu_seconds', float('nan')):.0f} s "
                         f"CPU{extra}")
        L.append("")
    notes = out / "NOTES.md"
    if notes.is_file():
        L += [notes.read_text().rstrip(), ""]
    atomic_write_text(out / "README.md", "\n".join(L))

