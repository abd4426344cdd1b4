# Stepwise: every target installs what is missing first. Needs only Node.js 20 and npm.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NPM_STAMP := node_modules/.install-stamp
BIN := node_modules/.bin

.PHONY: help install chromium pgbouncer run test budget check generate check-generated typecheck lint-spec build pack bench scale chaos fuzz soak clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

install: $(NPM_STAMP) ## install dependencies (npm ci) when missing or stale

run: $(NPM_STAMP) ## embedded PostgreSQL + migrations + API + worker with the example tasks
	node bin/stepwise.js dev $(ARGS)

chromium: ## Debian's chromium for the dashboard's browser test (apt-get, when missing)
	@bash scripts/install-chromium.sh

pgbouncer: ## Debian's pgbouncer binary for the transaction-pooler test (apt-get, when missing; service not started)
	@bash scripts/install-pgbouncer.sh

# The cost budget (test/budget) runs after the rest, alone (see jest.budget.config.js).
# Its jest options are JEST_ARGS' own (--outputFile=x.json becomes x.budget.json); test files named in
# JEST_ARGS ask for those only, and it is left out.
BUDGET_JEST_ARGS = $(patsubst --outputFile=%.json,--outputFile=%.budget.json,$(filter --%,$(JEST_ARGS)))

test: $(NPM_STAMP) chromium pgbouncer ## every test, then the cost budget alone; embedded PostgreSQL unless DATABASE_URL is set
	$(BIN)/jest $(JEST_ARGS)
	$(if $(filter-out --%,$(JEST_ARGS)),@echo "test files named in JEST_ARGS: cost budget not run (make budget)",$(BIN)/jest --config jest.budget.config.js --runInBand $(BUDGET_JEST_ARGS))

budget: $(NPM_STAMP) ## the cost budget alone (docs/cost-budget.md); ARGS=--update rewrites this server's figures
	UPDATE_BUDGET=$(if $(filter --update,$(ARGS)),1,0) $(BIN)/jest --config jest.budget.config.js --runInBand

generate: $(NPM_STAMP) ## regenerate generated/ from openapi.yaml
	$(BIN)/openapi-typescript openapi.yaml -o generated/openapi.d.ts

check-generated: $(NPM_STAMP) ## fail when generated/ is stale
	@$(BIN)/openapi-typescript openapi.yaml -o generated/openapi.d.ts --check >/dev/null 2>&1 || \
	  { echo "generated/ is stale: run 'make generate' and commit"; exit 1; }

typecheck: $(NPM_STAMP) ## tsc --noEmit over src, test, examples and scripts; src/client alone with browser globals only
	$(BIN)/tsc --noEmit -p tsconfig.json
	$(BIN)/tsc --noEmit -p packages/client/tsconfig.json

lint-spec: $(NPM_STAMP) ## lint openapi.yaml (redocly)
	$(BIN)/redocly lint openapi.yaml --format=stylish

check: check-generated typecheck lint-spec test ## what a reviewer runs: generated fresh, types, spec lint, tests

build: $(NPM_STAMP) ## compile to dist/
	$(BIN)/tsc -p tsconfig.build.json

pack: $(NPM_STAMP) ## npm tarballs of stepwise and stepwise-workflows-client in .packs/ (npm pack of a temporary copy: no dist/ here)
	node scripts/pack.mjs --out .packs

bench: $(NPM_STAMP) ## performance scenarios S1-S4 and more (ARGS=--peers: beside the peers; ARGS="--baseline REV": A/B against commit REV, alternating, with ratios); prints a table, writes bench-results/
	$(BIN)/tsx scripts/bench.ts $(ARGS)

scale: $(NPM_STAMP) ## 2 API servers and 1, 2, 4 worker processes on one database: throughput, claims, PostgreSQL CPU (ARGS=--n 20000)
	$(BIN)/tsx scripts/scale.ts $(ARGS)

chaos: $(NPM_STAMP) ## fault-injection run against real processes (ARGS=--long for a longer one)
	$(BIN)/tsx scripts/chaos.ts $(ARGS)

fuzz: $(NPM_STAMP) ## 10,000+ generated bad requests across every operation
	$(BIN)/tsx scripts/fuzz.ts $(ARGS)

soak: $(NPM_STAMP) ## steady mixed load; prints RSS, connections and event-loop lag over time
	$(BIN)/tsx scripts/soak.ts $(ARGS)

# As root in a clone the `postgres` user cannot reach, .stepwise/pgdata links to the data folder placed
# under /var/lib/stepwise (src/store/embedded.ts): that folder goes too.
clean: ## remove build output and local dev data
	@if [ -L .stepwise/pgdata ]; then d="$$(dirname "$$(readlink .stepwise/pgdata)")"; case "$$d" in \
	  /var/lib/stepwise/*|*/stepwise-root/*) echo "rm -rf $$d"; rm -rf "$$d";; esac; fi
	rm -rf dist .bench-dist .bench-baseline .stepwise .packs packages/client/dist
