package limits

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox"
)

func TestPrlimitArgs(t *testing.T) {
	l := Limits{CPUTime: 1500e6, MemoryBytes: 64 << 20, Pids: 32, FileSizeBytes: 1 << 20}
	assert.Equal(t, []string{"--core=0:0", "--cpu=3:4", "--as=67108864:67108864", "--fsize=1048576:1048576", "--nproc=32:32"}, l.PrlimitArgs(false))
	assert.Equal(t, []string{"--core=0:0", "--cpu=3:4", "--fsize=1048576:1048576", "--nproc=32:32"}, l.PrlimitArgs(true))
	assert.Equal(t, []string{"--core=0:0"}, Limits{}.PrlimitArgs(false))
	assert.Equal(t, "ulimit -c 0 && ulimit -t 2 && ulimit -v 65536 && ulimit -f 2048 && ulimit -u 32", l.UlimitScript())
}

func TestResolveLimits(t *testing.T) {
	l := Resolve(sandbox.LocalConfig{})
	assert.EqualValues(t, DefaultMemoryLimitMB<<20, l.MemoryBytes)
	assert.Equal(t, DefaultPidsLimit, l.Pids)
	assert.EqualValues(t, DefaultFileSizeLimitMB<<20, l.FileSizeBytes)
	assert.Zero(t, l.CPUTime)
	l = Resolve(sandbox.LocalConfig{MemoryLimitMB: -1, PidsLimit: -1, FileSizeLimitMB: 10})
	assert.Zero(t, l.MemoryBytes)
	assert.Zero(t, l.Pids)
	assert.EqualValues(t, 10<<20, l.FileSizeBytes)
	assert.EqualValues(t, MaxTmpMB<<20, l.TmpBytes)
	assert.EqualValues(t, MaxShmMB<<20, l.ShmBytes)
	l = Resolve(sandbox.LocalConfig{})
	assert.EqualValues(t, MaxTmpMB<<20, l.TmpBytes, "the default memory limit leaves /tmp its own bound")
	assert.EqualValues(t, MaxShmMB<<20, l.ShmBytes)
	l = Resolve(sandbox.LocalConfig{MemoryLimitMB: 100})
	assert.EqualValues(t, 50<<20, l.TmpBytes, "/tmp is memory: at most half the memory limit")
	assert.EqualValues(t, 25<<20, l.ShmBytes, "/dev/shm is memory: at most a quarter of the memory limit")
}
