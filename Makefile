# The two commands of the README: `make demo` runs the whole product, `make test` runs the tests.
# Python 3.11 under its versioned name, else a python3 that is 3.11 (checked when the venv is made).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install lint typecheck clean bench bench-pages

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is needed; run make PYTHON=/path/to/python3.11")'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python -m dashboard.launcher demo

test: $(STAMP)
	$(VENV)/bin/python -m dashboard.launcher test $(PYTEST_ARGS)

# Ingest write path vs plain COPY, in scratch schemas of the database in DATABASE_URL (migrated first).
bench: $(STAMP)
	DEBUG=1 $(VENV)/bin/python manage.py migrate -v0
	DEBUG=1 $(VENV)/bin/python manage.py bench_ingest $(BENCH_ARGS)

# Page, list-filter and search timings (p50/p95), plan flags and CSV export memory on the deliveries already in
# DATABASE_URL (e.g. from generate_deliveries).
bench-pages: $(STAMP)
	DEBUG=1 $(VENV)/bin/python manage.py bench_pages $(BENCH_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	DEBUG=1 $(VENV)/bin/mypy dashboard

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache staticfiles test-artifacts
