// Package faulttest is the aio orchestrator's fault test across several
// hosts, in the manner of Jepsen: three "hosts" (containers on a private
// Docker network, each running the faulthost program's sage processes)
// acquire, use and release sandboxes for a shared set of threads against
// one Redis and the Docker Engine, while a nemesis partitions a host from
// Redis, pauses it longer than a lease, kills its processes with SIGKILL
// and restarts Redis. Every process appends what it did and saw to a
// history (Event, one JSON object a line); check reads the histories and
// reports the violations it finds:
//
//   - at every moment at most one sandbox serves a thread;
//   - no command ran, and no sandbox was created, adopted or claimed, by a
//     process whose owner lease had ended, and no create, destroy, adopt
//     or claim was made under a thread lock after a newer holder took it;
//   - max_sandboxes was never exceeded;
//   - after the leases expired and one sweep ran, nothing of a dead owner
//     is left (containers, pool slots, saved state, locks, leases,
//     counts, cgroups).
//
// The test in this package builds the images from the tree (FROM
// scratch: the faulthost binary; Debian's redis-server with the
// libraries it links; the sandbox image), runs once fenced, where it must
// find nothing, and once with fencing off (the control), where it must
// find violations, so the checker is known to see them.
//
// The API is what the faulthost program needs to write a history:
// Recorder (NewRecorder), Event, Now and the Kind* values of the events a
// host records. Reading histories back and checking them (check, the
// rules) is this package's own, used by its test.
package faulttest
