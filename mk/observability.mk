# Observability: the Jaeger binary for the end-to-end trace test.
# tools/jaeger is its own Go module that pins Jaeger as a tool; the binary is
# built once into a cache directory shared by every checkout.

JAEGER_VERSION   ?= v1.76.0
SAGE_CACHE_DIR   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sage
SAGE_JAEGER_BIN  ?= $(SAGE_CACHE_DIR)/jaeger-$(JAEGER_VERSION)
# The e2e test (sagents/observability/otelsage) finds Jaeger through this.
export SAGE_JAEGER_BIN

.PHONY: jaeger e2e-jaeger

# Build Jaeger unless the cached binary is already there (about 11 minutes
# the first time on 2 cores, instant afterwards), then say how to start it.
jaeger: $(SAGE_JAEGER_BIN)
	@echo "jaeger: $(SAGE_JAEGER_BIN) is ready; start it with:"
	@echo "  $(SAGE_JAEGER_BIN) &    # OTLP on 127.0.0.1:4317, API on http://127.0.0.1:16686"
	@echo "then: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 make demo"

# The version is in the file name, so a present binary is never rebuilt.
$(SAGE_JAEGER_BIN):
	@echo "jaeger: building $(JAEGER_VERSION) into $@ (about 11 minutes the first time on 2 cores)"
	@mkdir -p $(dir $@)
	cd tools/jaeger && CGO_ENABLED=0 $(GO) build -trimpath -o $@.tmp github.com/jaegertracing/jaeger/cmd/jaeger
	@mv $@.tmp $@

# Only the Jaeger end-to-end test.
e2e-jaeger: jaeger
	$(GO) test -count=1 -run TestJaegerEndToEnd -v ./sagents/observability/otelsage/
