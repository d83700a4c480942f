// Package provisionercmd is the provisioner service as its programs run
// it: the flags, their checks, the backend they name and the serving
// until the context ends. Two programs use it: `sage provisioner`, which
// offers the Docker backend only (the sage binary links no Kubernetes
// client), and `sage-provisioner`, which passes a Kubernetes opener and
// so offers both (the program the Kubernetes manifests run).
package provisionercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/sage-go/sage/cmd/internal/serveflags"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend" // registers backend "docker"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner"
)

// defaultListen is --listen's default.
const defaultListen = "127.0.0.1:8002"

// Flags are the provisioner's flags.
type Flags struct {
	serveflags.Flags
	Backend, APIKey                           string
	Namespace, ServiceType, NodeHost, Kubecfg string
	RuntimeClass                              string
	PodAddress                                bool
	Image, AdvertiseHost, PublishIP           string
	Port, MemoryMB                            int
	CPUs                                      float64
	RunAsUser                                 int64
	AllowRoot, DropUnlisted                   bool
	IdleTTL, ReapInterval                     time.Duration
	MountPrefixes                             stringList
}

// Kubernetes opens the Kubernetes backend from f and returns it with,
// when f.IdleTTL is set, the idle reaper's loop to run. A program that
// offers no Kubernetes backend passes nil.
type Kubernetes func(f *Flags, logger *slog.Logger) (orchestrator.Backend, func(context.Context), error)

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	f.Flags.Register(fs, defaultListen)
	fs.StringVar(&f.Backend, "backend", "", "where sandboxes run: docker or kubernetes (required)")
	fs.StringVar(&f.APIKey, "api-key", os.Getenv(provisioner.EnvAPIKey), "key clients send in X-API-Key (default $"+provisioner.EnvAPIKey+"); required off loopback")
	fs.StringVar(&f.Namespace, "namespace", "", "kubernetes: namespace of the sandboxes (default: the provisioner's own in a cluster, else default)")
	fs.StringVar(&f.ServiceType, "service-type", "ClusterIP", "kubernetes: ClusterIP or NodePort")
	fs.StringVar(&f.NodeHost, "node-host", "", "kubernetes: address clients reach node ports on (required with NodePort)")
	fs.BoolVar(&f.PodAddress, "pod-address", false, "kubernetes: sandbox URLs are their Pods' IPs (for clients on the pod network without cluster DNS or kube-proxy, e.g. a single node's host)")
	fs.StringVar(&f.RuntimeClass, "runtime-class", "", "kubernetes: the sandbox Pods' RuntimeClass (e.g. gvisor; default: the node's runtime)")
	fs.StringVar(&f.Kubecfg, "kubeconfig", "", "kubernetes: kubeconfig file (default $KUBECONFIG, else in-cluster, else ~/.kube/config)")
	fs.StringVar(&f.Image, "image", "sage-sandbox:dev", "sandbox image")
	fs.StringVar(&f.AdvertiseHost, "advertise-host", "", "docker: host name or address clients reach sandboxes on (default 127.0.0.1; set it when clients run on other hosts)")
	fs.StringVar(&f.PublishIP, "publish-ip", "", "docker: address sandbox ports are published on (default 127.0.0.1, or 0.0.0.0 with a non-loopback --advertise-host)")
	fs.IntVar(&f.Port, "port", 8080, "the sandbox API port inside the container")
	fs.IntVar(&f.MemoryMB, "memory", 0, "memory limit per sandbox in MB (default: the backend's)")
	fs.Float64Var(&f.CPUs, "cpus", 0, "CPU limit per sandbox (default: the backend's)")
	fs.Int64Var(&f.RunAsUser, "run-as-user", 1000, "kubernetes: non-root UID sandboxes run as")
	fs.BoolVar(&f.AllowRoot, "allow-root", false, "kubernetes: let sandboxes run as the image's user, root included (for images that need it)")
	fs.Var(&f.MountPrefixes, "mount-prefix", "host directory under which clients may mount paths into sandboxes (repeatable; default: no extra mounts)")
	fs.BoolVar(&f.DropUnlisted, "drop-unlisted-mounts", false, "drop (and log) mounts outside --mount-prefix instead of refusing the request")
	fs.DurationVar(&f.IdleTTL, "idle-ttl", 0, "kubernetes: delete sandboxes with no activity through this service for this long (0: never)")
	fs.DurationVar(&f.ReapInterval, "reap-interval", time.Minute, "kubernetes: how often the idle reaper scans")
}

// ErrNoKubernetes is the error of --backend kubernetes in a program that
// offers no Kubernetes backend (sage: it is in sage-provisioner).
var ErrNoKubernetes = errors.New("--backend kubernetes: the Kubernetes backend is a program of its own: run sage-provisioner --backend kubernetes (make build makes bin/sage-provisioner; the manifests in deploy/kubernetes run it)")

