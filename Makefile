# coordinatord — developer targets. `make test` is the Go test suite of the main module (CI runs it,
# then `make deploy-check` and the Prometheus end-to-end check for deploy/, its own module, and
# vets, tests and builds the peer benchmark of bench/peer/, another module, without running it).
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
BENCHCOUNT ?= 1

.PHONY: all build test vet race lint unit bench fuzz fmt proto proto-check deploy-check deploy-e2e deploy-generate

# Pinned code generators: `make proto` installs exactly these into bin/tools.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
TOOLS := $(CURDIR)/bin/tools

all: build

## build: the binary, stamped with VERSION (default: git describe) for --version and the start-up log.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
build:
	$(GO) build -trimpath -ldflags "-X main.buildVersion=$(VERSION)" -o bin/coordinatord ./cmd/coordinatord

## test: vet, then every package under the race detector.
test: vet race

vet:
	$(GO) vet $(PKGS)

race:
	$(GO) test -race -count=1 $(PKGS)

## lint: staticcheck, then the size limits of every non-test, non-generated function in the tree
## (deploy/ included): cyclomatic complexity at most MAX_COMPLEXITY (gocyclo) and at most
## MAX_FUNC_LINES lines from func to its closing brace (internal/funclen). A function over either is
## split into named steps. staticcheck and gocyclo are fetched from the module proxy at pinned
## versions; neither needs an install.
STATICCHECK_VERSION ?= v0.8.2
GOCYCLO_VERSION     ?= v0.6.0
MAX_COMPLEXITY      := 25
MAX_FUNC_LINES      := 120
# Functions allowed past MAX_FUNC_LINES, as FILE:FUNC=LINES (none now): each may not grow past
# LINES, and funclen fails once an entry is no longer needed.
FUNCLEN_ALLOW :=
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	$(GO) run github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION) -over $(MAX_COMPLEXITY) -ignore '_test\.go$$|\.pb\.go$$' . \
	  || { echo "functions above cyclomatic complexity $(MAX_COMPLEXITY): split them into named steps"; exit 1; }
	$(GO) run ./internal/funclen -max $(MAX_FUNC_LINES) $(addprefix -allow ,$(FUNCLEN_ALLOW)) .

## unit: the test suite without the race detector (faster while iterating).
unit:
	$(GO) test -count=1 $(PKGS)

## bench: every package benchmark; pipe the output to benchstat to compare runs.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

fmt:
	gofmt -l -w $$(git ls-files '*.go')

