package otel

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
