package hostkit

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

func TestOutputSplitsTheLimitAndStreams(t *testing.T) {
	out, outW, errW, err := NewOutput(100)
	require.NoError(t, err)
	defer out.Close()
	cmd := exec.Command("/bin/sh", "-c", `printf '%0200d' 0; printf 'oops' >&2`)
	cmd.Stdout, cmd.Stderr = outW, errW
	require.NoError(t, cmd.Start())
	outW.Close()
	errW.Close()
	var mu sync.Mutex
	var streamed strings.Builder
	out.Start(func(b []byte) { mu.Lock(); streamed.Write(b); mu.Unlock() }, nil)
	require.NoError(t, cmd.Wait())
	out.Wait(10 * time.Second)
	var res driver.CommandResult
	out.Fill(&res)
	want := strings.Repeat("0", 25) + "\n[... 150 bytes omitted ...]\n" + strings.Repeat("0", 25)
	assert.Equal(t, want, res.Stdout, "stdout keeps half of the limit, its first and last quarter")
	assert.Equal(t, int64(150), res.StdoutDroppedBytes)
	assert.Equal(t, "oops", res.Stderr)
	assert.True(t, res.Truncated)
	assert.Equal(t, strings.Repeat("0", 200), streamed.String(), "the callback sees every byte")
}

// A pipe still held open (here by the test itself; in life by a process
// that left the command's group) does not hold Wait past its deadline.
func TestOutputWaitEndsHeldPipes(t *testing.T) {
	out, outW, errW, err := NewOutput(0)
	require.NoError(t, err)
	defer out.Close()
	defer outW.Close()
	defer errW.Close()
	out.Start(nil, nil)
	outW.Write([]byte("partial"))
	start := time.Now()
	out.Wait(50 * time.Millisecond)
	assert.Less(t, time.Since(start), 5*time.Second)
	var res driver.CommandResult
	out.Fill(&res)
	assert.Equal(t, "partial", res.Stdout)
}
