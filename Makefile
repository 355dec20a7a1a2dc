# ctrperf: `make demo` and `make test` work on a fresh Debian machine (root).
# Everything missing is installed by scripts/bootstrap.sh; a Docker engine is
# started by scripts/ensure-docker.sh when none answers.

SHELL       := /usr/bin/env bash
GO          ?= go
BIN         := bin/ctrperf
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X ctrperf/internal/version.Version=$(VERSION)
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck
# Tests that need Docker or root say so in their name (…Docker, …Root).
INTEGRATION := Docker|Root
TEST_FLAGS  ?=
PLANS       ?= $(wildcard plans/*.yaml)
DEMO_OUT    ?= out/demo

.PHONY: all build example bootstrap engine images demo test vet staticcheck unit fuzz integration reliability bench clean help

all: build

help:
	@echo "make demo      install what is missing, get an engine, build images, run plans/smoke.yaml --quick, report"
	@echo "make test      vet, staticcheck, unit tests (-race), fuzzing (FUZZTIME each), integration tests with real Docker"
	@echo "make reliability  $(KILL_TRIALS) SIGKILL trials of bench run (smoke, network, storage --quick), each followed by ctrperf clean; nothing of ctrperf may be left (KILL_SEED=... replays)"
	@echo "make build     $(BIN) (version $(VERSION))"
	@echo "make example   the static binary of examples/hello (Benchmark your own application, README.md)"
	@echo "make bootstrap install missing Debian packages, check Go, install staticcheck"
	@echo "make engine    start a Docker engine if none answers"
	@echo "make images    build ctrperf's images (FROM-scratch Go programs, Debian base)"
	@echo "make bench     run every plan in plans/ (PLANS=... to choose)"
	@echo "make clean     remove bin/ and out/ (images stay: ctrperf images rm --all)"

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ctrperf

# The example service of "Benchmark your own application": a static binary
# next to its Dockerfile (FROM scratch, so nothing is fetched to build it).
example:
	CGO_ENABLED=0 $(GO) build -trimpath -o examples/hello/hello ./examples/hello

bootstrap:
	@scripts/bootstrap.sh

engine: bootstrap
	@scripts/ensure-docker.sh

images: build engine
	$(BIN) images build

# The end-to-end tour. It starts afresh each time (real results belong in
# out/bench, which `make bench` resumes instead).
demo: build engine
	$(BIN) doctor
	$(BIN) images build
	rm -rf $(DEMO_OUT)
	$(BIN) bench run plans/smoke.yaml --quick --out $(DEMO_OUT)
	$(BIN) report $(DEMO_OUT) --format html
	@echo "demo: open $(DEMO_OUT)/report.html in a browser; ctrperf report $(DEMO_OUT) --format md for markdown"

test: engine vet staticcheck unit fuzz integration

vet:
	$(GO) vet ./...

staticcheck: bootstrap
	$(STATICCHECK) ./...

# Unit tests: fixtures and fakes, no Docker, no root.
unit:
	$(GO) test -race -skip '$(INTEGRATION)' $(TEST_FLAGS) ./...

# Native fuzzing of the decoders that read user files: each target runs for
# FUZZTIME from its seed corpus (testdata/fuzz/<Target>); a crasher is
# written there and becomes a regression case of every later `go test`.
FUZZTIME ?= 5s
FUZZ_TARGETS := ./internal/plan:FuzzParse ./internal/load:FuzzParseScenario ./cmd/ctrperf:FuzzIsolateConfig
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

# Integration tests with the real engine; -count=1 because the engine's
# state is not an input the test cache sees. With CTRPERF_REQUIRE_DOCKER=1
# (CI) they fail instead of skipping when no engine answers. -p 1: one
# package at a time, because private engines that start in one package
# flush the host's shared DOCKER iptables chains under the feet of another
# package's containers, and timing tests need the machine to themselves.
# The 3 SIGKILL trials of `make test` use a fixed seed (the same kill points
# every time, so a red CI means a regression, not a new kill point);
# `make reliability` explores new ones.
TEST_KILL_SEED ?= 1795462702794119269
integration: engine
	CTRPERF_KILL_SEED=$${CTRPERF_KILL_SEED:-$(TEST_KILL_SEED)} \
		$(GO) test -race -count=1 -p 1 -timeout 25m -run '$(INTEGRATION)' $(TEST_FLAGS) ./...

# SIGKILL trials: `ctrperf bench run` of plans/smoke.yaml, network.yaml (a
# private engine with userland_proxy: false, the client namespace) and
# storage.yaml (private engines on loop-file data roots), --quick, killed at
# a random moment, then `ctrperf clean`, then nothing of ctrperf may be left
# (containers, networks, volumes, private engines and their processes, loop
# devices, mounts, netns, veths, cgroups, iptables rules). `make test` runs
# 3 of them (CTRPERF_KILL_TRIALS); this runs KILL_TRIALS, about 45 s each.
# The test logs its seed; KILL_SEED=<seed> replays the same kills.
KILL_TRIALS ?= 20
KILL_SEED   ?=
reliability: engine
	CTRPERF_KILL_TRIALS=$(KILL_TRIALS) CTRPERF_KILL_SEED=$(KILL_SEED) \
		$(GO) test -race -count=1 -timeout 60m -v -run 'TestBenchKillDocker/SIGKILL' ./cmd/ctrperf/

# Every plan, one output directory each; a directory that already holds
# results is resumed (finished runs are kept). Extend PLANS or add plan
# families here as they land.
bench: build engine
	@set -e; for p in $(PLANS); do \
		o=out/bench/$$(basename $$p .yaml); \
		echo "== $$p -> $$o"; \
		if [ -e $$o/results.jsonl ]; then $(BIN) bench run --resume $$o; \
		else $(BIN) bench run $$p --out $$o; fi; \
		$(BIN) report $$o; \
		$(BIN) report $$o --format html; \
	done

clean:
	rm -rf bin out examples/hello/hello
