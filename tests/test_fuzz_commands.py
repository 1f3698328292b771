"""Fuzz every command's arguments and input files, in-process.

Each example calls ``certify.errors.run_command(prog, module.main, argv)`` --
what ``certify <command>`` runs -- so the interpreter start is paid once. Every
example must end (per-example alarm) with an exit code from the documented set
(0-3), print no traceback and no internal error, leave the user's files
untouched, and write no output file when it exits 2. The default suite runs a
seeded sample (about 1,500 argument vectors and 350 input files, 8 CPU s);
``--runslow`` runs sixteen times as many argument vectors.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certify.cli import COMMANDS as _ALL

#: every command that runs and exits; `serve` is a long-running server, exercised by the
#: service tests (tests/test_service_*.py) instead
COMMANDS = {k: v for k, v in _ALL.items() if k != "serve"}
from certify.core.errors import run_command

ROOT = Path(__file__).resolve().parent.parent
#: hard stop of one example, in CPU seconds of this process (ITIMER_PROF: the load of the
#: machine does not move it; a wall-clock alarm failed examples on a busy machine)
ALARM_S = 6.0

_spec = importlib.util.spec_from_file_location("run_cases", ROOT / "tests" / "harness" / "run_cases.py")
run_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_cases)

_DIR = Path(tempfile.mkdtemp(prefix="certify-fuzz-"))
_MADE = False
DURATIONS: list[tuple[float, list[str]]] = []          # (CPU seconds, the command line) of each example


def scratch() -> Path:
    global _MADE
    if not _MADE:
        run_cases.make_files(_DIR)
        import matplotlib.pyplot  # noqa: F401  -- report's figures: import and font cache paid once
        import torch  # noqa: F401  -- paid once, not inside an example's time

        import models.checkpoint  # noqa: F401
        for module, _ in COMMANDS.values():
            importlib.import_module(module)
        _MADE = True
    return _DIR


def teardown_module(module):
    shutil.rmtree(_DIR, ignore_errors=True)


# ---------------------------------------------------------------- strategies

FILES = ["missing.npy", "empty.npy", "empty.npz", "empty.json", "empty.csv", "empty.safetensors",
         "junk.npy", "junk.npz", "junk.json", "junk.csv", "junk.safetensors", "ok.npy", "ok.npz",
         "nan.npy", "inf.npy", "threed.npy", "oned.npy", "strings.npy", "truncated.npy",
         "truncated.npz", "nan.csv", "inf.csv", "bigexp.csv", "tinyexp.csv", "longnum.csv",
         "ragged.csv", "wide.csv", "ragged.json", "bignum.json", "longint.json", "notmatrix.json",
         "deep.json", "bounds.json", "truncated-cert.json", "noclaims.json", "evidence-null.json",
         "trunc-ckpt", "junk-ckpt", "outdir", "thesis", "notes.json", "paper.tex", ""]
OUTS = ["new-out.json", "new-out.npz", "outdir", "outdir.npz", "thesis", "notes.json", "paper.tex",
        ".", "/proc/certify-x.json", "emptydir", "sub/new.json", ""]

NUM = st.one_of(st.text(alphabet="0123456789-+.e/:naif ", max_size=14), st.sampled_from(["0", "-1", "1", "3", "8", "1000000000", "99999999999999999999999", "nan",
                       "inf", "-inf", "1e999999999", "1e-999999999", "1/0", "1/1000", "0.5",
                       "abc", "", " ", "9" * 5000, "2:1", "1:1000000000", "1:2", "-3:4"]))
FAMILY = st.sampled_from(["paper-5.1", "ood-100000-4-8-test", "ood-6-4-8-test", "ood-7-4-8-test",
                          "multilevel-100000-2-6-4", "multilevel-12-2-6-4", "multilevel-x-2-6-4",
                          "ood-99999999999999999999-4-8-test", "nope"] + FILES[:8])
SMALL = st.sampled_from(["1", "2", "3", "4", "0", "-1", "x", "1000000000", "9" * 5000])
TIME = st.sampled_from(["0.3", "nan", "inf", "-inf", "0", "-1", "1e999999999", "abc", "1000000000"])
DEMO_OUT = st.sampled_from(["thesis", ".", "/proc/certify-d", "notes.json", "paper.tex"])
TOKENS = st.sampled_from(["cube:3", "cube:0", "cube:100", "cube:-1", "cube:x", "cube:",
                          "cube:1000000000000000000000", "paper-5.1"])


def _opt(name: str, values) -> st.SearchStrategy:
    return st.tuples(st.just(name), values)


def _argv(positional, options) -> st.SearchStrategy:
    return st.tuples(positional, st.lists(st.one_of(*options), max_size=4)).map(
        lambda t: [*t[0], *[x for pair in t[1] for x in (pair if isinstance(pair, tuple) else (pair,))]])


FILE = st.sampled_from(FILES)
OUT = st.sampled_from(OUTS)

ARGV = {
    "rank": _argv(st.tuples(FILE), [_opt("--eps", NUM), _opt("--out", OUT), _opt("--tokens", TOKENS),
                                    _opt("--family", FAMILY), _opt("--max-primes", NUM),
                                    _opt("--batch-size", NUM), _opt("--code", FILE),
                                    st.just("--json"), st.just("--require-nonnegative")]),
    "extract": _argv(st.tuples(FILE), [_opt("--out", OUT), _opt("--tokens", TOKENS),
                                       _opt("--family", FAMILY), st.just("--json")]),
    "feasibility": _argv(st.just(("--time-limit", "0.3", "--no-progress")),
                         [_opt("--rank", NUM), _opt("--sweep", NUM), _opt("--family", FAMILY),
                          _opt("--time-limit", TIME), _opt("--out", OUT),
                          _opt("--features", st.sampled_from(["real", "nonnegative", "complex"])),
                          _opt("--seed", NUM), st.just("--json")]),
    "bounds": _argv(st.tuples(st.just("--m"), NUM), [_opt("--n", NUM), _opt("--eps", NUM),
                                                      _opt("--out", OUT), st.just("--json")]),
    "families": st.one_of(
        st.tuples(st.just("show"), FAMILY).map(list),
        st.tuples(st.just("save"), FAMILY, st.just("--out"), OUT).map(list),
        _argv(st.tuples(st.just("build"), st.sampled_from(["chain", "multilevel", "ood"])),
              [_opt("--M", NUM), _opt("--q", NUM), _opt("--s", NUM), _opt("--h", NUM),
               _opt("--n", NUM), _opt("--eps", NUM), _opt("--size", NUM), _opt("--code", FILE),
               _opt("--out", OUT)])),
    "transcript": _argv(st.tuples(st.just("--M"), SMALL, st.just("--s"), SMALL, st.just("--h"), SMALL,
                                  st.just("--q"), SMALL, st.just("--no-progress")),
                        [_opt("--bits", SMALL), _opt("--checkpoint", FILE), _opt("--time-limit", TIME),
                         _opt("--rank", NUM), _opt("--layers", SMALL), _opt("--out", OUT),
                         _opt("--format", st.sampled_from(["fp16", "bf16", "fp4"])),
                         _opt("--sweep-bits", NUM), _opt("--range", NUM)]),
    "verify": _argv(st.tuples(FILE), [st.just("--json"), FILE.map(lambda f: ("--", f))]),
    "report": _argv(st.tuples(FILE), [_opt("--out", OUT), st.just("--no-verify"), st.just("--json")]),
    "checkpoint": _argv(st.tuples(FILE), [_opt("--eps", NUM), _opt("--out", OUT),
                                          _opt("--family", FAMILY)]),
    "demo": _argv(st.tuples(st.just("--out"), DEMO_OUT), [_opt("--time-limit", TIME), _opt("--seed", NUM)]),
}
assert set(ARGV) == set(COMMANDS)


# ---------------------------------------------------------------- one run

class _Alarm(Exception):
    pass


_FIRED = [False]


def _on_alarm(signum, frame):
    _FIRED[0] = True            # recorded even when a library swallows the exception
    raise _Alarm()


def run_in_process(command: str, argv: list[str]) -> tuple[int | None, str, float]:
    """(exit code or None when stopped by the alarm, stderr, CPU seconds of this process)."""
    module = importlib.import_module(COMMANDS[command][0])
    err, out = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGPROF, _on_alarm)
    cwd = os.getcwd()
    t0 = time.process_time()
    rc: int | None
    _FIRED[0] = False
    try:
        os.chdir(scratch())
        signal.setitimer(signal.ITIMER_PROF, ALARM_S)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = run_command(f"certify {command}", module.main, argv)
            except SystemExit as exc:           # argparse: --help (0) and usage errors (2)
                rc = exc.code if isinstance(exc.code, int) else 2
    except _Alarm:
        rc = None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
        os.chdir(cwd)
    if _FIRED[0]:
        rc = None
    return rc, err.getvalue(), time.process_time() - t0


def _snapshot(d: Path) -> dict[str, bytes]:
    return {s: (d / s).read_bytes() for s in run_cases.SENTINELS if (d / s).exists()}


NEW = ("new-out.json", "new-out.npz", "sub/new.json")


def _new_outputs(argv: list[str], d: Path) -> list[Path]:
    outs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--out"]
    return [d / o for o in outs if o in NEW]


def _clean_new(d: Path) -> None:
    for o in (*NEW, "sub"):
        p = d / o
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def check_one(command: str, argv: list[str]) -> None:
    d = scratch()
    _clean_new(d)
    before = _snapshot(d)
    rc, err, secs = run_in_process(command, argv)
    DURATIONS.append((secs, [command, *argv]))
    shown = f"certify {command} {' '.join(a[:40] for a in argv)}"
    assert rc is not None, f"{shown}: still running after {ALARM_S} CPU s"
    allowed = (0, 1, 2, 3, 4) if command == "verify" else (0, 1, 2, 3)   # 4: holds, assuming
    assert rc in allowed, f"{shown}: exit {rc}"
    assert "Traceback" not in err, f"{shown}: {err[-800:]}"
    assert "internal error" not in err, f"{shown}: {err[-400:]}"
    assert ".stage." not in err, f"{shown}: {err[-400:]}"
    assert _snapshot(d) == before, f"{shown}: changed a user's file"
    if rc == 2:
        made = [o for o in _new_outputs(argv, d) if o.exists()]
        assert not made, f"{shown}: exit 2 but wrote {made}"
        lines = [ln for ln in err.splitlines() if "error" in ln]
        assert len(lines) == 1, f"{shown}: {err[-600:]}"


def _fuzz(command: str, n: int):
    @settings(max_examples=n, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(argv=ARGV[command])
    def run(argv):
        check_one(command, argv)
    return run


#: examples per command in the default suite (half of the earlier profile: the fuzzing's
#: own generation was most of its time); ``--runslow``: 16 times as many
NORMAL = {"rank": 240, "extract": 100, "feasibility": 240, "bounds": 150, "families": 240,
          "transcript": 180, "verify": 120, "report": 120, "checkpoint": 75, "demo": 50}


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
                        st.sampled_from(["schema", "format", "claims", "kind", "verdict", "evidence",
                                         "matrix", "tokens", "phi_q", "phi_k", "name", "params",
                                         "inputs", "words", "x"]), kids, max_size=5),
                    max_leaves=20)
READERS = [("rank", []), ("verify", []), ("report", ["--out", "new-out.json"]),
           ("families", None), ("checkpoint", []), ("extract", ["--out", "new-out.npz"])]


def _file_case(data: bytes, suffix: str, reader: int) -> None:
    d = scratch()
    f = d / f"fz{suffix}"
    f.write_bytes(data)
    command, extra = READERS[reader]
    argv = ["show", f.name] if command == "families" else [f.name, *extra]
    check_one(command, argv)


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".npy", ".npz", ".json", ".csv",
                                                             ".safetensors", ""]),
       reader=st.integers(0, len(READERS) - 1))
def test_fuzz_input_file_bytes(data, suffix, reader):
    _file_case(data, suffix, reader)


@settings(max_examples=200, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(doc=JSON, reader=st.integers(0, len(READERS) - 1))
def test_fuzz_input_json_documents(doc, reader):
    import json
    try:
        text = json.dumps(doc)
    except ValueError:
        return
    _file_case(text.encode(), ".json", reader)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_fuzz_command(command):
    _fuzz(command, NORMAL[command])()


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_fuzz_command_large(command):
    _fuzz(command, 16 * NORMAL[command])()


def test_the_harness_cases_in_process():
    """Every scripted harness case, in-process: documented exit, one line, files kept."""
    for _cls, command, argv in run_cases.cases():
        if command == "demo" and "--out" in argv and argv[argv.index("--out") + 1] not in (
                "thesis", "/proc/certify-d"):
            continue
        check_one(command, argv)


BASES = ["bounds.json", str(ROOT / "reports" / "reference" / "cube-kernel.json"),
         str(ROOT / "reports" / "reference" / "feasibility-r13-real.json")]


@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(base=st.integers(0, len(BASES) - 1), where=st.sampled_from(
           ["kind", "verdict", "statement", "parameters", "evidence", "method", "reason", "info",
            "evidence.eps", "evidence.k", "evidence.sigma_sq_enclosures", "evidence.margin",
            "parameters.rank", "parameters.eps", "top.claims", "top.inputs", "top.command"]),
       value=JSON, reader=st.sampled_from([1, 2]))
def test_fuzz_certificate_fields(base, where, value, reader):
    _certificate_field_case(base, where, value, reader)


@pytest.mark.slow
@settings(max_examples=400, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(base=st.integers(0, 2), where=st.sampled_from(
           ["kind", "verdict", "statement", "parameters", "evidence", "method", "reason", "info",
            "evidence.eps", "evidence.k", "evidence.sigma_sq_enclosures", "evidence.margin",
            "parameters.rank", "parameters.eps", "top.claims", "top.inputs", "top.command"]),
       value=JSON, reader=st.sampled_from([1, 2]))
def test_fuzz_certificate_fields_large(base, where, value, reader):
    _certificate_field_case(base, where, value, reader)


def _certificate_field_case(base, where, value, reader):
    """A real certificate with one field replaced by arbitrary JSON: verify and
    report answer with a documented exit code and one line, never a traceback."""
    import json
    path = Path(BASES[base]) if base else scratch() / BASES[0]
    if not path.is_absolute():
        path = scratch() / path
    if not path.exists():
        return
    cert = json.loads(path.read_text())
    head, _, key = where.partition(".")
    if head == "top":
        cert[key] = value
    elif key:
        if isinstance(cert["claims"][0].get(head), dict):
            cert["claims"][0][head][key] = value
    else:
        cert["claims"][0][head] = value
    try:
        text = json.dumps(cert)
    except ValueError:
        return
    _file_case(text.encode(), ".json", reader)
