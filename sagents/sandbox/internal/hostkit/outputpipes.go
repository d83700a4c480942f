package hostkit

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Output reads a command's stdout and stderr from two pipes into bounded
// buffers that share one output limit (half each), handing each chunk to
// the callbacks as it arrives. RunProcess uses it, and so can a driver that
// starts its commands another way.
type Output struct {
	outR, errR     *os.File
	stdout, stderr *driver.BoundedBuffer
	drained        chan struct{}
}

// NewOutput makes the two pipes; limit <= 0 means DefaultOutputLimit. Give
// outW and errW to the child as its stdout and stderr and close them once it
// started; then call Start.
func NewOutput(limit int) (o *Output, outW, errW *os.File, err error) {
	if limit <= 0 {
		limit = driver.DefaultOutputLimit
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles([]*os.File{outR, outW})
		return nil, nil, nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	o = &Output{outR: outR, errR: errR, stdout: driver.NewBoundedBuffer(limit / 2), stderr: driver.NewBoundedBuffer(limit - limit/2),
		drained: make(chan struct{})}
	return o, outW, errW, nil
}

// Start reads both pipes until they end (copyOutput); onOut and onErr may
// be nil.
func (o *Output) Start(onOut, onErr func([]byte)) {
	done := make(chan struct{}, 2)
	go func() { copyOutput(o.outR, o.stdout, onOut); done <- struct{}{} }()
	go func() { copyOutput(o.errR, o.stderr, onErr); done <- struct{}{} }()
	go func() { <-done; <-done; close(o.drained) }()
}

// Wait waits, after Start, until both pipes ended or, after d, ends the
// reads (a process that left the command's group may still hold a pipe)
// and waits for them to stop.
func (o *Output) Wait(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-o.drained:
	case <-t.C:
		o.outR.SetReadDeadline(time.Now())
		o.errR.SetReadDeadline(time.Now())
		<-o.drained
	}
}

// Fill sets res's Stdout, Stderr, what each dropped, and Truncated.
func (o *Output) Fill(res *driver.CommandResult) {
	res.Stdout, res.StdoutDroppedBytes = o.stdout.Text()
	res.Stderr, res.StderrDroppedBytes = o.stderr.Text()
	res.Truncated = res.StdoutDroppedBytes > 0 || res.StderrDroppedBytes > 0
}

// Close closes the read ends.
func (o *Output) Close() {
	o.outR.Close()
	o.errR.Close()
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyOutput reads a command's stream r until it ends, keeping what buf
// bounds and handing each chunk to on (when not nil) as it arrives.
func copyOutput(r io.Reader, buf *driver.BoundedBuffer, on func([]byte)) {
	cp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(cp)
	chunk := *cp
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			buf.Write(chunk[:n])
			if on != nil {
				on(chunk[:n])
			}
		}
		if err != nil {
			return
		}
	}
}