// Check refuses flags that cannot serve, each with one line naming the
// flag and the fix. kube reports whether the program offers the
// Kubernetes backend.
func (f *Flags) Check(kube bool) error {
	if err := f.Flags.Check(); err != nil {
		return err
	}
	switch {
	case f.Backend != "docker" && f.Backend != "kubernetes":
		return fmt.Errorf("--backend %q: want docker or kubernetes", f.Backend)
	case f.Backend == "kubernetes" && !kube:
		return ErrNoKubernetes
	case f.APIKey == "" && !provisioner.LoopbackAddr(f.Listen):
		return fmt.Errorf("--listen %s is not a loopback address: set --api-key or $%s (an unauthenticated provisioner must not be reachable from the network)", f.Listen, provisioner.EnvAPIKey)
	case f.IdleTTL < 0 || f.ReapInterval <= 0:
		return errors.New("--idle-ttl must be >= 0 and --reap-interval > 0")
	case f.IdleTTL > 0 && f.Backend != "kubernetes":
		return errors.New("--idle-ttl needs --backend kubernetes (the docker backend records no activity; the aio provider reaps idle sandboxes itself)")
	case f.PublishIP != "" && net.ParseIP(f.PublishIP) == nil:
		return fmt.Errorf("--publish-ip %q: want an IP address such as 0.0.0.0", f.PublishIP)
	case (f.PodAddress || f.RuntimeClass != "") && f.Backend != "kubernetes":
		return errors.New("--pod-address and --runtime-class apply to --backend kubernetes")
	case f.PodAddress && f.ServiceType == "NodePort":
		return errors.New("--pod-address and --service-type NodePort contradict each other: clients reach either the Pods or the node ports; drop one")
	case (f.PublishIP != "" || f.AdvertiseHost != "") && f.Backend != "docker":
		return errors.New("--advertise-host and --publish-ip apply to --backend docker (kubernetes: --service-type and --node-host)")
	case f.Port < 1 || f.Port > 65535 || f.MemoryMB < 0 || f.CPUs < 0:
		return errors.New("--port, --memory or --cpus out of range")
	}
	return nil
}

// Serve opens the backend f names and serves the provisioner API on
// f.Listen until ctx ends, announcing the bound address on announce
// ("listening http://ADDR"). The flags must have passed Check.
func Serve(ctx context.Context, f *Flags, kube Kubernetes, announce io.Writer, logger *slog.Logger) error {
	backend, reaper, err := f.openBackend(kube, logger)
	if err != nil {
		return err
	}
	srv, err := provisioner.NewServer(f.serverOptions(backend, logger))
	if err != nil {
		return err
	}
	if reaper != nil {
		go reaper(ctx)
	}
	return provisioner.Serve(ctx, srv, provisioner.ServeOptions{Listen: f.Listen, Announce: announce,
		ReadHeaderTimeout: f.ReadHeaderTimeout, ShutdownGrace: f.ShutdownGrace, Logger: logger})
}

func (f *Flags) serverOptions(b orchestrator.Backend, logger *slog.Logger) provisioner.Options {
	return provisioner.Options{Backend: b, BackendName: f.Backend, APIKey: f.APIKey, Logger: logger,
		Mounts:   provisioner.MountPolicy{Prefixes: f.MountPrefixes, DropUnlisted: f.DropUnlisted},
		Defaults: provisioner.Defaults{Image: f.Image, Port: f.Port, MemoryMB: f.MemoryMB, CPUs: f.CPUs}}
}

// openBackend returns the backend and, for kubernetes with --idle-ttl,
// the reaper loop to run.
func (f *Flags) openBackend(kube Kubernetes, logger *slog.Logger) (orchestrator.Backend, func(context.Context), error) {
	switch {
	case f.Backend == "docker":
		b, err := orchestrator.NewBackend("docker", f.DockerConfig())
		return b, nil, err
	case kube == nil:
		return nil, nil, ErrNoKubernetes
	}
	return kube(f, logger)
}

// DockerConfig is the docker backend's config: ports published on
// --publish-ip, URLs on --advertise-host.
func (f *Flags) DockerConfig() map[string]any {
	cfg := map[string]any{}
	ip := f.PublishIP
	if ip == "" && f.AdvertiseHost != "" && !provisioner.LoopbackAddr(net.JoinHostPort(f.AdvertiseHost, "1")) {
		ip = "0.0.0.0"
	}
	if ip != "" {
		cfg[dockerbackend.KeyHostIP] = ip
	}
	if f.AdvertiseHost != "" {
		cfg[dockerbackend.KeyAdvertiseHost] = f.AdvertiseHost
	}
	return cfg
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
