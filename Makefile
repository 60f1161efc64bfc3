# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3

.PHONY: run test install lint bench

run:  ## install, migrate, seed demo data, start web + worker + beat
	$(PYTHON) bin/dev run

test:  ## install, start what the tests need, then ruff, mypy and pytest
	$(PYTHON) bin/dev test

install:
	$(PYTHON) bin/dev install

bench: install  ## benchmarks, ours beside the naive way (needs root for the sandbox)
	.venv/bin/python manage.py sandbox up --no-register
	.venv/bin/python bench/poll.py
	.venv/bin/python bench/agent_poll.py
	.venv/bin/python bench/series.py
	.venv/bin/python bench/latency.py
	.venv/bin/python bench/joblist.py

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy .
	.venv/bin/lint-imports
