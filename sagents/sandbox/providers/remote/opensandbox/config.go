package opensandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// The provider_config keys.
const (
	keyURL            = "url"             // lifecycle base URL, e.g. http://host:8080/v1
	keyAPIKeyEnv      = "api_key_env"     // variable holding the API key
	keyExecdToken     = "execd_token"     // execd access token
	keyExecdTokenEnv  = "execd_token_env" // variable holding the execd token
	keyEntrypoint     = "entrypoint"      // list, or one string split on spaces
	keyEnv            = "env"             // map of variables for the sandbox
	keyCPU            = "cpu"             // e.g. "500m"
	keyMemory         = "memory"          // e.g. "512Mi"
	keyTTLSeconds     = "ttl_seconds"     // sandbox timeout, renewed while in use (0: no expiry)
	keyWorkspace      = "workspace"       // workspace path, or "auto": the sandbox's working directory
	keyThreadID       = "thread_id"       // thread whose sandbox to find again or create
	keyShutdownPolicy = "shutdown_policy" // keep or delete
	keyReadySeconds   = "ready_timeout_seconds"
	keyExecdTmp       = "execd_tmpdir" // execd's TMPDIR, where it keeps each command's output
)

// Defaults.
const (
	defaultImage     = "opensandbox/code-interpreter:v1.0.2"
	defaultWorkspace = "/workspace"
	defaultTTL       = 30 * time.Minute
	defaultReady     = 2 * time.Minute
	defaultExecdTmp  = "/tmp"
	// LabelThread is the metadata label carrying the thread id.
	LabelThread = "sage.thread"
)

// config configures Open.
type config struct {
	URL        string // lifecycle base URL
	APIKey     string
	ExecdToken string
	Image      string
	Entrypoint []string
	Env        map[string]string
	Resources  map[string]string // resourceLimits: cpu, memory
	TTL        time.Duration     // 0: no expiry
	// RenewEvery is how often an open sandbox's expiry moves forward
	// (0: TTL/3).
	RenewEvery time.Duration
	Workspace  string // DefaultWorkspace, or "auto"
	Thread     string // "" : an anonymous sandbox
	// Keep leaves the sandbox running at Close (default for a thread's
	// sandbox; an anonymous one is always deleted).
	Keep         bool
	ReadyTimeout time.Duration
	// ExecdTmp is execd's TMPDIR inside the sandbox (DefaultExecdTmp),
	// where execd keeps each command's output as <id>.stdout and
	// <id>.stderr: the exact bytes are read from there.
	ExecdTmp string
	// Timeout is the default command timeout (0: driver.DefaultTimeout).
	Timeout time.Duration
	// HTTPClient, when set, is used for both APIs.
	HTTPClient *http.Client
	// Locker, when set, serialises finding or creating a thread's
	// sandbox across processes (the aio provider's FileStore or Redis
	// store); without it two processes opening a new thread at once may
	// each create a sandbox.
	Locker locker
}

// locker takes a thread's cross-process lock; the returned function
// releases it.
type locker interface {
	Lock(ctx context.Context, threadID string) (release func(), err error)
}

