package hostkit

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
