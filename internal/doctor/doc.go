// Package doctor checks what this machine supports for sagents sandboxes
// and services, and says how to fix what is missing. `sage doctor` prints
// its report.
package doctor
