package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Home is $SAGE_HOME; when unset, /var/lib/sage for root (sessions run
// under their own uids, which must reach their workspaces: /root is
// closed to them) and ~/.sage for everyone else.
func Home() string { return sagehome.Dir() }

// ConfigFromEnv reads SAGE_SANDBOX_MODE (default local),
// SAGE_SANDBOX_WORKSPACE, SAGE_SANDBOX_MOUNT_PATHS, SAGE_SANDBOX_TIMEOUT,
// SAGE_LOCAL_CPU_TIME_LIMIT (seconds), SAGE_LOCAL_MEMORY_LIMIT_MB,
// SAGE_LOCAL_PIDS_LIMIT, SAGE_LOCAL_FILE_SIZE_LIMIT_MB, SAGE_LOCAL_NETWORK,
// SAGE_LOCAL_ALLOWED_DOMAINS and SAGE_LOCAL_DENIED_DOMAINS (comma-separated),
// SAGE_REMOTE_PROVIDER, SAGE_REMOTE_URL and SAGE_REMOTE_API_KEY. Errors name
// the variable.
func ConfigFromEnv() (Config, error) {
	return configFromLookup(os.LookupEnv)
}

// ConfigFromLookup is ConfigFromEnv reading the variables through lookup,
// so that a command line can put its flags in front of the environment.
func ConfigFromLookup(lookup func(string) (string, bool)) (Config, error) {
	return configFromLookup(lookup)
}

func configFromLookup(lookup func(string) (string, bool)) (Config, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	c := Config{
		Mode:      Type(get("SAGE_SANDBOX_MODE")),
		Workspace: get("SAGE_SANDBOX_WORKSPACE"),
		Local: LocalConfig{Network: NetworkMode(get("SAGE_LOCAL_NETWORK")),
			AllowedDomains: splitList(get("SAGE_LOCAL_ALLOWED_DOMAINS")),
			DeniedDomains:  splitList(get("SAGE_LOCAL_DENIED_DOMAINS")),
			UIDRange:       get("SAGE_LOCAL_UID_RANGE"),
			Umask:          get("SAGE_LOCAL_UMASK"),
			SeccompDeny:    splitList(get("SAGE_LOCAL_SECCOMP_DENY"))},
		Remote: RemoteConfig{
			Provider:  get("SAGE_REMOTE_PROVIDER"),
			ServerURL: get("SAGE_REMOTE_URL"),
			APIKey:    get("SAGE_REMOTE_API_KEY"),
		},
	}
	if c.Mode == "" {
		c.Mode = Local
	}
	if v := get("SAGE_SANDBOX_MOUNT_PATHS"); v != "" {
		ms, err := driver.ParseMounts(v)
		if err != nil {
			return Config{}, &ConfigError{Field: "SAGE_SANDBOX_MOUNT_PATHS", Value: v, Reason: err.Error()}
		}
		c.Mounts = ms
	}
	if v := get("SAGE_SANDBOX_TIMEOUT"); v != "" {
		d, err := parseSeconds(v)
		if err != nil {
			return Config{}, &ConfigError{Field: "SAGE_SANDBOX_TIMEOUT", Value: v, Reason: err.Error()}
		}
		c.Timeout = d
	}
	if v := get("SAGE_LOCAL_CPU_TIME_LIMIT"); v != "" {
		d, err := parseSeconds(v)
		if err != nil {
			return Config{}, &ConfigError{Field: "SAGE_LOCAL_CPU_TIME_LIMIT", Value: v, Reason: err.Error()}
		}
		c.Local.CPUTimeLimit = d
	}
	ints := []struct {
		name string
		dst  *int
	}{
		{"SAGE_LOCAL_MEMORY_LIMIT_MB", &c.Local.MemoryLimitMB},
		{"SAGE_LOCAL_PIDS_LIMIT", &c.Local.PidsLimit},
		{"SAGE_LOCAL_FILE_SIZE_LIMIT_MB", &c.Local.FileSizeLimitMB},
		{"SAGE_LOCAL_DISK_QUOTA_MB", &c.Local.DiskQuotaMB},
		{"SAGE_LOCAL_DISK_QUOTA_INODES", &c.Local.DiskQuotaInodes},
	}
	for _, it := range ints {
		if v := get(it.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return Config{}, &ConfigError{Field: it.name, Value: v, Reason: "want a whole number (-1 for none)"}
			}
			*it.dst = n
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, envNamed(err)
	}
	return c, nil
}

// parseSeconds accepts a number of seconds ("60", "1.5") or a Go duration
// ("90s", "2m").
func parseSeconds(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want seconds (30) or a duration (30s, 5m)")
	}
	return d, nil
}

// envNamed renames the field of a validation error after the variable
// that sets it ("sandbox.mounts[1].host_path" becomes
// "SAGE_SANDBOX_MOUNT_PATHS[1].host_path"); a field no variable sets
// keeps its YAML name.
func envNamed(err error) error {
	ce, ok := err.(*ConfigError)
	if !ok {
		return err
	}
	key, rest := ce.Field, ""
	if i := strings.IndexByte(key, '['); i >= 0 {
		key, rest = key[:i], key[i:]
	}
	if env := driver.EnvName(key); env != "" {
		ce.Field = env + rest
	}
	return err
}

// splitList splits a comma-separated variable, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
