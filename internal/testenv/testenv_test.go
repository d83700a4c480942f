package testenv

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The helper's two outcomes are observed in a child test process, since a
// failing or skipping t cannot be inspected from inside.
func TestMissing(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Missing(t, "widget", "install widget")
		t.Log("not reached")
		return
	}
	for _, tc := range []struct {
		allow    string
		wantFail bool
		wantText string
	}{
		{"", true, "widget unavailable; fix: install widget (or set SAGE_TEST_ALLOW_SKIP=1"},
		{"0", true, "fix: install widget"},
		{"1", false, "--- SKIP: TestMissing"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", AllowSkipEnv+"="+tc.allow)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail {
			t.Errorf("%s=%q: failed=%v, want %v\n%s", AllowSkipEnv, tc.allow, failed, tc.wantFail, out)
		}
		if !strings.Contains(string(out), tc.wantText) || strings.Contains(string(out), "not reached") {
			t.Errorf("%s=%q: output lacks %q or went on after Missing:\n%s", AllowSkipEnv, tc.allow, tc.wantText, out)
		}
	}
}

func TestCommandFindsSh(t *testing.T) {
	if p := Command(t, "sh", "install a shell"); !strings.HasSuffix(p, "/sh") {
		t.Errorf("Command(sh) = %q", p)
	}
}

// Buffer is written by several goroutines while it is read (-race checks
// that it is safe), and keeps every write.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Fatalf("%d bytes kept, want 800", got)
	}
}

func TestServeConns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	t.Run("serve", func(t *testing.T) {
		ServeConns(t, ln, func(c net.Conn) {
			served.Add(1)
			c.Write([]byte("hi\n"))
		})
		for range 3 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(c) // ends when the handler's connection is closed
			c.Close()
			if err != nil || string(b) != "hi\n" {
				t.Fatalf("read %q, %v", b, err)
			}
		}
	})
	if n := served.Load(); n != 3 {
		t.Fatalf("%d connections served, want 3", n)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("the listener is still open after the test ended")
	}
}
