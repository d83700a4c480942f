//go:build !linux

package local

import (
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// diskQuota: no workspace quota off Linux.
type diskQuota struct{}

// setupQuota refuses a configured quota: it cannot be enforced here.
func setupQuota(cfg driver.Config, _ string, _ *identity) (*diskQuota, error) {
	if cfg.Local.DiskQuotaMB == 0 && cfg.Local.DiskQuotaInodes == 0 {
		return nil, nil
	}
	return nil, &driver.ConfigError{Field: "sandbox.local.disk_quota_mb", Value: strconv.Itoa(cfg.Local.DiskQuotaMB),
		Reason: "cannot be enforced: a workspace quota needs Linux (a loop-mounted file system as root); fix: set it to 0"}
}

func (q *diskQuota) release() error { return nil }

func (q *diskQuota) abandon() {}
