package sandbox

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEgressConfigFromEnvAndYAML(t *testing.T) {
	c, err := configFromLookup(lookupFrom(map[string]string{
		"SAGE_LOCAL_NETWORK":         "allowlist",
		"SAGE_LOCAL_ALLOWED_DOMAINS": "pypi.org, *.pythonhosted.org,,api.example.com:8443",
		"SAGE_LOCAL_DENIED_DOMAINS":  "evil.pythonhosted.org",
	}))
	require.NoError(t, err)
	assert.Equal(t, NetworkAllowlist, c.Local.Network)
	assert.Equal(t, []string{"pypi.org", "*.pythonhosted.org", "api.example.com:8443"}, c.Local.AllowedDomains)
	assert.Equal(t, []string{"evil.pythonhosted.org"}, c.Local.DeniedDomains)

	c, err = ConfigFromYAML([]byte("sandbox:\n  local:\n    network: allowlist\n    allowed_domains: [pypi.org, \"*.example.com:*\"]\n    denied_domains: [x.example.com]\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"pypi.org", "*.example.com:*"}, c.Local.AllowedDomains)
	assert.Equal(t, []string{"x.example.com"}, c.Local.DeniedDomains)
}

func TestEgressConfigNamesTheBadEntry(t *testing.T) {
	_, err := configFromLookup(lookupFrom(map[string]string{
		"SAGE_LOCAL_NETWORK": "allowlist", "SAGE_LOCAL_ALLOWED_DOMAINS": "ok.example,bad domain"}))
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "SAGE_LOCAL_ALLOWED_DOMAINS[1]", ce.Field)
	assert.Equal(t, "bad domain", ce.Value)

	_, err = ConfigFromYAML([]byte("sandbox:\n  local: {network: allowlist, denied_domains: [\"*\"]}\n"))
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "sandbox.local.denied_domains[0]", ce.Field)

	_, err = ConfigFromYAML([]byte("sandbox:\n  local: {network: open, allowed_domains: [pypi.org]}\n"))
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "sandbox.local.allowed_domains", ce.Field)
	assert.Contains(t, err.Error(), "allowlist")

	_, err = ConfigFromYAML([]byte("sandbox:\n  local: {network: sometimes}\n"))
	assert.ErrorContains(t, err, "want off, allowlist or open")
}
