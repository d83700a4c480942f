//go:build !linux

package uids

import (
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// Identity is the host uid a sandbox runs as; only Linux switches uids
// (see uid_linux.go). Elsewhere sandboxed processes run as the caller.
type Identity struct{ UID, GID int }

// Owner: files sage creates stay the caller's (nil).
func (id *Identity) Owner() *hostkit.FileOwner { return nil }

// Idmapped: there are no idmapped workspaces off Linux.
func (id *Identity) Idmapped() bool { return false }

// Access bits for Reachable.
const (
	NeedRead  = 4
	NeedWrite = 2
	NeedExec  = 1
)

// ForSession: commands run as the caller (nil).
func ForSession(string, string) (*Identity, error) { return nil, nil }

// Reachable: the caller reaches what it reaches; nothing to check.
func Reachable(string, *Identity, uint32) error { return nil }

// Credential: no uid switch (nil).
func (id *Identity) Credential() *syscall.Credential { return nil }

// ReachFix: Reachable never refuses off Linux.
func ReachFix(string, error) string { return "" }
