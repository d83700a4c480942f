package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sage-go/sage/internal/yamlstrict"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// ConfigFromYAML reads the "sandbox:" block of a YAML document (other
// top-level keys are left alone for their own readers):
//
//	sandbox:
//	  mode: local            # local, remote or passthrough
//	  sandbox_id: s1
//	  workspace: /srv/ws
//	  timeout: 30s           # or seconds
//	  mounts: ["/data:/mnt/data:ro", {host_path: /x, sandbox_path: /y}]
//	  local: {cpu_time_limit: 60, memory_limit_mb: 1024, pids_limit: 256,
//	          file_size_limit_mb: 512, network: off,   # off, allowlist or open
//	          disk_quota_mb: 1024, disk_quota_inodes: 100000, # root only; 0: none
//	          allowed_domains: [pypi.org, "*.pythonhosted.org", "api.example.com:8443"],
//	          denied_domains: [evil.example.com],
//	          isolation: {linux: bwrap, darwin: seatbelt}}
//	  remote: {provider: aio, server_url: "http://127.0.0.1:8080",
//	           api_key: "...", image: "...", provider_config: {...}}
//
// Unknown keys inside the block are errors, so typos do not pass silently.
func ConfigFromYAML(data []byte) (Config, error) {
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Config{}, fmt.Errorf("sandbox config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	node, ok := doc["sandbox"]
	if !ok {
		return Config{}, &ConfigError{Field: "sandbox", Reason: "block missing"}
	}
	var y yamlSandbox
	if err := yamlstrict.Decode(&node, "sandbox", &y); err != nil {
		var ye *yamlstrict.Error
		if errors.As(err, &ye) {
			return Config{}, &ConfigError{Field: ye.Path, Value: ye.Value, Reason: ye.Detail()}
		}
		return Config{}, fmt.Errorf("sandbox config: %w", err)
	}
	c := y.config()
	if c.Mode == "" {
		c.Mode = Local
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

type yamlSandbox struct {
	Mode             string       `yaml:"mode"`
	SandboxID        string       `yaml:"sandbox_id"`
	Workspace        string       `yaml:"workspace"`
	VirtualWorkspace string       `yaml:"virtual_workspace"`
	RuntimeDir       string       `yaml:"runtime_dir"`
	Mounts           []yamlMount  `yaml:"mounts"`
	Timeout          yamlSeconds  `yaml:"timeout"`
	Local            yamlLocal    `yaml:"local"`
	Remote           RemoteConfig `yaml:"remote"`
}

type yamlLocal struct {
	CPUTimeLimit    yamlSeconds `yaml:"cpu_time_limit"`
	MemoryLimitMB   int         `yaml:"memory_limit_mb"`
	PidsLimit       int         `yaml:"pids_limit"`
	FileSizeLimitMB int         `yaml:"file_size_limit_mb"`
	DiskQuotaMB     int         `yaml:"disk_quota_mb"`
	DiskQuotaInodes int         `yaml:"disk_quota_inodes"`
	Network         yamlNetwork `yaml:"network"`
	AllowedDomains  []string    `yaml:"allowed_domains"`
	DeniedDomains   []string    `yaml:"denied_domains"`
	Isolation       struct {
		Linux  string `yaml:"linux"`
		Darwin string `yaml:"darwin"`
	} `yaml:"isolation"`
	UIDRange string `yaml:"uid_range"`
	Umask    string `yaml:"umask"`
	Seccomp  struct {
		Deny []string `yaml:"deny"`
	} `yaml:"seccomp"`
	FreshPerCommand *bool       `yaml:"fresh_per_command"`
	IdleTimeout     yamlSeconds `yaml:"idle_timeout"`
	Prestart        bool        `yaml:"prestart"`
	Checkpoints     onOff       `yaml:"checkpoints"`
}

func (y yamlSandbox) config() Config {
	c := Config{
		Mode:             Type(y.Mode),
		SandboxID:        y.SandboxID,
		Workspace:        y.Workspace,
		VirtualWorkspace: y.VirtualWorkspace,
		RuntimeDir:       y.RuntimeDir,
		Timeout:          y.Timeout.d,
		Remote:           y.Remote,
		Local: LocalConfig{
			CPUTimeLimit:    y.Local.CPUTimeLimit.d,
			MemoryLimitMB:   y.Local.MemoryLimitMB,
			PidsLimit:       y.Local.PidsLimit,
			FileSizeLimitMB: y.Local.FileSizeLimitMB,
			DiskQuotaMB:     y.Local.DiskQuotaMB,
			DiskQuotaInodes: y.Local.DiskQuotaInodes,
			Network:         NetworkMode(y.Local.Network),
			AllowedDomains:  y.Local.AllowedDomains,
			DeniedDomains:   y.Local.DeniedDomains,
			Isolation:       Isolation{Linux: y.Local.Isolation.Linux, Darwin: y.Local.Isolation.Darwin},
			UIDRange:        y.Local.UIDRange,
			Umask:           y.Local.Umask,
			SeccompDeny:     y.Local.Seccomp.Deny,
			FreshPerCommand: y.Local.FreshPerCommand,
			IdleTimeout:     y.Local.IdleTimeout.d,
			Prestart:        y.Local.Prestart,
			Checkpoints:     bool(y.Local.Checkpoints),
		},
	}
	for _, m := range y.Mounts {
		c.Mounts = append(c.Mounts, VolumeMount(m))
	}
	return c
}

// yamlMount accepts "host:sandbox[:ro]" or a mapping.
type yamlMount VolumeMount

func (m *yamlMount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		vm, err := driver.ParseMount(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		*m = yamlMount(vm)
		return nil
	}
	var v struct {
		HostPath    string `yaml:"host_path"`
		SandboxPath string `yaml:"sandbox_path"`
		ReadOnly    bool   `yaml:"read_only"`
	}
	if err := yamlstrict.Decode(n, "", &v); err != nil {
		return err
	}
	*m = yamlMount{HostPath: v.HostPath, SandboxPath: v.SandboxPath, ReadOnly: v.ReadOnly}
	return nil
}

// yamlSeconds accepts a number of seconds or a Go duration string.
type yamlSeconds struct{ d time.Duration }

func (s *yamlSeconds) UnmarshalYAML(n *yaml.Node) error {
	d, err := parseSeconds(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	s.d = d
	return nil
}

// yamlNetwork accepts off/allowlist/open and YAML booleans (false = off, true = open).
type yamlNetwork string

func (v *yamlNetwork) UnmarshalYAML(n *yaml.Node) error {
	switch n.Value {
	case "false", "no", "False", "FALSE":
		*v = yamlNetwork(NetworkOff)
	case "true", "yes", "True", "TRUE", "on":
		*v = yamlNetwork(NetworkOpen)
	default:
		*v = yamlNetwork(n.Value)
	}
	return nil
}

// onOff is a switch written on/off (as the docs do) or true/false.
type onOff bool

func (o *onOff) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want on or off")
	}
	s := n.Value
	switch strings.ToLower(s) {
	case "on", "true", "yes":
		*o = true
	case "off", "false", "no", "":
		*o = false
	default:
		return fmt.Errorf("%q is not on or off", s)
	}
	return nil
}
