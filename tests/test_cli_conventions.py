"""The command line's conventions (docs/commands.md, "Conventions every command follows"):
``--version``; ``--json`` prints exactly one JSON object on stdout, also on failure; ``-q``/``-v``;
``report``'s documented exit on a certificate with refuted claims; closed standard streams; a
refusal said once per model with the heads it covers; messages that name the fix."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from certify.cli import main

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "reports" / "reference"
GALLERY = ROOT / "reports" / "gallery" / "models"


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("CERTIFY_DEBUG", None)
    return env


def _certify(*args: str, cwd: Path, closed: str = "", **env: str) -> subprocess.CompletedProcess:
    """``python -m certify ARGS`` in a shell with stdout (``closed="1"``), stderr (``"2"``) or both
    (``"12"``) closed (``>&-``: closed, not the null device)."""
    redirect = " ".join(f"{fd}>&-" for fd in closed)
    return subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-m", "certify", *args],
                          cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=600)


def _one_json(text: str) -> dict:
    doc = json.loads(text)                    # exactly one document: trailing text would not parse
    assert isinstance(doc, dict)
    return doc


# ---------------------------------------------------------------- --version

def test_version_names_the_versions_and_the_compiled_kernels(tmp_path):
    p = _certify("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == ""
    first, packages, kernels = p.stdout.strip().splitlines()
    assert first.startswith("certify-attention ") and f"(python {sys.version.split()[0]})" in first
    assert "numpy " in packages and "python-flint " in packages and "torch" in packages
    assert kernels.startswith("compiled kernels: ")
    doc = _one_json(_certify("--version", "--json", cwd=tmp_path).stdout)
    assert doc["python"] == sys.version.split()[0]
    assert doc["packages"]["numpy"] == np.__version__
    assert set(doc["compiled"]) == {"solvers.exact._modkernel", "certify.checkers.kernel._spankernel",
                                    "certify.transcript._ballkernel", "models.canonical._crkernel"}
    off = _one_json(_certify("--version", "--json", cwd=tmp_path, CERTIFY_NO_COMPILED="1").stdout)
    assert all(v in ("not built", "switched off (CERTIFY_NO_COMPILED)") for v in off["compiled"].values())
    assert "0 of 4 in use" in _certify("--version", cwd=tmp_path, CERTIFY_NO_COMPILED="1").stdout


def test_version_imports_neither_numpy_nor_torch(tmp_path):
    p = subprocess.run([sys.executable, "-c", "import sys\nfrom certify.cli import main\nmain(['--version'])\n"
                        "print(sorted(m for m in ('numpy', 'torch', 'flint') if m in sys.modules))"],
                       cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1] == "[]"


# ---------------------------------------------------------------- --json on failure

def test_json_on_bad_input_is_one_object_with_exit_code_2(tmp_path, capsys):
    assert main(["rank", str(tmp_path / "missing.npy"), "--json"]) == 2
    out, err = capsys.readouterr()
    doc = _one_json(out)
    assert doc == {"error": f"no such file: {tmp_path / 'missing.npy'} (also tried .json, .safetensors, .npz, "
                            ".npy, .csv)", "exit_code": 2}
    assert err.strip() == f"certify rank: error: {doc['error']}"          # the line for people is kept


def test_json_on_an_uncertifiable_model_is_one_object_with_exit_code_3(capsys):
    assert main(["rank", str(GALLERY / "softmax"), "--json", "--no-progress"]) == 3
    doc = _one_json(capsys.readouterr().out)
    assert doc["exit_code"] == 3 and doc["error"].startswith("cannot certify: ") and "softmax" in doc["error"]


def test_json_on_a_usage_error_and_an_unknown_command(capsys):
    with pytest.raises(SystemExit) as e:                 # argparse's own exit, unchanged
        main(["bounds", "--json", "--m", "12", "--no-such-option"])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert _one_json(out) == {"error": "unrecognized arguments: --no-such-option", "exit_code": 2}
    assert "usage: certify bounds" in err
    assert main(["--json", "no-such-command"]) == 2
    assert _one_json(capsys.readouterr().out) == {"error": "unknown command 'no-such-command'", "exit_code": 2}


def test_json_on_an_internal_error_is_one_object_with_exit_code_1(capsys, monkeypatch):
    from certify.core.errors import run_command
    monkeypatch.delenv("CERTIFY_DEBUG", raising=False)

    def broken(argv):
        raise RuntimeError("a planted failure")
    assert run_command("certify rank", broken, ["x.npy", "--json"]) == 1
    doc = _one_json(capsys.readouterr().out)
    assert doc["exit_code"] == 1 and doc["error"].startswith("internal error: RuntimeError: a planted failure")


def test_json_on_success_is_still_the_commands_own_single_object(capsys):
    assert main(["bounds", "--m", "12", "--json"]) == 0
    doc = _one_json(capsys.readouterr().out)
    assert doc["m"] == 12 and doc["thm2_upper_log2"] == 12 and "exit_code" not in doc


# ---------------------------------------------------------------- -q / -v

def test_quiet_and_verbose(capsys):
    assert main(["bounds", "--m", "12"]) == 0
    assert "Thm 2" in capsys.readouterr().err                       # the table for people, on stderr
    for argv in (["bounds", "--m", "12", "-q"], ["-q", "bounds", "--m", "12"], ["bounds", "--quiet", "--m", "12"]):
        assert main(argv) == 0
        assert capsys.readouterr().err == "", argv
    assert main(["bounds", "--m", "12", "-v"]) == 0
    err = capsys.readouterr().err
    assert "Thm 2" in err and "certify bounds: exit 0 after" in err
    # an error is printed whatever the level
    assert main(["rank", "missing.npy", "-q"]) == 2
    assert capsys.readouterr().err.startswith("certify rank: error: no such file")
    with pytest.raises(SystemExit):
        main(["bounds", "-q", "-v", "--m", "3"])                     # one or the other


# ---------------------------------------------------------------- report's exit code

def test_report_of_a_certificate_with_refuted_claims_exits_0_and_of_a_failing_one_1(tmp_path, capsys):
    """docs/commands.md: report exits 0 when every certificate holds, whatever its verdicts
    (verify exits 4 here: its claims hold under the named extraction assumption), 1 when one
    fails its re-check."""
    cert = REF / "checkpoint-paper51-lookup-r8-s0.json"
    verdicts = [c["verdict"] for c in json.loads(cert.read_text())["claims"]]
    assert "refuted" in verdicts
    assert main(["report", str(cert), "--out", str(tmp_path / "rep")]) == 0
    assert "certificates hold" in capsys.readouterr().err
    assert main(["verify", str(cert)]) == 4
    capsys.readouterr()
    bad = json.loads(cert.read_text())
    bad["claims"][verdicts.index("refuted")]["verdict"] = "proved"        # a refuted claim relabelled
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["report", str(tmp_path / "bad.json"), "--out", str(tmp_path / "rep2")]) == 1
    assert "certificates FAIL" in capsys.readouterr().err
    assert (tmp_path / "rep2" / "report.md").is_file()                   # written, and marked FAILS


# ---------------------------------------------------------------- closed streams

@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("m")
    np.save(d / "x.npy", np.diag([1.0, 2.0, 3.0, 0.0]))
    return d / "x.npy"


CLOSED_CASES = {       # name -> (arguments, exit code)
    "bounds": (["bounds", "--m", "12"], 0),
    "bounds-json": (["bounds", "--m", "12", "--json"], 0),
    "rank": (["rank", "{x}", "--no-progress"], 0),
    "rank-json": (["rank", "{x}", "--json", "--no-progress"], 0),
    "rank-missing": (["rank", "missing.npy", "--json"], 2),
    "extract": (["extract", "{x}", "--out", "k.npz"], 0),
    "families": (["families", "show", "paper-5.1"], 0),
    "feasibility-bad": (["feasibility", "--rank", "0", "--json"], 2),
    "transcript-usage": (["transcript", "--M", "12"], 2),
    "verify": (["verify", str(REF / "cube-kernel.json")], 4),
    "report": (["report", str(REF / "cube-kernel.json"), "--out", "rep", "--no-verify"], 0),
    "demo-bad": (["demo", "--out", "/proc/certify-closed"], 2),
    "serve-bad": (["serve", "--no-such-option"], 2),
    "version": (["--version"], 0),
    "checkpoint-torch": (["checkpoint", str(GALLERY / "lat"), "--no-progress"], 0),
}


#: the cases that import torch or write a report (2-4 CPU s each, three runs): with ``--runslow``;
#: the closed-stream handling they go through is the one every other case runs through
HEAVY_CLOSED = {"checkpoint-torch", "report"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in HEAVY_CLOSED else c
                                  for c in sorted(CLOSED_CASES)])
def test_closed_stdout_or_stderr_no_traceback_and_the_same_exit(case, matrix, tmp_path):
    args, code = CLOSED_CASES[case]
    args = [a.format(x=matrix) for a in args]
    p = _certify(*args, cwd=tmp_path, closed="1")
    assert (p.returncode, "Traceback" in p.stderr) == (code, False), p.stderr[-1500:]
    p = _certify(*args, cwd=tmp_path, closed="2")
    assert (p.returncode, "Traceback" in p.stdout) == (code, False), p.stdout[-1500:]
    if "--json" in args:                      # nothing meant for stderr reaches stdout
        assert _one_json(p.stdout)["exit_code" if code else "verdict" if "rank" in args else "m"] is not None
    elif args[0] not in ("--version", "families"):
        assert p.stdout == "", p.stdout[-500:]
    if case not in ("checkpoint-torch", "report"):        # the slow ones: each stream once is enough
        p = _certify(*args, cwd=tmp_path, closed="12")
        assert p.returncode == code


# ---------------------------------------------------------------- refusals and messages

def test_a_refusal_is_said_once_with_the_heads_it_covers_and_the_fix(capsys):
    """The gallery's lat model has two layers of two heads; layer 1 reads layer 0's outputs."""
    assert main(["checkpoint", str(GALLERY / "lat"), "--layer", "1", "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert err.count("not a finite known token set") == 1, err
    assert "(layer 1 heads 0, 1)" in err and "--layer 0" in err and "first layer" not in err
    assert main(["checkpoint", str(GALLERY / "lat"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.count("only layer 0 reads the tokens") == 1 and "layer 1 heads 0, 1" in err
    assert main(["rank", str(GALLERY / "lat"), "--layer", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--layer 0" in err and "first layer" not in err


def _based_under_an_embedding(folder: Path, width: int, vocab: int) -> Path:
    """A bare fla Based layer (2 heads, feature_dim 3) at prefix ``layer.`` with a
    ``token_emb.weight`` beside it that config.json does not mention."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    f = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    folder.mkdir()
    save_file({"token_emb.weight": f(vocab, width), "layer.q_proj.weight": f(6, width),
               "layer.k_proj.weight": f(6, width), "layer.v_proj.weight": f(width, width),
               "layer.o_proj.weight": f(width, width)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"class": "BasedLinearAttention", "feature_dim": 3,
                                                    "num_heads": 2, "num_key_value_heads": 2,
                                                    "hidden_size": width}))
    return folder


