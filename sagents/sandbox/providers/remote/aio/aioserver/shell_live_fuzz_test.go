package aioserver

import (
	"bytes"
	"testing"
)

// FuzzShellMarker: however a live shell's output is cut into chunks, the
// command gets exactly the bytes before its marker and the status line
// is what follows it; output that looks like part of the marker passes.
func FuzzShellMarker(f *testing.F) {
	f.Add([]byte("hello\n"), []byte{1, 3})
	f.Add([]byte("__sage_end_"), []byte{5})
	f.Add([]byte("x__sage_end_m-1__"), []byte{0, 2, 9})
	f.Add([]byte(""), []byte{})
	f.Fuzz(func(t *testing.T, out, cuts []byte) {
		marker := []byte("__sage_end_m-1234__ ")
		if bytes.Contains(out, marker) {
			return
		}
		stream := append(append(append([]byte{}, out...), marker...), "0 /x\n"...)
		var got []byte
		p := &shellProc{marker: marker, ended: make(chan struct{})}
		p.sink = func(b []byte) { got = append(got, b...) }
		prev := 0
		for _, c := range cuts {
			at := prev + int(c)
			if at > len(stream) {
				break
			}
			p.output(stream[prev:at])
			prev = at
		}
		p.output(stream[prev:])
		select {
		case <-p.ended:
		default:
			t.Fatalf("marker not found in %q", stream)
		}
		if !bytes.Equal(got, out) {
			t.Fatalf("command output %q, want %q", got, out)
		}
		if string(p.after) != "0 /x\n" {
			t.Fatalf("after the marker %q", p.after)
		}
	})
}

// FuzzANSIQuote: the $'...' text of a command is one line, and decoding
// it as bash does gives the command back.
func FuzzANSIQuote(f *testing.F) {
	f.Add("echo 'a\\b'\nexit 3\t\x7f")
	f.Fuzz(func(t *testing.T, s string) {
		q := ansiQuote(s)
		if bytes.ContainsAny([]byte(q), "\n\r") {
			t.Fatalf("quoted text spans lines: %q", q)
		}
		if got := unANSI(q); got != s {
			t.Fatalf("round trip %q -> %q -> %q", s, q, got)
		}
	})
}

// unANSI decodes the subset of $'...' that ansiQuote writes.
func unANSI(q string) string {
	q = q[2 : len(q)-1]
	var b []byte
	for i := 0; i < len(q); i++ {
		if q[i] != '\\' {
			b = append(b, q[i])
			continue
		}
		i++
		if q[i] == 'x' {
			var v byte
			for _, h := range q[i+1 : i+3] {
				v = v*16 + byte(bytes.IndexByte([]byte("0123456789abcdef"), byte(h)))
			}
			b = append(b, v)
			i += 2
			continue
		}
		b = append(b, q[i])
	}
	return string(b)
}
