package provisionercmd_test

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sage-go/sage/cmd/internal/provisionercmd"
)

// Issue 15: the docker provisioner advertises --advertise-host in sandbox
// URLs and publishes where that host can reach (all addresses for a
// non-loopback host, loopback otherwise, or --publish-ip).
func TestDockerAdvertise(t *testing.T) {
	for _, tc := range []struct {
		f    provisionercmd.Flags
		want map[string]any
	}{
		{provisionercmd.Flags{}, map[string]any{}},
		{provisionercmd.Flags{AdvertiseHost: "sandbox.example"}, map[string]any{"host_ip": "0.0.0.0", "advertise_host": "sandbox.example"}},
		{provisionercmd.Flags{AdvertiseHost: "localhost"}, map[string]any{"advertise_host": "localhost"}},
		{provisionercmd.Flags{AdvertiseHost: "10.0.0.5", PublishIP: "10.0.0.5"}, map[string]any{"host_ip": "10.0.0.5", "advertise_host": "10.0.0.5"}},
	} {
		if got := tc.f.DockerConfig(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: got %v, want %v", tc.f, got, tc.want)
		}
	}
}

// TestCheckWithoutKubernetes: a program without the Kubernetes backend
// refuses --backend kubernetes at Check, naming the program that has it;
// one with it accepts the same flags.
func TestCheckWithoutKubernetes(t *testing.T) {
	var f provisionercmd.Flags
	fs := flag.NewFlagSet("p", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs)
	if err := fs.Parse([]string{"--backend", "kubernetes"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(false); err != provisionercmd.ErrNoKubernetes || !strings.Contains(err.Error(), "sage-provisioner") {
		t.Fatalf("Check(false): %v", err)
	}
	if err := f.Check(true); err != nil {
		t.Fatalf("Check(true): %v", err)
	}
}
