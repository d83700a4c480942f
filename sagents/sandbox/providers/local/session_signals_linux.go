//go:build linux

package local

// commandSignals is the bwrap session supervisor's --signals: "on" lets
// a command signal the processes of another command or of a background
// task (kill, kill -0, pkill, kill of a process group, kill -1) through
// the supervisor's relay, which refuses the supervisor and pid 1 as
// targets (supervisor/signals_linux.go); "off" leaves signals scoped to
// each command's Landlock domain (the behaviour of #31). A test's
// control sets "off", or "unguarded" (the relay signals the supervisor
// too), to prove that the tests see the difference.
var commandSignals = "on"
