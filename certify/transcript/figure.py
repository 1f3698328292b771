"""The ``--sweep-bits`` figure: bits available against q log2(s+1), and float /
exact accuracy against the bits per coordinate (PNG).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def sweep_figure(rows: list[dict[str, Any]], path: str | Path, title: str) -> None:
    """Bits available vs q log2(s+1) and float / exact accuracy vs p (PNG)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from certify.core.files import atomic_write_bytes

    ps = [r["p"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax1.plot(ps, [r["bits_available"] for r in rows], "o-", label="bits available L H r (dv+1) p")
    ax1.axhline(rows[0]["bits_needed"], color="k", ls="--", label="q log2(s+1)")
    col = [p for p, r in zip(ps, rows) if r["collision"]]
    if col:
        ax1.plot(col, [r["bits_available"] for r in rows if r["collision"]], "rx", ms=10,
                 mew=2, label="certified collision")
    ax1.set_xlabel("bits per coordinate p")
    ax1.set_ylabel("transcript bits")
    ax1.set_yscale("log", base=2)
    ax1.legend(fontsize=7)
    ax2.plot(ps, [r["float_accuracy"] for r in rows], "o-", label="float64 accuracy")
    ax2.plot(ps, [(r["distinct_transcripts"] or 0) / max(r["assignments_checked"], 1) for r in rows],
             "^:", label="distinct transcripts / assignments")
    ex = [(p, r["exact_accuracy"]) for p, r in zip(ps, rows) if r.get("exact_accuracy") is not None]
    if ex:
        ax2.plot([e[0] for e in ex], [e[1] for e in ex], "s", mfc="none", label="exact accuracy")
    ax2.set_xlabel("bits per coordinate p")
    ax2.set_ylabel("fraction of assignments")
    ax2.set_ylim(-0.02, 1.02)
    ax2.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
