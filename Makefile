# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install, run the main job on the built-in default
#   make test   create .venv, install (with test extras), run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# A CPU wheel of torch==2.13.0 lies in /opt/wheels on the project's machines;
# pointing pip there keeps it from pulling a multi-GB CUDA build.
WHEELS  = $(wildcard /opt/wheels)
PIPFLAGS = $(if $(WHEELS),--find-links $(WHEELS),)

.PHONY: demo test test-all lint-imports install install-test bench bench-report reports gallery clean service-deps latex-tools

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIPFLAGS) -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m certify demo

# report.tex is compiled in the tests with a real engine: Debian's
# texlive-latex-recommended (booktabs) and latexmk, installed here when missing
# (as root with apt-get; otherwise the step says what to install and the test skips).
latex-tools:
	@if command -v latexmk >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing texlive-latex-recommended and latexmk (report.tex compile test)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends texlive-latex-recommended latexmk >/dev/null) \
	  || echo "could not install texlive-latex-recommended latexmk: the LaTeX compile test will skip"; \
	else echo "to compile report.tex in the tests install: texlive-latex-recommended latexmk (e.g. sudo apt-get install texlive-latex-recommended latexmk)"; fi

# The default suite (under 3 minutes on 2 cores): the import contracts, then
# every test except those marked slow, on two pytest workers; the 15 slowest
# are printed. `make test-all` adds the slow profile (--runslow).
PYTEST = $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=15

lint-imports: $(VENV)/.installed
	$(VENV)/bin/lint-imports --no-cache

test: $(VENV)/.installed service-deps latex-tools lint-imports
	$(PYTEST) tests

test-all: $(VENV)/.installed service-deps latex-tools lint-imports
	$(PYTEST) --runslow tests

# The service's browser and database tests use Debian's chromium + chromium-driver
# and PostgreSQL 15 (its cluster stays stopped; the tests start a throwaway one).
# Installed only when missing; needs root (or sudo) for apt-get.
SERVICE_APT = $(if $(wildcard /usr/bin/chromium),,chromium) \
              $(if $(wildcard /usr/bin/chromedriver),,chromium-driver) \
              $(if $(wildcard /usr/lib/postgresql/15/bin/initdb),,postgresql-15)
service-deps:
	@if [ -n "$(strip $(SERVICE_APT))" ]; then \
	  echo "installing $(strip $(SERVICE_APT)) (apt-get)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(strip $(SERVICE_APT)) \
	    && (service postgresql stop >/dev/null 2>&1 || true); \
	fi

# every benchmark (each prints its ratio against a baseline measured in the same run and
# writes its results into reports/bench/), then the report: reports/bench/README.md and the
# plot of time vs n; `make bench-report` redraws the report from the committed results
bench: $(VENV)/.installed
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done
	$(PY) benchmarks/report.py

bench-report: $(VENV)/.installed
	$(PY) benchmarks/report.py

# regenerate the committed reference reports (reports/reference/)
reports: $(VENV)/.installed
	$(PY) -m certify demo --out reports/reference

# one small model of each supported library, saved and certified (reports/gallery/)
gallery: $(VENV)/.installed
	$(PY) reports/gallery/make_gallery.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