## proto: regenerate the committed Go code from proto/ (needs protoc on PATH).
proto:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$(TOOLS):$$PATH" protoc -I proto \
	  --go_out=proto --go_opt=paths=source_relative \
	  --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
	  proto/sharecoord/v1/*.proto

## proto-check: fail if the committed generated code differs from what `make proto` produces.
proto-check: proto
	@git diff --exit-code -- proto/ || { echo "generated code in proto/ is stale: run make proto and commit"; exit 1; }

## deploy-check: validate Dockerfile, kustomize manifests, alerts and dashboard without a cluster.
deploy-check:
	bash deploy/check.sh

## deploy-e2e: a real Prometheus scrapes a running coordinatord under load; every dashboard query
## and alert expression must return data.
deploy-e2e:
	bash deploy/e2e-prometheus.sh

## deploy-generate: regenerate deploy/monitoring/prometheusrule.yaml from alerts.yaml.
deploy-generate:
	cd deploy && $(GO) generate ./...

# ---- benchmarks (docs/benchmarks.md, docs/snapshot-tuning.md) ----
.PHONY: bench-packages bench-tradeoff bench-fsync bench-restart bench-load bench-peer bench-failover bench-peer-bin

BENCH_DIR ?= $(CURDIR)/bin/bench-data
BENCH_OUT ?= $(CURDIR)/bin/bench-out
BENCHSTAT ?= $(shell $(GO) env GOPATH)/bin/benchstat

## bench-packages: the statelog, shard and groupcfg benchmarks, 6 runs each, summarized by benchstat
## (go install golang.org/x/perf/cmd/benchstat@latest).
bench-packages:
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench . -count 6 ./internal/statelog/ ./internal/shard/ ./internal/groupcfg/ | tee $(BENCH_OUT)/packages.txt
	$(BENCHSTAT) $(BENCH_OUT)/packages.txt

## bench-tradeoff: the snapshot-limit study of docs/snapshot-tuning.md; writes its CSV, Markdown and
## plots into docs/img.
bench-tradeoff: build
	bin/coordinatord bench snapshot-tradeoff --allow-out-of-range-limits --data-dir $(BENCH_DIR)/tradeoff \
	  --share-partitions 100 --state-batches 50 --batches-per-write 2 --cold-interval 5s --segment-bytes 8MiB \
	  --max-replay 250ms --max-log-growth 1.1MiB --slo-write-rate 10000 --out docs/img

## bench-fsync: one small append + fdatasync on the benchmark disk (the durable-write floor).
bench-fsync: build
	@mkdir -p $(BENCH_DIR)
	bin/coordinatord bench fsync --dir $(BENCH_DIR)

## bench-restart: restart time of 50 partitions holding 1 GiB against the sequential read time
## (drops the page cache: run as root).
bench-restart: build
	bin/coordinatord bench restart --data-dir $(BENCH_DIR)/restart --drop-caches --runs 3

## bench-load: durable writes vs the health-check baseline against a server on 127.0.0.1:7070
## (start one first: bin/coordinatord serve --data-dir $(BENCH_DIR)/serve --log-level warn).
bench-load: build
	bin/coordinatord bench load --target 127.0.0.1:7070 --concurrency 64 --connections 4 --keys 1000 --batches-per-write 2 --duration 10s --warmup 3s
	bin/coordinatord bench load --target 127.0.0.1:7070 --concurrency 1 --connections 1 --keys 1000 --batches-per-write 2 --duration 10s --warmup 3s \
	  --fsync-dir $(BENCH_DIR)/serve

## bench-peer: coordinatord against etcd, one node or member and three, driven by the same client
## loop (bench/peer, a module of its own; etcd comes from PATH, or from Debian's etcd-server, which it
## installs with apt-get when it runs as root). Waits for a quiet machine before each configuration.
## Flags in BENCH_PEER_FLAGS, e.g. BENCH_PEER_FLAGS='-rounds 3 -profile bin/bench-out'.
BENCH_PEER_FLAGS ?=
bench-peer: build bench-peer-bin
	@mkdir -p $(BENCH_DIR)
	bin/bench-peer -coordinatord bin/coordinatord -dir $(BENCH_DIR) $(BENCH_PEER_FLAGS)

## bench-failover: kill -9 of a state partition's leader on three nodes, 20 times: time to the
## first acknowledged write on its successor, and for the restarted node to catch up.
BENCH_FAILOVER_FLAGS ?=
bench-failover: build bench-peer-bin
	@mkdir -p $(BENCH_DIR)
	bin/bench-peer -coordinatord bin/coordinatord -dir $(BENCH_DIR) -failover -failovers 20 $(BENCH_FAILOVER_FLAGS)

bench-peer-bin:
	cd bench/peer && $(GO) build -o $(CURDIR)/bin/bench-peer .

# ---- reliability (docs/reliability.md) ----
.PHONY: crashtest soak fuzz-long

CRASH_ROUNDS ?= 20

## crashtest: the crash suite alone: the real binary killed (SIGKILL) and stopped (SIGTERM) at random
## moments under a concurrent workload, CRASH_ROUNDS rounds per signal and state.log.sync mode, every
## key checked after each restart.
crashtest:
	$(GO) test -count=1 -v -timeout 30m -run '^TestCrashRecovery$$' ./cmd/coordinatord -crash.rounds=$(CRASH_ROUNDS)

## soak: the crash suite for 500 rounds per signal and state.log.sync mode.
soak:
	$(GO) test -count=1 -v -timeout 4h -run '^TestCrashRecovery$$' ./cmd/coordinatord -crash.rounds=500

## fuzz-long: the request-validation, record-decoding, log-reading and repair dry-run fuzz targets,
## FUZZ_EXECS executions each.
FUZZ_EXECS ?= 1000000x
fuzz-long:
	$(GO) test -run '^$$' -fuzz '^FuzzLenientUnmarshal$$' -fuzztime $(FUZZ_EXECS) ./internal/service
	$(GO) test -run '^$$' -fuzz '^FuzzRequestValidation$$' -fuzztime $(FUZZ_EXECS) ./internal/service
	$(GO) test -run '^$$' -fuzz '^FuzzStateHandlers$$' -fuzztime $(FUZZ_EXECS) ./internal/service
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(FUZZ_EXECS) ./internal/record
	$(GO) test -run '^$$' -fuzz '^FuzzOpenReplay$$' -fuzztime $(FUZZ_EXECS) ./internal/statelog
	$(GO) test -run '^$$' -fuzz '^FuzzRepairDryRun$$' -fuzztime $(FUZZ_EXECS) ./internal/statelog
