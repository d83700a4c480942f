package aiodriver

import (
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// omittedMarker is how sandboxd (driver.BoundedBuffer) marks dropped
// output; other servers' markers are not recognised.
var omittedMarker = regexp.MustCompile(`\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n`)

func toResult(r *aioapi.BashExecResult, d time.Duration) *driver.CommandResult {
	res := &driver.CommandResult{Stdout: deref(r.Stdout), Stderr: deref(r.Stderr), Duration: d}
	res.StdoutDroppedBytes = droppedBytes(res.Stdout)
	res.StderrDroppedBytes = droppedBytes(res.Stderr)
	res.Truncated = res.StdoutDroppedBytes > 0 || res.StderrDroppedBytes > 0
	res.ExitCode, res.Signal = exitStatus(r.Status, r.ExitCode)
	switch r.Status {
	case aioapi.StatusTimedOut:
		res.TimedOut = true
	case aioapi.StatusCompleted:
		res.Success = res.ExitCode == 0 && res.Signal == ""
	}
	return res
}

// exitStatus maps the API's exit code onto the shell convention: a
// negative code (Python's convention for "ended by signal n", which
// sandboxd follows) becomes 128+n and the signal's name.
func exitStatus(status string, code *int) (int, string) {
	switch {
	case code != nil && *code < 0:
		sig := syscall.Signal(-*code)
		return 128 - *code, hostkit.SignalName(sig)
	case code != nil:
		return *code, ""
	case status == aioapi.StatusKilled || status == aioapi.StatusTimedOut:
		return 128 + int(syscall.SIGKILL), "SIGKILL"
	}
	return -1, ""
}

func droppedBytes(s string) int64 {
	m := omittedMarker.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
