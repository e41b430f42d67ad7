# The two commands of the book:
#   make book   create the environments if needed, install, build the whole book (executing
#               every page; BENCH=1 runs the benchmark first)
#   make test   the same environments: a smoke build of the whole book, unit tests, checks of its HTML
#
# Two environments (environments/README.md), each from its own constraints file:
#   .venv         current: PyTorch, TensorFlow (Keras 3), JAX (Flax) on numpy 2, Python 3.12,
#                 with the book's tooling; the comparisons run here
#   .venv-legacy  legacy: MXNet 1.9 and Chainer 7 on numpy 1.26, Python 3.11
# ROSETTA_FRAMEWORKS=pytorch,jax installs and executes only those frameworks' tabs (and
# creates only the environments they need; the current one always, for the build).
# ROSETTA_PROFILE=smoke|full chooses the sizes (default: full with a CUDA GPU, smoke without).
# ROSETTA_OFFLINE=1 never downloads: pages use labelled synthetic stand-ins for missing data.
# PYTHON_CURRENT, PYTHON_LEGACY: the interpreters (default: python3.12 and python3.11,
# found on the PATH or through pyenv).

comma := ,
empty :=
space := $(empty) $(empty)

# The frameworks, each environment's, and what builds without isolation and with what: read
# from the registry (src/rosetta_utils/frameworks.py, run as a file: it needs no environment).
REGISTRY_LIST = $(shell python3 src/rosetta_utils/frameworks.py $(1))
FRAMEWORK_CHOICES := $(call REGISTRY_LIST,all)
ifeq ($(FRAMEWORK_CHOICES),)
$(error could not read the frameworks from src/rosetta_utils/frameworks.py with python3: is python3 on the PATH?)
endif
SELECTED := $(strip $(subst $(comma),$(space),$(or $(ROSETTA_FRAMEWORKS),$(subst $(space),$(comma),$(FRAMEWORK_CHOICES)))))
UNKNOWN := $(filter-out $(FRAMEWORK_CHOICES),$(SELECTED))
ifneq ($(UNKNOWN),)
$(error ROSETTA_FRAMEWORKS names $(UNKNOWN), not a framework of the book: use a comma-separated list of $(FRAMEWORK_CHOICES))
endif
ifeq ($(SELECTED),)
$(error ROSETTA_FRAMEWORKS is empty: name one or more of $(FRAMEWORK_CHOICES))
endif
CURRENT_FRAMEWORKS := $(filter $(SELECTED),$(call REGISTRY_LIST,current))
LEGACY_FRAMEWORKS := $(filter $(SELECTED),$(call REGISTRY_LIST,legacy))

# ROSETTA_GPU=auto|cuda|cpu: which builds of the frameworks to install. auto (the
# default) takes the GPU builds when an NVIDIA GPU is visible (/dev/nvidia0 ...).
ROSETTA_GPU ?= auto
GPU_CHOICES := auto cuda cpu
ifeq ($(filter $(ROSETTA_GPU),$(GPU_CHOICES)),)
$(error ROSETTA_GPU=$(ROSETTA_GPU) is not valid: use one of $(GPU_CHOICES))
endif
PROFILE_CHOICES := smoke full
ifneq ($(ROSETTA_PROFILE),)
ifeq ($(filter $(ROSETTA_PROFILE),$(PROFILE_CHOICES)),)
$(error ROSETTA_PROFILE=$(ROSETTA_PROFILE) is not valid: use one of $(PROFILE_CHOICES))
endif
endif
GPU_VISIBLE := $(if $(wildcard /dev/nvidia[0-9]*),yes,)
USE_CUDA := $(if $(filter cuda,$(ROSETTA_GPU)),yes,$(if $(filter auto,$(ROSETTA_GPU)),$(GPU_VISIBLE),))
# With CUDA, PyTorch, TensorFlow and JAX get their GPU builds (extras *-cuda in
# pyproject.toml); MXNet and Chainer have none for current GPUs and stay on the CPU.
CURRENT_EXTRAS := $(subst $(space),$(comma),$(strip test $(foreach name,$(CURRENT_FRAMEWORKS),$(name)$(if $(USE_CUDA),-cuda))))
LEGACY_EXTRAS := $(subst $(space),$(comma),$(strip test $(LEGACY_FRAMEWORKS)))

# The interpreters: an explicit PYTHON_CURRENT / PYTHON_LEGACY, else the first of
# python3.12 (python3.11) that runs, on the PATH or among pyenv's versions.
PYENV_VERSIONS := $(sort $(HOME)/.pyenv/versions $(if $(PYENV_ROOT),$(PYENV_ROOT)/versions) $(shell pyenv root 2>/dev/null)/versions)
find_python = $(firstword $(foreach candidate,$(1) $(foreach root,$(PYENV_VERSIONS),$(wildcard $(root)/$(2).*/bin/$(1))),$(shell $(candidate) -c 'import sys; assert sys.version_info[:2] == ($(subst .,$(comma),$(2)))' >/dev/null 2>&1 && command -v $(candidate))))
PYTHON_CURRENT ?= $(call find_python,python3.12,3.12)
PYTHON_LEGACY ?= $(call find_python,python3.11,3.11)

