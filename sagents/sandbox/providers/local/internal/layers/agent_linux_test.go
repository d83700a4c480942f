//go:build linux

package layers

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// shell is a bwrap sandbox made as local mode makes its session sandbox
// (a user namespace, a nested one by --disable-userns, no capability),
// running a shell that runs each line it reads and prints a line "--"
// after it.
type shell struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startShell(t *testing.T, ws string, cred *syscall.Credential) *shell {
	t.Helper()
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal("bwrap: ", err)
	}
	cmd := exec.Command(bw, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--as-pid-1",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", ws, "/workspace", "--remount-ro", "/", "--cap-drop", "ALL",
		"--chdir", "/", "sh", "-c", `while read -r l; do sh -c "$l" 2>&1; echo --; done`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &shell{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	if got := sh.run(t, "echo up"); got != "up\n" {
		t.Fatalf("sandbox: %q", got)
	}
	return sh
}

func (s *shell) run(t *testing.T, line string) string {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for {
		l, err := s.out.ReadString('\n')
		if err != nil {
			t.Fatalf("sandbox output: %v (%q)", err, b.String())
		}
		if l == "--\n" {
			return b.String()
		}
		b.WriteString(l)
	}
}

// pid is the sandbox's init (bwrap's child, the shell).
func (s *shell) pid(t *testing.T) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", s.cmd.Process.Pid, s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, f := range strings.Fields(string(b)) {
		pid, _ = strconv.Atoi(f)
	}
	if pid == 0 {
		t.Fatal("no child of bwrap")
	}
	return pid
}

func agentExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := openTempDir(t)
	p := filepath.Join(dir, Name)
	if err := os.Link(exe, p); err != nil { // protected_hardlinks: a copy
		b, err := os.ReadFile(exe)
		if err == nil {
			err = os.WriteFile(p, b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestMountInSandbox: the agent replaces a running sandbox's workspace
// bind with an overlay of host layers, which the sandbox's commands see
// and write to (into the upper, not the lower), and a freeze makes the
// mount read-only for them, refused (EBUSY) while a file is open for
// writing.
func TestMountInSandbox(t *testing.T) {
	root := openTempDir(t)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	}
	dirs := map[string]string{}
	for _, d := range []string{"base", "l1", "upper", "work"} {
		dirs[d] = filepath.Join(root, d)
		os.Mkdir(dirs[d], 0o755)
		if cred != nil {
			os.Chown(dirs[d], 65534, 65534)
		}
	}
	os.WriteFile(filepath.Join(dirs["base"], "a"), []byte("base a\n"), 0o644)
	os.WriteFile(filepath.Join(dirs["l1"], "b"), []byte("l1 b\n"), 0o644)
	sh := startShell(t, dirs["base"], cred)
	bw, _ := exec.LookPath("bwrap")
	a, err := Start(StartOptions{Bwrap: bw, Exe: agentExe(t), Pid: sh.pid(t), Cred: cred, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ms, err := a.Mount(Layout{Lowers: []string{dirs["l1"], dirs["base"]}, Upper: dirs["upper"], Work: dirs["work"], Target: "/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	defer m.Close()
	if got := sh.run(t, "cat /workspace/a /workspace/b; echo new > /workspace/c; rm /workspace/a; ls /workspace"); got != "base a\nl1 b\nb\nc\n" {
		t.Fatalf("inside: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dirs["base"], "a")); err != nil {
		t.Fatalf("the lower layer changed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dirs["upper"], "c")); string(b) != "new\n" {
		t.Fatalf("upper c: %q", b)
	}
	// The host sees the same state through the mount's descriptor.
	if b, err := os.ReadFile(filepath.Join("/proc/self/fd", strconv.Itoa(int(m.Fd())), "c")); err != nil || string(b) != "new\n" {
		t.Fatalf("host view: %q %v", b, err)
	}
	// The writer opens the file in its own time: wait (10 s at most) until
	// it holds it, or the freeze may come first and succeed.
	sh.run(t, "sleep 30 >> /workspace/c & w=$!; echo $w > /tmp/writer; i=0; "+
		"until ls -l /proc/$w/fd 2>/dev/null | grep -q /workspace/c || [ $i -ge 1000 ]; do sleep 0.01; i=$((i+1)); done")
	if err := a.Freeze("/workspace"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("freeze with a writer: %v, want EBUSY", err)
	}
	sh.run(t, "kill $(cat /tmp/writer); while kill -0 $(cat /tmp/writer) 2>/dev/null; do sleep 0.01; done")
	if err := a.Freeze("/workspace"); err != nil {
		t.Fatal(err)
	}
	if got := sh.run(t, "echo x > /workspace/d"); !strings.Contains(got, "Read-only") {
		t.Fatalf("write after freeze: %q", got)
	}
}

// openTempDir is a temporary directory others may traverse (the sandbox's
// uid, as root): t.TempDir's parent is 0700.
func openTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "sage-layers-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestSwapInSandbox: a swap freezes the live mount and mounts a new
// overlay on top in one request; while a file is open for writing it is
// EBUSY, and a bad layer fails, both leaving the live mount as it was and
// writable; then the frozen upper is a lower of the new mount, whose
// writes go to the new upper.
func TestSwapInSandbox(t *testing.T) {
	root := openTempDir(t)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	}
	dirs := map[string]string{}
	for _, d := range []string{"base", "u1", "w1", "u2", "w2"} {
		dirs[d] = filepath.Join(root, d)
		os.Mkdir(dirs[d], 0o755)
		if cred != nil {
			os.Chown(dirs[d], 65534, 65534)
		}
	}
	sh := startShell(t, dirs["base"], cred)
	bw, _ := exec.LookPath("bwrap")
	a, err := Start(StartOptions{Bwrap: bw, Exe: agentExe(t), Pid: sh.pid(t), Cred: cred, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ms, err := a.Mount(Layout{Lowers: []string{dirs["base"]}, Upper: dirs["u1"], Work: dirs["w1"], Target: "/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	closeFiles(ms)
	sh.run(t, "echo one > /workspace/a")
	next := Layout{Lowers: []string{dirs["u1"], dirs["base"]}, Upper: dirs["u2"], Work: dirs["w2"], Target: "/workspace"}
	sh.run(t, "sleep 30 >> /workspace/a & w=$!; echo $w > /tmp/writer; i=0; "+
		"until ls -l /proc/$w/fd 2>/dev/null | grep -q /workspace/a || [ $i -ge 1000 ]; do sleep 0.01; i=$((i+1)); done")
	if _, err := a.Swap([]string{"/workspace"}, next); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("swap with a writer: %v, want EBUSY", err)
	}
	sh.run(t, "kill $(cat /tmp/writer); while kill -0 $(cat /tmp/writer) 2>/dev/null; do sleep 0.01; done")
	bad := next
	bad.Lowers = []string{filepath.Join(root, "missing"), dirs["base"]}
	if _, err := a.Swap([]string{"/workspace"}, bad); err == nil {
		t.Fatal("swap with a missing layer worked")
	}
	if got := sh.run(t, "echo two >> /workspace/a && cat /workspace/a"); got != "one\ntwo\n" {
		t.Fatalf("after the failed swaps the mount is not the writable old one: %q", got)
	}
	ms, err = a.Swap([]string{"/workspace"}, next)
	if err != nil {
		t.Fatal(err)
	}
	closeFiles(ms)
	if got := sh.run(t, "echo three >> /workspace/a && cat /workspace/a"); got != "one\ntwo\nthree\n" {
		t.Fatalf("after the swap: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dirs["u1"], "a")); string(b) != "one\ntwo\n" {
		t.Fatalf("the frozen upper changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dirs["u2"], "a")); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("the new upper: %q", b)
	}
}