// configFrom reads a Config from the remote section of a sandbox config
// and the SAGE_OPENSANDBOX_* variables (through lookup), the config
// winning over the variables.
func configFrom(rc driver.RemoteConfig, lookup func(string) (string, bool)) (config, error) {
	pc := rc.ProviderConfig
	env := func(k string) string { v, _ := lookup(k); return v }
	c := config{URL: first(rc.ServerURL, str(pc, keyURL), env("SAGE_OPENSANDBOX_URL")),
		APIKey:     first(rc.APIKey, env("SAGE_OPENSANDBOX_API_KEY")),
		Image:      first(rc.Image, env("SAGE_OPENSANDBOX_IMAGE"), defaultImage),
		ExecdToken: first(str(pc, keyExecdToken), env("SAGE_OPENSANDBOX_EXECD_TOKEN")),
		Workspace:  first(str(pc, keyWorkspace), env("SAGE_OPENSANDBOX_WORKSPACE"), defaultWorkspace),
		ExecdTmp:   first(str(pc, keyExecdTmp), env("SAGE_OPENSANDBOX_EXECD_TMPDIR"), defaultExecdTmp),
		Thread:     str(pc, keyThreadID), Resources: map[string]string{"cpu": first(str(pc, keyCPU), "1"),
			"memory": first(str(pc, keyMemory), "2Gi")}, TTL: defaultTTL, ReadyTimeout: defaultReady}
	bad := func(key, val, reason string) error {
		return &driver.ConfigError{Field: "sandbox.remote.provider_config." + key, Value: val, Reason: reason}
	}
	if k := str(pc, keyAPIKeyEnv); k != "" {
		if c.APIKey = env(k); c.APIKey == "" {
			return c, bad(keyAPIKeyEnv, k, "the variable is empty or unset; export it or name another one")
		}
	}
	if k := str(pc, keyExecdTokenEnv); k != "" {
		if c.ExecdToken = env(k); c.ExecdToken == "" {
			return c, bad(keyExecdTokenEnv, k, "the variable is empty or unset; export it or name another one")
		}
	}
	if c.URL == "" {
		return c, &driver.ConfigError{Field: "sandbox.remote.server_url", Reason: "the opensandbox provider needs the lifecycle server URL: set --opensandbox-url, server_url or SAGE_OPENSANDBOX_URL"}
	}
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, &driver.ConfigError{Field: "sandbox.remote.server_url", Value: c.URL, Reason: "want an http or https URL such as http://127.0.0.1:8080/v1"}
	}
	switch v := pc[keyEntrypoint].(type) {
	case nil:
		c.Entrypoint = []string{"tail", "-f", "/dev/null"}
	case string:
		c.Entrypoint = strings.Fields(v)
	case []any:
		for _, a := range v {
			s, ok := a.(string)
			if !ok {
				return c, bad(keyEntrypoint, fmt.Sprint(v), "want a list of strings")
			}
			c.Entrypoint = append(c.Entrypoint, s)
		}
	default:
		return c, bad(keyEntrypoint, fmt.Sprint(v), "want a list of strings")
	}
	if len(c.Entrypoint) == 0 {
		return c, bad(keyEntrypoint, "", "must not be empty")
	}
	if m, ok := pc[keyEnv].(map[string]any); ok {
		c.Env = map[string]string{}
		for k, v := range m {
			if !driver.ValidEnvName(k) {
				return c, bad(keyEnv, k, "not a valid variable name")
			}
			c.Env[k] = fmt.Sprint(v)
		}
	} else if pc[keyEnv] != nil {
		return c, bad(keyEnv, fmt.Sprint(pc[keyEnv]), "want a map of variable names to values")
	}
	var err error
	if c.TTL, err = seconds(pc, keyTTLSeconds, c.TTL); err != nil || (c.TTL > 0 && c.TTL < time.Minute) {
		return c, bad(keyTTLSeconds, fmt.Sprint(pc[keyTTLSeconds]), "want 0 (no expiry) or at least 60 seconds")
	}
	if c.ReadyTimeout, err = seconds(pc, keyReadySeconds, c.ReadyTimeout); err != nil || c.ReadyTimeout <= 0 {
		return c, bad(keyReadySeconds, fmt.Sprint(pc[keyReadySeconds]), "want a positive number of seconds")
	}
	if !strings.HasPrefix(c.ExecdTmp, "/") {
		return c, bad(keyExecdTmp, c.ExecdTmp, "want an absolute path such as /tmp")
	}
	if c.Workspace != "auto" && (!strings.HasPrefix(c.Workspace, "/") || c.Workspace == "/") {
		return c, bad(keyWorkspace, c.Workspace, `want an absolute path other than "/", or "auto"`)
	}
	switch p := str(pc, keyShutdownPolicy); p {
	case "", "keep":
		c.Keep = c.Thread != ""
	case "delete":
	default:
		return c, bad(keyShutdownPolicy, p, "want keep or delete")
	}
	return c, nil
}

func first(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func str(m map[string]any, k string) string {
	if v, ok := m[k]; ok && v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

func seconds(m map[string]any, k string, def time.Duration) (time.Duration, error) {
	v, ok := m[k]
	if !ok || v == nil {
		return def, nil
	}
	n, err := strconv.ParseFloat(fmt.Sprint(v), 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad seconds %v", v)
	}
	return time.Duration(n * float64(time.Second)), nil
}
