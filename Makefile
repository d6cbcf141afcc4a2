# The README's two commands: `make demo` and `make test`. Both set up .venv first.
SHELL := /bin/bash
VENV := .venv/bin
export PATH := $(CURDIR)/$(VENV):$(PATH)
DEMO_OUT ?= demo-out

# Parallel test workers (pytest-xdist); TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2

.PHONY: setup demo test test-fast test-engine test-course lint build validate clean constraints docs docs-serve

setup:
	@bash scripts/setup.sh

demo:
	@SKIP_BROWSER=1 SKIP_HUB=1 bash scripts/setup.sh    # the demo needs no browser and no Hub proxy
	autograder build
	autograder grade samples/submissions -o $(DEMO_OUT) --force

test: setup
	python -m pytest -n $(TEST_WORKERS) --durations=25    # the slowest tests named in the log

test-fast: setup    # the edit loop: every test not marked slow (no notebook kernels, no batches)
	python -m pytest -n $(TEST_WORKERS) -m "not slow"

test-engine: setup    # the kit's own tests (autograder/), without the course's content
	python -m pytest -n $(TEST_WORKERS) --ignore=tests/curriculum

test-course: setup    # the course's content (source/, solutions/): its catalogs, evidence, language, notebooks
	python -m pytest -n $(TEST_WORKERS) tests/curriculum

lint: setup
	ruff check
	mypy
	lint-imports    # the layers and acyclic packages: [tool.importlinter] in pyproject.toml

build: setup
	autograder build

validate: setup
	autograder validate
	autograder validate --mutants    # every mutant of every reference (~3 min on 2 cores); CI: tests/curriculum/test_mutants.py

docs: setup    # the documentation site into site/ (docs/reference/ and architecture.md's lists: scripts/docs_reference.py)
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict -d site

docs-serve: setup    # the site at http://127.0.0.1:8000, rebuilt on each edit (site/index.html needs no server; search does)
	NO_MKDOCS_2_WARNING=1 mkdocs serve --strict

clean:
	rm -rf $(DEMO_OUT) dist .pytest_cache

constraints: setup    # pin what .venv holds now (after changing pyproject.toml and checking the tests pass)
	@{ grep '^#' constraints.txt; pip freeze --exclude-editable | grep -v '^torch=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	@{ grep '^#' constraints-compare50.txt; .venv/compare50/bin/python -m pip freeze; } > constraints-compare50.txt.new
	mv constraints-compare50.txt.new constraints-compare50.txt
