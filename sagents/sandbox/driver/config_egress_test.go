package driver

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseEgressRule(t *testing.T) {
	cases := []struct {
		in   string
		want string // canonical form
		wild bool
		ip   bool
		port int
	}{
		{"example.com", "example.com", false, false, 0},
		{"Example.COM.", "example.com", false, false, 0},
		{"*.example.com", "*.example.com", true, false, 0},
		{"api.example.com:8443", "api.example.com:8443", false, false, 8443},
		{"*.example.com:*", "*.example.com:*", true, false, AnyPort},
		{"localhost", "localhost", false, false, 0},
		{"127.0.0.2:*", "127.0.0.2:*", false, true, AnyPort},
		{"10.1.2.3", "10.1.2.3", false, true, 0},
		{"::1", "::1", false, true, 0},
		{"[::1]:8080", "[::1]:8080", false, true, 8080},
		{"[::ffff:127.0.0.1]", "127.0.0.1", false, true, 0},
		{"under_score.example", "under_score.example", false, false, 0},
	}
	for _, c := range cases {
		r, err := ParseEgressRule(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, r.String(), c.in)
		assert.Equal(t, c.wild, r.Wildcard, c.in)
		assert.Equal(t, c.ip, r.IP.IsValid(), c.in)
		assert.Equal(t, c.port, r.Port, c.in)
		assert.Equal(t, c.in, r.Text)
	}
	for _, bad := range []string{"", "*", "*.com", "*.127.0.0.1", "example.com:0", "example.com:65536", "example.com:http",
		"example.com:080", "ex ample.com", "-bad.example", "a..b", "[::1", "[::1]x", "exa/mple.com", "http://example.com",
		"example.com:", strings.Repeat("a", 64) + ".com", "1.2.3.4.5"} {
		_, err := ParseEgressRule(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestEgressRuleMatch(t *testing.T) {
	cases := []struct {
		rule, host string
		port       int
		deny, want bool
	}{
		{"example.com", "example.com", 443, false, true},
		{"example.com", "example.com", 80, false, true},
		{"example.com", "example.com", 22, false, false},
		{"example.com", "example.com", 22, true, true},
		{"example.com", "www.example.com", 443, false, false},
		{"example.com", "badexample.com", 443, false, false},
		{"*.example.com", "www.example.com", 443, false, true},
		{"*.example.com", "a.b.example.com", 443, false, true},
		{"*.example.com", "example.com", 443, false, false},
		{"*.example.com", "wwwexample.com", 443, false, false},
		{"example.com:8443", "example.com", 8443, false, true},
		{"example.com:8443", "example.com", 443, false, false},
		{"example.com:8443", "example.com", 443, true, false},
		{"example.com:*", "example.com", 5432, false, true},
		{"127.0.0.2:*", "127.0.0.2", 9, false, true},
		{"127.0.0.2", "127.0.0.3", 443, false, false},
	}
	for _, c := range cases {
		r, err := ParseEgressRule(c.rule)
		require.NoError(t, err)
		host, err := NormalizeHost(c.host)
		require.NoError(t, err)
		got := r.MatchHost(host) && r.MatchPort(c.port, c.deny)
		assert.Equal(t, c.want, got, "%s vs %s:%d deny=%v", c.rule, c.host, c.port, c.deny)
	}
}

// FuzzParseEgressRule: the parser never panics, and what it accepts
// round-trips through its canonical form to the same rule.
func FuzzParseEgressRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "[::1]:*", "10.0.0.1", "a_b.c:65535", "*.", "[", ":", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseEgressRule(s)
		if err != nil {
			return
		}
		back, err := ParseEgressRule(r.String())
		if err != nil {
			t.Fatalf("%q -> %q does not parse: %v", s, r.String(), err)
		}
		back.Text = r.Text
		if back != r {
			t.Fatalf("%q -> %+v -> %q -> %+v", s, r, r.String(), back)
		}
		if h, err := NormalizeHost(r.Host); err != nil || h != r.Host {
			t.Fatalf("%q: host %q is not normal (%q, %v)", s, r.Host, h, err)
		}
	})
}

// FuzzNormalizeHost: a normalized host is stable and never holds
// characters that could split a header or a URL.
func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"Example.COM.", "[::1]", "a\r\nb", "x y", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := NormalizeHost(s)
		if err != nil {
			return
		}
		if again, err := NormalizeHost(h); err != nil || again != h {
			t.Fatalf("%q -> %q -> %q, %v", s, h, again, err)
		}
		if strings.ContainsAny(h, "\r\n /?#@") {
			t.Fatalf("%q -> %q holds a separator", s, h)
		}
	})
}
