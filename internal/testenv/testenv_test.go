package testenv

import (
	"os"
	"os/exec"
	"strings"
	"sync"
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
