package dockerbackend

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Provider config keys this backend reads (besides container_prefix,
// installation_id and home).
const (
	KeyHostIP        = "host_ip"        // where ports are published (default 127.0.0.1)
	KeyAdvertiseHost = "advertise_host" // the host in sandbox URLs (default: host_ip)
	KeyNetwork       = "network"        // a Docker network to attach sandboxes to, reached by address (default: publish on host_ip)
)

// backendName is the name this package registers with orchestrator.RegisterBackend.
const backendName = "docker"

func init() { orchestrator.RegisterBackend(backendName, fromConfig) }

// fromConfig reads container_prefix, installation_id (default: one
// derived from home) and runtime from the provider config; a runtime the
// engine does not have is an error here, before any sandbox is made.
func fromConfig(cfg map[string]any) (orchestrator.Backend, error) {
	o := Options{}
	if v, ok := cfg[orchestrator.KeyContainerPrefix]; ok && v != nil {
		o.Prefix = strings.TrimSpace(fmt.Sprint(v))
	}
	if v, ok := cfg[KeyHostIP]; ok && v != nil {
		o.HostIP = strings.TrimSpace(fmt.Sprint(v))
	}
	if v, ok := cfg[KeyAdvertiseHost]; ok && v != nil {
		o.AdvertiseHost = strings.TrimSpace(fmt.Sprint(v))
	}
	if v, ok := cfg[KeyNetwork]; ok && v != nil {
		o.Network = strings.TrimSpace(fmt.Sprint(v))
	}
	if v, ok := cfg[orchestrator.KeyInstallationID]; ok && v != nil {
		o.Installation = strings.TrimSpace(fmt.Sprint(v))
	}
	if v, ok := cfg[orchestrator.KeyHome]; ok && v != nil && o.Installation == "" {
		o.Installation = installationFor(strings.TrimSpace(fmt.Sprint(v)))
	}
	if v, ok := cfg[orchestrator.KeyRuntime]; ok && v != nil {
		o.Runtime = strings.TrimSpace(fmt.Sprint(v))
	}
	if o.Runtime == "" {
		return New(o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return NewChecked(ctx, o)
}
