package testenv

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"testing"
)

// HelperProcess is a test of this test binary run in a process of its
// own: one a test kills with -9, say. Its stderr is this process's, its
// stdout is read a line at a time ([HelperProcess.ReadUntil]), and it
// runs until its stdin closes (if it reads it), it ends, or it is killed.
type HelperProcess struct {
	Cmd   *exec.Cmd
	Stdin io.WriteCloser
	out   io.Reader
	lines *bufio.Scanner
}

// StartHelper runs the test named test (matched as ^test$) of this test
// binary in a new process, with env (K=V) added to this one's; the end of
// t closes its stdin, kills it and waits for it.
func StartHelper(t testing.TB, test string, env ...string) *HelperProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("helper %s: %v", test, err)
	}
	cmd := exec.Command(exe, "-test.run", "^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("helper %s: %v", test, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("helper %s: %v", test, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("helper %s: %v", test, err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return &HelperProcess{Cmd: cmd, Stdin: in, out: out, lines: bufio.NewScanner(out)}
}

// ReadUntil passes each line the helper prints to each until each
// returns false, and then discards what it prints after (so that it never
// blocks on a full pipe); false when its stdout ended first.
func (h *HelperProcess) ReadUntil(each func(line string) bool) bool {
	for h.lines.Scan() {
		if !each(h.lines.Text()) {
			go io.Copy(io.Discard, h.out)
			return true
		}
	}
	return false
}

// Kill9 kills the helper with SIGKILL and waits for it.
func (h *HelperProcess) Kill9() {
	h.Cmd.Process.Kill()
	h.Cmd.Wait()
}
