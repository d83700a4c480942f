package driver

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks the config and names the first bad field.
func (c Config) Validate() error { return c.validate(yamlNames) }

// fieldNames maps config fields to the names users wrote them under.
type fieldNames map[string]string

// fields names each config field as a config file (YAML) and as the
// environment (SAGE_*) spell it; a field with no variable of its own is
// named by its YAML name in both.
var fields = []struct{ key, yaml, env string }{
	{"mode", "sandbox.mode", "SAGE_SANDBOX_MODE"},
	{"workspace", "sandbox.workspace", "SAGE_SANDBOX_WORKSPACE"},
	{"virtual_workspace", "sandbox.virtual_workspace", ""},
	{"mounts", "sandbox.mounts", "SAGE_SANDBOX_MOUNT_PATHS"},
	{"timeout", "sandbox.timeout", "SAGE_SANDBOX_TIMEOUT"},
	{"cpu", "sandbox.local.cpu_time_limit", "SAGE_LOCAL_CPU_TIME_LIMIT"},
	{"mem", "sandbox.local.memory_limit_mb", "SAGE_LOCAL_MEMORY_LIMIT_MB"},
	{"pids", "sandbox.local.pids_limit", "SAGE_LOCAL_PIDS_LIMIT"},
	{"fsize", "sandbox.local.file_size_limit_mb", "SAGE_LOCAL_FILE_SIZE_LIMIT_MB"},
	{"network", "sandbox.local.network", "SAGE_LOCAL_NETWORK"},
	{"allowed", "sandbox.local.allowed_domains", "SAGE_LOCAL_ALLOWED_DOMAINS"},
	{"denied", "sandbox.local.denied_domains", "SAGE_LOCAL_DENIED_DOMAINS"},
	{"iso_linux", "sandbox.local.isolation.linux", ""},
	{"iso_darwin", "sandbox.local.isolation.darwin", ""},
	{"provider", "sandbox.remote.provider", "SAGE_REMOTE_PROVIDER"},
	{"url", "sandbox.remote.server_url", "SAGE_REMOTE_URL"},
	{"sandbox_id", "sandbox.sandbox_id", ""},
	{"uid_range", "sandbox.local.uid_range", "SAGE_LOCAL_UID_RANGE"},
	{"umask", "sandbox.local.umask", "SAGE_LOCAL_UMASK"},
	{"seccomp_deny", "sandbox.local.seccomp.deny", "SAGE_LOCAL_SECCOMP_DENY"},
	{"disk_mb", "sandbox.local.disk_quota_mb", "SAGE_LOCAL_DISK_QUOTA_MB"},
	{"disk_inodes", "sandbox.local.disk_quota_inodes", "SAGE_LOCAL_DISK_QUOTA_INODES"},
}

// EnvName is the SAGE_* variable that sets the config field named by
// its YAML key ("sandbox.local.memory_limit_mb"), "" when none does.
func EnvName(yamlKey string) string {
	for _, f := range fields {
		if f.yaml == yamlKey {
			return f.env
		}
	}
	return ""
}

// yamlNames are the names errors give the fields; ConfigFromEnv's errors
// rename them after their variables (EnvName).
var yamlNames = func() fieldNames {
	y := fieldNames{}
	for _, f := range fields {
		y[f.key] = f.yaml
	}
	return y
}()

func (c Config) validate(n fieldNames) error {
	bad := func(key, val, reason string) error {
		return &ConfigError{Field: n[key], Value: val, Reason: reason}
	}
	switch c.Mode {
	case Local, Remote, Passthrough:
	case "":
		return bad("mode", "", "required (local, remote or passthrough)")
	default:
		return bad("mode", string(c.Mode), "unknown mode (want local, remote or passthrough)")
	}
	if c.SandboxID != "" && !validID(c.SandboxID) {
		return bad("sandbox_id", c.SandboxID, "want 1-64 characters of A-Z a-z 0-9 _ -")
	}
	if c.VirtualWorkspace != "" && !CleanAbs(c.VirtualWorkspace) {
		return bad("virtual_workspace", c.VirtualWorkspace, "must be a clean absolute path other than /")
	}
	if err := validateMounts(c.Mounts, n["mounts"]); err != nil {
		return err
	}
	if c.Timeout < 0 {
		return bad("timeout", c.Timeout.String(), "must not be negative")
	}
	if err := c.Local.validate(bad); err != nil {
		return err
	}
	if err := c.Local.validateEgress(n); err != nil {
		return err
	}
	if c.Mode == Remote {
		if c.Remote.Provider == "" {
			return bad("provider", "", "required in remote mode")
		}
		if u := c.Remote.ServerURL; u != "" {
			p, err := url.Parse(u)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				return bad("url", u, "want an http or https URL")
			}
		}
	}
	return nil
}