CURRENT := .venv
LEGACY := .venv-legacy
BIN := $(CURRENT)/bin
CURRENT_STAMP := $(CURRENT)/.installed-$(subst $(comma),-,$(CURRENT_EXTRAS))
LEGACY_STAMP := $(if $(LEGACY_FRAMEWORKS),$(LEGACY)/.installed-$(subst $(comma),-,$(LEGACY_EXTRAS)))
STAMPS := $(CURRENT_STAMP) $(LEGACY_STAMP)
HTML := $(CURDIR)/_build/html
# PyTorch's CUDA wheels for a GPU machine (PyPI's Linux wheel is a CUDA build too).
TORCH_CUDA_INDEX ?= https://download.pytorch.org/whl/cu128

export PIP_DISABLE_PIP_VERSION_CHECK := 1
export ROSETTA_RESULTS_DIR ?= $(CURDIR)/_build/results
# Where the build finds each environment's interpreter (rosetta_book.environments).
export ROSETTA_CURRENT_PYTHON := $(CURDIR)/$(CURRENT)/bin/python
export ROSETTA_LEGACY_PYTHON := $(CURDIR)/$(LEGACY)/bin/python

.PHONY: bench record-defaults downloads-check site-tests book test unit-tests unit-tests-current unit-tests-legacy book-smoke browser gpu-check gpu-dry-run environments clean

# BENCH=1 runs the benchmark (make bench, minutes per task) before building, and the task
# pages show its reports; without it they show the newest report there is, this machine's
# (_build/results) or the curated one (results/), labelled with its machine and date.
BENCH ?= 0
ifeq ($(filter $(BENCH),0 1),)
$(error BENCH=$(BENCH) is not valid: use BENCH=1 (run the benchmark first) or BENCH=0)
endif
book: $(STAMPS) $(if $(filter 1,$(BENCH)),bench)
	ROSETTA_BOOK_BUILD=1 $(BIN)/jupyter-book build . --builder html --warningiserror --keep-going
	@echo "Book built: $(HTML)/index.html"

# The benchmark of every task of the registry (rosetta_utils.tasks) in the build's profile
# (rosetta_book.bench): its reports, bench-<task>.json in the build's results folder, are
# the last table of each task page's Timing section and the Results page's benchmark table.
bench: $(STAMPS)
	$(BIN)/python -m rosetta_book.bench --frameworks $(subst $(space),$(comma),$(SELECTED)) \
	  $(if $(ROSETTA_PROFILE),--profile $(ROSETTA_PROFILE))

environments: $(STAMPS)

# After a pin in environments/ moved: record the defaults the translation tables' calls
# leave unsaid, as the new releases have them (book/tables/defaults/*.json, rosetta_book.
# record_defaults), from the last build's parts where it ran them; commit the diff.
record-defaults: $(STAMPS)
	ROSETTA_PROFILE=smoke ROSETTA_OFFLINE=1 $(BIN)/python -m rosetta_book.record_defaults

# Every download run where a reader runs it (rosetta_book.downloads_check): per framework,
# fresh environments made from each download's own install line (never the book's), each
# download run alone there, offline, in the smoke profile. Five frameworks' environments:
# minutes each, and the downloads themselves; the publish workflow runs it, and make test
# runs one download per framework (DOWNLOADS_CHECK_ARGS=--one-per-framework).
DOWNLOADS_CHECK_ARGS ?=
downloads-check: $(CURRENT_STAMP)
	$(BIN)/python -m rosetta_book.downloads_check --frameworks $(subst $(space),$(comma),$(SELECTED)) \
	  --current-python $(PYTHON_CURRENT) $(if $(LEGACY_FRAMEWORKS),--legacy-python $(PYTHON_LEGACY)) \
	  $(DOWNLOADS_CHECK_ARGS)

