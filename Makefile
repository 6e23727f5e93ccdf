# Two entry points: `make serve` runs the server, `make test` runs the tests.
# Both create .venv on first use. torch is installed first from TORCH_SPEC (the CPU build by
# default, so CI never pulls a multi-GB CUDA wheel); bring your own build with
#   make serve TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128"
# or install torch into .venv yourself first: an importable torch is kept as it is.

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
SERVE_ARGS ?=
# pytest-xdist workers: one more than a 2-core machine's cores, as many tests wait on sockets,
# a browser or a fake engine's clock (measured: phase one 716 s with two, 626 s with three)
TEST_WORKERS ?= 3
PIP = $(VENV)/bin/python -m pip

.PHONY: serve test install install-test lint mutation clean

# the CPU kernels are built (once, about 2 minutes) before the server listens, not while the
# first model loads and requests wait
serve: install
	$(VENV)/bin/ownvoice doctor --prepare
	$(VENV)/bin/ownvoice serve $(SERVE_ARGS)

# Two workers run the tests (pytest-xdist), then the tests marked `alone` (they measure time or
# load) run with the machine to themselves; both phases run, and either failing fails.
test: install-test
	@status=0; \
	OWNVOICE_REQUIRE_REFERENCE=1 $(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not alone" || status=1; \
	OWNVOICE_REQUIRE_REFERENCE=1 $(VENV)/bin/python -m pytest -q -m alone || status=1; \
	exit $$status

# mutation testing of the quick pure-Python modules (docs/testing.md); not part of `make test`
mutation: install-test
	$(VENV)/bin/python scripts/mutation.py $(MODULES)

lint: install-test
	$(VENV)/bin/ruff check ownvoice tests
	$(VENV)/bin/ruff format --check ownvoice tests
	$(VENV)/bin/hadolint docker/Dockerfile.*

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.torch: $(VENV)/bin/python
	$(VENV)/bin/python -c "import torch" 2>/dev/null || $(PIP) install $(TORCH_SPEC)
	touch $@

# Installs run again only when the dependency files changed (stamp files in .venv), so a
# set-up machine starts offline: the editable install fetches its build backend each time.
install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

$(VENV)/.installed: $(VENV)/.torch pyproject.toml Makefile
	$(PIP) install -q -e ".[server,book]"
	touch $@

# The official reference package (parity tests only) is installed without its dependencies:
# it would pull gradio, and its 25 Hz code imports sox/onnxruntime/torchaudio, which the tests
# replace with inert stubs (tests/reference/stubs). The test extras hold the server's.
$(VENV)/.installed-test: $(VENV)/.torch pyproject.toml Makefile
	$(PIP) install -q -e ".[server,book,test]"
	$(PIP) install -q --no-deps qwen-tts==0.1.1
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV)
