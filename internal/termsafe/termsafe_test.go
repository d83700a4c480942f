package termsafe

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"file.txt", "file.txt"},
		{"dir-1_2/x+y=z,w:v@host", "dir-1_2/x+y=z,w:v@host"},
		{"résumé-日本.md", "résumé-日本.md"},
		{"a#b~c", "a#b~c"},
		{"", "''"},
		{"a b", "'a b'"},
		{"#x", "'#x'"},
		{"it's", `'it'\''s'`},
		{"\x1b[2J", `$'\033''[2J'`},
		{"a\rb", `'a'$'\r''b'`},
		{"a\nb", `'a'$'\n''b'`},
		{"bell\x07", `'bell'$'\a'`},
		{"bad\xff\xfe", `'bad'$'\377\376'`},
		{"x\x01", `'x'$'\001'`},
		{"rlo\u202etxt", `'rlo'$'\342\200\256''txt'`},
		{"q'\n", `'q'\'$'\n'`},
	} {
		if got := Name(c.in); got != c.want {
			t.Errorf("Name(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	assert := func(in, want string) {
		t.Helper()
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	assert("open x: no such file", "open x: no such file")
	assert("tab\there", "tab\there")
	assert("evil \x1b]0;title\x07 name\n", `evil \033]0;title\a name\n`)
	assert("bad \xff", `bad \377`)
}

// TestNameRoundTripsThroughBash checks that bash reads the quoted form
// back as the original bytes.
func TestNameRoundTripsThroughBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash not found (needed to check the quoting)")
	}
	names := []string{"plain", "a b", "it's", "\x1b[2J", "a\rb\nc", "\x07", "bad\xff", "x'\x01'y", "#h", "~t", "$HOME", "`id`", "\u202e"}
	var script strings.Builder
	for _, n := range names {
		script.WriteString("printf '%s\\0' " + Name(n) + "\n")
	}
	out, err := exec.Command(bash, "-c", script.String()).Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(names) {
		t.Fatalf("bash printed %d names, want %d: %q", len(got), len(names), got)
	}
	for i, n := range names {
		if got[i] != n {
			t.Errorf("bash read %s back as %q, want %q", Name(n), got[i], n)
		}
	}
}

// decode reads Name's output back (the subset of shell syntax it emits).
func decode(t *testing.T, q string) string {
	var b strings.Builder
	for len(q) > 0 {
		switch {
		case strings.HasPrefix(q, "$'"):
			end := strings.IndexByte(q[2:], '\'')
			if end < 0 {
				t.Fatalf("unterminated $'")
			}
			esc := q[2 : 2+end]
			q = q[3+end:]
			for len(esc) > 0 {
				if esc[0] != '\\' || len(esc) < 2 {
					t.Fatalf("bad escape in %q", esc)
				}
				switch esc[1] {
				case 'a', 'b', 'f', 'n', 'r', 't', 'v':
					b.WriteByte(map[byte]byte{'a': 7, 'b': 8, 'f': 12, 'n': 10, 'r': 13, 't': 9, 'v': 11}[esc[1]])
					esc = esc[2:]
				default:
					v, err := strconv.ParseUint(esc[1:4], 8, 8)
					if err != nil {
						t.Fatalf("bad octal in %q", esc)
					}
					b.WriteByte(byte(v))
					esc = esc[4:]
				}
			}
		case strings.HasPrefix(q, "'"):
			end := strings.IndexByte(q[1:], '\'')
			if end < 0 {
				t.Fatalf("unterminated '")
			}
			b.WriteString(q[1 : 1+end])
			q = q[2+end:]
		case strings.HasPrefix(q, `\'`):
			b.WriteByte('\'')
			q = q[2:]
		default:
			return b.String() + q // a plain name
		}
	}
	return b.String()
}

func FuzzName(f *testing.F) {
	for _, s := range []string{"a", "a b", "\x1b[2J", "\r\n", "\xff", "'", "x'\x01", "\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Name(s)
		if !utf8.ValidString(q) {
			t.Fatalf("Name(%q) = %q is not UTF-8", s, q)
		}
		for _, r := range q {
			if !unicode.IsPrint(r) {
				t.Fatalf("Name(%q) = %q holds non-printable %U", s, q, r)
			}
		}
		if got := decode(t, q); got != s {
			t.Fatalf("Name(%q) = %s decodes to %q", s, q, got)
		}
		txt := Text(s)
		for _, r := range txt {
			if r != '\t' && !unicode.IsPrint(r) {
				t.Fatalf("Text(%q) = %q holds non-printable %U", s, txt, r)
			}
		}
	})
}
