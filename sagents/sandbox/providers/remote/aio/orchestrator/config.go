package orchestrator

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Keys of RemoteConfig.ProviderConfig that the orchestrating provider
// reads. Every key is also passed to the backend's factory, which reads
// its own (container_prefix for docker; provisioner_url and
// provisioner_api_key for the provisioner).
const (
	KeyThreadID          = "thread_id"
	KeyBackend           = "backend"         // docker (default) or provisioner
	KeyProvisionerURL    = "provisioner_url" // default $SAGE_PROVISIONER_URL; selects the provisioner backend
	KeyProvisionerAPIKey = "provisioner_api_key"
	KeyImage             = "image"            // default RemoteConfig.Image, then sage-sandbox:dev
	KeyPort              = "port"             // default 8080
	KeyContainerPrefix   = "container_prefix" // docker; default sage-sandbox
	KeyRuntime           = "runtime"          // docker: the engine's OCI runtime, e.g. runsc (gVisor); default the engine's
	KeyIdleTimeout       = "idle_timeout"     // seconds or Go duration; 0 disables
	KeyReapInterval      = "reap_interval"
	KeyReadyTimeout      = "ready_timeout"
	KeyMounts            = "mounts"      // ["host:container[:ro]", ...] or a comma list
	KeyEnvironment       = "environment" // {NAME: value with $VAR / ${VAR:-default}}
	KeyMemoryMB          = "memory_mb"
	KeyCPUs              = "cpus"
	KeyStateStore        = "state_store"      // file (default) or redis
	KeyStateStoreAddr    = "state_store_addr" // a directory, or redis://host:port/db
	KeyShutdownPolicy    = "shutdown_policy"  // release (default) or keep
	KeyHome              = "home"             // default SAGE_HOME
	KeyPoolSize          = "pool_size"        // warm pool: started, unassigned sandboxes (0: none)
	KeyMaxSandboxes      = "max_sandboxes"    // bound on held plus pooled sandboxes (0: none)
	// KeyInstallationID separates deployments sharing an engine (docker;
	// default: derived from home).
	KeyInstallationID = "installation_id"
)

// ProviderFromConfig builds a Provider from a RemoteConfig: its
// ProviderConfig keys (above), then the environment: SAGE_PROVISIONER_URL
// and SAGE_PROVISIONER_API_KEY, SAGE_AIO_STATE_STORE and
// SAGE_AIO_STATE_ADDR, SAGE_AIO_IMAGE, SAGE_AIO_CONTAINER_PREFIX,
// SAGE_AIO_IDLE_TIMEOUT, SAGE_AIO_RUNTIME, SAGE_AIO_POOL_SIZE,
// SAGE_AIO_MAX_SANDBOXES. The backend is "provisioner" when a provisioner
// URL is set, else "docker"; either must be registered (import its
// package).
func ProviderFromConfig(rc driver.RemoteConfig, base ProviderOptions) (*Provider, error) {
	pc := withEnvDefaults(rc)
	o := base
	if err := applyConfig(&o, pc); err != nil {
		return nil, err
	}
	if o.Backend == nil {
		b, err := NewBackend(backendName(pc), pc)
		if err != nil {
			return nil, err
		}
		o.Backend = b
	}
	if o.Store == nil {
		kind := str(pc, KeyStateStore, "file")
		addrDefault := "" // redis and others: their own default address
		if kind == "file" {
			addrDefault = o.Home
		}
		st, err := NewStateStore(kind, str(pc, KeyStateStoreAddr, addrDefault))
		if err != nil {
			return nil, err
		}
		o.Store = st
	}
	return NewProvider(o)
}

func withEnvDefaults(rc driver.RemoteConfig) map[string]any {
	pc := make(map[string]any, len(rc.ProviderConfig)+8)
	for k, v := range rc.ProviderConfig {
		pc[k] = v
	}
	envKeys := map[string]string{KeyProvisionerURL: "SAGE_PROVISIONER_URL", KeyProvisionerAPIKey: "SAGE_PROVISIONER_API_KEY",
		KeyStateStore: "SAGE_AIO_STATE_STORE", KeyStateStoreAddr: "SAGE_AIO_STATE_ADDR", KeyImage: "SAGE_AIO_IMAGE",
		KeyContainerPrefix: "SAGE_AIO_CONTAINER_PREFIX", KeyIdleTimeout: "SAGE_AIO_IDLE_TIMEOUT",
		KeyInstallationID: "SAGE_AIO_INSTALLATION_ID", KeyRuntime: "SAGE_AIO_RUNTIME",
		KeyPoolSize: "SAGE_AIO_POOL_SIZE", KeyMaxSandboxes: "SAGE_AIO_MAX_SANDBOXES"}
	for k, env := range envKeys {
		if _, set := pc[k]; !set {
			if v := os.Getenv(env); v != "" {
				pc[k] = v
			}
		}
	}
	if _, set := pc[KeyImage]; !set && rc.Image != "" {
		pc[KeyImage] = rc.Image
	}
	return pc
}

