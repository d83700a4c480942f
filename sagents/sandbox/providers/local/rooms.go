package local

import (
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/bwrapargs"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/quota"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/seatbelt"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// SystemPath is a system directory bound read-only into the sandbox, or,
// when Symlink is set, a symlink recreated inside (merged-/usr systems
// have /bin -> usr/bin).
type SystemPath = bwrapargs.SystemPath

// VolumeBind binds a host path (Host) at a path inside (Inside).
type VolumeBind = bwrapargs.VolumeBind

// BwrapOptions is everything BwrapArgs needs; it holds no machine state,
// so the argument list is a pure function of it. Its fields are
// documented in package internal/bwrapargs (Options).
type BwrapOptions = bwrapargs.Options

// BwrapArgs builds the bwrap argument list (without the bwrap binary
// itself and without the command), in the fixed order that package
// internal/bwrapargs documents (Args): namespaces, lifetime,
// environment, capabilities, system directories, /etc and its masked
// secrets, /proc and /dev, /tmp, extra read-only paths, the workspace
// and the mounts, the read-only root, --chdir, seccomp.
func BwrapArgs(o BwrapOptions) []string { return bwrapargs.Args(o) }

// SeatbeltLimitsNote is the one-line caveat for reports of macOS limits:
// ulimit -u sets RLIMIT_NPROC, which macOS counts for every process of
// the user, so the pids limit is not enforced per sandbox there.
const SeatbeltLimitsNote = seatbelt.LimitsNote

// SeatbeltOptions describe a Seatbelt profile: the workspace and the
// session's tmp (read-write), the read-write and read-only mounts, the
// network, and the egress proxies' localhost ports (ProxyPorts).
type SeatbeltOptions = seatbelt.Options

// SeatbeltProfile generates the profile: deny by default; read system
// paths; read and write only the workspace, the session tmp and the
// read-write mounts; execute only system programs and what lives in the
// sandbox's own directories; no network unless enabled, or, with
// ProxyPorts, outbound TCP to those localhost ports only. Every path is
// escaped; a path with a control character is an error.
func SeatbeltProfile(o SeatbeltOptions) (string, error) { return seatbelt.Profile(o) }

// IdmapSummary says, for sage doctor, whether a folder of another owner
// (a root user's project) works as a workspace on dir's file system: as
// root, through an idmapped mount; else why not, with the fix. Off Linux
// it is an error: idmapped workspaces are Linux's.
func IdmapSummary(dir string) (string, error) { return uids.IdmapSummary(dir) }

// DiskQuotaSummary says whether this process can enforce a workspace disk
// quota (sandbox.local.disk_quota_mb, opt-in); off Linux it never can.
func DiskQuotaSummary() (enforced bool, detail string) { return quota.Summary() }
