# The sandbox images for the aio provider's Docker backend, built through
# the Docker API with no registry and skipped when up to date:
# sage-sandbox:dev, Debian (python3 with venv and pip, git, curl,
# coreutils, bash) plus a static sage running `sage sandboxd --mode
# passthrough` (FROM debian:SUITE-slim where a registry is reachable, else
# a debootstrap root file system from the apt mirror, cached in
# ~/.cache/sage/image), and `make image-minimal`: sage-sandbox:minimal,
# FROM scratch with busybox.
.PHONY: image image-minimal

IMAGE ?= sage-sandbox:dev

image: build
	@echo "image: building $(IMAGE) (the first time: a static sage, 2-3 minutes, and Debian by debootstrap, about 10 minutes on a busy 2-core machine; then seconds)"
	$(BIN)/sage image build --tag $(IMAGE) --binary $(BIN)/sage

image-minimal: build
	$(BIN)/sage image build --minimal --binary $(BIN)/sage

# The aio provider on Docker, in one run: `docker run -d` + first HTTP 200
# (baseline) vs Acquire of a new thread; Acquire of a cached thread;
# Acquire after a restart (recovered from state).
.PHONY: bench-aio
bench-aio: setup
	$(GO) test -run '^$$' -bench 'BaselineDockerRun|AcquireNew|AcquireRecovered' -benchtime 8x -benchmem ./sagents/sandbox/providers/remote/aio/dockerbackend/
	$(GO) test -run '^$$' -bench 'AcquireCached' -benchmem ./sagents/sandbox/providers/remote/aio/dockerbackend/
