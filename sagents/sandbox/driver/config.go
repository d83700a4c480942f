package driver

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/observability"
)

// NetworkMode says what network a sandboxed command gets.
type NetworkMode string

// Network modes.
const (
	NetworkOff  NetworkMode = "off"
	NetworkOpen NetworkMode = "open"
	// NetworkAllowlist keeps the sandbox's own empty network namespace and
	// lets traffic out only through a filtering proxy on the host, to the
	// destinations that AllowedDomains names and DeniedDomains does not.
	NetworkAllowlist NetworkMode = "allowlist"
)

// Isolation choices, per operating system.
const (
	IsolationAuto     = "auto"
	IsolationBwrap    = "bwrap"
	IsolationSeatbelt = "seatbelt"
	// IsolationGvisor runs commands under gVisor's runsc (Linux): a
	// second kernel between the commands and the host's; one runsc
	// sandbox per session (the session sandbox), or per command with
	// FreshPerCommand.
	IsolationGvisor = "gvisor"
	IsolationNone   = "none"
)

// Config describes a sandbox. The zero value of every optional field means
// the provider's safe default.
type Config struct {
	Mode Type
	// SandboxID identifies the sandbox; empty means a random id.
	SandboxID string
	// Workspace is the host directory of the workspace (local and
	// passthrough). It is created if missing.
	Workspace string
	// VirtualWorkspace is the workspace path as commands see it; empty
	// means the provider's default ("/workspace" in local mode, the host
	// path in passthrough mode).
	VirtualWorkspace string
	// RuntimeDir holds background logs and temporary code files; empty
	// means $SAGE_HOME/runtime/<sandbox id>.
	RuntimeDir string
	Mounts     []VolumeMount
	// Timeout is the default command timeout; 0 means DefaultTimeout.
	Timeout time.Duration
	Local   LocalConfig
	Remote  RemoteConfig
	// Observer receives the sandbox's events (exec, file operations,
	// background tasks, ...) as observability runs, children of the run
	// each call's context carries; nil sends none.
	Observer *observability.Manager
}

// LocalConfig holds the limits and isolation of local mode. For the
// integer limits 0 means the provider's default and -1 means no limit.
type LocalConfig struct {
	CPUTimeLimit    time.Duration // budget of each command, all its processes together; 0: none
	MemoryLimitMB   int
	PidsLimit       int
	FileSizeLimitMB int
	// DiskQuotaMB and DiskQuotaInodes bound the workspace's disk use (its
	// own loop-mounted file system, as root only); 0: no quota. A quota
	// that this host cannot enforce is refused, never ignored.
	DiskQuotaMB     int
	DiskQuotaInodes int
	Network         NetworkMode // "" means off
	// AllowedDomains and DeniedDomains are the egress rules of network
	// allowlist (see EgressRule); deny is checked first.
	AllowedDomains []string
	DeniedDomains  []string
	Isolation      Isolation
	// UIDRange is where sandboxed processes get their host uid when sage
	// runs as root ("FIRST:COUNT", or the name of a user whose /etc/subuid
	// range to use); empty: the /etc/subuid range of user "sage" when it
	// has one, else DefaultUIDRange. Each workspace gets its own uid.
	UIDRange string
	// Umask is the file mode creation mask inside, in octal; empty: 077.
	Umask string
	// SeccompDeny lists more system calls the seccomp filter refuses
	// (names as in syscalls(2)), on top of the built-in list.
	SeccompDeny []string
	// FreshPerCommand true starts a fresh sandbox per command. Nil (the
	// default) runs every command, background task and Python or
	// JavaScript call of the sandbox in one long-lived session sandbox
	// (/tmp, processes and localhost persist) where bwrap or gVisor
	// isolates (Linux, isolation auto, bwrap or gvisor), else fresh; false
	// asks for the session sandbox and is a config error where it cannot
	// run.
	FreshPerCommand *bool
	// IdleTimeout stops an idle session sandbox (the next command starts
	// a new one); 0 means 15 minutes, negative never.
	IdleTimeout time.Duration
	// Prestart starts the session sandbox in the background when the
	// Sandbox opens, so the first command does not wait for its start
	// (a command that comes before it is ready waits for it). Ignored
	// with a fresh sandbox per command.
	Prestart bool
	// Checkpoints stacks the session sandbox's workspace as overlay
	// layers kept on the host, so that Sandbox.Checkpoint, Rollback, Fork
	// and Checkpoints work (docs/checkpoints.md): the live state is the
	// layered mount, the host workspace folder its base, written back on
	// Close and by Sandbox.Sync. It needs the bwrap session sandbox; off
	// leaves the workspace a plain bind of the host folder.
	Checkpoints bool
}

// DefaultUIDRange is the host uid range of sandboxed processes when sage
// runs as root and no other range is configured: 65536 uids from
// 2000000000, inside the range systemd leaves unused (1879048192 to
// 2147483647).
const DefaultUIDRange = "2000000000:65536"

// MinDiskQuotaMB and MinDiskQuotaInodes are the smallest workspace quotas
// (an ext4 file system needs room for its journal and metadata).
const (
	MinDiskQuotaMB     = 16
	MinDiskQuotaInodes = 64
)

// Isolation picks the isolation technique per operating system.
type Isolation struct {
	Linux  string // auto, bwrap or none
	Darwin string // auto, seatbelt or none
}

// RemoteConfig selects and configures a remote provider.
type RemoteConfig struct {
	Provider  string `yaml:"provider" json:"provider,omitempty"`
	ServerURL string `yaml:"server_url" json:"server_url,omitempty"`
	APIKey    string `yaml:"api_key" json:"-"`
	Image     string `yaml:"image" json:"image,omitempty"`
	// ProviderConfig holds provider-specific settings.
	ProviderConfig map[string]any `yaml:"provider_config" json:"provider_config,omitempty"`
}

// ParseMount parses "host:sandbox[:ro|:rw]".
func ParseMount(s string) (VolumeMount, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return VolumeMount{}, fmt.Errorf("mount %q: want host:sandbox[:ro]", s)
	}
	m := VolumeMount{HostPath: parts[0], SandboxPath: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			m.ReadOnly = true
		case "rw":
		default:
			return VolumeMount{}, fmt.Errorf("mount %q: mode %q is not ro or rw", s, parts[2])
		}
	}
	return m, nil
}

// ParseMounts parses a comma-separated list of mounts.
func ParseMounts(s string) ([]VolumeMount, error) {
	var out []VolumeMount
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		m, err := ParseMount(item)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// ParseUmask parses an octal file mode creation mask ("077", "0022").
func ParseUmask(s string) (fs.FileMode, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 || len(s) > 4 {
		return 0, fmt.Errorf("want an octal mask such as 077 or 022")
	}
	return fs.FileMode(v), nil
}

// ParseUIDRange parses "FIRST:COUNT" (the /etc/subuid layout without the
// user name). The range must hold at least one uid, stay below 2^31 and
// leave out uid 0.
func ParseUIDRange(s string) (first, count uint32, err error) {
	a, b, ok := strings.Cut(s, ":")
	f, ferr := strconv.ParseUint(a, 10, 32)
	c, cerr := strconv.ParseUint(b, 10, 32)
	if !ok || ferr != nil || cerr != nil || f == 0 || c == 0 || f+c > 1<<31 {
		return 0, 0, fmt.Errorf("uid range %q: want FIRST:COUNT with FIRST > 0 and FIRST+COUNT <= 2147483648", s)
	}
	return uint32(f), uint32(c), nil
}

func validUserName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

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
