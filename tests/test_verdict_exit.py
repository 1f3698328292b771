"""``CERTIFY_VERDICT_EXIT=0``: a verdict (exit 1, verify's 4) ends with status 0 and one
line naming the code it stands for; bad input (2) and uncertifiable input (3) still fail."""

from __future__ import annotations

import pytest

from certify.cli import main


@pytest.mark.parametrize("env, code", [(None, 1), ("1", 1), ("0", 0)])
def test_a_refuted_transcript_exits_with_its_verdict_unless_told(monkeypatch, capsys, env, code):
    if env is None:
        monkeypatch.delenv("CERTIFY_VERDICT_EXIT", raising=False)
    else:
        monkeypatch.setenv("CERTIFY_VERDICT_EXIT", env)
    assert main(["transcript", "--M", "12", "--s", "3", "--h", "6", "--q", "4", "--bits", "1",
                 "--no-progress"]) == code
    err = capsys.readouterr().err
    assert "verdict: refuted" in err
    assert ("certify transcript: verdict: exit 1" in err) is (code == 0)


def test_bad_input_still_fails_under_it(monkeypatch, capsys):
    monkeypatch.setenv("CERTIFY_VERDICT_EXIT", "0")
    assert main(["rank", "no-such-file.npy"]) == 2
    assert "verdict: exit" not in capsys.readouterr().err
