package seatbelt

import (
	"fmt"
	"sort"
	"strings"
)

// Limits on macOS. Seatbelt confines what a command may touch, not how
// much it may use; the limits come from the shell's ulimit run before the
// command (limits.Limits.UlimitScript), so they are per-process rlimits. One of
// them is weaker than its name: `ulimit -u` sets RLIMIT_NPROC, which macOS
// checks against every process of the user, not of the sandbox. It caps
// the user's total (a sandbox may be refused a fork because of unrelated
// processes, and sandboxes of one user share the budget), so the pids
// limit is NOT enforced per sandbox on macOS. LimitsNote says so
// wherever limits are reported.

// LimitsNote is the one-line caveat for reports of macOS limits.
const LimitsNote = "pids limit not enforced per sandbox on macOS: ulimit -u (RLIMIT_NPROC) counts every process of the user"

// Options describe a Seatbelt profile.
type Options struct {
	Workspace string   // read-write
	Tmp       string   // the session's private tmp, read-write
	ReadWrite []string // read-write mounts
	ReadOnly  []string // read-only mounts and interpreters
	Network   bool
	// ProxyPorts are the localhost ports of the egress proxies (network
	// allowlist): the only network a command may use. Ignored with Network.
	ProxyPorts []int
}

// seatbeltSystemRead are the system paths any program needs to read.
var seatbeltSystemRead = []string{
	"/Library/Apple", "/Library/Frameworks", "/Library/Preferences", "/System", "/bin", "/dev",
	"/opt/homebrew", "/private/etc", "/private/var/db/dyld", "/private/var/db/timezone",
	"/sbin", "/usr",
}

// seatbeltExec are where programs may be executed from.
var seatbeltExec = []string{"/bin", "/opt/homebrew", "/sbin", "/usr"}

// Profile generates the profile: deny by default; read system
// paths; read and write only the workspace, the session tmp and the
// read-write mounts; execute only system programs and what lives in the
// sandbox's own directories; no network unless enabled, or, with
// ProxyPorts, outbound TCP to those localhost ports only. Every path is
// escaped; a path with a control character is an error.
func Profile(o Options) (string, error) {
	var b strings.Builder
	b.WriteString("(version 1)\n(deny default)\n")
	b.WriteString("(allow process-fork)\n(allow signal (target same-sandbox))\n")
	b.WriteString("(allow sysctl-read)\n(allow file-read-metadata)\n")
	b.WriteString("(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\"))\n")
	b.WriteString("(allow ipc-posix-shm-read-data (ipc-posix-name \"apple.shm.notification_center\"))\n")
	rw := append([]string{o.Workspace, o.Tmp}, o.ReadWrite...)
	sort.Strings(rw[2:])
	ro := append([]string{}, o.ReadOnly...)
	sort.Strings(ro)
	sections := []struct {
		rule  string
		paths []string
	}{
		{"file-read*", append(append([]string{}, seatbeltSystemRead...), append(rw, ro...)...)},
		{"file-write*", rw},
		{"process-exec", append(append([]string{}, seatbeltExec...), append(rw, ro...)...)},
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "(allow %s\n", s.rule)
		for _, p := range s.paths {
			q, err := sbString(p)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  (subpath %s)\n", q)
		}
		if s.rule == "file-write*" {
			b.WriteString("  (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/stdout\") (literal \"/dev/stderr\")\n")
		}
		b.WriteString(")\n")
	}
	switch {
	case o.Network:
		b.WriteString("(allow network*)\n(allow system-socket)\n")
		b.WriteString("(allow mach-lookup (global-name \"com.apple.dnssd.service\") (global-name \"com.apple.SystemConfiguration.configd\"))\n")
	case len(o.ProxyPorts) > 0:
		writeProxyRules(&b, o.ProxyPorts)
	}
	return b.String(), nil
}

// writeProxyRules allows outbound connections to the proxies' localhost
// ports and nothing else: no DNS (the proxy resolves), no other port.
func writeProxyRules(b *strings.Builder, ports []int) {
	b.WriteString("(allow network-outbound\n")
	for _, p := range ports {
		fmt.Fprintf(b, "  (remote tcp \"localhost:%d\")\n", p)
	}
	b.WriteString(")\n")
}

// sbString quotes a path as a Seatbelt (SBPL) string literal.
func sbString(p string) (string, error) {
	if p == "" || !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("local: seatbelt: path %q must be absolute", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("local: seatbelt: path %q has a control character", p)
		}
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(p) + `"`, nil
}
