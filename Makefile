PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# setuptools notes "Editable installation." for every editable install of a package with a mapped directory
# (connectors/ is installed as streamforest.connectors); it is information, not a problem, so it is not shown.
QUIET_BUILD := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: demo test lint reproduce bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(QUIET_BUILD) $(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/streamforest demo

# Two test files at a time: the broker tests spend most of their time waiting on brokers, timeouts and group
# rebalances (a whole Kafka run keeps about a quarter of one core busy), so the rest of the suite runs beside them; a file stays in one
# process (its brokers and fixtures are the file's).
test: $(STAMP)
	bash .ci/ensure-prometheus
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

reproduce: $(STAMP)
	$(BIN)/python -m scenarios.paper_reproduction

bench: $(STAMP)
	$(BIN)/python -m scenarios.benchmarks.feature_arrival

clean:
	rm -rf $(VENV) build *.egg-info
