# The two commands a new user needs: `make run` and `make test` (README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU wheel on this project's machines; an unpinned torch would pull a multi-GB CUDA build.
TORCH_VERSION ?= 2.13.0
# Where Debian's chromium package puts the browser the browser tests drive.
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup browser run test lint quick demo-evaluator

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==$(TORCH_VERSION)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The browser tests drive Debian's Chromium: installed here when missing (as root; otherwise
# the command to run is printed). A failed install is a warning here, so `make run` never
# stops on it; `make test` stops without the browser.
setup: $(VENV)/.installed
	@scripts/install-browser $(CHROMIUM)

browser:
	@scripts/install-browser --require $(CHROMIUM)

run: setup
	scripts/run-portal

demo-evaluator: setup
	$(PY) -m evaluation demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

# The inner loop (DEVELOPERS.md): ruff, then every test that starts no worker, sandbox, live
# server or browser (tests/heavy.py), on the embedded default, stopping at the first failure.
quick: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -x -m "not heavy" $(PYTEST_ARGS)

# PYTEST_ARGS narrows a run: `.ci/run` passes `-m on_both_backends` for its second leg.
test: browser lint
	$(PY) -m pytest $(PYTEST_ARGS)