# make test, in timed phases (tools/phase; their times are printed again at the end): the
# environments, both at once beside the browser's install; the smoke build as the test
# build (ROSETTA_TEST_BUILD=1: every part shares the machine, and the pages say their times
# are not measurements); then every test (tools/run_tests.py): the current and legacy
# environments' unit tests and the built site's tests, each heavy test file in a process of
# its own, the light ones a few to a process, as many processes at once as there are cores.
# The unit tests take the parts the build executed from its cache (the same code, profile
# and helpers; see rosetta_book.chapter) instead of executing every page a second time. The
# last line counts what was checked: the verdicts the build gated and the tests that ran.
# The test build runs the ResNet-50 page on weights in the published file's exact layout,
# served on 127.0.0.1 and fetched by the page's loader into the build's own data cache
# (tests/served_resnet50.py; a labelled stand-in, as any file but the published one), so
# that the page's tests take its parts from the build instead of running all five again.
TEST_RUN := _build/test-run
TEST_DATA := $(CURDIR)/_build/test-data
test:
	@rm -f $(TEST_RUN)/phases.tsv
	@tools/phase $(TEST_RUN)/phases.tsv "environments and the browser" \
	  $(MAKE) --no-print-directory -j3 --output-sync=target environments browser
	@tools/phase $(TEST_RUN)/phases.tsv "smoke build (the test build)" sh -c '\
	  served=$$($(BIN)/python tests/served_resnet50.py $(TEST_DATA)) && \
	  env "$$served" ROSETTA_DATA_DIR=$(TEST_DATA)/cache $(MAKE) --no-print-directory book-smoke ROSETTA_TEST_BUILD=1'
	@tools/phase $(TEST_RUN)/phases.tsv "tests (unit, legacy, site)" env ROSETTA_TEST_BUILD=1 \
	  ROSETTA_TEST_SERVED_RESNET50=$(TEST_DATA) \
	  ROSETTA_BUILD_CACHE=$(CURDIR)/_build/.jupyter_cache $(BIN)/python tools/run_tests.py --current $(BIN)/python \
	  $(if $(LEGACY_FRAMEWORKS),--legacy $(LEGACY)/bin/python) --site $(HTML) --out $(TEST_RUN) \
	  --verdicts _build/verdicts-gated.json; status=$$?; tools/phase --report $(TEST_RUN)/phases.tsv; exit $$status

# The tests of the built site (what a reader sees: every page built, no failed verdict
# shown, the downloads): after `make test`'s smoke build, and after the publish
# workflow's full one.
site-tests:
	ROSETTA_BOOK_HTML=$(HTML) $(BIN)/python -m pytest -q tests/test_built_*.py

# The browser tests use the distribution's Chromium and ChromeDriver (no tool that
# downloads its own browser, which cannot work offline). Installed here when missing
# and this may (root, apt-get); else the browser tests are skipped, saying why.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "Installing chromium and chromium-driver for the browser tests"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	    || echo "apt-get could not install chromium: the browser tests will be skipped"; \
	else echo "No chromium here and no way to install it: the browser tests will be skipped"; fi

# Tests never touch the network: the data loaders use their labelled stand-ins. The
# current environment runs every test; the legacy one the tests that import MXNet or
# Chainer in the test's own process (tests/conftest.py chooses them).
unit-tests: unit-tests-current $(if $(LEGACY_FRAMEWORKS),unit-tests-legacy)

unit-tests-current: $(CURRENT_STAMP)
	ROSETTA_OFFLINE=1 $(BIN)/python -m pytest -q --durations=15 --ignore-glob='tests/test_built_*.py'

unit-tests-legacy: $(LEGACY_STAMP)
	ROSETTA_OFFLINE=1 ROSETTA_TEST_ENVIRONMENT=legacy $(LEGACY)/bin/python -m pytest -q --durations=15 --ignore-glob='tests/test_built_*.py'

book-smoke: $(STAMPS)
	ROSETTA_PROFILE=smoke ROSETTA_OFFLINE=1 $(MAKE) --no-print-directory book BENCH=0

# One environment: create it with its interpreter, install under its constraints, and
# write the stamp last, so that an interrupted install is never taken as complete. The
# installs go through uv (pinned in each constraints file, itself installed by pip): the
# same releases as pip would install under the same constraints, in about a quarter of
# pip's time (the current environment is 8 GB, PyPI's torch being a CUDA build). Chainer's
# sdist builds inside the environment, with its pinned setuptools. Like pip, uv compiles
# every module's bytecode as it installs (--compile-bytecode): where PYTHONDONTWRITEBYTECODE
# is set (as on this project's machines), no process would ever write it, and every part's
# kernel would compile its framework's modules again (a test build took 1,203 s against 899).
# $(1): folder, $(2): interpreter, $(3): interpreter's name, $(4): constraints, $(5): extras, $(6): installer
# options, $(7): the environment (its frameworks' build requirements go in first, as the registry says)
UV_INSTALL = $(1)/bin/uv pip install --quiet --compile-bytecode --python $(1)/bin/python --constraint $(CURDIR)/$(4)
define install_environment
	@test -n "$(2)" || { echo "make: no $(3) found (needed for $(1)). Install CPython $(3:python%=%) (for example 'pyenv install $(3:python%=%)') or name one: make $(MAKECMDGOALS) $(if $(filter .venv,$(1)),PYTHON_CURRENT,PYTHON_LEGACY)=/path/to/$(3)" >&2; exit 2; }
	rm -f $(1)/.installed-*
	test -x $(1)/bin/python || $(2) -m venv $(1)
	PIP_CONSTRAINT=$(CURDIR)/$(4) $(1)/bin/python -m pip install --quiet uv
	$(if $(call REGISTRY_LIST,build-with $(7)),$(UV_INSTALL) "setuptools>=77" $(foreach requirement,$(call REGISTRY_LIST,build-with $(7)),"$(requirement)"))
	$(UV_INSTALL) $(6) $(foreach package,$(call REGISTRY_LIST,no-build-isolation $(7)),--no-build-isolation-package $(package)) -e src/rosetta_utils -e ".[$(5)]"
	touch $(1)/.installed-$(subst $(comma),-,$(5))
