package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// Labels and annotations on the objects this backend creates.
const (
	labelManagedBy      = "app.kubernetes.io/managed-by"
	labelName           = "app.kubernetes.io/name"
	labelSandbox        = "sage.dev/sandbox"
	labelThread         = "sage.dev/thread"
	annotationSandboxID = "sage.dev/sandbox-id"
	annotationThreadID  = "sage.dev/thread-id"
	annotationOwner     = "sage.dev/owner"
	annotationActivity  = "sage.dev/last-activity"
	// annotationFence is the fencing token of the thread lock the Pod
	// was created or last adopted under (orchestrator.Fence); a call
	// under an older token may not delete or adopt it.
	annotationFence = "sage.dev/fence"

	managedBy   = "sage-provisioner"
	appName     = "sage-sandbox"
	portName    = "http"
	containerNm = "sandbox"
)

var (
	dnsLabel     = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelValue   = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// objectName is the Pod's and the Service's name for a sandbox id:
// prefix-id when that is a valid DNS-1035 label of at most 63 characters,
// else prefix-h<first 20 hex digits of sha256(id)>.
func objectName(prefix, id string) string {
	n := prefix + "-" + id
	if len(n) <= 63 && dnsLabel.MatchString(n) {
		return n
	}
	return prefix + "-h" + hash(id)[:20]
}

// labelFor is id itself when it is a valid label value, else h<hash>.
func labelFor(id string) string {
	if len(id) <= 63 && labelValue.MatchString(id) {
		return id
	}
	return "h" + hash(id)[:40]
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
