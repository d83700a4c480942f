package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend" // registers backend "docker"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner"
)

func init() {
	register(command{"provisioner", "serve the sandbox provisioner API (Docker or Kubernetes backend)", runProvisioner})
}

type provisionerFlags struct {
	serveFlags
	backend, apiKey                           string
	namespace, serviceType, nodeHost, kubecfg string
	image, advertiseHost, publishIP           string
	port, memoryMB                            int
	cpus                                      float64
	runAsUser                                 int64
	allowRoot, dropUnlisted                   bool
	idleTTL, reapInterval                     time.Duration
	mountPrefixes                             stringList
}

func (f *provisionerFlags) register(fs *flag.FlagSet) {
	f.serveFlags.register(fs, "127.0.0.1:8002")
	fs.StringVar(&f.backend, "backend", "", "where sandboxes run: docker or kubernetes (required)")
	fs.StringVar(&f.apiKey, "api-key", os.Getenv(provisioner.EnvAPIKey), "key clients send in X-API-Key (default $"+provisioner.EnvAPIKey+"); required off loopback")
	fs.StringVar(&f.namespace, "namespace", "", "kubernetes: namespace of the sandboxes (default: the provisioner's own in a cluster, else default)")
	fs.StringVar(&f.serviceType, "service-type", "ClusterIP", "kubernetes: ClusterIP or NodePort")
	fs.StringVar(&f.nodeHost, "node-host", "", "kubernetes: address clients reach node ports on (required with NodePort)")
	fs.StringVar(&f.kubecfg, "kubeconfig", "", "kubernetes: kubeconfig file (default $KUBECONFIG, else in-cluster, else ~/.kube/config)")
	fs.StringVar(&f.image, "image", "sage-sandbox:dev", "sandbox image")
	fs.StringVar(&f.advertiseHost, "advertise-host", "", "docker: host name or address clients reach sandboxes on (default 127.0.0.1; set it when clients run on other hosts)")
	fs.StringVar(&f.publishIP, "publish-ip", "", "docker: address sandbox ports are published on (default 127.0.0.1, or 0.0.0.0 with a non-loopback --advertise-host)")
	fs.IntVar(&f.port, "port", 8080, "the sandbox API port inside the container")
	fs.IntVar(&f.memoryMB, "memory", 0, "memory limit per sandbox in MB (default: the backend's)")
	fs.Float64Var(&f.cpus, "cpus", 0, "CPU limit per sandbox (default: the backend's)")
	fs.Int64Var(&f.runAsUser, "run-as-user", 1000, "kubernetes: non-root UID sandboxes run as")
	fs.BoolVar(&f.allowRoot, "allow-root", false, "kubernetes: let sandboxes run as the image's user, root included (for images that need it)")
	fs.Var(&f.mountPrefixes, "mount-prefix", "host directory under which clients may mount paths into sandboxes (repeatable; default: no extra mounts)")
	fs.BoolVar(&f.dropUnlisted, "drop-unlisted-mounts", false, "drop (and log) mounts outside --mount-prefix instead of refusing the request")
	fs.DurationVar(&f.idleTTL, "idle-ttl", 0, "kubernetes: delete sandboxes with no activity through this service for this long (0: never)")
	fs.DurationVar(&f.reapInterval, "reap-interval", time.Minute, "kubernetes: how often the idle reaper scans")
}

func runProvisioner(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage provisioner", "sage provisioner --backend docker|kubernetes [flags]")
	var f provisionerFlags
	f.register(fs)
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if err := f.check(); err != nil {
		return usageError(env, fs.Name(), "%v", err)
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, nil))
	backend, reaper, err := f.openBackend(logger)
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	srv, err := provisioner.NewServer(f.serverOptions(backend, logger))
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	if reaper != nil {
		go reaper(ctx)
	}
	err = provisioner.Serve(ctx, srv, provisioner.ServeOptions{Listen: f.listen, Announce: env.stdout,
		ReadHeaderTimeout: f.headerTimeout, ShutdownGrace: f.grace, Logger: logger})
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
}

func (f *provisionerFlags) check() error {
	if err := f.serveFlags.check(); err != nil {
		return err
	}
	switch {
	case f.backend != "docker" && f.backend != "kubernetes":
		return fmt.Errorf("--backend %q: want docker or kubernetes", f.backend)
	case f.apiKey == "" && !provisioner.LoopbackAddr(f.listen):
		return fmt.Errorf("--listen %s is not a loopback address: set --api-key or $%s (an unauthenticated provisioner must not be reachable from the network)", f.listen, provisioner.EnvAPIKey)
	case f.idleTTL < 0 || f.reapInterval <= 0:
		return errors.New("--idle-ttl must be >= 0 and --reap-interval > 0")
	case f.idleTTL > 0 && f.backend != "kubernetes":
		return errors.New("--idle-ttl needs --backend kubernetes (the docker backend records no activity; the aio provider reaps idle sandboxes itself)")
	case f.publishIP != "" && net.ParseIP(f.publishIP) == nil:
		return fmt.Errorf("--publish-ip %q: want an IP address such as 0.0.0.0", f.publishIP)
	case (f.publishIP != "" || f.advertiseHost != "") && f.backend != "docker":
		return errors.New("--advertise-host and --publish-ip apply to --backend docker (kubernetes: --service-type and --node-host)")
	case f.port < 1 || f.port > 65535 || f.memoryMB < 0 || f.cpus < 0:
		return errors.New("--port, --memory or --cpus out of range")
	}
	return nil
}

func (f *provisionerFlags) serverOptions(b orchestrator.Backend, logger *slog.Logger) provisioner.Options {
	return provisioner.Options{Backend: b, BackendName: f.backend, APIKey: f.apiKey, Logger: logger,
		Mounts:   provisioner.MountPolicy{Prefixes: f.mountPrefixes, DropUnlisted: f.dropUnlisted},
		Defaults: provisioner.Defaults{Image: f.image, Port: f.port, MemoryMB: f.memoryMB, CPUs: f.cpus}}
}

// openBackend returns the backend and, for kubernetes with --idle-ttl,
// the reaper loop to run.
func (f *provisionerFlags) openBackend(logger *slog.Logger) (orchestrator.Backend, func(context.Context), error) {
	if f.backend == "docker" {
		b, err := orchestrator.NewBackend("docker", f.dockerConfig())
		return b, nil, err
	}
	return f.openKubernetes(logger)
}

// dockerConfig is the docker backend's config: ports published on
// --publish-ip, URLs on --advertise-host.
func (f *provisionerFlags) dockerConfig() map[string]any {
	cfg := map[string]any{}
	ip := f.publishIP
	if ip == "" && f.advertiseHost != "" && !provisioner.LoopbackAddr(net.JoinHostPort(f.advertiseHost, "1")) {
		ip = "0.0.0.0"
	}
	if ip != "" {
		cfg[dockerbackend.KeyHostIP] = ip
	}
	if f.advertiseHost != "" {
		cfg[dockerbackend.KeyAdvertiseHost] = f.advertiseHost
	}
	return cfg
}
