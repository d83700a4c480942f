package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/sage-go/sage/internal/doctor"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

func init() {
	register(command{"doctor", "check what this machine supports and how to fix what is missing", runDoctor})
}

func runDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage doctor", "sage doctor [--json]")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	r := doctor.Run(ctx, doctor.Env{})
	r.Checks = append(r.Checks, doctor.Check{Name: "local defaults", Status: doctor.OK, Detail: local.DefaultsSummary()})
	le := local.ProbeLimits()
	r.Checks = append(r.Checks, limitsCheck(le))
	r.Checks = append(r.Checks, isolationChecks()...)
	if runtime.GOOS == "linux" {
		g := gvisorCheck(ctx)
		r.Checks = append(r.Checks, g)
		if g.Status == doctor.OK {
			r.Checks = append(r.Checks, gvisorCheckpointsCheck(ctx))
		}
	}
	r.Checks = append(r.Checks, checkpointsCheck())
	var err error
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			doctor.Report
			OK bool `json:"ok"`
			// LimitsEnforced: how local mode's limits hold for this user.
			LimitsEnforced driver.LimitsEnforced `json:"limits_enforced"`
		}{r, r.OK(), le})
	} else {
		err = r.Print(env.stdout)
	}
	if err != nil {
		return fail(env, 1, err)
	}
	if !r.OK() {
		return 1
	}
	return 0
}

// limitsCheck says how local mode's limits hold for the current user: for
// the default limits and a CPU time budget. Limits that would hold per
// process only are a warning, with what local mode then refuses.
func limitsCheck(le driver.LimitsEnforced) doctor.Check {
	c := doctor.Check{Name: "local limits", Status: doctor.OK,
		Detail: fmt.Sprintf("cpu_time=%s memory=%s pids=%s file_size=%s", le.CPUTime, le.Memory, le.Pids, le.FileSize)}
	var refused []string
	if le.CPUTime != driver.EnforcedCgroup {
		refused = append(refused, "--cpu-time N")
	}
	if le.Memory != driver.EnforcedCgroup {
		c.Detail += "; the default memory limit holds per process only (RLIMIT_AS, shared memory not counted)"
		refused = append(refused, "--memory N")
	}
	if len(refused) > 0 {
		c.Status = doctor.Warn
		c.Detail += fmt.Sprintf("; no writable cgroup, so %s cannot hold for a whole command and are refused", strings.Join(refused, " and "))
		c.Fix = "run sage with a writable cgroup (as root, or delegated: systemd-run --user --scope -p Delegate=yes sage ...)"
	}
	return c
}

// isolationChecks report what local mode enforces beyond namespaces: the
// host uid of sandboxed processes, the seccomp filter, what keeps a
// session's commands apart (Landlock), a disk quota.
func isolationChecks() []doctor.Check {
	var out []doctor.Check
	if runtime.GOOS != "linux" {
		return out
	}
	c := doctor.Check{Name: "local uid", Status: doctor.OK, Required: true}
	if d, err := local.RunAsSummary(); err != nil {
		c.Status, c.Detail, c.Fix = doctor.Missing, err.Error(), "set SAGE_LOCAL_UID_RANGE=FIRST:COUNT (default "+driver.DefaultUIDRange+") or add an /etc/subuid range for user sage"
	} else {
		c.Detail = d
	}
	out = append(out, c)
	c = doctor.Check{Name: "seccomp", Status: doctor.OK, Required: true}
	if d, err := local.SeccompSummary(); err != nil {
		c.Status, c.Detail, c.Fix = doctor.Missing, err.Error(), "local mode supports amd64 and arm64"
	} else {
		c.Detail = d
	}
	out = append(out, c)
	c = doctor.Check{Name: "session isolation", Status: doctor.OK}
	if holds, d := local.SessionIsolationSummary(); holds {
		c.Detail = d
	} else {
		c.Status, c.Detail, c.Fix = doctor.Warn, d, "run Linux 6.12 or later (Landlock ABI 6) for per-command domains"
	}
	out = append(out, c)
	out = append(out, idmapCheck())
	c = doctor.Check{Name: "workspace quota", Status: doctor.Warn}
	var enforced bool
	enforced, c.Detail = local.DiskQuotaSummary()
	if enforced {
		c.Status = doctor.OK
	} else {
		c.Fix = "run sage as root on a host with loop devices and mkfs.ext4 (e2fsprogs) to use sandbox.local.disk_quota_mb, or put SAGE_HOME on a size-bounded file system (a quota'd volume) if commands must not fill the disk"
	}
	return append(out, c)
}

// gvisorCheck says whether --isolation gvisor works: optional, so a
// missing runsc is a warning with the fix.
func gvisorCheck(ctx context.Context) doctor.Check {
	c := doctor.Check{Name: "gvisor", Status: doctor.OK}
	d, err := local.GvisorSummary(ctx)
	if err != nil {
		// The error ends with the fix of its cause (not root, no runsc, a
		// runsc too old): doctor shows it as the fix.
		detail, fix, _ := strings.Cut(err.Error(), "; fix: ")
		c.Status, c.Detail, c.Fix = doctor.Warn, detail, "only --isolation gvisor needs it: "+fix
		return c
	}
	c.Detail = d
	return c
}

// idmapCheck says whether, as root, a folder of another owner (a root
// user's project) works as a workspace on SAGE_HOME's file system,
// through an idmapped mount; elsewhere such a folder is refused.
func idmapCheck() doctor.Check {
	c := doctor.Check{Name: "idmapped workspace", Status: doctor.OK}
	if os.Geteuid() != 0 {
		c.Detail = "not needed: as an unprivileged user, commands run as you and your folders stay yours"
		return c
	}
	return summaryCheck(c, func() (string, error) { return local.IdmapSummary(sandbox.Home()) })
}

// gvisorCheckpointsCheck says whether checkpoints work under isolation
// gvisor here and what runsc checkpoint and restore cost (a probe of
// about a second, runsc on a sandbox shaped as a gVisor session's): a
// warning when they would fail, since only checkpoints under gVisor
// need it.
func gvisorCheckpointsCheck(ctx context.Context) doctor.Check {
	return summaryCheck(doctor.Check{Name: "gvisor checkpoints", Status: doctor.OK}, func() (string, error) {
		return local.GvisorCheckpointsSummary(ctx)
	})
}

// checkpointsCheck says whether sandbox.local.checkpoints can work here and
// what a checkpoint covers (files, never processes).
func checkpointsCheck() doctor.Check {
	return summaryCheck(doctor.Check{Name: "checkpoints", Status: doctor.OK}, local.CheckpointsSummary)
}

// summaryCheck is c with the detail summary gives, or, when it fails, a
// warning with the error's detail and its "; fix: " part as the fix.
func summaryCheck(c doctor.Check, summary func() (string, error)) doctor.Check {
	d, err := summary()
	if err != nil {
		detail, fix, _ := strings.Cut(err.Error(), "; fix: ")
		c.Status, c.Detail, c.Fix = doctor.Warn, detail, fix
		return c
	}
	c.Detail = d
	return c
}
