package archtest

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const localPkg = userPkg + "/providers/local"

// localRooms are the rooms of local mode: the packages below
// providers/local, each a concern of its own (providers/local/doc.go has
// the map), with the other rooms each may import. A room's own subtree
// (seccomp/internal/int80) is part of it. Package local, the root, imports
// the rooms; no room imports the root.
var localRooms = map[string][]string{
	"egress":             nil,
	"internal/bwrapargs": nil,
	// the isolation backends: bwrap's arguments, the cgroups and rlimits
	// commands are born in, their uid, the seccomp filter, the Seatbelt
	// profile, the network bridge commands run behind
	"internal/isolation": {"internal/bwrapargs", "internal/limits", "internal/memfd", "internal/uids", "seccomp",
		"internal/seatbelt", "netbridge"},
	"internal/layers":   nil,
	"internal/limits":   {"supervisor"}, // the cgroup thread starts off the main thread as the supervisor does
	"internal/memfd":    nil,
	"internal/quota":    {"internal/uids"}, // the image and its mount belong to the workspace's uid
	"internal/seatbelt": nil,
	"internal/uids":     nil,
	"netbridge":         nil,
	"seccomp":           {"internal/memfd"},
	"supervisor":        nil,
}

// localRoom names the room path belongs to ("" when none is declared);
// ok is false for a package outside providers/local or the root itself.
func localRoom(rooms map[string][]string, path string) (room string, ok bool) {
	if !under(path, localPkg) || path == localPkg {
		return "", false
	}
	for r := range rooms {
		if under(path, localPkg+"/"+r) && len(r) > len(room) {
			room = r
		}
	}
	return room, true
}

// localRoomViolation says why the import of imp by from breaks the
// one-way rooms of local mode, "" when it does not:
//   - no room imports the root package local;
//   - a room imports another room only as rooms declares.
func localRoomViolation(rooms map[string][]string, from, imp string) string {
	fromRoom, ok := localRoom(rooms, from)
	if !ok || fromRoom == "" {
		return ""
	}
	if imp == localPkg {
		return "a room never imports package local (the root imports the rooms)"
	}
	impRoom, ok := localRoom(rooms, imp)
	if !ok || impRoom == fromRoom || slices.Contains(rooms[fromRoom], impRoom) {
		return ""
	}
	return "rooms import each other only as localRooms declares"
}

// localRoomErrors checks every import of pkgs; seen counts the packages
// of each declared room it met. A package below providers/local in no
// declared room is an error: a new room is declared, with its imports.
func localRoomErrors(rooms map[string][]string, pkgs []pkg) (errs []string, seen map[string]int) {
	seen = map[string]int{}
	for _, p := range pkgs {
		room, ok := localRoom(rooms, p.ImportPath)
		if !ok {
			continue
		}
		if room == "" {
			errs = append(errs, strings.TrimPrefix(p.ImportPath, module)+": not a declared room of local mode; add it to localRooms with the rooms it imports")
			continue
		}
		seen[room]++
		for _, imp := range p.Imports {
			if why := localRoomViolation(rooms, p.ImportPath, imp); why != "" {
				errs = append(errs, strings.TrimPrefix(p.ImportPath, module)+" imports "+strings.TrimPrefix(imp, module)+": "+why)
			}
		}
	}
	return errs, seen
}

// TestLocalRooms: the rooms of providers/local import each other only as
// declared and never the root package (localRoomViolation), and every
// declared room exists.
func TestLocalRooms(t *testing.T) {
	errs, seen := localRoomErrors(localRooms, list(t, "./sagents/sandbox/providers/local/..."))
	assert.Empty(t, errs)
	names := make([]string, 0, len(localRooms))
	for r := range localRooms {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		require.NotZero(t, seen[r], "room %s not listed: the check would see nothing of it (remove it from localRooms if it is gone)", r)
	}
}

// TestLocalRoomsControl feeds the check a synthetic import graph in which
// each rule is broken once, beside imports that are allowed: every
// violation is found, and only those.
func TestLocalRoomsControl(t *testing.T) {
	rooms := map[string][]string{"internal/a": {"internal/b"}, "internal/b": nil, "pub": nil}
	a, b, pub := localPkg+"/internal/a", localPkg+"/internal/b", localPkg+"/pub"
	pkgs := []pkg{
		{ImportPath: localPkg, Imports: []string{a, b, pub, driverPkg}},
		{ImportPath: a, Imports: []string{"os", driverPkg, b, a + "/sub"}},
		{ImportPath: a + "/sub", Imports: []string{a, localPkg}},
		{ImportPath: b, Imports: []string{a, pub}},
		{ImportPath: pub, Imports: []string{userPkg}},
		{ImportPath: localPkg + "/internal/c", Imports: []string{localPkg}},
		{ImportPath: module + "cmd/sage", Imports: []string{localPkg, pub}},
	}
	errs, seen := localRoomErrors(rooms, pkgs)
	assert.ElementsMatch(t, []string{
		"sagents/sandbox/providers/local/internal/a/sub imports sagents/sandbox/providers/local: a room never imports package local (the root imports the rooms)",
		"sagents/sandbox/providers/local/internal/b imports sagents/sandbox/providers/local/internal/a: rooms import each other only as localRooms declares",
		"sagents/sandbox/providers/local/internal/b imports sagents/sandbox/providers/local/pub: rooms import each other only as localRooms declares",
		"sagents/sandbox/providers/local/internal/c: not a declared room of local mode; add it to localRooms with the rooms it imports",
	}, errs)
	assert.Equal(t, map[string]int{"internal/a": 2, "internal/b": 1, "pub": 1}, seen)
}
