package aiodriver

import "context"

// maxEndedTasks bounds the ended background tasks a Handle remembers (so
// their output can still be read); beyond it, ended ones are forgotten,
// and their sessions closed, when new tasks start.
const maxEndedTasks = 64

// maxTaskChecks bounds the status requests of one RunningTasks call;
// beyond it, unchecked tasks count as running.
const maxTaskChecks = 32

// pruneTasksLocked forgets ended tasks beyond maxEndedTasks (which ones
// is unspecified) and closes their sessions in the background. h.mu is
// held.
func (h *Handle) pruneTasksLocked() {
	var ended []string
	for id, t := range h.tasks {
		if t.ended.Load() {
			ended = append(ended, id)
		}
	}
	if len(ended) <= maxEndedTasks {
		return
	}
	for _, id := range ended[:len(ended)-maxEndedTasks] {
		delete(h.tasks, id)
		h.lanes.discard(id)
	}
}

// RunningTasks counts the background tasks that may still run, asking
// the server about each one not known to have ended. A failed status read
// counts as running.
func (h *Handle) RunningTasks(ctx context.Context) int {
	h.mu.Lock()
	var open []*bgTask
	for _, t := range h.tasks {
		if !t.ended.Load() {
			open = append(open, t)
		}
	}
	h.mu.Unlock()
	n := 0
	for i, t := range open {
		if i >= maxTaskChecks {
			return n + len(open) - i
		}
		if st, err := h.status(ctx, t); err != nil || st.Alive {
			n++
		}
	}
	return n
}
