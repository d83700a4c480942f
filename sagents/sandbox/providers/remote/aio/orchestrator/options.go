package orchestrator

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Shutdown policies.
const (
	// PolicyRelease destroys, on Shutdown, the sandboxes this process
	// created or adopted.
	PolicyRelease = "release"
	// PolicyKeep leaves them running (and their state saved) for other
	// processes; Shutdown only closes this process's handles.
	PolicyKeep = "keep"
)

// Defaults of ProviderOptions.
const (
	DefaultImage        = "sage-sandbox:dev"
	DefaultPort         = 8080
	DefaultReapInterval = 60 * time.Second
	DefaultReadyTimeout = 60 * time.Second
	// DefaultSweepInterval is how often a provider sweeps (SweepInterval).
	DefaultSweepInterval = time.Minute
	// TokenEnv carries a sandbox's API token into its container.
	TokenEnv = "SAGE_SANDBOXD_TOKEN"
	// UserDataPath is where a thread's directories are mounted.
	UserDataPath = "/mnt/user-data"
	// SkillsPath is where the skills directory is mounted, read-only.
	SkillsPath = "/mnt/skills"
)

// ProviderOptions configure NewProvider. Only Backend is required.
type ProviderOptions struct {
	Backend Backend
	// Store persists thread -> sandbox; nil means a FileStore in Home.
	Store StateStore
	// Home holds threads/<id>/user-data (default sagehome.Dir()).
	Home string
	// SkillsDir is mounted read-only at /mnt/skills when it exists
	// (default Home/skills).
	SkillsDir string
	Image     string // default DefaultImage
	Port      int    // the API port inside the sandbox, default 8080
	Mounts    []driver.VolumeMount
	// Env is the sandbox's environment, already resolved ($VAR expanded).
	Env      map[string]string
	MemoryMB int
	CPUs     float64
	// IdleTimeout releases sandboxes unused for that long; 0 disables
	// the reaper.
	IdleTimeout time.Duration
	// ReapInterval is how often the reaper scans (default 60 s).
	ReapInterval time.Duration
	// ReadyTimeout bounds WaitReady after create or adoption (default
	// 60 s).
	ReadyTimeout time.Duration
	// ShutdownPolicy is PolicyRelease (default) or PolicyKeep.
	ShutdownPolicy string
	// Owner identifies this process in labels and state (default
	// host-pid-random; 1-64 of A-Z a-z 0-9 _ -). With a state store that
	// keeps owner leases (redis, FileStore) it is the id of this
	// process's owner lease; after losing one the process continues
	// under Owner-N.
	Owner string
	// Timeout is the default command timeout of the handles.
	Timeout time.Duration
	// LivenessInterval is how often a cache hit asks the backend whether
	// the sandbox still runs (default DefaultLivenessInterval).
	LivenessInterval time.Duration
	// TouchInterval is how often, at most, a used sandbox is touched on a
	// backend that implements Toucher (default DefaultTouchInterval).
	TouchInterval time.Duration
	// PoolSize is how many started, ready, unassigned sandboxes the warm
	// pool keeps (0: no pool); the backend must implement Pooler.
	PoolSize int
	// MaxSandboxes bounds the sandboxes of the deployment, warm pools
	// included (0: no limit): with a store that counts (redis,
	// FileStore), every process sharing it counts against the same
	// bound, so give them all the same value; with another store it
	// bounds this process's. PoolSize may not exceed it.
	MaxSandboxes int
	// SweepInterval is how often the provider collects what dead owners
	// left (Sweep), with a store that keeps owner leases (default
	// DefaultSweepInterval; negative: never, as `sage sandbox ls` does).
	SweepInterval time.Duration
	Logger        *slog.Logger
}

func (o *ProviderOptions) defaults() error {
	if o.Backend == nil {
		return &driver.ConfigError{Field: "backend", Reason: "required by the aio provider"}
	}
	switch o.ShutdownPolicy {
	case "":
		o.ShutdownPolicy = PolicyRelease
	case PolicyRelease, PolicyKeep:
	default:
		return &driver.ConfigError{Field: "shutdown_policy", Value: o.ShutdownPolicy, Reason: "want release or keep"}
	}
	if err := o.checkPool(); err != nil {
		return err
	}
	if o.IdleTimeout < 0 || o.ReapInterval < 0 || o.ReadyTimeout < 0 {
		return &driver.ConfigError{Field: "idle_timeout", Reason: "durations must not be negative"}
	}
	if o.Home == "" {
		o.Home = sagehome.Dir()
	}
	if o.Store == nil {
		o.Store = NewFileStore(o.Home)
	}
	if o.SkillsDir == "" {
		o.SkillsDir = filepath.Join(o.Home, "skills")
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.ReapInterval == 0 {
		o.ReapInterval = DefaultReapInterval
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.LivenessInterval <= 0 {
		o.LivenessInterval = DefaultLivenessInterval
	}
	if o.TouchInterval <= 0 {
		o.TouchInterval = DefaultTouchInterval
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = ownerID(fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(4)))
	}
	if !driver.ValidID(o.Owner) {
		return &driver.ConfigError{Field: "owner", Value: o.Owner, Reason: "want 1-64 characters of A-Z a-z 0-9 _ -"}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// ownerID makes s a valid owner id: other characters become '-', and it
// keeps its last 64 (the pid and random part).
func ownerID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[len(b)-64:]
	}
	return string(b)
}
