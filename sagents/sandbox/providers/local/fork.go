package local

import (
	"os"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// forkIn is what a sandbox opened as a fork on its parent's frozen layers
// holds (fork_linux.go, docs/checkpoints.md "Fork"); nil for any other.
type forkIn struct {
	// ident is, as root, the parent's session uid: the shared layers are
	// its files, and a sandbox's overlay takes only its own uid.
	ident *uids.Identity
	// layers are the parent's frozen layers and base the fork stands on,
	// topmost first, held until the fork lets them go (dropShared).
	layers []*sharedLayer
	// done is called once when the fork lets them go (the parent's count
	// of live forks).
	done func()
	// placeholder is a pooled sandbox's empty folder, bound at the
	// workspace under the overlay; removed at Close.
	placeholder string
	// lock is held (flock) while a pooled sandbox (or the fork that took
	// it) lives: its placeholder, runtime directory and lock file, side by
	// side in SAGE_HOME/runtime, are swept by a later process once no one
	// holds it (sweep_linux.go: a daemon killed with -9).
	lock *os.File
	// upper is a pooled sandbox's layer made ahead for the fork's writes
	// (adopt); 0: none.
	upper int
}

// sharedLayer is a frozen layer directory (its u the overlay's lower)
// that forks stand on: held, its owner's free moves it aside instead of
// removing it, and the last fork's release removes it.
type sharedLayer struct {
	path   string // where it is now (the owner's layers, or set aside)
	refs   int
	orphan bool   // its owner let it go: the last release removes it
	aside  string // the directory it was set aside in (asideDirs); "": none
}

// forkSide is a sandbox's side of its forks: how many stand on its
// layers, and its pool of pre-started sandboxes for them
// (forkpool_linux.go).
type forkSide struct {
	mu   sync.Mutex
	live int
	pool *forkPool
	// size is Options.ForkPool; cfg the sandbox's configuration, the
	// pool's key (a spare is opened with it, on an empty folder).
	size int
	cfg  driver.Config
	opts SessionOptions
}

// forkPool holds pre-started, empty session sandboxes a fork takes.
type forkPool struct {
	size    int
	spares  []*Sandbox
	filling int
	closed  bool
	wg      sync.WaitGroup
	changed chan struct{} // closed and replaced at each change (tests wait on it)
}
