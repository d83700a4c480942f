package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestProvisionerUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--backend"},
		{[]string{"--backend", "nomad"}, "--backend"},
		{[]string{"--backend", "docker", "--listen", "0.0.0.0:8002", "--api-key", ""}, "not a loopback address"},
		{[]string{"--backend", "docker", "--idle-ttl", "1h"}, "--idle-ttl needs --backend kubernetes"},
		{[]string{"--backend", "docker", "--publish-ip", "nope"}, "--publish-ip \"nope\""},
		// sage links no Kubernetes client: the backend is sage-provisioner's.
		{[]string{"--backend", "kubernetes"}, "run sage-provisioner --backend kubernetes"},
	} {
		var errb strings.Builder
		code := run(context.Background(), &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb}, append([]string{"provisioner"}, tc.args...))
		if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q", tc.args, code, errb.String())
		}
	}
}
