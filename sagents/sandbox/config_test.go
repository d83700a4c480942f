package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lookupFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigFromEnv(t *testing.T) {
	c, err := configFromLookup(lookupFrom(map[string]string{
		"SAGE_SANDBOX_MODE":          "remote",
		"SAGE_SANDBOX_MOUNT_PATHS":   "/data:/mnt/data:ro, /src:/mnt/src",
		"SAGE_LOCAL_CPU_TIME_LIMIT":  "60",
		"SAGE_LOCAL_MEMORY_LIMIT_MB": "512",
		"SAGE_REMOTE_PROVIDER":       "aio",
		"SAGE_REMOTE_URL":            "http://127.0.0.1:8080",
	}))
	require.NoError(t, err)
	assert.Equal(t, Remote, c.Mode)
	assert.Equal(t, []VolumeMount{{HostPath: "/data", SandboxPath: "/mnt/data", ReadOnly: true}, {HostPath: "/src", SandboxPath: "/mnt/src"}}, c.Mounts)
	assert.Equal(t, 60*time.Second, c.Local.CPUTimeLimit)
	assert.Equal(t, 512, c.Local.MemoryLimitMB)
	assert.Equal(t, "aio", c.Remote.Provider)
	assert.Equal(t, "http://127.0.0.1:8080", c.Remote.ServerURL)
}

func TestConfigFromEnvDefaultsToLocal(t *testing.T) {
	c, err := configFromLookup(lookupFrom(nil))
	require.NoError(t, err)
	assert.Equal(t, Local, c.Mode)
}

func TestConfigFromEnvNamesTheBadVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"SAGE_SANDBOX_MODE":          {"SAGE_SANDBOX_MODE": "docker"},
		"SAGE_SANDBOX_MOUNT_PATHS":   {"SAGE_SANDBOX_MOUNT_PATHS": "/only-one-part"},
		"SAGE_LOCAL_CPU_TIME_LIMIT":  {"SAGE_LOCAL_CPU_TIME_LIMIT": "lots"},
		"SAGE_LOCAL_MEMORY_LIMIT_MB": {"SAGE_LOCAL_MEMORY_LIMIT_MB": "1G"},
		"SAGE_REMOTE_PROVIDER":       {"SAGE_SANDBOX_MODE": "remote"},
		"SAGE_REMOTE_URL":            {"SAGE_SANDBOX_MODE": "remote", "SAGE_REMOTE_PROVIDER": "aio", "SAGE_REMOTE_URL": "ftp://x"},
	}
	for field, env := range cases {
		t.Run(field, func(t *testing.T) {
			_, err := configFromLookup(lookupFrom(env))
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, field, ce.Field)
			assert.Contains(t, err.Error(), field)
		})
	}
}

func TestConfigFromYAML(t *testing.T) {
	c, err := ConfigFromYAML([]byte(`
llm: {model: whatever}   # other blocks are not ours
sandbox:
  mode: local
  sandbox_id: s-1
  workspace: /srv/ws
  timeout: 45s
  mounts:
    - /data:/mnt/data:ro
    - {host_path: /x, sandbox_path: /y}
  local:
    cpu_time_limit: 30
    memory_limit_mb: 1024
    pids_limit: 128
    file_size_limit_mb: 64
    network: off
    isolation: {linux: bwrap, darwin: seatbelt}
  remote:
    provider: aio
    server_url: http://127.0.0.1:9
    provider_config: {idle_timeout: 600}
`))
	require.NoError(t, err)
	assert.Equal(t, Config{
		Mode: Local, SandboxID: "s-1", Workspace: "/srv/ws", Timeout: 45 * time.Second,
		Mounts: []VolumeMount{{HostPath: "/data", SandboxPath: "/mnt/data", ReadOnly: true}, {HostPath: "/x", SandboxPath: "/y"}},
		Local: LocalConfig{CPUTimeLimit: 30 * time.Second, MemoryLimitMB: 1024, PidsLimit: 128,
			FileSizeLimitMB: 64, Network: NetworkOff, Isolation: Isolation{Linux: "bwrap", Darwin: "seatbelt"}},
		Remote: RemoteConfig{Provider: "aio", ServerURL: "http://127.0.0.1:9",
			ProviderConfig: map[string]any{"idle_timeout": 600}},
	}, c)
}

