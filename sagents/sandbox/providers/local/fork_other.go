//go:build !linux

package local

import "context"

// Forks stand on checkpoint layers, which exist on Linux only.
func (s *Sandbox) closeFork(context.Context) {}
func (s *Sandbox) closeForkEnd()             {}
func (s *Sandbox) refill()                   {}
func evacuate(string)                        {}
