# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install, run the main job on the built-in default
#   make test   create .venv, install (every extra and the test tools: [all,test]), run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# A CPU wheel of torch==2.13.0 lies in /opt/wheels on the project's machines;
# pointing pip there keeps it from pulling a multi-GB CUDA build.
WHEELS  = $(wildcard /opt/wheels)
PIPFLAGS = $(if $(WHEELS),--find-links $(WHEELS),)

# Python's default: modules and pytest's rewritten tests keep their bytecode in __pycache__
# (git-ignored). Some shells export PYTHONDONTWRITEBYTECODE; then every process of the suite
# (hundreds of commands run as subprocesses) would compile the project's sources again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-all test-pure schema lint lint-imports install install-test bench bench-report suite-times reports gallery clean service-deps latex-tools

# the compiled kernels are built by the install: a changed C source re-installs
KERNEL_SOURCES := $(wildcard solvers/exact/*.c models/canonical/*.c certify/transcript/*.c certify/checkers/kernel/*.c)

$(VENV)/.installed: pyproject.toml $(KERNEL_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIPFLAGS) -e '.[all,test]'
	@# the compiled kernels are optional (no C compiler: pip skips them quietly); say so loudly
	$(PY) -c 'from certify.cli.version import install_check; install_check()'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m certify demo

# Debian packages some tests need, installed when missing: as root with apt-get,
# otherwise with `sudo -n` (passwordless sudo) when that works. Where neither is
# possible the step says which packages are missing; the tests that need them then
# skip naming those packages (under CI, where they must run, they fail instead).
define apt_install
	if [ "$$(id -u)" = 0 ]; then run=""; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then run="sudo -n"; \
	else run=none; fi; \
	if [ "$$run" = none ] || ! command -v apt-get >/dev/null 2>&1; then \
	  echo "not installed (needs root or passwordless sudo): $(1); $(2) will skip. Install with: sudo apt-get install $(1)"; \
	else echo "installing $(1) (apt-get)"; \
	  ( $$run apt-get update -qq && $$run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $(1) >/dev/null ) \
	  || echo "could not install $(1); $(2) will skip"; fi
endef

# report.tex is compiled in the tests with a real engine: Debian's
# texlive-latex-recommended (booktabs) and latexmk.
LATEX_APT = $(if $(shell command -v latexmk 2>/dev/null),,latexmk) \
            $(if $(shell kpsewhich booktabs.sty 2>/dev/null),,texlive-latex-recommended)
latex-tools:
	@if [ -n "$(strip $(LATEX_APT))" ]; then $(call apt_install,$(strip $(LATEX_APT)),the LaTeX compile test); fi

# The default suite: the import contracts, then
# every test except those marked slow, on two pytest workers; the 15 slowest
# are printed. `make test-all` adds the slow profile (--runslow).
PYTEST = $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=15

# the published certificate schema, written from the kinds' declarations (certify.checkers.schema);
# tests/test_declarations.py runs the writer and keeps the committed file equal to it, byte for byte
schema: $(VENV)/.installed
	$(PY) -c "from certify.checkers import schema; schema.write()"

# ruff on the whole tree (packages, tests, benchmarks, the research scripts under reports/); mypy on every
# package in one run, strict (every signature annotated) on the checker (the part a reviewer trusts), the
# core and the solvers; both configured in pyproject.toml
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy certify models solvers

lint-imports: $(VENV)/.installed
	$(VENV)/bin/lint-imports --no-cache

test: $(VENV)/.installed service-deps latex-tools lint lint-imports
	$(PYTEST) tests

test-all: $(VENV)/.installed service-deps latex-tools lint lint-imports
	$(PYTEST) --runslow tests

# The pure paths: a representative part of the suite (exact rank, the checker's span check,
# verify, the canonical extraction, the transcript enumeration) with the compiled kernels
# switched off, as on a machine without a C compiler (docs/commands.md, Compiled kernels)
PURE_TESTS = tests/test_compiled_switch.py tests/test_exact.py tests/test_span_check.py tests/test_rank.py \
             tests/test_verify.py tests/test_canonical.py tests/test_transcript.py
test-pure: $(VENV)/.installed
	CERTIFY_NO_COMPILED=1 $(PYTEST) $(PURE_TESTS)

# The service's browser and database tests use Debian's chromium + chromium-driver
# and PostgreSQL 15 (its cluster stays stopped; the tests start a throwaway one).
SERVICE_APT = $(if $(wildcard /usr/bin/chromium),,chromium) \
              $(if $(wildcard /usr/bin/chromedriver),,chromium-driver) \
              $(if $(wildcard /usr/lib/postgresql/15/bin/initdb),,postgresql-15)
service-deps:
	@if [ -n "$(strip $(SERVICE_APT))" ]; then $(call apt_install,$(strip $(SERVICE_APT)),the service's browser and PostgreSQL tests); \
	  if [ -x /usr/lib/postgresql/15/bin/initdb ]; then (service postgresql stop >/dev/null 2>&1 || sudo -n service postgresql stop >/dev/null 2>&1 || true); fi; fi

# every benchmark (each prints its ratio against a baseline measured in the same run and
# writes its results into reports/bench/), then the report: reports/bench/README.md and the
# plot of time vs n; `make bench-report` redraws the report from the committed results
bench: $(VENV)/.installed
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done
	$(PY) benchmarks/report.py

bench-report: $(VENV)/.installed
	$(PY) benchmarks/report.py

# the default suite's time (`make suite-times`; a subset: `make suite-times TESTS=tests/test_codes.py`):
# reports/suite-times.json and .md (tests passed, pytest seconds, CPU seconds of pytest and its
# workers, the 15 slowest), then the README's headline figures, which quote it
TESTS ?= tests
suite-times: $(VENV)/.installed
	$(PY) benchmarks/suite_times.py $(TESTS)
	$(PY) benchmarks/report.py --pages

# regenerate the committed reference reports (reports/reference/)
reports: $(VENV)/.installed
	$(PY) -m certify demo --out reports/reference

# one small model of each supported library, saved and certified (reports/gallery/)
gallery: $(VENV)/.installed
	$(PY) reports/gallery/make_gallery.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
