// Package bwrapargs builds the bubblewrap (bwrap) argument list of a
// local-mode sandbox in one place, as a pure function of Options: the
// namespaces, the lifetime flags, the environment, the dropped
// capabilities, the read-only system, the masked secrets of /etc, /proc,
// /dev, a size-bounded /dev/shm and /tmp, the workspace and the mounts,
// and the seccomp filter, always in the same order (Args). It runs
// nothing and reads nothing from the machine; the bwrap backend of
// package internal/isolation (bwrap_linux.go) finds the system paths,
// opens the descriptors and starts bwrap. Package local exports Args as BwrapArgs and Options as
// BwrapOptions.
package bwrapargs
