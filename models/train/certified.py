"""The ranks the project's own certificates decide for the Sec. 5.1 family.

Read from the committed feasibility certificates (``reports/feasibility/*.json``),
never restated: only claims of kind ``infeasible`` or ``feasible`` whose verdict is
``proved``, for the family ``paper-5.1`` in the paper's model class (``class:
paper``), one record per feature class (``nonnegative``, ``real``). ``certify
verify`` re-derives each of these claims exactly; this module only reads them.

Two monotonicity steps, both by padding with zero features (a rank-r head is a
rank-(r+1) head with one more feature that is 0 on every token: the kernel
alpha, hence every output, is unchanged, and a zero feature is nonnegative): an
infeasible rank makes every smaller rank infeasible, a feasible rank makes every
larger rank feasible. So a feature class is summed up by the largest rank proved
infeasible (every rank up to it cannot succeed) and the least rank with a proved
witness; the ranks between are open. Certificates that contradict each other
(a proved witness at or below a proved-infeasible rank) are an error, not a
result.

The trained Sec. 5.1 heads (``lookup_softplus`` tables, strictly positive on every
token, free values ``g_x(z)``) are heads of the nonnegative class on the family's
tokens, the scope of the infeasibility claims; so a run at a rank the nonnegative
record excludes cannot succeed, whatever the optimiser does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[2]
CERT_DIR = ROOT / "reports" / "feasibility"
FAMILY = "paper-5.1"
FEATURE_CLASSES = ("nonnegative", "real")
#: the feature class of the trained Sec. 5.1 heads (``lookup_softplus`` > 0)
TRAINED_CLASS = "nonnegative"


@dataclass(frozen=True)
class CertifiedRanks:
    """What the certificates prove about one feature class on one family."""

    features: str
    infeasible_max: int | None                # every rank <= this is proved infeasible
    feasible_min: int | None                  # a proved witness at this rank (and so above)
    infeasible: dict[int, tuple[str, ...]] = field(default_factory=dict)   # rank -> files
    feasible: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def status(self, rank: int) -> str:
        """``infeasible`` (certified), ``feasible`` (certified) or ``open``."""
        if self.infeasible_max is not None and rank <= self.infeasible_max:
            return "infeasible"
        if self.feasible_min is not None and rank >= self.feasible_min:
            return "feasible"
        return "open"

    def to_json(self) -> dict:
        return {"features": self.features, "infeasible_max": self.infeasible_max,
                "feasible_min": self.feasible_min,
                "infeasible": {str(r): list(f) for r, f in sorted(self.infeasible.items())},
                "feasible": {str(r): list(f) for r, f in sorted(self.feasible.items())}}


def _claims(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, list):
        raise ValueError(f"{path.name}: not a certificate (no claims list)")
    return claims


def certified_ranks(paths: Iterable[Path] | None = None, family: str = FAMILY,
                    model_class: str = "paper") -> dict[str, CertifiedRanks]:
    """One :class:`CertifiedRanks` per feature class, from the proved feasibility
    claims about ``family`` in ``model_class`` held by ``paths`` (default: every
    ``*.json`` of ``reports/feasibility``). Raises ``ValueError`` when two proved
    claims contradict each other."""
    files = sorted(CERT_DIR.glob("*.json")) if paths is None else sorted(paths)
    found: dict[str, dict[str, dict[int, set[str]]]] = {
        f: {"infeasible": {}, "feasible": {}} for f in FEATURE_CLASSES}
    for path in files:
        for c in _claims(path):
            p = c.get("parameters") or {}
            if (c.get("kind") not in ("infeasible", "feasible") or c.get("verdict") != "proved"
                    or p.get("family") != family or p.get("class") != model_class):
                continue
            feats, rank = p.get("features"), p.get("rank")
            if feats not in found or not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
                raise ValueError(f"{path.name}: a proved {c['kind']} claim with features {feats!r}, "
                                 f"rank {rank!r}")
            found[feats][c["kind"]].setdefault(rank, set()).add(path.name)
    out = {}
    for feats, kinds in found.items():
        inf = {r: tuple(sorted(v)) for r, v in sorted(kinds["infeasible"].items())}
        fea = {r: tuple(sorted(v)) for r, v in sorted(kinds["feasible"].items())}
        lo, hi = max(inf, default=None), min(fea, default=None)
        if lo is not None and hi is not None and hi <= lo:
            raise ValueError(f"{family}, {feats} features: a proved witness at rank {hi} but rank "
                             f"{lo} proved infeasible ({', '.join(fea[hi] + inf[lo])})")
        out[feats] = CertifiedRanks(feats, lo, hi, inf, fea)
    # nonnegative heads are real heads: a real infeasibility holds for them too
    nn, real = out["nonnegative"], out["real"]
    if real.infeasible_max is not None and (nn.infeasible_max or 0) < real.infeasible_max:
        raise ValueError(f"{family}: real features proved infeasible up to {real.infeasible_max}, "
                         f"nonnegative only up to {nn.infeasible_max}; the certificates are incomplete")
    return out


def run_verdicts(ranks_runs: dict[int, tuple[int, int]], cert: CertifiedRanks) -> dict[int, dict]:
    """Per rank of a sweep, ``{runs, solved, status, cannot, did_not, undecided}``: of
    the runs that failed, ``cannot`` could not have succeeded (the rank is certified
    infeasible for the class), ``did_not`` failed by optimisation (a witness at the
    rank is certified), ``undecided`` failed at a rank certified neither way.
    ``ranks_runs`` maps a rank to (runs, solved)."""
    out = {}
    for rank, (runs, solved) in sorted(ranks_runs.items()):
        status = cert.status(rank)
        if status == "infeasible" and solved:
            raise ValueError(f"{solved} run(s) solve at rank {rank}, certified infeasible for "
                             f"{cert.features} features: the runs or the certificates are wrong")
        failed = runs - solved
        out[rank] = {"runs": runs, "solved": solved, "status": status,
                     "cannot": failed if status == "infeasible" else 0,
                     "did_not": failed if status == "feasible" else 0,
                     "undecided": failed if status == "open" else 0}
    return out
