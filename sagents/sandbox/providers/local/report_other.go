//go:build !linux

package local

import "fmt"

// RunAsSummary says which uid local commands run as: the caller's.
func RunAsSummary() (string, error) {
	return "commands run as you (Seatbelt does not switch users)", nil
}

// SeccompSummary: there is no seccomp off Linux.
func SeccompSummary() (string, error) {
	return "", fmt.Errorf("seccomp is Linux only")
}

// SessionIsolationSummary: there is no session sandbox off Linux.
func SessionIsolationSummary() (holds bool, detail string) {
	return false, "the session sandbox is Linux only"
}
