// Package procfs reads what sage measures about processes from Linux's
// /proc: the fields of /proc/PID/stat, a process's tree of descendants and
// its proportional set size (PSS, /proc/PID/smaps_rollup). Every read is
// bounded (the number of /proc entries scanned, the lines read); a process
// that is gone or unreadable reads as absent or 0. Elsewhere than on Linux
// there is no /proc and every function reports nothing.
package procfs
