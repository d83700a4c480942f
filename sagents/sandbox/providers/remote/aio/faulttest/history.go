package faulttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Event kinds of a history.
const (
	// KindLease: an owner lease was granted to Owner (Inv: sent, Comp:
	// answered).
	KindLease = "lease"
	// KindObserve: a process asked which owners hold their lease; Absent
	// are those that did not, at some moment between Inv and Comp.
	KindObserve = "observe"
	// KindLock: Thread's lock was granted with fencing Token.
	KindLock = "lock"
	// KindOp: a backend call (Op: create, destroy, adopt, claim) made
	// under Owner's lease and Thread's lock Token (0: none).
	KindOp = "op"
	// KindCmd: a command in Sandbox for Thread ("" anonymous), run by
	// Owner; Answered is the hostname the sandbox printed (its
	// container's id).
	KindCmd = "cmd"
	// kindFault: the nemesis did Op (partition, pause, kill, restart) to
	// Host between Inv and Comp (partition and pause: until healed).
	kindFault = "fault"
	// kindSample: N sandbox containers ran at Inv.
	kindSample = "sample"
	// KindSweep: a sweep collected N sandboxes.
	KindSweep = "sweep"
	// KindCount: a max_sandboxes count (Op: reserve, unreserve) of
	// Sandbox for Owner.
	KindCount = "count"
)

// Event is one line of a history.
type Event struct {
	Kind      string   `json:"kind"`
	Host      string   `json:"host,omitempty"`
	Owner     string   `json:"owner,omitempty"`
	Op        string   `json:"op,omitempty"`
	Thread    string   `json:"thread,omitempty"`
	Sandbox   string   `json:"sandbox,omitempty"`
	Container string   `json:"container,omitempty"`
	Answered  string   `json:"answered,omitempty"`
	Token     int64    `json:"token,omitempty"`
	Absent    []string `json:"absent,omitempty"`
	Names     []string `json:"names,omitempty"` // a sample's containers`
	N         int      `json:"n,omitempty"`
	Inv       int64    `json:"inv"`            // unix ns: invoked (or observed)
	Comp      int64    `json:"comp,omitempty"` // unix ns: completed
	OK        bool     `json:"ok,omitempty"`
	Err       string   `json:"err,omitempty"`
}

// Recorder appends events to a history file, one write(2) each, so a
// process killed with SIGKILL loses at most the event it was writing
// (which then reads as never completed).
type Recorder struct {
	mu sync.Mutex
	f  *os.File
}

// NewRecorder opens (creating) path for appending.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f}, nil
}

// Add appends e.
func (r *Recorder) Add(e Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.f.Write(append(b, '\n'))
}

// Close closes the file.
func (r *Recorder) Close() error { return r.f.Close() }

// Now is the time stamp of events: unix nanoseconds of the wall clock,
// which every process on one machine shares (containers included).
func Now() int64 { return time.Now().UnixNano() }

// readHistories reads every *.jsonl file of dir, skipping a torn last
// line; events come back sorted by Inv.
func readHistories(dir string) ([]Event, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var all []Event
	for _, f := range files {
		evs, err := readHistory(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		all = append(all, evs...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Inv < all[j].Inv })
	return all, nil
}

const maxLine = 1 << 20

func readHistory(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(io.LimitReader(f, 1<<30))
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
