// Package uids says whom a local-mode sandbox runs as. As root, sage
// never runs commands as root: each workspace gets its own unprivileged
// host uid from a range (sandbox.local.uid_range, SAGE_LOCAL_UID_RANGE),
// recorded machine-wide in Registry (uid_linux.go: Identity, ForSession,
// Range); the workspace is chowned to it, or, for a folder of another
// owner (a root user's project), shown to the sandbox through an
// idmapped mount instead (idmap_linux.go: MountIdmapped, SweepIdmapped,
// IdmapSummary). Reachable checks that the uid can reach a path before
// bwrap, running as that uid, binds it, and OpenWorkspace opens the
// workspace without following symlinks, refusing one that is no longer
// the uid's. Off Linux commands run as the caller and this package does
// nothing.
package uids
