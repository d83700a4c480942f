# sagents-go. `make demo` installs only what the demo needs (about a minute
# on a fresh machine); `make test` sets up everything the tests use
# (.ci/setup.sh: packages, redis, Jaeger, the sandbox image) and runs them.

GO        ?= go
BIN       := bin
GOFILES    = $(shell find . -name '*.go' -not -path './tools/*' -not -path './.cache/*')
BENCHTIME ?= 1s
# The framework adapters, each a Go module of its own (the core module
# pulls none of their dependencies); vet, cross and unit run in each.
ADAPTERS  := adapters/eino adapters/langchaingo adapters/genkit
# -s -w: a release build, without the symbol table and DWARF (delve
# cannot debug it, go tool nm cannot read it; panics' stack traces and
# profiles still name every function, from the pclntab the runtime keeps):
# sage is 35.9 MB so, 51.4 MB with them. gRPC (the OTLP gRPC exporters)
# links golang.org/x/net/trace, whose html/template calls reflect's
# MethodByName, so the linker keeps every exported method of every type
# stored in an interface, with their symbols and DWARF (-tags grpcnotrace,
# which drops x/net/trace, made it 36.2 MB unstripped). LDFLAGS= builds a
# binary delve can debug. internal/archtest checks the flags and that only
# x/net/trace links text/template into sage.
LDFLAGS   ?= -s -w

.PHONY: all setup build build-lean provisioner-image test vet fmt-check cross unit adapters bench demo clean kube

all: build

setup:
	@bash .ci/setup.sh test

# bin/sage-supervisor, next to bin/sage, is local mode's session
# supervisor on its own: a session sandbox starts it instead of
# re-executing the whole sage binary (a faster first command).
# bin/sage-provisioner is the provisioner with the Kubernetes backend
# (the program deploy/kubernetes runs): sage links no Kubernetes client.
build: build-lean
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="$(LDFLAGS)" -o $(BIN)/sage-provisioner ./cmd/sage-provisioner

# The image deploy/kubernetes/provisioner.yaml runs.
provisioner-image: build
	docker build -f deploy/kubernetes/Dockerfile -t sage-provisioner:dev $(BIN)

# The demo's binaries: sage and its supervisor, without the provisioner
# (client-go: 280 packages a first build would compile for nothing).
build-lean:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="$(LDFLAGS)" -o $(BIN)/sage ./cmd/sage
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="$(LDFLAGS)" -o $(BIN)/sage-supervisor ./cmd/sage-supervisor

vet:
	$(GO) vet ./...
	@for d in $(ADAPTERS); do echo "(cd $$d && $(GO) vet ./...)"; (cd $$d && $(GO) vet ./...) || exit 1; done

fmt-check:
	@out="$$(gofmt -l $(GOFILES))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The darwin code (Seatbelt) must always build, even though CI runs Linux;
# vet type-checks the core's test files for darwin too (a Linux-only test
# helper used from an untagged file breaks `go test` on a Mac).
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	@for d in $(ADAPTERS); do echo "(cd $$d && GOOS=darwin GOARCH=arm64 $(GO) build ./...)"; (cd $$d && GOOS=darwin GOARCH=arm64 $(GO) build ./...) || exit 1; done

unit:
	$(GO) test -race -count=1 -timeout 30m ./...
	@for d in $(ADAPTERS); do echo "(cd $$d && $(GO) test -race -count=1 -timeout 10m ./...)"; (cd $$d && $(GO) test -race -count=1 -timeout 10m ./...) || exit 1; done

test: setup vet fmt-check cross unit

# The adapters' tests alone (unit runs them after the core's).
adapters:
	@for d in $(ADAPTERS); do (cd $$d && $(GO) test -race -count=1 -timeout 10m ./...) || exit 1; done

