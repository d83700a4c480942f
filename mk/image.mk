# The sandbox image for the aio provider's Docker backend: FROM scratch,
# a static sage running `sage sandboxd --mode passthrough`, busybox.
# Built through the Docker API with no registry; skipped when up to date.
.PHONY: image

IMAGE ?= sage-sandbox:dev

image: build
	@echo "image: building $(IMAGE) through the Docker API (builds a static sage first: 2-3 minutes on a fresh 2-core machine, seconds afterwards)"
	$(BIN)/sage image build --tag $(IMAGE) --binary $(BIN)/sage

# The aio provider on Docker, in one run: `docker run -d` + first HTTP 200
# (baseline) vs Acquire of a new thread; Acquire of a cached thread;
# Acquire after a restart (recovered from state).
.PHONY: bench-aio
bench-aio: setup
	$(GO) test -run '^$$' -bench 'BaselineDockerRun|AcquireNew|AcquireRecovered' -benchtime 8x -benchmem ./sagents/sandbox/providers/remote/aio/dockerbackend/
	$(GO) test -run '^$$' -bench 'AcquireCached' -benchmem ./sagents/sandbox/providers/remote/aio/dockerbackend/
