# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3

.PHONY: run test check screenshots durations chaos install lint bench lock

run:  ## install, migrate, seed demo data, start web + worker + beat
	$(PYTHON) bin/dev run

test:  ## install, start what the tests need, then ruff, mypy and pytest
	$(PYTHON) bin/dev test

check:  ## while changing code: lint, types, contracts and every test that needs no sandbox or browser
	$(PYTHON) bin/dev check

# The tests that take the pictures docs/ shows (tests/portal/test_docs.py keeps this list whole).
SCREENSHOT_TESTS = tests/browser/test_submit.py tests/browser/test_admin_usage.py \
	tests/browser/test_job_page_attempts.py tests/e2e/test_job_page_browser.py \
	tests/e2e/test_job_page_restart.py tests/e2e/test_job_page_frameworks.py

screenshots:  ## run the tests that take docs/'s pictures, then copy them into docs/
	rm -rf test-artifacts/docs
	$(PYTHON) bin/dev test $(SCREENSHOT_TESTS) --numprocesses=4 -p no:cacheprovider
	cp test-artifacts/docs/*.png docs/

durations:  ## after a `make test`: its long tests' seconds become the order's record (tests/durations.json)
	cp test-artifacts/durations.json tests/durations.json

chaos:  ## only the chaos suite (tests/chaos, part of `make test`); recovery times at the end
	$(PYTHON) bin/dev test tests/chaos -q

install:  ## only make .venv match requirements/dev.txt
	$(PYTHON) bin/dev install

# pyproject.toml holds the ranges; these two commands pin them (the files' headers repeat
# them; devtools/grafana/package.json pins the board check's npm tools). Production first; dev takes production's pins as constraints, so the two agree.
# A plain `make lock` keeps every pin it can; LOCK_ARGS=--upgrade (or
# LOCK_ARGS="--upgrade-package django") moves them.
LOCK_OPTS = --python-version 3.11 --python-platform linux
lock: install  ## recompile requirements/prod.txt and requirements/dev.txt from pyproject.toml
	.venv/bin/uv pip compile -q pyproject.toml $(LOCK_OPTS) --generate-hashes $(LOCK_ARGS) -o requirements/prod.txt
	.venv/bin/uv pip compile -q pyproject.toml --extra dev -c requirements/prod.txt $(LOCK_OPTS) $(LOCK_ARGS) -o requirements/dev.txt
	cd devtools/grafana && npm install --package-lock-only --ignore-scripts --no-audit --no-fund
	$(PYTHON) bin/dev install

# `make bench BENCH_ARGS=--quick`: small sizes, as the suite runs them (tests/benches).
BENCH_ARGS ?=

bench: install  ## benchmarks, ours beside the naive way (needs root for the sandbox)
	.venv/bin/python manage.py sandbox up --no-register
	.venv/bin/python bench/poll.py $(BENCH_ARGS)
	.venv/bin/python bench/agent_poll.py $(BENCH_ARGS)
	.venv/bin/python bench/series.py $(BENCH_ARGS)
	.venv/bin/python bench/parsers.py $(BENCH_ARGS)
	.venv/bin/python bench/ingest.py $(BENCH_ARGS)
	.venv/bin/python bench/latency.py $(BENCH_ARGS)
	.venv/bin/python bench/joblist.py $(BENCH_ARGS)
	.venv/bin/python bench/runs.py $(BENCH_ARGS)
	.venv/bin/python bench/compare.py $(BENCH_ARGS)
	.venv/bin/python bench/diagnosis.py $(BENCH_ARGS)
	.venv/bin/python bench/page.py $(BENCH_ARGS)
	.venv/bin/python bench/soak.py $(BENCH_ARGS)
	.venv/bin/python bench/start_estimates.py $(BENCH_ARGS)
	.venv/bin/python bench/bad_nodes.py $(BENCH_ARGS)
	.venv/bin/python bench/session_proxy.py $(BENCH_ARGS)
	.venv/bin/python bench/web_connections.py $(BENCH_ARGS)

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy .
	.venv/bin/lint-imports
