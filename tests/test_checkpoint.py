"""Checkpoints: round trips for every architecture; a missing key, a wrong shape,
an unknown config key or a pickle gets one clear line and exit code 2; a
pickle with code is never executed."""

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from certify.cli.model_checkpoint import main
from certify.core.cube import all_tokens
from certify.core.errors import InputError, run_command
from certify.sources.checkpoint import load_checkpoint, load_model
from models.checkpoint import build_model, save_checkpoint, validate_config
from models.heads import DenseSoftmaxHead, KernelHead, LookupHead, PositionalKernelHead

ROOT = Path(__file__).resolve().parent.parent


def gen(seed):
    return torch.Generator().manual_seed(seed)


def _models():
    return {
        "elu1": KernelHead(5, 4, 3, "elu1", generator=gen(0)),
        "favor": KernelHead(5, 6, 3, "favor", proj_dim=2, omega_seed=3, generator=gen(0),
                            dtype=torch.float64),
        "tensor_square": KernelHead(5, 4, 3, "tensor_square", generator=gen(0)),
        "lookup": LookupHead(all_tokens(3)[[1, 2, 5]], 2, "lookup_exp", generator=gen(0)),
        "softmax": DenseSoftmaxHead(5, 3, 4, generator=gen(0)),
        "positional": PositionalKernelHead(5, 3, 2, 4, "softplus", generator=gen(0)),
    }


@pytest.mark.parametrize("name", sorted(_models()))
def test_round_trip(tmp_path, name):
    model = _models()[name]
    family = {"name": "paper-5.1", "sha256": "ab" * 32}
    w, c = save_checkpoint(model, tmp_path / name, {"seed": 7, "family": family,
                                                    "training": {"steps": 3}})
    assert w.suffix == ".safetensors" and c.suffix == ".json"
    cfg, loaded = load_model(tmp_path / name)
    assert cfg["seed"] == 7 and cfg["family"] == family and cfg["architecture"] == model.architecture
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k])
    if name == "lookup":
        X = torch.tensor([[0, 1, 2, 2]])
    else:
        X = torch.randint(0, 2, (3, 4, 5), generator=gen(1))
    with torch.no_grad():
        assert torch.equal(model(X), loaded(X))
    # every way of naming the checkpoint loads it
    for p in (tmp_path / f"{name}.json", tmp_path / f"{name}.safetensors"):
        assert load_checkpoint(p)[0] == cfg


def _saved(tmp_path):
    model = KernelHead(4, 3, 2, "exp", generator=gen(0))
    save_checkpoint(model, tmp_path / "m", {"seed": 0})
    return tmp_path / "m"


