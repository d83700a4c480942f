package otelsage

import "testing"

func TestResolveEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in       string
		hostport string
		insecure bool
	}{
		{"", "localhost:4317", true},
		{"localhost:4317", "localhost:4317", true},
		{"127.0.0.1:9", "127.0.0.1:9", true},
		{"[::1]:4317", "[::1]:4317", true},
		{"collector.example:4317", "collector.example:4317", false},
		{"http://collector.example:4317", "collector.example:4317", true},
		{"https://127.0.0.1:4317", "127.0.0.1:4317", false},
		{"http://localhost:4317/v1/traces", "localhost:4317", true},
	} {
		hp, ins := resolveEndpoint(tc.in)
		if hp != tc.hostport || ins != tc.insecure {
			t.Errorf("resolveEndpoint(%q) = %q, %v; want %q, %v", tc.in, hp, ins, tc.hostport, tc.insecure)
		}
	}
}

// TestResolveTargetPrecedence: option > per-signal variable > general
// variable > default, for protocol, endpoint, path and plain text.
func TestResolveTargetPrecedence(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name string
		sig  signal
		opt  setupConfig
		env  map[string]string
		want target
		err  bool
	}{
		{name: "default-grpc", sig: signalTraces,
			want: target{protocol: protocolGRPC, hostport: "localhost:4317", insecure: true}},
		{name: "default-http", sig: signalMetrics, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			want: target{protocol: protocolHTTP, hostport: "localhost:4318", path: "/v1/metrics", insecure: true}},
		{name: "general-endpoint-gets-signal-path", sig: signalTraces, env: map[string]string{
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "https://intake.example/api/public/otel/"},
			want: target{protocol: protocolHTTP, hostport: "intake.example", path: "/api/public/otel/v1/traces"}},
		{name: "signal-endpoint-as-is", sig: signalTraces, env: map[string]string{
			"OTEL_EXPORTER_OTLP_PROTOCOL":        "http/protobuf",
			"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://wrong:1",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/custom/traces"},
			want: target{protocol: protocolHTTP, hostport: "127.0.0.1:4318", path: "/custom/traces", insecure: true}},
		{name: "signal-endpoint-of-other-signal-ignored", sig: signalMetrics, env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":        "collector.example:4317",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "other:4317"},
			want: target{protocol: protocolGRPC, hostport: "collector.example:4317"}},
		{name: "signal-protocol-beats-general", sig: signalMetrics, env: map[string]string{
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
			want: target{protocol: protocolHTTP, hostport: "127.0.0.1:4318", path: "/v1/metrics", insecure: true}},
		{name: "option-protocol-and-endpoint-beat-env", sig: signalTraces,
			opt:  setupConfig{protocol: protocolHTTP, endpoint: "127.0.0.1:9"},
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "x:1"},
			want: target{protocol: protocolHTTP, hostport: "127.0.0.1:9", path: "/v1/traces", insecure: true}},
		{name: "insecure-env", sig: signalTraces, env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector.example:4317", "OTEL_EXPORTER_OTLP_INSECURE": "true"},
			want: target{protocol: protocolGRPC, hostport: "collector.example:4317", insecure: true}},
		{name: "signal-insecure-beats-general", sig: signalTraces, env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4317", "OTEL_EXPORTER_OTLP_INSECURE": "true",
			"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "false"},
			want: target{protocol: protocolGRPC, hostport: "localhost:4317"}},
		{name: "insecure-option-beats-env", sig: signalTraces, opt: setupConfig{insecure: &yes},
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example:4317"},
			want: target{protocol: protocolGRPC, hostport: "c.example:4317", insecure: true}},
		{name: "secure-option", sig: signalTraces, opt: setupConfig{insecure: &no},
			want: target{protocol: protocolGRPC, hostport: "localhost:4317"}},
		{name: "protocol-case-insensitive", sig: signalTraces, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "HTTP/Protobuf"},
			want: target{protocol: protocolHTTP, hostport: "localhost:4318", path: "/v1/traces", insecure: true}},
		{name: "http-json-unsupported", sig: signalTraces, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.opt
			got, err := resolveTarget(tc.sig, &c, func(k string) string { return tc.env[k] })
			if tc.err {
				if err == nil {
					t.Fatalf("resolveTarget = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("resolveTarget = %+v\nwant           %+v", got, tc.want)
			}
		})
	}
}
