import gc
import os

import pytest

# One BLAS / OpenMP thread in the test processes and the commands they start: the suite runs
# on two workers over two cores, where a second thread per process only competes (and spins,
# counted as CPU time). Set before numpy or torch is loaded by a test module; a test that is
# about thread counts sets its own environment for the process it starts.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# numpy's huge-page advice off, as every command runs (certify/__main__.py); numpy reads the
# switch when it is first imported, which is after this file (tests/test_exit.py checks it)
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

# The cyclic garbage collector tuned as the command line tunes it (certify/__main__.py: a
# process that ends when its work does looks at its youngest objects every 100,000 new
# containers, not every 700): a test worker holds 0.3-0.6 M objects (numpy, torch, the model
# libraries), and with the default thresholds its automatic full collections (about 0.1 s each)
# were a tenth of its CPU. The in-process runs of the commands (tests/test_fuzz_commands.py,
# certify.cli.run) then run as the commands do. tests/test_exit.py checks the value.
COLLECTOR_THRESHOLDS = (100_000, 10, 10)
gc.set_threshold(*COLLECTOR_THRESHOLDS)

# The suite runs with ``--dist loadfile`` (Makefile, benchmarks/suite_times.py): every test of a
# file on one worker, so a module-scoped fixture (a Ray cluster, a server, a browser) is built
# once. (``--dist loadgroup`` with a group per file did not group: pytest 9 reads a node's id
# from a field xdist 3.8 does not set, so the groups never reached the scheduler and each module
# fixture was built on both workers.)


#: test files run as one work unit, on one worker: those that import the model libraries (fla
#: alone costs about 9 CPU s to import, performer-pytorch and transformers 1-2 s each), so that
#: one worker imports them instead of both, and the static scans, which share parsed sources
#: (tests/test_suite_hygiene.py checks the names)
SAME_WORKER = {"libraries": ("test_checkpoint_defaults", "test_checkpoint_libraries", "test_checkpoint_loader",
                             "test_checkpoint_replay", "test_fla_embedding", "test_fla_unnormalized",
                             "test_layouts", "test_nonnegative_structure", "test_one_line_failures",
                             "test_readme_examples", "test_sequences_layers", "test_sequences_lucidrains"),
               # the static scans: one worker parses the sources once (tests/source_trees.py)
               "scans": ("test_architecture", "test_docs_references", "test_function_length")}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the files of :data:`SAME_WORKER` as one unit per group."""
    from xdist.scheduler import LoadFileScheduling
    unit = {f"tests/{name}.py": group for group, names in SAME_WORKER.items() for name in names}

    class FileOrGroup(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return unit.get(file, file)

    return FileOrGroup(config, log) if config.getoption("dist") == "loadfile" else None


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="run tests marked slow (heavy sweeps)")
    parser.addoption("--cpu-report", type=int, default=0, metavar="N",
                     help="print the N tests that use the most CPU seconds (this process and its waited-for children)")


#: the work units that take the longest (wall seconds of a whole run, longest first: Ray, the
#: servers, Chromium, the model libraries): collected first, so that with ``--dist loadfile`` the
#: workers start on them and neither ends the run on one while the other idles (xdist's own order,
#: by number of tests, put the servers' files last: a 10 s tail). tests/test_suite_hygiene.py
#: checks the names.
LONGEST_FIRST = ("test_parallel", "test_service_api", "test_service_browser", "libraries",
                 "test_schema_deletion", "test_check_isolation", "test_sdp", "test_trust",
                 "test_service_bounds", "test_service_datadir", "test_hub_models", "test_transcript_scale",
                 "test_service_restart", "test_feasibility", "test_checkpoint_cmd", "test_oracle")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False      # the collection's order (above), not the count


def pytest_collection_modifyitems(config, items):
    group = {name: g for g, names in SAME_WORKER.items() for name in names}
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(group.get(item.path.stem, item.path.stem), len(rank)))
    if config.getoption("--runslow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: opt in with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# ---------------------------------------------------------------- CPU seconds per test (load-independent)

def _cpu() -> float:
    import resource
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


_CPU: dict[str, float] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item._cpu_start = _cpu()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``--cpu-report N``: the teardown report carries the CPU seconds of the whole
    test (setup, call and teardown; this process and the children it waited for), so the
    suite's cost is read in CPU seconds even on a loaded machine."""
    outcome = yield
    if call.when == "teardown" and item.config.getoption("--cpu-report", 0):
        outcome.get_result().user_properties.append(("cpu_s", _cpu() - getattr(item, "_cpu_start", _cpu())))


def pytest_runtest_logreport(report):
    for k, v in getattr(report, "user_properties", []):
        if k == "cpu_s" and report.when == "teardown":
            _CPU[report.nodeid] = v


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = config.getoption("--cpu-report", 0)
    if not n or not _CPU:
        return
    total = sum(_CPU.values())
    terminalreporter.write_sep("=", f"CPU seconds per test: {total:.1f} in all, the {n} largest")
    for nodeid, s in sorted(_CPU.items(), key=lambda kv: -kv[1])[:n]:
        terminalreporter.write_line(f"{s:8.2f}  {nodeid}")
