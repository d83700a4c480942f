# sagents-go. `make demo` and `make test` set up what they need (see
# .ci/setup.sh) and then run.

GO        ?= go
BIN       := bin
GOFILES    = $(shell find . -name '*.go' -not -path './tools/*' -not -path './.cache/*')
BENCHTIME ?= 1s

.PHONY: all setup build test vet fmt-check cross unit bench demo clean

all: build

setup:
	@bash .ci/setup.sh

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/sage ./cmd/sage

vet:
	$(GO) vet ./...

fmt-check:
	@out="$$(gofmt -l $(GOFILES))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The darwin code (Seatbelt) must always build, even though CI runs Linux.
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

unit:
	$(GO) test -race -count=1 -timeout 30m ./...

test: setup vet fmt-check cross unit

# Benchmarks print ns/op; scripts/bench-ratio.sh prints each ratio against
# the baseline measured in the same run.
bench: setup
	$(GO) test -run '^$$' -bench 'ExecTrue' -benchtime $(BENCHTIME) -count 5 ./sagents/sandbox/providers/passthrough/ | tee $(BIN)/bench-passthrough.txt
	@bash scripts/bench-ratio.sh $(BIN)/bench-passthrough.txt BenchmarkBareExecTrue BenchmarkPassthroughExecTrue 1.5

demo: setup build
	@bash scripts/demo.sh

clean:
	rm -rf $(BIN)

-include mk/*.mk
