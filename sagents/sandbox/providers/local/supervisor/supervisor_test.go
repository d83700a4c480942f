//go:build linux

package supervisor

import (
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// The supervisor's init takes over before the linking program's other
// packages initialise only while it imports nothing but early standard
// packages (see the import block): a heavier import (os/exec,
// golang.org/x/sys/unix, ...) would make every session sandbox run the
// init functions of most of the sage binary first.
func TestImportsStayEarly(t *testing.T) {
	allowed := map[string]bool{"encoding/binary": true, "errors": true, "os": true, "runtime": true, "strconv": true,
		"strings": true, "sync": true, "syscall": true, "unsafe": true}
	for _, file := range []string{"supervisor.go", "reap_linux.go", "wire.go", "domain_linux.go", "tag_linux.go",
		"signals_linux.go", "signals_linux_amd64.go", "signals_linux_arm64.go", "signals_linux_other.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !allowed[p] {
				t.Errorf("%s imports %s: keep its imports to %v (the init order, see the import block)", file, p, allowed)
			}
		}
	}
}

// served, the version a pong carries, is Protocol unless a test's
// stale build set it (-ldflags -X).
func TestServedIsProtocol(t *testing.T) {
	if served != strconv.Itoa(Protocol) {
		t.Errorf("served = %q, want Protocol %d", served, Protocol)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=/x", "PATH=/nonexistent:" + dir}
	if got, err := lookPath("tool", env); err != nil || got != exe {
		t.Errorf("lookPath(tool) = %q, %v; want %q", got, err, exe)
	}
	if got, err := lookPath("/bin/sh", env); err != nil || got != "/bin/sh" {
		t.Errorf("lookPath(/bin/sh) = %q, %v", got, err)
	}
	for _, name := range []string{"plain", "missing"} {
		if _, err := lookPath(name, env); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("lookPath(%s): %v, want os.ErrNotExist", name, err)
		}
	}
}

// TestMainUmask: --umask sets the mask every command inherits (the
// sandbox runs no shell in front of the supervisor to set it); a bad
// value or a missing one is refused before anything is served.
func TestMainUmask(t *testing.T) {
	for _, args := range [][]string{
		{"--fd", "3", "--umask", "999"},
		{"--fd", "3", "--umask", "-1"},
		{"--fd", "3", "--umask"},
		{"--fd", "3", "--mask", "077"},
		{"--fd", "3", "--protocol", "1"},
		{"--fd", "3", "--umask", "077", "--protocol"},
	} {
		if got := Main(args); got != ExitFailed {
			t.Errorf("Main(%q) = %d, want %d", args, got, ExitFailed)
		}
	}
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(sp[1])
	syscall.Close(sp[0]) // the host is gone: Main serves nothing and returns
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if got := Main([]string{"--fd", strconv.Itoa(sp[1]), "--umask", "027"}); got != 0 {
		t.Fatalf("Main = %d, want 0", got)
	}
	if got := syscall.Umask(old); got != 0o027 {
		t.Errorf("umask after Main = %03o, want 027", got)
	}
	// Control of the protocol case: this build's own version is served.
	sp, err = syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(sp[1])
	syscall.Close(sp[0])
	if got := Main([]string{"--fd", strconv.Itoa(sp[1]), "--protocol", strconv.Itoa(Protocol)}); got != 0 {
		t.Errorf("Main with --protocol %d = %d, want 0", Protocol, got)
	}
}

// TestMainChannelOnStdin: --fd 0 serves the channel on stdin (a gVisor
// session with checkpoints: runsc restore hands stdin back), moved above
// 2, with /dev/null left on stdin; a ping is answered there.
func TestMainChannelOnStdin(t *testing.T) {
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The old supervisor refused --fd 0: no answer, not a hang.
	syscall.SetsockoptTimeval(sp[0], syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 10})
	saved, err := fcntlDup(0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Dup3(saved, 0, 0); syscall.Close(saved) }()
	if err := syscall.Dup3(sp[1], 0, 0); err != nil {
		t.Fatal(err)
	}
	syscall.Close(sp[1])
	done := make(chan int, 1)
	go func() { done <- Main([]string{"--fd", "0", "--protocol", strconv.Itoa(Protocol)}) }()
	b, _ := Request{Op: "ping", ID: 1}.MarshalBinary()
	if _, err := syscall.Write(sp[0], b); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := syscall.Read(sp[0], buf)
	if err != nil {
		t.Fatalf("no answer on the channel: %v (Main: %v)", err, done)
	}
	var r Reply
	if err := r.UnmarshalBinary(buf[:n]); err != nil || r.Op != "pong" {
		t.Fatalf("reply %+v, %v; want a pong", r, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		t.Errorf("stdin after --fd 0: mode %o, %v; want /dev/null", st.Mode, err)
	}
	syscall.Close(sp[0]) // the host is gone: Main returns
	if got := <-done; got != 0 {
		t.Errorf("Main = %d, want 0", got)
	}
}
