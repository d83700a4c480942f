package local

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/egress"
)

// EgressEvent is one decision of the network allowlist proxy: the
// domain and port asked for, whether it was allowed, and the rule that
// decided. Wire an EgressObserver to sagents/observability to trace them.
type EgressEvent = egress.Event

// EgressObserver receives every egress decision, synchronously; it must
// not block.
type EgressObserver = egress.Observer

// Options are what a config file cannot say.
type Options struct {
	// EgressObserver receives every decision of the network allowlist
	// proxy; nil logs them with slog (blocked at Info, allowed at Debug).
	EgressObserver EgressObserver
	// Resolver resolves names for the proxy; nil means the system
	// resolver. Tests map names to loopback addresses with it.
	Resolver egress.Resolver
	// Session runs shell commands in one long-lived session sandbox.
	Session SessionOptions
	// ForkPool is how many pre-started, empty session sandboxes a sandbox
	// with checkpoints keeps for its forks (Sandbox.ForkDriver): 0 is one
	// once it forked, a positive number that many from its start (at most
	// 8), a negative one none (docs/checkpoints.md, "Fork").
	ForkPool int

	fork *forkIn // NewWithOptions opens a fork (fork_linux.go)
}

// Loopback ports of the proxies inside a Linux sandbox (its own network
// namespace, so they never collide).
const (
	HTTPProxyPort  = 3128
	SOCKSProxyPort = 1080
)

// egressProxy is a sandbox's pair of filtering proxies; httpAddr and
// socksAddr are where commands reach them (host:port).
type egressProxy struct {
	proxy               *egress.Proxy
	dir                 string // host directory of the Unix sockets (Linux)
	exe                 string // the bridge executable (Linux)
	httpAddr, socksAddr string
}

// startEgress starts the proxies of a network allowlist sandbox.
func startEgress(cfg driver.Config, opts Options, s *Sandbox) (*egressProxy, error) {
	pol, err := egress.NewPolicy(cfg.Local.AllowedDomains, cfg.Local.DeniedDomains)
	if err != nil {
		return nil, err
	}
	e, httpLn, socksLn, err := listenEgress(s.runtimeDir, s.ident)
	if err != nil {
		return nil, err
	}
	obs := opts.EgressObserver
	if obs == nil {
		obs = logEgress(s.id)
	}
	e.proxy = egress.New(egress.Options{Policy: pol, Resolver: opts.Resolver, Observer: obs})
	e.proxy.Serve(httpLn, socksLn)
	slog.Info("local sandbox: network allowlist", "sandbox", s.id, "allowed", cfg.Local.AllowedDomains,
		"denied", cfg.Local.DeniedDomains)
	return e, nil
}

// close stops the proxies and removes the sockets. Nil-safe.
func (e *egressProxy) close() error {
	if e == nil {
		return nil
	}
	err := e.proxy.Close()
	if e.dir != "" {
		if rerr := os.RemoveAll(e.dir); err == nil && rerr != nil {
			err = fmt.Errorf("local: remove proxy sockets: %w", rerr)
		}
	}
	return err
}

// env points every common client at the proxies: HTTP(S)_PROXY for HTTP
// and CONNECT, ALL_PROXY for SOCKS5 with remote name resolution.
func (e *egressProxy) env() map[string]string {
	env := map[string]string{}
	for k, v := range map[string]string{
		"HTTP_PROXY": "http://" + e.httpAddr, "HTTPS_PROXY": "http://" + e.httpAddr,
		"ALL_PROXY": "socks5h://" + e.socksAddr, "NO_PROXY": "localhost,127.0.0.1,::1",
	} {
		env[k] = v
		env[lower(k)] = v
	}
	return env
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// socketDir makes a private directory for the proxy sockets: under the
// runtime directory when the socket paths fit in sun_path (108 bytes),
// else under the system temporary directory.
func socketDir(runtimeDir string) (string, error) {
	parent := runtimeDir
	if len(filepath.Join(runtimeDir, "net-12345678", "socks.sock")) > 100 {
		parent = ""
	}
	dir, err := os.MkdirTemp(parent, "net-")
	if err != nil {
		return "", fmt.Errorf("local: proxy socket dir: %w", err)
	}
	return dir, nil
}

func listenUnix(dir, name string) (net.Listener, error) {
	ln, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("local: egress proxy: %w", err)
	}
	return ln, nil
}

// logEgress is the default observer.
func logEgress(id string) EgressObserver {
	return func(ev EgressEvent) {
		level := slog.LevelDebug
		if !ev.Allowed {
			level = slog.LevelInfo
		}
		slog.Log(context.Background(), level, "local sandbox: egress", "sandbox", id, "protocol", ev.Protocol,
			"domain", ev.Domain, "port", ev.Port, "allowed", ev.Allowed, "rule", ev.Rule, "reason", ev.Reason)
	}
}

// withProxyEnv merges the proxy variables under the command's own (which
// win: a command may opt out, and gains nothing by it).
func (e *egressProxy) withProxyEnv(extra map[string]string) map[string]string {
	if e == nil {
		return extra
	}
	env := e.env()
	for k, v := range extra {
		env[k] = v
	}
	return env
}
