import os
from fractions import Fraction

import pytest

from certify.core.bounds import bound_claim, lemma3, lemma4
from certify.core.certificate import Certificate, Claim, ClaimKind
from certify.core.errors import InputError
from certify.core.files import atomic_write_text
from certify.core.numbers import q_to_str, str_to_q
from certify.core.verdict import Verdict


def test_verdict_is_enum_not_substring():
    assert Verdict("proved") is Verdict.PROVED
    with pytest.raises(ValueError):
        Verdict("unproved")


def test_claim_needs_reason_unless_proved():
    with pytest.raises(ValueError):
        Claim(ClaimKind.BOUND, "x", Verdict.UNKNOWN)
    Claim(ClaimKind.BOUND, "x", Verdict.UNKNOWN, reason="time limit")


def test_statement_is_rendered_from_the_parameters():
    claim = bound_claim(lemma4(15, 4, strict=True))
    assert claim.statement == ("Lemma 4: a 15 x 15 matrix with unit diagonal and |C_ij| < 1/4 "
                               "has rank >= 9")


def test_roundtrip_and_exit_code(tmp_path):
    c1 = bound_claim(lemma3(3, "1/2", 3))
    cert = Certificate(claims=[c1], inputs={"m": "ab" * 32}, seeds={"rng": 7})
    assert cert.exit_code() == 0
    path = tmp_path / "c.json"
    cert.write(path)
    back = Certificate.read(path)
    assert back.claims[0].evidence["factor"] == "2" and back.renderer == cert.renderer
    assert back.claims[0].verdict is Verdict.PROVED and back.seeds == {"rng": 7}
    cert.claims.append(Claim(ClaimKind.BOUND, "b", Verdict.UNKNOWN, reason="r"))
    assert cert.exit_code() == 1


def test_a_claim_the_checker_rejects_is_never_written(tmp_path):
    import dataclasses
    c = bound_claim(lemma3(3, "1/2", 3))
    forged = dataclasses.replace(c, evidence={**c.evidence, "factor": "3"})
    with pytest.raises(RuntimeError, match="checker rejects claim 0"):
        Certificate(claims=[forged]).write(tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


def test_a_certificate_the_schema_refuses_outside_its_claims_is_never_written(tmp_path):
    cert = Certificate(claims=[bound_claim(lemma3(3, "1/2", 3))], command=["certify", 7])
    with pytest.raises(RuntimeError, match=r"schema: \$\.command\[1\]: 7 is not of type 'string'"):
        cert.write(tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


def test_unknown_keys_rejected():
    obj = Certificate(claims=[]).to_json()
    obj["extra"] = 1
    with pytest.raises(InputError, match="unknown keys"):
        Certificate.from_json(obj)


def test_exact_rationals():
    assert q_to_str(Fraction(-6, 4)) == "-3/2" and str_to_q("-3/2") == Fraction(-3, 2)
    for bad in (0.5, "1/0", "x", None):
        with pytest.raises(InputError):
            str_to_q(bad)


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    atomic_write_text(path, "old")

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_the_recorded_versions_are_the_installed_ones(tmp_path, monkeypatch):
    # every installed distribution: the version read from the dist-info folder names equals
    # importlib.metadata's; an absent one is None; a first entry on sys.path wins over a later one
    from importlib import metadata

    from certify.core.certificate import installed_versions
    names = tuple(sorted({d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]}))
    assert len(names) > 20
    assert installed_versions(names) == {n: metadata.version(n) for n in names}
    assert installed_versions(("no-such-distribution",)) == {"no-such-distribution": None}
    (tmp_path / "Python_Flint-0.0.1.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_versions(("python-flint", "numpy"))["python-flint"] == "0.0.1"


def test_the_recorded_commit_is_read_from_the_git_files_as_git_reads_it(tmp_path):
    """``environment.git_commit`` without a git child process: this checkout's HEAD equals
    ``git rev-parse HEAD``; a detached head, a loose ref, a packed ref and a worktree's
    ``.git`` file each give their commit; anything else is left to git itself (None here)."""
    import subprocess
    from pathlib import Path

    from certify.core.certificate import _git_commit, _head_from_files
    root = Path(__file__).resolve().parent.parent
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    if git.returncode == 0:
        assert _head_from_files(root) in (git.stdout.strip(), None)
        assert _git_commit() == git.stdout.strip()
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text(a + "\n")
    assert _head_from_files(repo) == a
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{b} refs/heads/main\n^{c}\n")
    assert _head_from_files(repo) == b
    (repo / ".git" / "refs" / "heads" / "main").write_text(c + "\n")      # a loose ref wins
    assert _head_from_files(repo) == c
    wt = tmp_path / "wt"
    (repo / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (repo / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (repo / ".git" / "worktrees" / "wt" / "HEAD").write_text("ref: refs/heads/main\n")
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'wt'}\n")
    assert _head_from_files(wt) == c
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    assert _head_from_files(repo) is None and _head_from_files(tmp_path) is None


def test_the_recorded_platform_is_platforms_own():
    import platform

    from certify.core.certificate import _platform
    assert _platform() == platform.platform()
