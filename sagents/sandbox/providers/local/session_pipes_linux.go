//go:build linux

package local

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox"
)

// pipes are one command's stdio: the child's ends go to the supervisor,
// the host reads stdout and stderr into bounded buffers.
type pipes struct {
	child          []*os.File // stdin, stdout, stderr of the command
	inW            *os.File
	outR, errR     *os.File
	stdout, stderr *sandbox.BoundedBuffer
	drained        chan struct{}
	stdin          io.Reader
}

func newPipes(opts sandbox.ExecOptions, devnull *os.File) (*pipes, error) {
	p := &pipes{drained: make(chan struct{}), stdin: opts.Stdin}
	var inR *os.File
	var err error
	if f, ok := opts.Stdin.(*os.File); ok && !stdinViaPipe { // a red-team control only
		fd, err := unix.Dup(int(f.Fd()))
		if err != nil {
			return nil, err
		}
		inR, p.stdin = os.NewFile(uintptr(fd), "stdin"), nil
	} else if devnull != nil {
		inR = devnull
	} else if inR, p.inW, err = os.Pipe(); err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeFiles([]*os.File{inR, p.inW})
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles([]*os.File{inR, p.inW, outR, outW})
		return nil, err
	}
	p.child, p.outR, p.errR = []*os.File{inR, outW, errW}, outR, errR
	limit := opts.OutputLimit
	if limit <= 0 {
		limit = sandbox.DefaultOutputLimit
	}
	p.stdout, p.stderr = sandbox.NewBoundedBuffer(limit/2), sandbox.NewBoundedBuffer(limit-limit/2)
	return p, nil
}

func (p *pipes) closeChild() { closeFiles(p.child); p.child = nil }

func (p *pipes) run(opts sandbox.ExecOptions) {
	if p.inW != nil && p.stdin != nil {
		go func() { io.Copy(p.inW, p.stdin); p.inW.Close() }()
	}
	done := make(chan struct{}, 2)
	go func() { sandbox.CopyOutput(p.outR, p.stdout, opts.OnStdout); done <- struct{}{} }()
	go func() { sandbox.CopyOutput(p.errR, p.stderr, opts.OnStderr); done <- struct{}{} }()
	go func() { <-done; <-done; close(p.drained) }()
}

// result collects the output: what the command wrote, and what the pipes
// hold a moment after it exited.
func (p *pipes) result(d time.Duration) *sandbox.CommandResult {
	select {
	case <-p.drained:
	case <-time.After(drainAfterExit):
		p.outR.SetReadDeadline(time.Now())
		p.errR.SetReadDeadline(time.Now())
		<-p.drained
	}
	res := &sandbox.CommandResult{Duration: d}
	res.Stdout, res.StdoutDroppedBytes = p.stdout.Text()
	res.Stderr, res.StderrDroppedBytes = p.stderr.Text()
	res.Truncated = res.StdoutDroppedBytes > 0 || res.StderrDroppedBytes > 0
	return res
}

func (p *pipes) close() {
	closeFiles(p.child)
	p.outR.Close()
	p.errR.Close()
	if p.inW != nil {
		p.inW.Close()
	}
}
