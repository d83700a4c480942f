package seatbelt

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestSeatbeltProfileGolden(t *testing.T) {
	cases := map[string]Options{
		"basic": {Workspace: "/Users/me/.sage/sessions/s1/workspace", Tmp: "/Users/me/.sage/sessions/s1/runtime/tmp"},
		"mounts_network": {Workspace: "/w", Tmp: "/t", ReadWrite: []string{"/data/out"},
			ReadOnly: []string{"/data/in", "/opt/python3.12"}, Network: true},
		"allowlist": {Workspace: "/w", Tmp: "/t", ProxyPorts: []int{53128, 51080}},
		"escaping":  {Workspace: `/Users/me/my "quoted" dir`, Tmp: `/tmp/back\slash`, ReadOnly: []string{"/Users/me/ünï cødé ✓"}},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Profile(o)
			require.NoError(t, err)
			golden := filepath.Join("testdata", "seatbelt", name+".sb")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -run Seatbelt -update to create the golden files")
			assert.Equal(t, string(want), got)
		})
	}
}

func TestSeatbeltRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"relative", "/new\nline", "/nul\x00", ""} {
		_, err := Profile(Options{Workspace: p, Tmp: "/t"})
		assert.Error(t, err, "%q", p)
	}
	_, err := Profile(Options{Workspace: "/w", Tmp: "/t", ReadOnly: []string{"/x\"); (allow default) (\""}})
	assert.NoError(t, err, "quotes are escaped, not rejected")
}

func TestSeatbeltQuoting(t *testing.T) {
	q, err := sbString(`/a "b" \c`)
	require.NoError(t, err)
	assert.Equal(t, `"/a \"b\" \\c"`, q)
}

// The tests below check what the generated profile means, not how it
// reads: they parse the SBPL into s-expressions and evaluate a small model
// of Seatbelt's matching (an operation is allowed when an allow rule for it,
// or for a wildcard like file-write*, has no filter or a matching one;
// everything else falls to (deny default)).

// sexp is an SBPL form: an atom, a string literal or a list.
type sexp struct {
	atom   string
	str    *string
	list   []sexp
	isList bool
}

func parseSBPL(t *testing.T, src string) []sexp {
	t.Helper()
	p := &sbplParser{src: src}
	var forms []sexp
	for {
		p.space()
		if p.i >= len(p.src) {
			return forms
		}
		f, err := p.form()
		require.NoError(t, err, "profile does not parse at byte %d:\n%s", p.i, src)
		forms = append(forms, f)
	}
}

type sbplParser struct {
	src string
	i   int
}