func TestConfigFromYAMLNetworkBooleans(t *testing.T) {
	for in, want := range map[string]NetworkMode{"false": NetworkOff, "true": NetworkOpen, "open": NetworkOpen, "off": NetworkOff} {
		c, err := ConfigFromYAML([]byte("sandbox:\n  local:\n    network: " + in + "\n"))
		require.NoError(t, err, in)
		assert.Equal(t, want, c.Local.Network, in)
	}
}

func TestConfigFromYAMLErrors(t *testing.T) {
	cases := map[string]string{
		"no block":      "other: 1\n",
		"unknown key":   "sandbox:\n  mdoe: local\n",
		"bad mode":      "sandbox:\n  mode: vm\n",
		"bad mount":     "sandbox:\n  mounts: [\"/a\"]\n",
		"relative host": "sandbox:\n  mounts: [\"a:/b\"]\n",
		"sandbox root":  "sandbox:\n  mounts: [\"/a:/\"]\n",
		"twice":         "sandbox:\n  mounts: [\"/a:/b\", \"/c:/b\"]\n",
		"bad timeout":   "sandbox:\n  timeout: soon\n",
		"negative mem":  "sandbox:\n  local: {memory_limit_mb: -2}\n",
		"bad network":   "sandbox:\n  local: {network: sometimes}\n",
		"bad isolation": "sandbox:\n  local: {isolation: {linux: docker}}\n",
		"tiny cpu":      "sandbox:\n  local: {cpu_time_limit: 0.5}\n",
		"bad id":        "sandbox:\n  sandbox_id: ../x\n",
		"no provider":   "sandbox:\n  mode: remote\n",
		"not yaml":      "sandbox: [\n",
	}
	want := map[string]string{
		"no block": "sandbox", "bad mode": "sandbox.mode", "bad mount": "/a",
		"relative host": "sandbox.mounts[0].host_path", "sandbox root": "sandbox.mounts[0].sandbox_path",
		"twice": "sandbox.mounts[1].sandbox_path", "negative mem": "sandbox.local.memory_limit_mb",
		"bad network": "sandbox.local.network", "bad isolation": "sandbox.local.isolation.linux",
		"tiny cpu": "sandbox.local.cpu_time_limit", "bad id": "sandbox.sandbox_id",
		"no provider": "sandbox.remote.provider", "unknown key": "mdoe", "bad timeout": "soon",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ConfigFromYAML([]byte(doc))
			require.Error(t, err)
			if w, ok := want[name]; ok {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Errors of a config file name the key as written and what it takes,
// never a Go type (issue 37: "sandbox.yamlSandbox", "!!str `lots` into
// int").
func TestConfigFromYAMLErrorsNameTheKey(t *testing.T) {
	for doc, want := range map[string]string{
		"sandbox:\n  mdoe: local\n": `sandbox config: sandbox.mdoe: unknown key (line 2); sandbox takes local, mode, mounts, remote, ` +
			`runtime_dir, sandbox_id, timeout, virtual_workspace, workspace`,
		"sandbox:\n  local:\n    memory_limit_mb: lots\n":             `sandbox config: sandbox.local.memory_limit_mb="lots": "lots" is not a whole number (line 3)`,
		"sandbox:\n  local: {pids_limit: 5, bogus: 1}\n":              `sandbox config: sandbox.local.bogus: unknown key (line 2); sandbox.local takes allowed_domains,`,
		"sandbox:\n  timeout: soon\n":                                 `sandbox config: sandbox.timeout="soon": want seconds (30) or a duration (30s, 5m) (line 2)`,
		"sandbox:\n  mounts: [\"/a\"]\n":                              `sandbox config: sandbox.mounts[0]="/a": mount "/a": want host:sandbox[:ro] (line 2)`,
		"sandbox:\n  mounts: /a:/b\n":                                 `sandbox config: sandbox.mounts="/a:/b": want a list, not "/a:/b" (line 2)`,
		"sandbox:\n  local: {isolation: {linux: [a]}}\n":              `sandbox config: sandbox.local.isolation.linux: want a string, not a list (line 2)`,
		"sandbox:\n  local: {fresh_per_command: maybe}\n":             `sandbox config: sandbox.local.fresh_per_command="maybe": "maybe" is not true or false (line 2)`,
		"sandbox:\n  remote: {provider_config: {x: [1]}, image: 3}\n": "", // any value in provider_config; 3 is a string
		"sandbox:\n  local: {checkpoints: maybe}\n":                   `sandbox config: sandbox.local.checkpoints="maybe": "maybe" is not on or off (line 2)`,
	} {
		_, err := ConfigFromYAML([]byte(doc))
		if want == "" {
			assert.NoError(t, err, doc)
			continue
		}
		require.Error(t, err, doc)
		assert.True(t, strings.HasPrefix(err.Error(), want), "%q:\n got %s\nwant %s", doc, err, want)
		var ce *ConfigError
		assert.ErrorAs(t, err, &ce, doc)
		for _, goName := range []string{`yaml`, `!!`, `\bint\b`, `\bbool\b`, `\bstruct\b`} { // as words: "checkpoints" holds "int"
			assert.NotRegexp(t, goName, err.Error(), doc)
		}
	}
}

func TestDiskQuotaConfig(t *testing.T) {
	c, err := configFromLookup(lookupFrom(map[string]string{"SAGE_LOCAL_DISK_QUOTA_MB": "64", "SAGE_LOCAL_DISK_QUOTA_INODES": "1000"}))
	require.NoError(t, err)
	assert.Equal(t, 64, c.Local.DiskQuotaMB)
	assert.Equal(t, 1000, c.Local.DiskQuotaInodes)

	y, err := ConfigFromYAML([]byte("sandbox:\n  local: {disk_quota_mb: 32, disk_quota_inodes: 500}\n"))
	require.NoError(t, err)
	assert.Equal(t, 32, y.Local.DiskQuotaMB)
	assert.Equal(t, 500, y.Local.DiskQuotaInodes)

	for env, field := range map[string]map[string]string{
		"SAGE_LOCAL_DISK_QUOTA_MB":     {"SAGE_LOCAL_DISK_QUOTA_MB": "8"},
		"SAGE_LOCAL_DISK_QUOTA_INODES": {"SAGE_LOCAL_DISK_QUOTA_INODES": "1000"}, // without a byte quota
	} {
		_, err := configFromLookup(lookupFrom(field))
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, env)
		assert.Equal(t, env, ce.Field)
	}
	_, err = ConfigFromYAML([]byte("sandbox:\n  local: {disk_quota_mb: -5}\n"))
	assert.ErrorContains(t, err, "sandbox.local.disk_quota_mb")
	_, err = configFromLookup(lookupFrom(map[string]string{"SAGE_LOCAL_DISK_QUOTA_MB": "lots"}))
	assert.ErrorContains(t, err, "SAGE_LOCAL_DISK_QUOTA_MB")
}

func TestConfigFromYAMLSession(t *testing.T) {
	c, err := ConfigFromYAML([]byte("sandbox:\n  local:\n    fresh_per_command: false\n    idle_timeout: 90\n"))
	require.NoError(t, err)
	require.NotNil(t, c.Local.FreshPerCommand)
	assert.False(t, *c.Local.FreshPerCommand)
	assert.Equal(t, 90*time.Second, c.Local.IdleTimeout)
	assert.False(t, c.Local.Prestart)
	c, err = ConfigFromYAML([]byte("sandbox:\n  local:\n    prestart: true\n"))
	require.NoError(t, err)
	assert.True(t, c.Local.Prestart)
	c, err = ConfigFromYAML([]byte("sandbox:\n  local: {}\n"))
	require.NoError(t, err)
	assert.Nil(t, c.Local.FreshPerCommand, "unset: the driver decides (a session sandbox where bwrap isolates)")
}

// TestConfigCheckpointsOnOff: sandbox.local.checkpoints is written on or
// off, as the docs write it (true and false too).
func TestConfigCheckpointsOnOff(t *testing.T) {
	for doc, want := range map[string]bool{"on": true, "off": false, "true": true, "false": false} {
		c, err := ConfigFromYAML([]byte("sandbox:\n  local:\n    checkpoints: " + doc + "\n"))
		require.NoError(t, err, doc)
		assert.Equal(t, want, c.Local.Checkpoints, doc)
	}
}
