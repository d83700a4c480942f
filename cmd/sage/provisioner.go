package main

import (
	"context"
	"log/slog"

	"github.com/sage-go/sage/cmd/internal/provisionercmd"
)

func init() {
	register(command{"provisioner", "serve the sandbox provisioner API (Docker backend; Kubernetes: sage-provisioner)", runProvisioner})
}

// runProvisioner serves the provisioner with the Docker backend. The
// Kubernetes backend is the program sage-provisioner (cmd/sage-provisioner):
// it is over half of a sage binary that linked it (client-go), and the CLI a
// user runs on a laptop never uses it.
func runProvisioner(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage provisioner", "sage provisioner --backend docker [flags]",
		"(the Kubernetes backend: sage-provisioner --backend kubernetes)")
	var f provisionercmd.Flags
	f.Register(fs)
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if err := f.Check(false); err != nil {
		return usageError(env, fs.Name(), "%v", err)
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, nil))
	if err := provisionercmd.Serve(ctx, &f, nil, env.stdout, logger); err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
}
