# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3

.PHONY: run test install lint bench

run:  ## install, migrate, seed demo data, start web + worker + beat
	$(PYTHON) bin/dev run

test:  ## install, start what the tests need, then ruff, mypy and pytest
	$(PYTHON) bin/dev test

install:
	$(PYTHON) bin/dev install

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy .
