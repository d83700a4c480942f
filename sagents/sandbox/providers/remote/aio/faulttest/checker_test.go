package faulttest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func cmd(thread, container, owner string, inv, comp int64) Event {
	return Event{Kind: KindCmd, Thread: thread, Answered: container, Owner: owner, Inv: inv, Comp: comp, OK: true}
}

// A history where nothing goes wrong: a thread moves from one sandbox
// to the next (the first is never heard from again), an owner whose lease
// is seen gone does nothing afterwards, a lock holder calls the backend
// before the next grant, and the sandboxes stay within the bound.
func TestCheckerPassesACleanHistory(t *testing.T) {
	h := []Event{
		cmd("t", "c1", "a", 10, 20),
		cmd("t", "c1", "a", 30, 40),
		cmd("t", "c2", "b", 50, 60),
		cmd("t", "c2", "b", 70, 80),
		{Kind: KindObserve, Absent: []string{"a"}, Inv: 45, Comp: 46},
		{Kind: KindLock, Thread: "t", Token: 1, Inv: 1, Comp: 2},
		{Kind: KindOp, Op: "create", Thread: "t", Token: 1, Owner: "a", Inv: 3, Comp: 9, OK: true},
		{Kind: KindLock, Thread: "t", Token: 2, Inv: 44, Comp: 47},
		{Kind: KindOp, Op: "destroy", Thread: "t", Token: 1, Owner: "a", Inv: 48, Comp: 49, OK: false},
		{Kind: kindSample, N: 2, Inv: 50},
	}
	r := check(h, 2)
	assert.Empty(t, r.Violations, r.String())
}

// Each rule finds the violation it is for.
func TestCheckerFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		rule string
		h    []Event
	}{
		{ruleOneSandbox, []Event{
			cmd("t", "c1", "a", 10, 20), cmd("t", "c2", "b", 30, 40), cmd("t", "c1", "a", 50, 60)}},
		{ruleLostLease, []Event{
			{Kind: KindObserve, Absent: []string{"a"}, Inv: 10, Comp: 11},
			cmd("t", "c1", "a", 12, 20)}},
		{ruleLostLease, []Event{
			{Kind: KindObserve, Absent: []string{"a"}, Inv: 10, Comp: 11},
			{Kind: KindOp, Op: "create", Owner: "a", Inv: 12, Comp: 13, OK: true}}},
		{ruleStaleLock, []Event{
			{Kind: KindLock, Thread: "t", Token: 1, Inv: 1, Comp: 2},
			{Kind: KindLock, Thread: "t", Token: 2, Inv: 10, Comp: 11},
			{Kind: KindOp, Op: "destroy", Thread: "t", Token: 1, Owner: "a", Inv: 12, Comp: 13, OK: true}}},
		{ruleMax, []Event{{Kind: kindSample, N: 3, Inv: 1}}},
	} {
		r := check(tc.h, 2)
		require.Len(t, r.Violations, 1, "%s: %s", tc.rule, r.String())
		assert.Equal(t, tc.rule, r.Violations[0].Rule)
	}
	// What is not definite is not a violation: a command that overlaps
	// the observation, a failed one, an overlapping switch of sandboxes.
	r := check([]Event{
		{Kind: KindObserve, Absent: []string{"a"}, Inv: 10, Comp: 11},
		cmd("t", "c1", "a", 9, 20),
		{Kind: KindCmd, Thread: "t", Answered: "c1", Owner: "a", Inv: 30, Comp: 31},
		cmd("u", "c3", "b", 10, 50), cmd("u", "c4", "b", 20, 30), cmd("u", "c3", "b", 40, 60),
	}, 0)
	assert.Empty(t, r.Violations, r.String())
}

// Histories are read back from every file of a directory, a torn last
// line (a process killed while writing) skipped.
func TestHistoriesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	rec, err := NewRecorder(filepath.Join(dir, "a.jsonl"))
	require.NoError(t, err)
	rec.Add(cmd("t", "c1", "a", 2, 3))
	rec.Add(cmd("t", "c1", "a", 1, 2))
	require.NoError(t, rec.Close())
	f, err := os.OpenFile(filepath.Join(dir, "a.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, _ = f.WriteString(`{"kind":"cmd","thr`)
	f.Close()
	evs, err := readHistories(dir)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.EqualValues(t, 1, evs[0].Inv, "sorted by invocation")
}