def test_a_based_layer_under_an_unstated_embedding_names_the_config_line(tmp_path, capsys):
    model = _based_under_an_embedding(tmp_path / "m", 32, 50)
    assert main(["rank", str(model), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "add \"embedding\": \"token_emb.weight\" to config.json" in err and "50 vocabulary rows" in err
    assert main(["checkpoint", str(model), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert err.count("\"embedding\": \"token_emb.weight\"") == 1 and "(layer 0 heads 0, 1)" in err


@pytest.mark.slow
def test_the_embedding_line_the_message_names_is_the_fix(tmp_path, capsys):
    """With the line the refusal names, the layer is read on the vocabulary (the library check
    runs: slow)."""
    model = _based_under_an_embedding(tmp_path / "m", 32, 50)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "embedding": "token_emb.weight"}))
    assert main(["rank", str(model), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["token_set"] == "vocab:50"


def test_paths_that_are_not_files_are_said_to_be_what_they_are(tmp_path, capsys):
    (tmp_path / "folder.npy").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    os.symlink("loop.npy", tmp_path / "loop.npy")
    os.symlink("nowhere.npy", tmp_path / "dangling.npy")
    for argv, words in ((["rank", "loop.npy"], "a loop of symbolic links"),
                        (["rank", "dangling.npy"], "a symbolic link to nowhere.npy, which does not exist"),
                        (["verify", "folder.npy"], "a folder, not a file"),
                        (["verify", "fifo.json"], "a FIFO (named pipe), not a regular file"),
                        (["verify", "loop.npy"], "a loop of symbolic links"),
                        (["report", "fifo.json", "--out", "r"], "a FIFO (named pipe), not a regular file")):
        assert main([argv[0], *[str(tmp_path / a) if a.endswith((".npy", ".json")) else a for a in argv[1:]]]) \
            == 2, argv
        err = capsys.readouterr().err
        assert words in err and "absent" not in err and "no such file" not in err, (argv, err)


def test_verify_says_what_is_at_an_inputs_path_instead_of_absent(tmp_path, capsys):
    cert = ROOT / "reports" / "gallery" / "lat" / "certificate.json"
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "certificate.json").write_bytes(cert.read_bytes())
    names = list(json.loads(cert.read_text())["inputs"])
    weights = next(n for n in names if n.endswith(".safetensors"))
    config = next(n for n in names if n.endswith("config.json"))
    (tmp_path / "c" / weights).mkdir(parents=True)
    os.mkfifo(tmp_path / "c" / config)
    cwd = os.getcwd()
    os.chdir(tmp_path)                      # neither name resolves from the working folder
    try:
        assert main(["verify", str(tmp_path / "c" / "certificate.json"), "--json"]) == 4
    finally:
        os.chdir(cwd)
    status = {i["name"]: i["status"] for i in json.loads(capsys.readouterr().out)["inputs"]}
    assert status[weights].startswith("not read: ") and status[weights].endswith("is a folder, not a file")
    assert status[config].endswith("is a FIFO (named pipe), not a regular file")


def test_a_misspelt_root_key_is_named_as_unexpected(tmp_path, capsys):
    doc = json.loads((REF / "feasibility-r8-real.json").read_text())
    doc["claim"] = doc.pop("claims")
    (tmp_path / "c.json").write_text(json.dumps(doc))
    assert main(["verify", str(tmp_path / "c.json")]) == 2
    assert "unexpected key 'claim' (did you mean 'claims'?)" in capsys.readouterr().err


def _header_only(path: Path, tensors: dict[str, tuple[str, list[int], int]], data: int) -> None:
    """A safetensors file whose header declares ``tensors`` (name -> dtype, shape, bytes) over
    ``data`` bytes, written sparse (no byte of data is stored)."""
    header, off = {}, 0
    for name, (dtype, shape, n) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + data)


def test_a_declared_size_is_refused_from_the_header_before_any_byte_is_read(tmp_path, capsys):
    # a 10 GiB tensor declared in a small file: the byte range lies outside it
    _header_only(tmp_path / "small.safetensors", {"w": ("F32", [2 ** 30, 10], 10 * 2 ** 32)}, 64)
    assert main(["rank", str(tmp_path / "small.safetensors")]) == 2
    assert "small.safetensors is not a readable safetensors file" in capsys.readouterr().err
    # a 10 GiB embedding in a (sparse) 10 GiB file: refused from the header, never hashed
    model = _based_under_an_embedding(tmp_path / "layer", 6, 4)
    from safetensors.numpy import load_file
    small = load_file(str(model / "model.safetensors"))
    rows = 10 * 2 ** 30 // 24
    big = tmp_path / "big"
    big.mkdir()
    tensors = {k: ("F32", list(v.shape), v.nbytes) for k, v in small.items() if k != "token_emb.weight"}
    tensors["token_emb.weight"] = ("F32", [rows, 6], rows * 24)
    _header_only(big / "model.safetensors", tensors, sum(t[2] for t in tensors.values()))
    (big / "config.json").write_text(json.dumps({**json.loads((model / "config.json").read_text()),
                                                 "embedding": "token_emb.weight"}))
    from certify.checkers import sources as hashed
    hashed_files: list = []
    real = hashed.sha256_file
    hashed.sha256_file = lambda path: hashed_files.append(path) or real(path)
    try:
        assert main(["rank", str(big), "--no-progress"]) == 2
    finally:
        hashed.sha256_file = real
    err = capsys.readouterr().err
    assert f"declares {rows} x 6 (10.0 GiB)" in err and "over the limit vocab" in err
    assert not hashed_files                                 # no file was hashed
