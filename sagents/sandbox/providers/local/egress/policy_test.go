package egress

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPolicyTable(t *testing.T) {
	allow := []string{"example.com", "*.example.com", "api.other.test:8443", "db.test:*", "10.0.0.5:5432", "127.0.0.2:*"}
	deny := []string{"bad.example.com", "*.evil.example.com", "example.com:80", "203.0.113.9"}
	p, err := NewPolicy(allow, deny)
	require.NoError(t, err)
	cases := []struct {
		host string
		port int
		ok   bool
		rule string
	}{
		{"example.com", 443, true, "example.com"},
		{"example.com", 80, false, "example.com:80"}, // deny first
		{"example.com", 22, false, ""},
		{"www.example.com", 443, true, "*.example.com"},
		{"bad.example.com", 443, false, "bad.example.com"},
		{"x.evil.example.com", 443, false, "*.evil.example.com"},
		{"api.other.test", 8443, true, "api.other.test:8443"},
		{"api.other.test", 443, false, ""},
		{"db.test", 5432, true, "db.test:*"},
		{"other.test", 443, false, ""},
		{"10.0.0.5", 5432, true, "10.0.0.5:5432"},
		{"203.0.113.9", 443, false, "203.0.113.9"},
	}
	for _, c := range cases {
		v := p.CheckName(c.host, c.port)
		assert.Equal(t, c.ok, v.Allowed, "%s:%d: %s", c.host, c.port, v.Reason)
		assert.Equal(t, c.rule, v.Rule, "%s:%d", c.host, c.port)
	}
	addrs := []struct {
		ip   string
		port int
		ok   bool
	}{
		{"93.184.216.34", 443, true},
		{"203.0.113.9", 443, false}, // deny by address, whatever the name
		{"127.0.0.1", 443, false},
		{"127.0.0.2", 9999, true}, // named by an allow rule
		{"::ffff:127.0.0.2", 9999, true},
		{"10.0.0.5", 5432, true},
		{"10.0.0.5", 22, false},
		{"169.254.169.254", 80, false},
		{"192.168.1.1", 443, false},
		{"::1", 443, false},
		{"fe80::1", 443, false},
	}
	for _, c := range addrs {
		v := p.CheckAddr(netip.MustParseAddr(c.ip), c.port)
		assert.Equal(t, c.ok, v.Allowed, "%s:%d: %s", c.ip, c.port, v.Reason)
	}
}

func TestSpecialAddr(t *testing.T) {
	cases := map[string]string{
		"8.8.8.8": "", "2606:4700::1111": "", "127.0.0.1": "loopback", "127.9.9.9": "loopback", "::1": "loopback",
		"10.1.1.1": "private", "172.16.0.1": "private", "192.168.0.1": "private", "fd12::1": "private",
		"169.254.1.1": "link-local", "fe80::1": "link-local", "169.254.169.254": "cloud metadata",
		"fd00:ec2::254": "cloud metadata", "100.100.100.200": "cloud metadata", "168.63.129.16": "cloud metadata",
		"0.0.0.0": "unspecified", "::": "unspecified", "100.64.0.1": "shared (CGNAT)", "224.0.0.1": "multicast",
		"255.255.255.255": "broadcast", "::ffff:10.0.0.1": "private", "64:ff9b::7f00:1": "NAT64", "0.1.2.3": "this-network",
	}
	for ip, want := range cases {
		assert.Equal(t, want, SpecialAddr(netip.MustParseAddr(ip)), ip)
	}
}

func TestSplitPort(t *testing.T) {
	for in, want := range map[string]struct {
		host string
		port int
	}{"a.test": {"a.test", 80}, "a.test:81": {"a.test", 81}, "[::1]": {"[::1]", 80}, "[::1]:82": {"::1", 82}} {
		h, p, err := splitPort(in, 80)
		require.NoError(t, err, in)
		assert.Equal(t, want.host, h, in)
		assert.Equal(t, want.port, p, in)
	}
	for _, bad := range []string{"a.test:0", "a.test:x", "::1", "a.test:99999"} {
		_, _, err := splitPort(bad, 80)
		assert.Error(t, err, bad)
	}
	_, _, err := splitPort("a.test", 0)
	assert.Error(t, err, "CONNECT needs a port")
}
