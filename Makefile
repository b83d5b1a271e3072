# callwire. `make run` starts the server on the embedded store; `make test` runs the whole suite.
SHELL := /bin/bash
GO    ?= go
BIN   := bin/callwire
PKGS  := ./...

.PHONY: run build test vet fmt-check bench fuzz clean

run: build
	./$(BIN) serve

build:
	$(GO) build -o $(BIN) ./cmd/callwire

# The whole suite, with the race detector. Tests that need PostgreSQL or Redis run when those
# answer on localhost (see .ci/services.sh) and skip loudly otherwise.
test: vet fmt-check
	. .ci/services.sh; $(GO) test -race -count=1 -timeout 12m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Load benchmark against PostgreSQL; see docs/benchmarks.md.
bench:
	. .ci/services.sh; $(GO) run ./cmd/callwire-bench $(BENCHFLAGS)

# A short run of every fuzz target.
FUZZTIME ?= 20s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

clean:
	rm -rf bin
