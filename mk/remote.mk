# Remote mode (AIO Sandbox API): client, remote Handle and `sage sandboxd`.
.PHONY: test-remote bench-remote sandboxd

test-remote:
	$(GO) test -race -count=1 ./sagents/sandbox/providers/remote/...

# Remote exec of `true` through sandboxd on loopback vs the passthrough
# Handle it wraps, plus the per-call HTTP overhead, in one run.
bench-remote:
	$(GO) test -run '^$$' -bench 'ExecTrue|HTTPOverhead' -benchtime $(BENCHTIME) -count 5 ./sagents/sandbox/providers/remote/aio/

sandboxd: build
	@echo "run: $(BIN)/sage sandboxd --listen 127.0.0.1:8080 --workspace DIR [--mode local|passthrough] [--token T]"
