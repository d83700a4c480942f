//go:build !linux

package local

import (
	"errors"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// checkpoints exist on Linux only (checkpoint_linux.go).
type checkpoints struct{}

// gvisorCheckpoints exist on Linux only (checkpoint_gvisor_session_linux.go).
type gvisorCheckpoints struct{}

func (s *Sandbox) setupCheckpoints(cfg driver.Config) error {
	if !cfg.Local.Checkpoints {
		return nil
	}
	return &driver.ConfigError{Field: "sandbox.local.checkpoints", Value: "on",
		Reason: "checkpoints need the bwrap session sandbox on Linux"}
}

func (s *Sandbox) closeCheckpoints() error { return nil }

// CheckpointsSummary: checkpoints need Linux.
func CheckpointsSummary() (string, error) {
	return "", errors.New("checkpoints need Linux (overlayfs in the bwrap session sandbox)")
}
