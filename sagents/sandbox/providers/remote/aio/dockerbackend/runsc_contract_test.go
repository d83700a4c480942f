package dockerbackend_test

import (
	"testing"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestContractRunsc runs the contract suite through sandboxes of the
// Docker runtime runsc (gVisor). The file API runs inside the sandbox,
// on gVisor's kernel, whose openat(O_NOFOLLOW|O_DIRECTORY) follows
// symlinks: without HostFS's own directory walk the Escapes cases "read
// through dir symlink" and "write through dir symlink" leave the
// workspace (ln -s / root_link; root_link/etc/passwd).
func TestContractRunsc(t *testing.T) {
	f := newFixture(t)
	b := requireRunsc(t, f)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.Backend = b })
	sandboxtest.Run(t, sandboxtest.Options{
		New: contractNew(p, "contract-runsc-"),
		// gVisor's processes do not show in this host's /proc.
		NoTaskPIDs: true,
	})
}
