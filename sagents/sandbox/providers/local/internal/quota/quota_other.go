//go:build !linux

package quota

import (
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// Disk: no workspace quota off Linux.
type Disk struct{}

// Setup refuses a configured quota: it cannot be enforced here.
func Setup(cfg driver.Config, _ string, _ *uids.Identity) (*Disk, error) {
	if cfg.Local.DiskQuotaMB == 0 && cfg.Local.DiskQuotaInodes == 0 {
		return nil, nil
	}
	return nil, &driver.ConfigError{Field: "sandbox.local.disk_quota_mb", Value: strconv.Itoa(cfg.Local.DiskQuotaMB),
		Reason: "cannot be enforced: a workspace quota needs Linux (a loop-mounted file system as root); fix: set it to 0"}
}

// Release: there is nothing to release.
func (q *Disk) Release() error { return nil }

// Abandon: there is nothing to abandon.
func (q *Disk) Abandon() {}

// Summary: no workspace quota is enforced.
func Summary() (enforced bool, detail string) {
	return false, "not enforced: only each file's size (ulimit -f) is bounded"
}
