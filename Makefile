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

.PHONY: demo test install install-test bench reports gallery clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIPFLAGS) -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m certify demo

test: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: $(VENV)/.installed
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

# regenerate the committed reference reports (reports/reference/)
reports: $(VENV)/.installed
	$(PY) -m certify demo --out reports/reference

# one small model of each supported library, saved and certified (reports/gallery/)
gallery: $(VENV)/.installed
	$(PY) reports/gallery/make_gallery.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
