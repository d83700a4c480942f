// Package seatbelt generates the Seatbelt (sandbox-exec) profile that
// confines a command of local mode on macOS: deny by default, reads of
// system paths, writes to the workspace, the session's tmp and the
// read-write mounts only, and no network unless enabled (or only the
// egress proxies' localhost ports). It is plain text generation and
// builds on every platform; the backend that runs sandbox-exec with the
// profile is package internal/isolation's (seatbelt_darwin.go). Package local exports
// Profile as SeatbeltProfile and Options as SeatbeltOptions.
package seatbelt
