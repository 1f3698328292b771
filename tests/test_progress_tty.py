"""Progress bars go to stderr only when it is a terminal: ``certify checkpoint
--batch`` with stderr in a file writes no bar into it, and with stderr a
terminal it shows one (the engine's "checkpoints" bar)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

CKPT = Path(__file__).resolve().parents[1] / "models" / "checkpoints" / "ood-6-4-8-elu1-r8-s0"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _batch_of_one_unreadable(tmp_path: Path) -> Path:
    d = tmp_path / "ckpts"
    d.mkdir()
    shutil.copy(CKPT.with_suffix(".json"), d / "bad.json")
    w = CKPT.with_suffix(".safetensors").read_bytes()
    (d / "bad.safetensors").write_bytes(w[: len(w) // 3])       # unreadable: reported, fast
    return d


def test_checkpoint_batch_draws_its_bar_only_on_a_terminal(tmp_path, monkeypatch):
    from certify.cli import checkpoint
    d = _batch_of_one_unreadable(tmp_path)
    monkeypatch.delenv("CERTIFY_NO_PROGRESS", raising=False)
    for stream, bar in ((io.StringIO(), False), (_Terminal(), True)):
        monkeypatch.setattr("sys.stderr", stream)
        assert checkpoint.main(["--batch", str(d)]) == 2
        err = stream.getvalue()
        assert "checkpoint" in err and "bad" in err, err          # the one-line reason
        assert ("checkpoints:" in err) is bar, (bar, err)
