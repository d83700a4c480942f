// Command sage-provisioner serves the sandbox provisioner API with the
// Docker or the Kubernetes backend: the program the manifests in
// deploy/kubernetes run. `sage provisioner` serves the same API with the
// Docker backend only, so that the sage binary links no Kubernetes client
// (client-go is over half of a sage that linked it).
//
//	sage-provisioner --backend kubernetes --namespace sage --listen 0.0.0.0:8002 --api-key $KEY
//
// Exit codes: 0 after a clean stop (SIGINT or SIGTERM ends the service
// within --shutdown-grace), 2 for a bad flag, 125 when the backend or the
// service could not run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/sage-go/sage/cmd/internal/provisionercmd"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner/kube"
)

const (
	exitUsage = 2   // a bad flag or argument
	exitFail  = 125 // the backend or the service could not run
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sage-provisioner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f provisionercmd.Flags
	f.Register(fs)
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stdout, "usage: sage-provisioner --backend docker|kubernetes [flags]\n\nflags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	case err != nil:
		return usage(stderr, err)
	case fs.NArg() > 0:
		return usage(stderr, fmt.Errorf("unexpected argument %q: sage-provisioner takes flags only", fs.Arg(0)))
	}
	if err := f.Check(true); err != nil {
		return usage(stderr, err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if err := provisionercmd.Serve(ctx, &f, openKubernetes, stdout, logger); err != nil {
		fmt.Fprintf(stderr, "sage-provisioner: %s\n", oneLine(err.Error()))
		return exitFail
	}
	return 0
}

// usage prints err on one line with a pointer to --help.
func usage(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "sage-provisioner: %s; see 'sage-provisioner --help'\n", oneLine(err.Error()))
	return exitUsage
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// openKubernetes is the kubernetes backend and, with --idle-ttl, its
// idle reaper.
func openKubernetes(f *provisionercmd.Flags, logger *slog.Logger) (orchestrator.Backend, func(context.Context), error) {
	cs, err := kube.Connect(f.Kubecfg)
	if err != nil {
		return nil, nil, err
	}
	ns := f.Namespace
	if ns == "" {
		ns = kube.DefaultNamespace()
	}
	b, err := kube.New(kube.Options{Client: cs, Namespace: ns, ServiceType: corev1.ServiceType(f.ServiceType),
		NodeHost: f.NodeHost, PodAddress: f.PodAddress, RuntimeClass: f.RuntimeClass,
		Image: f.Image, Port: f.Port, RunAsUser: f.RunAsUser, AllowRoot: f.AllowRoot, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	logger.Info("provisioner: kubernetes backend", "namespace", ns, "service_type", f.ServiceType, "pod_address", f.PodAddress,
		"runtime_class", f.RuntimeClass, "idle_ttl", f.IdleTTL)
	if f.IdleTTL == 0 {
		return b, nil, nil
	}
	return b, func(ctx context.Context) {
		b.RunReaper(ctx, kube.ReapOptions{TTL: f.IdleTTL, Interval: f.ReapInterval})
	}, nil
}