# Benchmarks print ns/op; every ratio bench checks comes from a paired
# benchmark (internal/benchpair): baseline and candidate alternate in one
# loop, the order flipped every iteration, so that the noisy machine's
# load swings hit both, and the benchmark reports the ratio of their
# medians (x-baseline), which scripts/bench-metric.sh reads (go test
# -count runs one benchmark's five runs before the next's, minutes apart:
# a ratio of two benchmarks would measure the load). A cross-kind ratio,
# a command of a warm session against a sandbox started for the command,
# is labelled so.
BENCH = $(GO) test -run '^$$' -benchtime $(BENCHTIME) -count 5 -benchmem
bench: setup
	@mkdir -p $(BIN)
	$(BENCH) -bench 'ExecTrue' ./sagents/sandbox/providers/passthrough/ | tee $(BIN)/bench-passthrough.txt
	$(BENCH) -bench 'True' ./sagents/sandbox/providers/local/ | tee $(BIN)/bench-local.txt
	$(GO) test -run '^$$' -bench 'IdleSessionMemory' -benchtime 1x -count 1 ./sagents/sandbox/providers/local/ | tee -a $(BIN)/bench-local.txt
	$(BENCH) -bench 'ExecTrue|HTTPOverhead' ./sagents/sandbox/providers/remote/aio/aiodriver/ | tee $(BIN)/bench-remote.txt
	$(BENCH) -bench 'OpenSandboxExecTrue' ./sagents/sandbox/providers/remote/opensandbox/ | tee $(BIN)/bench-opensandbox.txt
	$(BENCH) -bench . ./sagents/observability/... | tee $(BIN)/bench-observability.txt
	$(BENCH) -bench . ./sagents/llm/ | tee $(BIN)/bench-llm.txt
	$(BENCH) -bench 'FileRead' ./sagents/mcpserver/ | tee $(BIN)/bench-mcp.txt
	$(BENCH) -bench 'KernelRollbackPaired' ./sagents/sandbox/providers/remote/aio/aioserver/ | tee $(BIN)/bench-kernel.txt
	$(GO) test -run '^$$' -bench Transfer100MB -benchtime 5x -count 3 ./sagents/sandbox/providers/local/egress/ | tee $(BIN)/bench-egress.txt
	$(GO) test -run '^$$' -bench 'BaselineDockerRun|AcquireNew|AcquirePooled|AcquireRecovered|First200Runsc' -benchtime 8x -count 3 ./sagents/sandbox/providers/remote/aio/dockerbackend/ | tee $(BIN)/bench-aio.txt
	$(GO) test -run '^$$' -bench 'AcquireCached' -benchmem -count 3 ./sagents/sandbox/providers/remote/aio/dockerbackend/ | tee -a $(BIN)/bench-aio.txt
	@echo; echo "== ratios (paired benchmarks, x-baseline: the median over the runs)"
	@fail=0; \
	bash scripts/bench-metric.sh $(BIN)/bench-passthrough.txt BenchmarkPassthroughExecTruePaired x-baseline 1.5 || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkLocalExecTruePaired x-baseline 1.3 || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkSessionExecTruePaired x-baseline 0.3 'cross-kind: a warm session command against a cold start' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkSessionFirstExecTruePaired/own x-baseline 1.3 'cross-kind: a session start and its first command against a bare bwrap start' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkSessionFirstExecTruePaired/self x-baseline '' 'cross-kind: a session start and its first command against a bare bwrap start' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkSessionFirstExecTruePrestartedPaired x-baseline '' 'cross-kind: a prestarted session first command against a cold start' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkSessionExecTrueRelayPaired x-baseline || fail=$$((fail+1)); \
	grep -h 'bytes/session' $(BIN)/bench-local.txt || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-remote.txt BenchmarkRemoteExecTruePaired x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-mcp.txt BenchmarkMCPFileReadPaired x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-kernel.txt BenchmarkKernelRollbackPaired/kernel x-baseline 3 'cross-kind: a rollback against a warm execution' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-kernel.txt BenchmarkKernelRollbackPaired/execute_python x-baseline 3 'cross-kind: a rollback against a warm execution' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-opensandbox.txt BenchmarkOpenSandboxExecTrue x-baseline 1.2 || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-observability.txt BenchmarkSpanPairRatio/handler x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-observability.txt BenchmarkSpanPairRatio/manager x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-aio.txt BenchmarkAcquireNewPaired x-baseline 1.2 || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-aio.txt BenchmarkAcquirePooledPaired x-baseline 0.1 || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-aio.txt BenchmarkFirst200RunscPaired x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkGvisorExecTruePaired/bwrap x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkGvisorExecTruePaired/bare x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkGvisorSessionExecTruePaired/bare x-baseline '' 'cross-kind: a warm session command against a cold start' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkGvisorSessionExecTruePaired/gvisor x-baseline 0.3 'cross-kind: a warm session command against a cold start' || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkGvisorSessionFirstExecTruePaired/bare x-baseline || fail=$$((fail+1)); \
	bash scripts/bench-metric.sh $(BIN)/bench-local.txt BenchmarkGvisorSessionFirstExecTruePaired/gvisor x-baseline || fail=$$((fail+1)); \
	if [ $$fail -gt 0 ]; then echo "bench: $$fail ratio(s) NOT met or missing"; exit 1; fi

# The demo needs only bubblewrap and python3 (no Jaeger, image or Redis);
# each step prints one line with its duration, and the build what it is
# compiling while it runs (go build -v; scripts/step.sh). It leaves no
# process and no session behind (scripts/demo.sh).
demo:
	@start=$$(date +%s); \
	SAGE_STEP_PREFIX=demo bash .ci/setup.sh demo && \
	SAGE_STEP_COUNT="packages compiled" bash scripts/step.sh demo "go build bin/sage, without the Kubernetes backend (2-5 min the first time on 2 cores, seconds after)" \
		env GOFLAGS=-v $(MAKE) -s --no-print-directory build-lean && \
	SAGE_DEMO_START=$$start bash scripts/demo.sh

clean:
	rm -rf $(BIN)

# kube-apiserver and the node binaries (kubelet, kube-scheduler,
# kube-controller-manager, kubectl; built at the version of go.mod's
# client-go), etcd, containerd and the CNI plugins for the Kubernetes
# backend's tests against a real API server and a real node; `make setup`
# does it too.
kube:
	@bash scripts/step.sh setup "$$(sed -n 's/^# step: //p' .ci/setup.d/35-kube.sh)" bash .ci/setup.d/35-kube.sh

-include mk/*.mk
