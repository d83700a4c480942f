package doctor

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Status is the outcome of one check.
type Status string

// Statuses.
const (
	OK      Status = "ok"
	Warn    Status = "warn"
	Missing Status = "missing"
	NA      Status = "n/a"
)

// Check is one line of the report.
type Check struct {
	Name     string `json:"name"`
	Status   Status `json:"status"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix,omitempty"`
	Required bool   `json:"required"` // needed by the default (local) mode
}

// Report is the whole result.
type Report struct {
	OS     string  `json:"os"`
	Checks []Check `json:"checks"`
}

// OK reports whether every required check passed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if c.Required && c.Status != OK {
			return false
		}
	}
	return true
}

// Print writes the report as an aligned table, with fixes under the
// checks that need them.
func (r Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, strings.ToUpper(string(c.Status)), c.Detail)
		if c.Fix != "" && c.Status != OK && c.Status != NA {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	return tw.Flush()
}

// Env is what the checks read; the zero value means the real machine.
type Env struct {
	GOOS         string
	ProcRoot     string // "/proc"
	SysRoot      string // "/sys"
	DockerHost   string // $DOCKER_HOST or unix:///var/run/docker.sock
	RedisAddr    string // $SAGE_REDIS_ADDR or 127.0.0.1:6379
	OTLPEndpoint string // $OTEL_EXPORTER_OTLP_ENDPOINT or http://localhost:4317
	LookPath     func(string) (string, error)
	// Output runs a command and returns its combined output.
	Output  func(ctx context.Context, name string, args ...string) ([]byte, error)
	Timeout time.Duration // per network check, default 2 s
}

func (e Env) withDefaults() Env {
	def := func(v *string, env, fallback string) {
		if *v == "" {
			*v = os.Getenv(env)
		}
		if *v == "" {
			*v = fallback
		}
	}
	if e.GOOS == "" {
		e.GOOS = runtime.GOOS
	}
	def(&e.ProcRoot, "", "/proc")
	def(&e.SysRoot, "", "/sys")
	def(&e.DockerHost, "DOCKER_HOST", "unix:///var/run/docker.sock")
	def(&e.RedisAddr, "SAGE_REDIS_ADDR", "127.0.0.1:6379")
	def(&e.OTLPEndpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317")
	if e.LookPath == nil {
		e.LookPath = exec.LookPath
	}
	if e.Output == nil {
		e.Output = func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).CombinedOutput()
		}
	}
	if e.Timeout == 0 {
		e.Timeout = 2 * time.Second
	}
	return e
}

// Run runs every check, the slow ones concurrently.
func Run(ctx context.Context, e Env) Report {
	e = e.withDefaults()
	checks := []func(context.Context, Env) Check{
		checkBwrap, checkUserNS, checkAppArmor, checkCgroup, checkSeatbelt,
		checkDocker, checkRedis, checkOTLP,
	}
	out := make([]Check, len(checks))
	var wg sync.WaitGroup
	for i, f := range checks {
		wg.Go(func() { out[i] = f(ctx, e) })
	}
	wg.Wait()
	return Report{OS: e.GOOS, Checks: out}
}

func (e Env) read(root, rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, rel))
	return strings.TrimSpace(string(b)), err
}