endef

$(CURRENT_STAMP): pyproject.toml src/rosetta_utils/pyproject.toml environments/current.txt
	$(call install_environment,$(CURRENT),$(PYTHON_CURRENT),python3.12,environments/current.txt,$(CURRENT_EXTRAS),$(if $(USE_CUDA),--extra-index-url $(TORCH_CUDA_INDEX)),current)

$(LEGACY)/.installed-%: pyproject.toml src/rosetta_utils/pyproject.toml environments/legacy.txt
	$(call install_environment,$(LEGACY),$(PYTHON_LEGACY),python3.11,environments/legacy.txt,$(LEGACY_EXTRAS),,legacy)

# The device check: every chapter's PyTorch and JAX parts in the full profile on this
# machine's GPU (each part's device read from its arrays), each page's comparison cells on
# what they computed (a failed verdict fails the check), then the GPU lessons' measurements
# (rosetta_book.gpu_lessons); records appended to results/, within a 6-minute budget that
# cuts the lessons first. Runs on the machine's own Python with PyTorch and JAX installed
# (the current environment by default): see the README. On the lent GPU machine:
#   make gpu-check GPU_CHECK_PYTHON=python3
# GPU_CHECK_ARGS adds options: --budget SECONDS, --pages cifar10_cnn,..., --lessons
# autotuning,precision,layouts,fused-rnn (or none), --frameworks, --results FOLDER.
GPU_CHECK_PYTHON ?= $(BIN)/python
gpu-check:
	PYTHONPATH=$(CURDIR)/src$(if $(PYTHONPATH),:$(PYTHONPATH)) $(GPU_CHECK_PYTHON) -m rosetta_book.gpu_check $(GPU_CHECK_ARGS)

# A dry run of the lent GPU machine: a throwaway environment with that machine's versions
# (environments/gpu-machine.txt), from the registry's CPU wheels, runs the device check
# in the smoke profile on this CPU: the chapters, their comparisons and the lessons (on
# batches cut to a few examples), within GPU_DRY_RUN_BUDGET seconds (a small CPU's time,
# not the GPU's 6 minutes). Nothing of it is kept but its output.
GPU_DRY_RUN := _build/gpu-dry-run
GPU_DRY_RUN_BUDGET ?= 1800
# What that machine's image has that the chapters import (KINDS.md's package list), and
# what a session carries there as wheels because the image lacks it: pooch and myst-nb
# (the README), onnx2torch and jax2onnx (the chapter on moving models between frameworks).
GPU_MACHINE_PACKAGES := torch torchvision jax jaxlib flax optax orbax-checkpoint numpy matplotlib pillow \
  onnx onnxscript onnxruntime tqdm
GPU_CARRIED_PACKAGES := pooch myst-nb onnx2torch jax2onnx
gpu-dry-run:
	@test -n "$(PYTHON_CURRENT)" || { echo "make: no python3.12 found: the GPU machine runs Python 3.12 (PYTHON_CURRENT=/path/to/python3.12)" >&2; exit 2; }
	rm -rf $(GPU_DRY_RUN)
	$(PYTHON_CURRENT) -m venv $(GPU_DRY_RUN)/venv
	PIP_CONSTRAINT=$(CURDIR)/environments/gpu-machine.txt $(GPU_DRY_RUN)/venv/bin/python -m pip install --quiet $(GPU_MACHINE_PACKAGES) $(GPU_CARRIED_PACKAGES)
	PIP_CONSTRAINT=$(CURDIR)/environments/gpu-machine.txt $(GPU_DRY_RUN)/venv/bin/python -m pip install --quiet --no-deps -e src/rosetta_utils -e .
	ROSETTA_OFFLINE=1 $(MAKE) --no-print-directory gpu-check GPU_CHECK_PYTHON=$(GPU_DRY_RUN)/venv/bin/python \
	  GPU_CHECK_ARGS="--profile smoke --allow-cpu --budget $(GPU_DRY_RUN_BUDGET) --results $(CURDIR)/$(GPU_DRY_RUN)/results"

clean:
	rm -rf _build
