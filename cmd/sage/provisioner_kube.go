//go:build !sage_nokube

package main

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner/kube"
)

// openKubernetes is the kubernetes backend (left out of builds tagged
// sage_nokube, such as the one make demo makes: it is 280 of sage's
// 880 packages).
func (f *provisionerFlags) openKubernetes(logger *slog.Logger) (orchestrator.Backend, func(context.Context), error) {
	cs, err := kube.Connect(f.kubecfg)
	if err != nil {
		return nil, nil, err
	}
	ns := f.namespace
	if ns == "" {
		ns = kube.DefaultNamespace()
	}
	b, err := kube.New(kube.Options{Client: cs, Namespace: ns, ServiceType: corev1.ServiceType(f.serviceType),
		NodeHost: f.nodeHost, Image: f.image, Port: f.port, RunAsUser: f.runAsUser, AllowRoot: f.allowRoot, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	logger.Info("provisioner: kubernetes backend", "namespace", ns, "service_type", f.serviceType, "idle_ttl", f.idleTTL)
	if f.idleTTL == 0 {
		return b, nil, nil
	}
	return b, func(ctx context.Context) {
		b.RunReaper(ctx, kube.ReapOptions{TTL: f.idleTTL, Interval: f.reapInterval})
	}, nil
}
