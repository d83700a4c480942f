//go:build !linux

package main

import "os"

// The session sandbox, and so its supervisor, is Linux only.
func main() {
	os.Stderr.WriteString("sage-supervisor: the session sandbox runs on Linux only\n")
	os.Exit(2)
}
