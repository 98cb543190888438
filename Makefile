# Rookery's everyday targets. `make test` is the command README.md gives and CI runs.
GO ?= go

.PHONY: test build run fuzz bench cluster-up cluster-down

test:
	$(GO) vet ./...
	$(GO) test -race ./...

build:
	CGO_ENABLED=0 $(GO) build -o bin/rookery ./cmd/node

run:
	$(GO) run ./cmd/node --dev

# Short fuzzing pass over every decoder and parser (corpora live in testdata/fuzz).
fuzz:
	./scripts/fuzz.sh 30s