func (p *sbplParser) space() {
	for p.i < len(p.src) {
		switch c := p.src[p.i]; {
		case c == ' ' || c == '\n' || c == '\t':
			p.i++
		case c == ';': // comment to end of line
			for p.i < len(p.src) && p.src[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func (p *sbplParser) form() (sexp, error) {
	p.space()
	if p.i >= len(p.src) {
		return sexp{}, errors.New("unexpected end")
	}
	switch p.src[p.i] {
	case '(':
		p.i++
		out := sexp{isList: true}
		for {
			p.space()
			if p.i >= len(p.src) {
				return sexp{}, errors.New("unclosed list")
			}
			if p.src[p.i] == ')' {
				p.i++
				return out, nil
			}
			f, err := p.form()
			if err != nil {
				return sexp{}, err
			}
			out.list = append(out.list, f)
		}
	case ')':
		return sexp{}, errors.New("unexpected )")
	case '"':
		p.i++
		var b strings.Builder
		for p.i < len(p.src) {
			c := p.src[p.i]
			p.i++
			switch c {
			case '\\':
				if p.i >= len(p.src) {
					return sexp{}, errors.New("dangling backslash")
				}
				b.WriteByte(p.src[p.i])
				p.i++
			case '"':
				s := b.String()
				return sexp{str: &s}, nil
			default:
				b.WriteByte(c)
			}
		}
		return sexp{}, errors.New("unterminated string")
	}
	start := p.i
	for p.i < len(p.src) && !strings.ContainsRune(" \n\t()\";", rune(p.src[p.i])) {
		p.i++
	}
	return sexp{atom: p.src[start:p.i]}, nil
}

// rule is one (allow OP FILTER...) or (deny OP ...) form.
type rule struct {
	action, op string
	filters    []sexp
}

type sbProfile struct {
	version string
	rules   []rule
}

func compile(t *testing.T, o Options) sbProfile {
	t.Helper()
	src, err := Profile(o)
	require.NoError(t, err)
	var prof sbProfile
	for _, f := range parseSBPL(t, src) {
		require.True(t, f.isList && len(f.list) >= 2 && f.list[0].atom != "", "unexpected top-level form %+v", f)
		head := f.list[0].atom
		if head == "version" {
			prof.version = f.list[1].atom
			continue
		}
		require.Contains(t, []string{"allow", "deny"}, head, "top-level form %q", head)
		prof.rules = append(prof.rules, rule{action: head, op: f.list[1].atom, filters: f.list[2:]})
	}
	return prof
}

// opMatches: "file-write*" covers "file-write-data"; "network*" covers
// every network operation; "default" covers everything.
func opMatches(ruleOp, op string) bool {
	if ruleOp == "default" || ruleOp == op {
		return true
	}
	prefix, ok := strings.CutSuffix(ruleOp, "*")
	return ok && strings.HasPrefix(op, prefix)
}

// filterMatches evaluates the filters the generator uses against a path
// (file operations) or a "host:port" (network operations).
func filterMatches(t *testing.T, f sexp, arg string) bool {
	t.Helper()
	require.True(t, f.isList && len(f.list) >= 2, "filter %+v", f)
	str := func(i int) string {
		require.NotNil(t, f.list[i].str, "filter %s wants a string", f.list[0].atom)
		return *f.list[i].str
	}
	switch f.list[0].atom {
	case "subpath":
		p := str(1)
		return arg == p || strings.HasPrefix(arg, strings.TrimSuffix(p, "/")+"/")
	case "literal":
		return arg == str(1)
	case "remote":
		// (remote tcp|ip "HOST:PORT"), either part possibly "*".
		require.Len(t, f.list, 3)
		if proto := f.list[1].atom; proto != "tcp" && proto != "ip" {
			return false
		}
		rh, rp, _ := strings.Cut(str(2), ":")
		ah, ap, _ := strings.Cut(arg, ":")
		return (rh == "*" || rh == ah) && (rp == "*" || rp == ap)
	case "global-name", "ipc-posix-name", "target":
		return false // not a path or address
	}
	t.Fatalf("filter %q is not understood by this test: teach it before using it", f.list[0].atom)
	return false
}

// allowed reports whether op on arg is allowed: the last matching rule
// wins, and (deny default) must be the first.
func (p sbProfile) allowed(t *testing.T, op, arg string) bool {
	t.Helper()
	verdict := false
	for _, r := range p.rules {
		if !opMatches(r.op, op) {
			continue
		}
		match := len(r.filters) == 0
		for _, f := range r.filters {
			if filterMatches(t, f, arg) {
				match = true
			}
		}
		if match {
			verdict = r.action == "allow"
		}
	}
	return verdict
}

func TestSeatbeltProfileDeniesByDefault(t *testing.T) {
	p := compile(t, Options{Workspace: "/w", Tmp: "/t"})
	assert.Equal(t, "1", p.version)
	require.NotEmpty(t, p.rules)
	assert.Equal(t, rule{action: "deny", op: "default", filters: nil}, rule{action: p.rules[0].action, op: p.rules[0].op, filters: nil},
		"the first rule must be (deny default)")
	assert.Empty(t, p.rules[0].filters)
	for _, r := range p.rules[1:] {
		assert.NotEqual(t, "default", r.op, "no rule but the first may be about default")
		// Unconditional allows are few and reviewed: anything broader must
		// carry filters.
		if len(r.filters) == 0 {
			assert.Contains(t, []string{"process-fork", "sysctl-read", "file-read-metadata"}, r.op,
				"unconditional (allow %s)", r.op)
		}
	}
	for _, op := range []string{"process-exec", "file-write-data", "file-read-data", "network-outbound", "network-bind",
		"mach-priv-task-port", "iokit-open", "system-socket"} {
		assert.False(t, p.allowed(t, op, "/Users/me/elsewhere"), "%s outside the sandbox", op)
	}
}

func TestSeatbeltProfileFileRules(t *testing.T) {
	o := Options{Workspace: "/Users/me/.sage/sessions/s1/workspace", Tmp: "/Users/me/.sage/sessions/s1/runtime/tmp",
		ReadWrite: []string{"/data/out"}, ReadOnly: []string{"/data/in"}}
	p := compile(t, o)
	write := func(path string) bool { return p.allowed(t, "file-write-data", path) }
	read := func(path string) bool { return p.allowed(t, "file-read-data", path) }
	exec := func(path string) bool { return p.allowed(t, "process-exec", path) }

	for _, dir := range []string{o.Workspace, o.Tmp, "/data/out"} {
		assert.True(t, write(dir+"/f"), "write in %s", dir)
		assert.True(t, write(dir+"/a/b/c"), "write deep in %s", dir)
		assert.True(t, read(dir+"/f"), "read in %s", dir)
	}
	for _, path := range []string{"/data/in/f", "/Users/me/.ssh/authorized_keys", "/Users/me/.sage/sessions/s2/workspace/f",
		"/Users/me/.sage/sessions/s1/runtime/state", o.Workspace + "2/f", "/private/tmp/f", "/tmp/f", "/etc/hosts",
		"/private/etc/sudoers", "/usr/local/bin/x", "/Library/LaunchAgents/x.plist", "/dev/disk0"} {
		assert.False(t, write(path), "write %s", path)
	}
	for _, dev := range []string{"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr"} {
		assert.True(t, write(dev), "write %s", dev)
	}
	assert.True(t, read("/data/in/f"), "read-only mounts are readable")
	assert.True(t, read("/usr/lib/libSystem.B.dylib"))
	for _, path := range []string{"/Users/me/.ssh/id_ed25519", "/Users/me/Documents/x", "/Users/me/.sage/sessions/s2/workspace/f",
		"/private/var/root/x", "/Volumes/ext/x"} {
		assert.False(t, read(path), "read %s", path)
	}
	assert.True(t, exec("/usr/bin/python3"))
	assert.True(t, exec(o.Workspace+"/a.out"), "programs the sandbox builds may run")
	assert.False(t, exec("/Users/me/bin/tool"))
	assert.False(t, exec("/Applications/Terminal.app/Contents/MacOS/Terminal"))
}

func TestSeatbeltProfileNetworkRules(t *testing.T) {
	ops := []string{"network-outbound", "network-inbound", "network-bind"}
	t.Run("off", func(t *testing.T) {
		p := compile(t, Options{Workspace: "/w", Tmp: "/t"})
		for _, op := range ops {
			for _, addr := range []string{"localhost:53", "localhost:3128", "93.184.216.34:443", "*:*"} {
				assert.False(t, p.allowed(t, op, addr), "%s %s", op, addr)
			}
		}
		assert.False(t, p.allowed(t, "system-socket", ""))
	})
	t.Run("allowlist: only the proxy ports", func(t *testing.T) {
		p := compile(t, Options{Workspace: "/w", Tmp: "/t", ProxyPorts: []int{53128, 51080}})
		assert.True(t, p.allowed(t, "network-outbound", "localhost:53128"))
		assert.True(t, p.allowed(t, "network-outbound", "localhost:51080"))
		for _, addr := range []string{"localhost:53", "localhost:80", "localhost:5312", "localhost:531280", "127.0.0.1:22",
			"93.184.216.34:443", "93.184.216.34:53128", "*:53"} {
			assert.False(t, p.allowed(t, "network-outbound", addr), "outbound %s", addr)
		}
		assert.False(t, p.allowed(t, "network-bind", "localhost:53128"))
		assert.False(t, p.allowed(t, "network-inbound", "localhost:53128"))
		assert.False(t, p.allowed(t, "mach-lookup", "com.apple.dnssd.service"), "no DNS: the proxy resolves")
	})
	t.Run("open", func(t *testing.T) {
		p := compile(t, Options{Workspace: "/w", Tmp: "/t", Network: true, ProxyPorts: []int{53128}})
		for _, op := range ops {
			assert.True(t, p.allowed(t, op, "93.184.216.34:443"), op)
		}
	})
}

func TestSeatbeltProfileQuotingKeepsMeaning(t *testing.T) {
	ws := `/Users/me/my "quoted" dir`
	tmp := `/tmp/back\slash`
	evil := `/x"); (allow default) (allow file-write* (subpath "/`
	p := compile(t, Options{Workspace: ws, Tmp: tmp, ReadOnly: []string{evil}})
	assert.True(t, p.allowed(t, "file-write-data", ws+"/f"))
	assert.True(t, p.allowed(t, "file-write-data", tmp+"/f"))
	assert.False(t, p.allowed(t, "file-write-data", `/Users/me/my `))
	assert.False(t, p.allowed(t, "file-write-data", "/etc/passwd"), "a path cannot inject rules")
	assert.True(t, p.allowed(t, "file-read-data", evil+"/f"), "the odd path is one literal string")
	for _, r := range p.rules[1:] {
		assert.NotEqual(t, "default", r.op)
	}
}

func TestSBPLParser(t *testing.T) {
	forms := parseSBPL(t, "(a \"b\\\"c\" (d)) ; comment\n(e)")
	require.Len(t, forms, 2)
	assert.Equal(t, "a", forms[0].list[0].atom)
	assert.Equal(t, `b"c`, *forms[0].list[1].str)
	assert.Equal(t, "d", forms[0].list[2].list[0].atom)
	for _, bad := range []string{"(a", `(a "b)`, ")"} {
		p := &sbplParser{src: bad}
		_, err := p.form()
		assert.Error(t, err, bad)
	}
}
