"""Memory of long runs: the checker's per-certificate scratch keeps large shared values
boundedly, keyed by complete content; a command's freed heap goes back to the kernel at
phase boundaries; a large text is written without a second copy of it in memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from certify.checkers import scratch


def test_recent_keeps_the_last_few_and_recomputes_the_rest():
    calls: list[str] = []

    def make(name):
        def compute():
            calls.append(name)
            return [name]
        return compute

    with scratch.session() as s:
        first = scratch.recent("a", make("a"), keep=2)
        assert scratch.recent("a", make("a"), keep=2) is first           # kept: not recomputed
        scratch.recent("b", make("b"), keep=2)
        scratch.recent("a", make("a"), keep=2)                           # a used last: b is oldest
        scratch.recent("c", make("c"), keep=2)                           # b let go
        assert calls == ["a", "b", "c"]
        assert scratch.recent("a", make("a"), keep=2) == ["a"] and calls == ["a", "b", "c"]
        assert scratch.recent("b", make("b"), keep=2) == ["b"] and calls == ["a", "b", "c", "b"]
        assert len(s) == 2
    assert scratch.recent("a", make("a")) == ["a"] and calls[-1] == "a"  # outside a check: computed


def test_content_key_is_the_whole_content():
    assert scratch.content_key([[1, 2]]) != scratch.content_key([[1], [2]])      # the shape counts
    assert scratch.content_key([[1, 2], [3, 4]]) != scratch.content_key([[1, 2], [3, 5]])
    assert scratch.content_key([[1, 2]]) == scratch.content_key([[1, 2]])
    assert len(scratch.content_key([list(range(10**4))])) == 64


_TRIM = r"""
import certify.__main__                       # the command's malloc tunables (heap kept up to 1 GB)
from certify.core.memory import trim
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
blocks = [bytearray(8 << 20) for _ in range(40)]            # 320 MB from the heap, touched
for b in blocks:
    b[::4096] = b"\x01" * len(b[::4096])
before = rss()
del blocks, b
kept = rss()
trim()
print(before >> 20, kept >> 20, rss() >> 20)
"""


def test_trim_gives_a_finished_phase_back():
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc_trim: Linux")
    out = subprocess.run([sys.executable, "-c", _TRIM], capture_output=True, text=True, check=True)
    before, kept, after = map(int, out.stdout.split())
    assert kept > before - 64, "the tuned heap keeps what was freed (the reason trim exists)"
    assert after < kept - 256, f"trim gave back {kept - after} MB of 320 freed"


def test_a_large_text_is_written_a_chunk_at_a_time_as_the_same_bytes(tmp_path, monkeypatch):
    from certify.core import files
    text = "Gram ∑ é 😀 " * 50 + "end"                     # multi-byte characters across chunk edges
    monkeypatch.setattr(files, "TEXT_CHUNK", 7)
    files.atomic_write_text(tmp_path / "a.json", text)
    with open(tmp_path / "b.json", "wb") as f:
        files.write_text(f, text)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes() == text.encode()
