package sandbox

import (
	"os"
	"sort"
	"strings"
)

// DefaultPath is PATH when the parent has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// allowedEnv reports whether a parent variable may pass into a sandbox:
// PATH, LANG, LC_*, TERM, TZ, TMPDIR and SSL_CERT_*. Everything else,
// secrets included, stays outside.
func allowedEnv(name string) bool {
	switch name {
	case "PATH", "LANG", "TERM", "TZ", "TMPDIR":
		return true
	}
	return strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "SSL_CERT_")
}

// Environ builds a sandbox environment: the allowlisted variables of the
// parent (from parent, or os.Environ() when nil), then HOME, then extra.
// The result is sorted and has one entry per name.
func Environ(parent []string, home string, extra map[string]string) []string {
	if parent == nil {
		parent = os.Environ()
	}
	vars := map[string]string{"PATH": DefaultPath}
	for _, kv := range parent {
		k, v, ok := strings.Cut(kv, "=")
		if ok && allowedEnv(k) {
			vars[k] = v
		}
	}
	if home != "" {
		vars["HOME"] = home
	}
	for k, v := range extra {
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// ValidEnvName reports whether name can be an environment variable name.
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		ok := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// NewID returns prefix-<12 random hex digits>, a valid sandbox id.
func NewID(prefix string) string { return prefix + "-" + randomHex(6) }
