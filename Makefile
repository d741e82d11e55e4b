# Cairn: `make run` starts it on the embedded default, `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1

.PHONY: run test test-fast check chromium install install-dev worker bench clean

# The optional parts, each a requirements file: `make install EXTRAS="llm s3"` (LiteLLM for remote models,
# an S3 bucket for imports). `make run` needs neither; install-dev has both, for the tests.
EXTRAS ?=

$(VENV)/.installed: pyproject.toml requirements/base.txt requirements/model.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/base.txt
	$(PY) -m pip install --quiet --no-deps -r requirements/model.txt
	touch $@

$(VENV)/.installed-%: requirements/%.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r $<
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements/dev.txt
	$(PY) -m pip install --quiet -r requirements/dev.txt
	touch $@

install: $(VENV)/.installed $(EXTRAS:%=$(VENV)/.installed-%)

install-dev: $(VENV)/.installed-dev

# One supervisor (config/serve.py): a Redis broker when CELERY_BROKER_URL is unset, gunicorn, a Celery
# worker and beat, all stopped together by Ctrl-C. It loads the demo team for a trial; `make run DEMO=0`
# starts without it, and an install without a team opens its setup page first.
DEMO ?= 1

run: install
ifeq ($(DEMO),0)
	@echo "Web page:  http://$(HOST):$(PORT)/rag   (an empty database opens the setup page: it creates your team and its owner)"
else
	@echo "Web page:  http://$(HOST):$(PORT)/rag   (sign in as alice / cairn-demo; make run DEMO=0 starts without the demo)"
endif
	@echo "Admin:     http://$(HOST):$(PORT)/admin/"
	@echo "API:       http://$(HOST):$(PORT)/api/   schema: http://$(HOST):$(PORT)/api/schema/docs"
	@echo "MCP:       http://$(HOST):$(PORT)/mcp    (for agents; see docs/api.md, Connect an agent)"
	@echo 'Try:       curl -H "Authorization: Bearer $$TOKEN" -X POST http://$(HOST):$(PORT)/api/documents.list'
	$(PY) -m config.serve $(if $(filter 0,$(DEMO)),,--demo) --bind $(HOST):$(PORT)

# The suite starts what it needs (its own PostgreSQL and Redis under var/) and stops it at the end.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): otherwise
# pytest and every server a test starts compile the code afresh, a good share of the suite's time.
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest
# Two test processes (pytest-xdist): the tests that start processes run one after another in one of them
# (tests/conftest.py groups them), the database-only tests share both. TEST_WORKERS=0 runs in one process.
# The `exclusive` tests kill the suite's own PostgreSQL: `make test` runs them alone, after the others.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

test: check chromium
	$(PYTEST) $(PYTEST_PARALLEL) -m "not exclusive"
	$(PYTEST) -m exclusive

# The loop while working: everything but the tests that start processes (servers, workers, Chromium),
# load the real model or migrate back to earlier migrations (see the markers in pyproject.toml).
test-fast: install-dev
	$(PYTEST) $(PYTEST_PARALLEL) -m "not serve and not server and not worker and not browser and not slow_model and not upgrade"

# The browser tests drive Debian's Chromium: installed here when it is missing and apt-get may (as root).
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Debian's chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "Could not install chromium: the browser tests will fail (install Debian's chromium package)"; \
	  else \
	    echo "The browser tests need Chromium: install Debian's chromium package (sudo apt-get install chromium)"; \
	  fi; \
	fi

# Lint, format and types; the import rules run inside the suite (tests/test_architecture.py).
check: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy

worker: install
	$(VENV)/bin/celery -A config worker --loglevel=info

clean:
	rm -rf $(VENV) var

# The benchmarks are scripts run one by one (they need datasets, large databases and quiet cores): this
# lists each with its commands, with the standard library only. Figures and how each works: docs/benchmarks.md.
bench:
	@$(PYTHON) -m bench
