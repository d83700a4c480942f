// Package passthrough registers the "passthrough" sandbox mode: commands
// run directly on the host with /bin/sh -c, in the workspace, with an
// allowlisted environment. There is NO isolation: a command can read and
// write anything the calling user can. It exists for debugging; file
// operations still go through the sandbox path mapper, so the file API
// cannot leave the workspace and mounts, but commands can.
//
// Mounts are honoured by the file API only: commands see host paths.
// The provider refuses to start when SAGE_SERVER_PROCESS=1, so servers do
// not run model-written commands unisolated by accident.
//
// An anonymous sandbox's runtime directory (SAGE_HOME/runtime/pt-ID: code
// files, background tasks' logs) goes at Close; one a process killed with
// -9 left is removed by the next process's first anonymous open there
// (sweep_unix.go), where SAGE_HOME can be written (sandboxd in a Pod,
// as a uid that cannot, opens without the lock). The background tasks of a killed process are not
// stopped by it: they run in process groups of their own.
package passthrough
