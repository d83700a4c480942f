package dockerbackend

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/docker/docker/api/types/filters"
)

// Installation is the installation id this backend labels and filters by.
func (b *Backend) Installation() string { return b.o.Installation }

// installationFor is the default installation id of a SAGE_HOME: the
// first 12 hex digits of sha256 of its absolute path.
func installationFor(home string) string {
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	sum := sha256.Sum256([]byte(home))
	return hex.EncodeToString(sum[:6])
}

// errForeign is returned (wrapped, matching fs.ErrPermission) when a
// container with this backend's name belongs to another prefix or
// installation.
var errForeign = fmt.Errorf("docker: container belongs to another deployment: %w", fs.ErrPermission)

// ours reports whether a container carries this backend's prefix and
// installation labels.
func (b *Backend) ours(labels map[string]string) bool {
	return labels[LabelManaged] == "1" && labels[LabelPrefix] == b.o.Prefix && labels[LabelInstallation] == b.o.Installation
}

// scope filters by this backend's prefix and installation labels.
func (b *Backend) scope() []filters.KeyValuePair {
	return []filters.KeyValuePair{filters.Arg("label", LabelManaged+"=1"),
		filters.Arg("label", LabelPrefix+"="+b.o.Prefix), filters.Arg("label", LabelInstallation+"="+b.o.Installation)}
}
