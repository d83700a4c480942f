//go:build linux

package local

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// pipes are one command's stdio: the child's ends go to the supervisor,
// the host reads stdout and stderr into bounded buffers.
type pipes struct {
	child []*os.File // stdin, stdout, stderr of the command
	inW   *os.File
	out   *hostkit.Output
	stdin io.Reader
}

func newPipes(opts driver.ExecOptions, devnull *os.File) (*pipes, error) {
	p := &pipes{stdin: opts.Stdin}
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
	out, outW, errW, err := hostkit.NewOutput(opts.OutputLimit)
	if err != nil {
		closeFiles([]*os.File{inR, p.inW})
		return nil, err
	}
	p.child, p.out = []*os.File{inR, outW, errW}, out
	return p, nil
}

func (p *pipes) closeChild() { closeFiles(p.child); p.child = nil }

func (p *pipes) run(opts driver.ExecOptions) {
	if p.inW != nil && p.stdin != nil {
		go func() { io.Copy(p.inW, p.stdin); p.inW.Close() }()
	}
	p.out.Start(opts.OnStdout, opts.OnStderr)
}

// result collects the output: what the command wrote, and what the pipes
// hold a moment after it exited.
func (p *pipes) result(d time.Duration) *driver.CommandResult {
	p.out.Wait(drainAfterExit)
	res := &driver.CommandResult{Duration: d}
	p.out.Fill(res)
	return res
}

func (p *pipes) close() {
	closeFiles(p.child)
	p.out.Close()
	if p.inW != nil {
		p.inW.Close()
	}
}

// closeFiles closes the files of fs that are set.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