func (l LocalConfig) validate(bad func(key, val, reason string) error) error {
	if l.CPUTimeLimit < 0 || (l.CPUTimeLimit > 0 && l.CPUTimeLimit < time.Second) {
		return bad("cpu", l.CPUTimeLimit.String(), "must be 0 (default) or at least 1s")
	}
	for key, v := range map[string]int{"mem": l.MemoryLimitMB, "pids": l.PidsLimit, "fsize": l.FileSizeLimitMB} {
		if v < -1 {
			return bad(key, strconv.Itoa(v), "must be -1 (no limit), 0 (default) or positive")
		}
	}
	if l.DiskQuotaMB < 0 || (l.DiskQuotaMB > 0 && l.DiskQuotaMB < MinDiskQuotaMB) {
		return bad("disk_mb", strconv.Itoa(l.DiskQuotaMB), fmt.Sprintf("must be 0 (no quota) or at least %d", MinDiskQuotaMB))
	}
	if l.DiskQuotaInodes < 0 || (l.DiskQuotaInodes > 0 && l.DiskQuotaInodes < MinDiskQuotaInodes) {
		return bad("disk_inodes", strconv.Itoa(l.DiskQuotaInodes), fmt.Sprintf("must be 0 (the file system's default) or at least %d", MinDiskQuotaInodes))
	}
	if l.DiskQuotaInodes > 0 && l.DiskQuotaMB == 0 {
		return bad("disk_inodes", strconv.Itoa(l.DiskQuotaInodes), "needs a byte quota too; fix: set disk_quota_mb as well")
	}
	if l.Umask != "" {
		if _, err := ParseUmask(l.Umask); err != nil {
			return bad("umask", l.Umask, err.Error())
		}
	}
	if l.UIDRange != "" {
		if _, _, err := ParseUIDRange(l.UIDRange); err != nil && !validUserName(l.UIDRange) {
			return bad("uid_range", l.UIDRange, "want FIRST:COUNT (e.g. "+DefaultUIDRange+") or the name of a user with an /etc/subuid range")
		}
	}
	for _, e := range []struct {
		key, val string
		want     []string // besides "" (the default)
	}{
		{"network", string(l.Network), []string{string(NetworkOff), string(NetworkAllowlist), string(NetworkOpen)}},
		{"iso_linux", l.Isolation.Linux, []string{IsolationAuto, IsolationBwrap, IsolationGvisor, IsolationNone}},
		{"iso_darwin", l.Isolation.Darwin, []string{IsolationAuto, IsolationSeatbelt, IsolationNone}},
	} {
		if e.val != "" && !slices.Contains(e.want, e.val) {
			return bad(e.key, e.val, "want "+orList(e.want))
		}
	}
	return nil
}

// orList spells words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// validateEgress parses every domain rule, naming the bad entry, and
// refuses rules next to network open, which would ignore them.
func (l LocalConfig) validateEgress(n fieldNames) error {
	for _, list := range []struct {
		key   string
		rules []string
	}{{"allowed", l.AllowedDomains}, {"denied", l.DeniedDomains}} {
		if _, err := ParseEgressRules(list.rules, n[list.key]); err != nil {
			return err
		}
		if len(list.rules) > 0 && l.Network == NetworkOpen {
			return &ConfigError{Field: n[list.key], Value: strings.Join(list.rules, ","),
				Reason: "network open ignores domain rules; use network: allowlist"}
		}
	}
	return nil
}

func validateMounts(ms []VolumeMount, field string) error {
	seen := map[string]bool{}
	for i, m := range ms {
		f := fmt.Sprintf("%s[%d]", field, i)
		if m.HostPath == "" || !filepath.IsAbs(m.HostPath) {
			return &ConfigError{Field: f + ".host_path", Value: m.HostPath, Reason: "must be an absolute path"}
		}
		if !CleanAbs(m.SandboxPath) {
			return &ConfigError{Field: f + ".sandbox_path", Value: m.SandboxPath, Reason: "must be a clean absolute path other than /"}
		}
		if seen[m.SandboxPath] {
			return &ConfigError{Field: f + ".sandbox_path", Value: m.SandboxPath, Reason: "mounted twice"}
		}
		seen[m.SandboxPath] = true
	}
	return nil
}

// CleanAbs reports whether p can be a sandbox path of a mount or the
// virtual workspace: clean, absolute, not /, no NUL or colon.
func CleanAbs(p string) bool {
	return p != "/" && path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsAny(p, "\x00:")
}

func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		ok := r == '_' || r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

// ValidID reports whether s is a valid sandbox or thread id:
// ^[A-Za-z0-9_-]{1,64}$.
func ValidID(s string) bool { return validID(s) }
