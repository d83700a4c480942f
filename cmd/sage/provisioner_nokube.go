//go:build sage_nokube

package main

import (
	"context"
	"log/slog"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// openKubernetes: this build has no kubernetes backend.
func (f *provisionerFlags) openKubernetes(*slog.Logger) (orchestrator.Backend, func(context.Context), error) {
	return nil, nil, badSetting("--backend kubernetes: this sage was built without the Kubernetes backend (make demo builds a lean binary); build the full one with make build")
}
