//go:build linux

package hostkit

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackgroundLaunchSignal: a task whose Launch has Signal gets every
// signal through it (SIGTERM, then SIGKILL once its leader ended), and
// none goes to the process group of the pid Run reported (a pid of
// another pid namespace, say gVisor's, names an unrelated host process).
// The control: without Signal the same launch kills that group.
func TestBackgroundLaunchSignal(t *testing.T) {
	for _, withSignal := range []bool{true, false} {
		bystander := exec.Command("sleep", "30")
		bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, bystander.Start())
		exited := make(chan struct{})
		go func() { bystander.Wait(); close(exited) }()
		t.Cleanup(func() { bystander.Process.Kill() })

		var mu sync.Mutex
		var got []syscall.Signal
		end := make(chan struct{})
		var once sync.Once
		l := Launch{Run: func(context.Context, *os.File) (int, func() (int, string), error) {
			return bystander.Process.Pid, func() (int, string) {
				select {
				case <-end:
				case <-exited:
				}
				return 143, "SIGTERM"
			}, nil
		}}
		if withSignal {
			l.Signal = func(sig syscall.Signal) {
				mu.Lock()
				got = append(got, sig)
				mu.Unlock()
				once.Do(func() { close(end) })
			}
		}
		b := NewBackground(t.TempDir(), 100*time.Millisecond)
		task, err := b.Start(context.Background(), l)
		require.NoError(t, err)
		require.NoError(t, b.KillBackground(context.Background(), task.ID, false))
		if withSignal {
			mu.Lock()
			assert.Equal(t, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}, got)
			mu.Unlock()
			select {
			case <-exited:
				t.Fatal("a signal reached the process group of the reported pid")
			case <-time.After(200 * time.Millisecond):
			}
		} else {
			select {
			case <-exited: // the control: the group got the signal
			case <-time.After(5 * time.Second):
				t.Fatal("without Signal the reported group should have been signalled: the test proves nothing")
			}
		}
	}
}
