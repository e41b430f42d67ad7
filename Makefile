# The two commands of the book:
#   make book   create .venv if needed, install, build the whole book (executing every page)
#   make test   the same environment: unit tests, a smoke build of the whole book, checks of its HTML
#
# ROSETTA_FRAMEWORKS=pytorch,jax installs and executes only those frameworks' tabs.
# ROSETTA_PROFILE=smoke|full chooses the sizes (default: full with a CUDA GPU, smoke without).
# ROSETTA_OFFLINE=1 never downloads: pages use labelled synthetic stand-ins for missing data.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
comma := ,
EXTRAS := $(if $(ROSETTA_FRAMEWORKS),book$(comma)test$(comma)$(ROSETTA_FRAMEWORKS),all)
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
HTML := $(CURDIR)/_build/html

# Pins for every pip call, build environments included (Chainer builds from source).
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export ROSETTA_RESULTS_DIR ?= $(CURDIR)/_build/results

.PHONY: book test unit-tests book-smoke clean

book: $(STAMP)
	ROSETTA_BOOK_BUILD=1 $(BIN)/jupyter-book build . --builder html --warningiserror --keep-going
	@echo "Book built: $(HTML)/index.html"

test: unit-tests book-smoke
	ROSETTA_BOOK_HTML=$(HTML) $(BIN)/python -m pytest -q tests/test_built_book.py

unit-tests: $(STAMP)
	ROSETTA_OFFLINE=1 $(BIN)/python -m pytest -q --ignore=tests/test_built_book.py

# Tests never touch the network: the data loaders use their labelled stand-ins.
book-smoke: $(STAMP)
	ROSETTA_PROFILE=smoke ROSETTA_OFFLINE=1 $(MAKE) --no-print-directory book

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "setuptools>=77,<81" wheel
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $@

clean:
	rm -rf _build
