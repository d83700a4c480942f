package local

import (
	"context"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/bwrapargs"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
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

// GvisorOptions is everything GvisorSpec needs; like BwrapOptions it holds
// no machine state, so the spec is a pure function of it. Its fields are
// documented in package internal/isolation.
type GvisorOptions = isolation.GvisorOptions

// GvisorSpec builds the OCI runtime spec runsc runs: a root of its own
// (system directories and /etc bound read-only, /etc secrets masked), the
// workspace and mounts bound, a private size-bounded /tmp and /dev/shm,
// no capabilities, no new privileges, the limits as rlimits. Mounts are
// in the order that makes later ones cover earlier ones.
func GvisorSpec(o GvisorOptions) *specs.Spec { return isolation.GvisorSpec(o) }

// GvisorSummary says whether isolation gvisor works here, for sage
// doctor: the runsc it would use and its version, or why not.
//
// Its error names the fix too: run as root, install runsc, or a newer
// one, as the cause is. Off Linux it is an error: gVisor runs on Linux
// only.
func GvisorSummary(ctx context.Context) (string, error) { return isolation.GvisorSummary(ctx) }
