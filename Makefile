# callwire. `make run` starts the server on the embedded store; `make test` runs the whole suite.
SHELL := /bin/bash
GO    ?= go
BIN   := bin/callwire
# Every Go module of the repository, the root first: the server (.), the translator SDK (sdk) and
# the example translator (examples/csv-translator), each with its own go.mod; see
# docs/decisions.md, "The SDK is a module of its own". test, vet, tidy-check and fuzz run in each.
MODULES := $(patsubst %/go.mod,%,$(shell git ls-files --cached --others --exclude-standard 'go.mod' '*/go.mod' 2>/dev/null || find . -name go.mod -not -path './.git/*' | sed 's|^\./||'))
MODULES := . $(filter-out . go.mod,$(MODULES))
# each runs its argument, a shell command, in every module and fails if it failed in any.
each = fail=; for m in $(MODULES); do (cd $$m && $(1)) || fail="$$fail $$m"; done; \
	if [ -n "$$fail" ]; then echo "failed in:$$fail"; exit 1; fi

.PHONY: run build test cluster-test vet staticcheck fmt-check tidy-check bench bench-read bench-scale bench-sip fuzz proto clean

run: build
	./$(BIN) serve

build:
	$(GO) build -o $(BIN) ./cmd/callwire

# The whole suite of every module, with the race detector. Tests that need PostgreSQL or Redis
# run when those answer on localhost (see .ci/services.sh) and skip loudly otherwise.
test: vet staticcheck fmt-check tidy-check
	@. .ci/services.sh; $(call each,$(GO) test -race -count=1 -timeout 12m ./...)

# The deployment past one machine, under faults: three `callwire serve` replicas behind HAProxy
# (Debian package haproxy) on a PostgreSQL primary and standby and a six-node Redis Cluster,
# desks and reporters, with a replica, a Redis master and the standby killed in turn; see
# docs/scaling.md, "The test topology". About a minute and a half; `make test` skips it.
cluster-test:
	. .ci/services.sh; CALLWIRE_TEST_CLUSTER=1 $(GO) test -race -count=1 -timeout 6m -v -run '^TestCluster$$' ./cmd/callwire/clustertest

vet:
	@$(call each,$(GO) vet ./...)

# staticcheck at the version go.mod's tool block pins, with its default checks: any finding fails
# the suite. A finding that is wrong about the code is silenced where it stands, with
# //lint:ignore CHECK and the reason.
# The root module runs it as a tool; the others, which do not pin it, run the same version.
STATICCHECK = $(shell $(GO) list -m -f '{{.Version}}' honnef.co/go/tools)
staticcheck:
	@$(call each,if [ "$$m" = . ]; then $(GO) tool staticcheck ./...; else $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) ./...; fi)

# Each module's go.mod and go.sum say exactly what its code imports: a stale or missing line fails
# the suite.
tidy-check:
	@$(call each,$(GO) mod tidy -diff >/dev/null 2>&1 || { echo "$$m: go.mod or go.sum is not tidy; run 'go mod tidy' there. The difference:"; $(GO) mod tidy -diff; false; })

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The write path under load, on PostgreSQL and then the embedded store; see docs/benchmarks.md.
bench:
	. .ci/services.sh; $(GO) run ./cmd/callwire-bench $(BENCHFLAGS)

# The read side: the call history's requests timed on a store of a clinic group's year, filled
# once and kept (PostgreSQL's in the database callwire_readbench, the embedded store's under the
# user's cache directory); see docs/benchmarks.md, "Reading the history".
bench-read:
	. .ci/services.sh; $(GO) run ./cmd/callwire-bench -read $(BENCHFLAGS)

# Past one replica: the popup streams one `callwire serve` holds (1,000, 5,000 and 10,000 on the
# in-process broker, up to 9,000 on a Redis of the bench's own), memory, goroutines and files per
# stream and the popup latency with them open; events through 1, 2 and 3 replicas behind HAProxy
# (Debian package haproxy) with each process's CPU per event; PostgreSQL's size per call. A few
# minutes; see docs/scaling.md, "Sizing".
bench-scale:
	. .ci/services.sh; $(GO) run ./cmd/callwire-bench -scale $(BENCHFLAGS)

# The SIP observer: calls per second through the proxy with translation on and off (sipp, Debian
# package sip-tester), HEP datagrams translated per second, and the call model's memory; see
# docs/benchmarks.md.
bench-sip:
	$(GO) run ./cmd/callwire-bench-sip $(BENCHFLAGS)

# A short run of every fuzz target.
FUZZTIME ?= 20s
fuzz:
	@set -e; for m in $(MODULES); do (cd $$m && for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME); \
	  done; \
	done); done

# Regenerate the translator protocol's Go code from sdk/translator/wire/translator.proto.
# The code generators are the versions pinned in go.mod's tool block; protoc is Debian's
# protobuf-compiler package, and its version is checked because it is written into the output.
PROTO_DIR      := sdk/translator/wire
PROTOC         ?= protoc
PROTOC_VERSION := 3.21.12
proto:
	@set -e; \
	got=$$($(PROTOC) --version 2>/dev/null | awk '{print $$2}'); \
	if [ "$$got" != "$(PROTOC_VERSION)" ]; then \
	  echo "make proto needs protoc $(PROTOC_VERSION) (apt-get install protobuf-compiler on Debian 12); found '$$got'"; exit 1; \
	fi; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) build -o "$$tmp/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go; \
	$(GO) build -o "$$tmp/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc; \
	$(PROTOC) --plugin=protoc-gen-go="$$tmp/protoc-gen-go" --plugin=protoc-gen-go-grpc="$$tmp/protoc-gen-go-grpc" \
	  -I $(PROTO_DIR) \
	  --go_out=$(PROTO_DIR) --go_opt=paths=source_relative \
	  --go-grpc_out=$(PROTO_DIR) --go-grpc_opt=paths=source_relative \
	  $(PROTO_DIR)/translator.proto

clean:
	rm -rf bin
