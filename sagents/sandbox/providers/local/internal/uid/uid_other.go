//go:build !linux

package local

import (
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// identity is the host uid a sandbox runs as; only Linux switches uids
// (see uid_linux.go). Elsewhere sandboxed processes run as the caller.
type identity struct{ uid, gid int }

func (id *identity) owner() *hostkit.FileOwner { return nil }

func (id *identity) idmapped() bool { return false }

const (
	needRead  = 4
	needWrite = 2
	needExec  = 1
)

func sessionIdentity(string, string) (*identity, error) { return nil, nil }

func reachable(string, *identity, uint32) error { return nil }

func (id *identity) credential() *syscall.Credential { return nil }

func reachFix(string, error) string { return "" }