def _cli(args):
    """``python -m models.checkpoint ARGS`` as a process (its entry point; torch is imported
    again, 1.3 CPU s): test_cli_show_json."""
    return subprocess.run([sys.executable, "-m", "models.checkpoint", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _in_process(args) -> subprocess.CompletedProcess:
    """What ``python -m models.checkpoint ARGS`` runs, in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_command("models.checkpoint", main, list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_missing_key_is_one_line_exit_2(tmp_path, capsys):
    stem = _saved(tmp_path)
    t = load_file(f"{stem}.safetensors")
    del t["key_map.proj.bias"]
    save_file(t, f"{stem}.safetensors")
    with pytest.raises(InputError, match="missing tensor.*key_map.proj.bias"):
        build_model(*load_checkpoint(stem))
    assert run_command("models.checkpoint", main, ["show", str(stem)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "key_map.proj.bias" in err


def test_wrong_shape_and_unexpected_key(tmp_path):
    stem = _saved(tmp_path)
    t = load_file(f"{stem}.safetensors")
    t["value.weight"] = torch.zeros(2, 5)
    save_file(t, f"{stem}.safetensors")
    with pytest.raises(InputError, match=r"'value.weight' has shape \(2, 5\), expected \(2, 4\)"):
        build_model(*load_checkpoint(stem))
    t["value.weight"] = torch.zeros(2, 4)
    t["extra"] = torch.zeros(1)
    save_file(t, f"{stem}.safetensors")
    with pytest.raises(InputError, match="unexpected tensor.*extra"):
        build_model(*load_checkpoint(stem))
    t.pop("extra")
    t["value.weight"] = torch.zeros(2, 4, dtype=torch.float64)
    save_file(t, f"{stem}.safetensors")
    with pytest.raises(InputError, match="dtype"):
        build_model(*load_checkpoint(stem))


def test_cli_wrong_shape_exit_2(tmp_path):
    stem = _saved(tmp_path)
    t = load_file(f"{stem}.safetensors")
    t["query_map.proj.weight"] = torch.zeros(9, 4)
    save_file(t, f"{stem}.safetensors")
    out = _in_process(["show", str(stem)])
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "query_map.proj.weight" in out.stderr
    assert out.stdout == ""


def test_config_rejects_unknown_and_missing_keys(tmp_path):
    stem = _saved(tmp_path)
    cfg = json.loads(Path(f"{stem}.json").read_text())
    with pytest.raises(InputError, match="unknown key.*'ranks'"):
        validate_config({**cfg, "ranks": 3})
    with pytest.raises(InputError, match="missing key.*'rank'"):
        validate_config({k: v for k, v in cfg.items() if k != "rank"})
    with pytest.raises(InputError, match="feature map"):
        validate_config({**cfg, "feature_map": "lookup_exp"})
    with pytest.raises(InputError, match="rank"):
        validate_config({**cfg, "rank": 0})
    Path(f"{stem}.json").write_text(json.dumps({**cfg, "lr": 0.1}))
    assert _in_process(["show", str(stem)]).returncode == 2


class _Evil:
    marker = None

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_with_code_is_refused_and_not_run(tmp_path, capsys):
    stem = _saved(tmp_path)
    cfg = Path(f"{stem}.json").read_text()
    marker = tmp_path / "ran"
    evil = _Evil()
    _Evil.marker = str(marker)
    torch.save({"query_map.proj.weight": evil}, tmp_path / "evil.pt")
    (tmp_path / "evil.json").write_text(cfg)
    with pytest.raises(InputError, match="weights_only"):
        load_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()
    assert run_command("models.checkpoint", main, ["show", str(tmp_path / "evil.pt")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    # the same pickle under a .safetensors name is not a safetensors file
    (tmp_path / "evil2.safetensors").write_bytes((tmp_path / "evil.pt").read_bytes())
    (tmp_path / "evil2.json").write_text(cfg)
    assert _in_process(["show", str(tmp_path / "evil2")]).returncode == 2
    assert not marker.exists()


def test_plain_tensor_dict_pt_loads(tmp_path):
    stem = _saved(tmp_path)
    tensors = load_file(f"{stem}.safetensors")
    torch.save(tensors, tmp_path / "plain.pt")
    (tmp_path / "plain.json").write_text(Path(f"{stem}.json").read_text())
    cfg, model = load_model(tmp_path / "plain.pt")
    assert torch.equal(model.state_dict()["key_map.proj.weight"], tensors["key_map.proj.weight"])


def test_cli_show_json(tmp_path):
    stem = _saved(tmp_path)
    out = _cli(["show", str(stem), "--json"])
    assert out.returncode == 0
    info = json.loads(out.stdout)
    assert info["config"]["feature_map"] == "exp" and info["guarantee"] == "features_nonnegative"
    assert info["tensors"]["query_map.proj.weight"] == [3, 4]


def test_missing_files(tmp_path):
    with pytest.raises(InputError, match="no checkpoint weights"):
        load_checkpoint(tmp_path / "nothing")
    stem = _saved(tmp_path)
    Path(f"{stem}.json").unlink()
    with pytest.raises(InputError, match="config .* is missing"):
        load_checkpoint(stem)
