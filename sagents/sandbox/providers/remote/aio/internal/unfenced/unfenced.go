// Package unfenced is a test-only switch that turns the aio provider's
// fencing off, so that a fault test's control run shows its checker
// finds what fencing prevents. Only code inside the aio tree can import
// it; nothing there sets it but the fault test's host program when it is
// asked to run as the control.
//
// With Off set, leases behave as before issue 35: a lock's holder
// measures its validity from the arrival of each renewal's answer and
// looks only at its renewal ticks; a process does not stop using its
// sandboxes when its owner lease lapses; and backends compare no fencing
// token before they create, destroy, adopt or claim.
package unfenced

import "sync/atomic"

// Off disables fencing (see the package doc). The zero value is fenced.
var Off atomic.Bool