func backendName(pc map[string]any) string {
	if b := str(pc, KeyBackend, ""); b != "" {
		return b
	}
	if str(pc, KeyProvisionerURL, "") != "" {
		return "provisioner"
	}
	return "docker"
}

func applyConfig(o *ProviderOptions, pc map[string]any) error {
	var err error
	o.Home = str(pc, KeyHome, o.Home)
	o.Image = str(pc, KeyImage, o.Image)
	o.ShutdownPolicy = str(pc, KeyShutdownPolicy, o.ShutdownPolicy)
	set := func(e error) {
		if err == nil {
			err = e
		}
	}
	set(intKey(pc, KeyPort, &o.Port))
	set(intKey(pc, KeyMemoryMB, &o.MemoryMB))
	set(intKey(pc, KeyPoolSize, &o.PoolSize))
	set(intKey(pc, KeyMaxSandboxes, &o.MaxSandboxes))
	set(floatKey(pc, KeyCPUs, &o.CPUs))
	set(durKey(pc, KeyIdleTimeout, &o.IdleTimeout))
	set(durKey(pc, KeyReapInterval, &o.ReapInterval))
	set(durKey(pc, KeyReadyTimeout, &o.ReadyTimeout))
	set(mountsKey(pc, &o.Mounts))
	set(envKey(pc, &o.Env))
	return err
}

func str(pc map[string]any, k, def string) string {
	if v, ok := pc[k]; ok && v != nil {
		if s := strings.TrimSpace(fmt.Sprint(v)); s != "" {
			return s
		}
	}
	return def
}

func intKey(pc map[string]any, k string, dst *int) error {
	s := str(pc, k, "")
	if s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return &driver.ConfigError{Field: k, Value: s, Reason: "not an integer"}
	}
	*dst = n
	return nil
}

func floatKey(pc map[string]any, k string, dst *float64) error {
	s := str(pc, k, "")
	if s == "" {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return &driver.ConfigError{Field: k, Value: s, Reason: "not a non-negative number"}
	}
	*dst = f
	return nil
}

// durKey accepts seconds ("600", "0.5") or a Go duration ("10m").
func durKey(pc map[string]any, k string, dst *time.Duration) error {
	s := str(pc, k, "")
	if s == "" {
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		*dst = time.Duration(f * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return &driver.ConfigError{Field: k, Value: s, Reason: "want seconds or a duration such as 10m"}
	}
	*dst = d
	return nil
}

func mountsKey(pc map[string]any, dst *[]driver.VolumeMount) error {
	var items []string
	switch v := pc[KeyMounts].(type) {
	case nil:
		return nil
	case string:
		items = strings.Split(v, ",")
	case []string:
		items = v
	case []any:
		for _, x := range v {
			items = append(items, fmt.Sprint(x))
		}
	default:
		return &driver.ConfigError{Field: KeyMounts, Reason: "want a list of host:container[:ro]"}
	}
	for _, it := range items {
		if it = strings.TrimSpace(it); it == "" {
			continue
		}
		m, err := driver.ParseMount(it)
		if err != nil {
			return &driver.ConfigError{Field: KeyMounts, Value: it, Reason: err.Error()}
		}
		*dst = append(*dst, m)
	}
	return nil
}

func envKey(pc map[string]any, dst *map[string]string) error {
	raw := map[string]string{}
	for k, v := range *dst {
		raw[k] = v
	}
	switch v := pc[KeyEnvironment].(type) {
	case nil:
	case map[string]string:
		for k, s := range v {
			raw[k] = s
		}
	case map[string]any:
		for k, s := range v {
			raw[k] = fmt.Sprint(s)
		}
	default:
		return &driver.ConfigError{Field: KeyEnvironment, Reason: "want a map of NAME: value"}
	}
	for k := range raw {
		if !driver.ValidEnvName(k) || k == TokenEnv {
			return &driver.ConfigError{Field: KeyEnvironment, Value: k, Reason: "invalid or reserved variable name"}
		}
	}
	env, err := resolveEnv(raw, nil)
	if err != nil {
		return err
	}
	*dst = env
	return nil
}
