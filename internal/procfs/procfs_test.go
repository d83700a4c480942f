package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/sage-go/sage/internal/testenv"
)

func TestProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, ok := Stat(os.Getpid()); ok {
			t.Fatal("Stat read something without /proc")
		}
		return
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	f, ok := Stat(cmd.Process.Pid)
	if !ok || len(f) < 20 {
		t.Fatalf("Stat(child) = %v, %v", f, ok)
	}
	if f[1] != strconv.Itoa(os.Getpid()) {
		t.Errorf("child's parent %s, want %d", f[1], os.Getpid())
	}
	if _, ok := Stat(0); ok {
		t.Error("Stat(0) read something")
	}
	tree := Tree(os.Getpid())
	if tree[0] != os.Getpid() || !slices.Contains(tree, cmd.Process.Pid) {
		t.Errorf("Tree(self) = %v, want self first and child %d", tree, cmd.Process.Pid)
	}
	if slices.Contains(Tree(cmd.Process.Pid), os.Getpid()) {
		t.Error("the parent is in the child's tree")
	}
	self, child := PSS(os.Getpid()), PSS(cmd.Process.Pid)
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		testenv.Missing(t, "/proc/PID/smaps_rollup", "run on Linux 4.14 or later")
	}
	if self <= 0 || child <= 0 {
		t.Fatalf("PSS self %d, child %d: want both > 0", self, child)
	}
	if sum := TreePSS(os.Getpid()); sum < self+child {
		t.Errorf("TreePSS(self) = %d < self %d + child %d", sum, self, child)
	}
}
