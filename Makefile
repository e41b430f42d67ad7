# The two commands of the book:
#   make book   create .venv if needed, install, build the whole book (executing every page)
#   make test   the same environment: a smoke build of the whole book, unit tests, checks of its HTML
#
# ROSETTA_FRAMEWORKS=pytorch,jax installs and executes only those frameworks' tabs.
# ROSETTA_PROFILE=smoke|full chooses the sizes (default: full with a CUDA GPU, smoke without).
# ROSETTA_OFFLINE=1 never downloads: pages use labelled synthetic stand-ins for missing data.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
comma := ,

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
# With CUDA, each framework that has a maintained GPU build gets it (extras *-cuda in
# pyproject.toml); MXNet and Chainer have none for current GPUs and stay on the CPU.
CUDA_EXTRA = $(if $(filter $(1),pytorch tensorflow jax),$(1)-cuda,$(1))
FRAMEWORK_EXTRAS := $(if $(USE_CUDA),$(foreach name,$(subst $(comma), ,$(or $(ROSETTA_FRAMEWORKS),pytorch$(comma)tensorflow$(comma)jax$(comma)mxnet$(comma)chainer)),$(call CUDA_EXTRA,$(name))),$(subst $(comma), ,$(or $(ROSETTA_FRAMEWORKS),frameworks)))
# PyTorch's CUDA wheels (2.13.0+cu128 outranks the CPU-only 2.13.0 the pin also allows).
TORCH_CUDA_INDEX ?= https://download.pytorch.org/whl/cu128
empty :=
space := $(empty) $(empty)
EXTRAS := book$(comma)test$(comma)$(subst $(space),$(comma),$(strip $(FRAMEWORK_EXTRAS)))
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
HTML := $(CURDIR)/_build/html

# Pins for every pip call, build environments included (Chainer builds from source).
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export ROSETTA_RESULTS_DIR ?= $(CURDIR)/_build/results

.PHONY: book test unit-tests book-smoke browser gpu-check clean

book: $(STAMP)
	ROSETTA_BOOK_BUILD=1 $(BIN)/jupyter-book build . --builder html --warningiserror --keep-going
	@echo "Book built: $(HTML)/index.html"

# The smoke build runs first: the unit tests then take the parts it executed from its
# cache (the same code, profile and helpers; see rosetta_utils.chapter), instead of
# executing every page a second time.
test: book-smoke browser
	ROSETTA_BUILD_CACHE=$(CURDIR)/_build/.jupyter_cache $(MAKE) --no-print-directory unit-tests
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

unit-tests: $(STAMP)
	ROSETTA_OFFLINE=1 $(BIN)/python -m pytest -q --ignore-glob='tests/test_built_*.py'

# Tests never touch the network: the data loaders use their labelled stand-ins.
book-smoke: $(STAMP)
	ROSETTA_PROFILE=smoke ROSETTA_OFFLINE=1 $(MAKE) --no-print-directory book

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "setuptools>=77,<81" wheel
	$(BIN)/python -m pip install --quiet $(if $(USE_CUDA),--extra-index-url $(TORCH_CUDA_INDEX)) -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $@

# The device check: every chapter's PyTorch and JAX parts in the full profile on this
# machine's GPU, records appended to results/. Runs on the machine's own Python with
# only PyTorch and JAX installed (no .venv): see the README, "The GPU runner".
GPU_CHECK_PYTHON ?= python3
gpu-check:
	PYTHONPATH=$(CURDIR)/src$(if $(PYTHONPATH),:$(PYTHONPATH)) $(GPU_CHECK_PYTHON) -m rosetta_utils.gpu_check $(GPU_CHECK_ARGS)

clean:
	rm -rf _build
