# Rookery's everyday targets. `make test` is the command README.md gives and CI runs.
GO ?= go

.PHONY: test lint build run fuzz bench jepsen cluster-up cluster-down

# docker compose (the plugin) or docker-compose (Debian's package), whichever exists.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

# Style first (gofmt, vet, staticcheck pinned in tools/go.mod), then every test
# under the race detector. cmd/node's tests run real clusters of race-built
# nodes (up to seven processes for the sharded ones), which on two cores take
# longer than go test's default ten minutes. filters holds no goroutine and no
# lock (its package doc): its tests, minutes of arithmetic under the detector,
# run without it, and its one test of concurrent readers runs with it.
# `go test -short ./...` (under two minutes) leaves out every test that runs
# real nodes.
# scripts/test.sh runs them and, when one fails, ends with what failed.
test: lint
	GO="$(GO)" ./scripts/test.sh

lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool -modfile=tools/go.mod staticcheck ./...

# The commit `rookery version` reports where Go stamps none (-buildvcs=false).
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.commit=$(COMMIT)" -o bin/rookery ./cmd/node

run:
	$(GO) run ./cmd/node --dev

# Short fuzzing pass over every decoder and parser (corpora live in testdata/fuzz).
fuzz:
	./scripts/fuzz.sh 30s

# redis-benchmark against a node, a three-node cluster and a durable redis-server.
bench:
	bash bench/redis-bench.sh

# A minute of kills, pauses, restarts and partitions under load, then the checks.
jepsen:
	$(GO) run ./jepsen-lite -duration 60s

# A three-node secured cluster in containers (docker-compose.yml), from a binary
# built here; .env (password, gossip key) is written once if missing.
cluster-up: build
	./scripts/compose-env.sh
	$(COMPOSE) up -d --build

cluster-down:
	$(COMPOSE) down
