package faulttest

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Rules the checker applies.
const (
	ruleOneSandbox = "one-sandbox-per-thread"
	ruleLostLease  = "no-use-after-lease-lost"
	ruleStaleLock  = "no-backend-call-under-a-stale-lock"
	ruleMax        = "max-sandboxes"
	ruleLeftover   = "nothing-left-of-dead-owners"
)

// violation is one thing the history proves went wrong.
type violation struct {
	Rule   string
	Detail string
}

// report is what Check found.
type report struct {
	Violations []violation
	// Counts of the history, for the test's log.
	Commands, CommandsOK, Ops, Locks, Leases, Observations, Faults, Samples int
	FaultsByOp                                                              map[string]int
}

// byRule counts the violations of each rule.
func (r report) byRule() map[string]int {
	out := map[string]int{}
	for _, v := range r.Violations {
		out[v.Rule]++
	}
	return out
}

// String prints the counts and up to five violations of each rule.
func (r report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "history: %d commands (%d ok), %d backend calls, %d lock grants, %d owner leases, %d lease observations, %d samples; faults %v\n",
		r.Commands, r.CommandsOK, r.Ops, r.Locks, r.Leases, r.Observations, r.Samples, r.FaultsByOp)
	by := r.byRule()
	if len(by) == 0 {
		b.WriteString("violations: none\n")
		return b.String()
	}
	fmt.Fprintf(&b, "violations: %v\n", by)
	shown := map[string]int{}
	for _, v := range r.Violations {
		if shown[v.Rule]++; shown[v.Rule] <= 5 {
			fmt.Fprintf(&b, "  %s: %s\n", v.Rule, v.Detail)
		}
	}
	return b.String()
}

// check applies the rules to a history (events of every process, any
// order). max is the max_sandboxes bound (0: none). Only definite
// violations count: an event's effect is known to lie between its
// invocation and its completion, and a command that did not complete
// successfully may or may not have run.
func check(events []Event, max int) report {
	r := report{FaultsByOp: map[string]int{}}
	evs := append([]Event(nil), events...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Inv < evs[j].Inv })
	for _, e := range evs {
		switch e.Kind {
		case KindCmd:
			r.Commands++
			if e.OK {
				r.CommandsOK++
			}
		case KindOp:
			r.Ops++
		case KindLock:
			r.Locks++
		case KindLease:
			r.Leases++
		case KindObserve:
			r.Observations++
		case kindFault:
			r.Faults++
			r.FaultsByOp[e.Op]++
		case kindSample:
			r.Samples++
		}
	}
	r.Violations = append(r.Violations, oneSandbox(evs)...)
	r.Violations = append(r.Violations, lostLease(evs)...)
	r.Violations = append(r.Violations, staleLock(evs)...)
	r.Violations = append(r.Violations, maxSandboxes(evs, max)...)
	return r
}

// oneSandbox: for a thread, a container C that answered a command which
// completed before a command answered by another container D began, and
// one which began after that command completed, existed, serving, while
// D served: two sandboxes at once.
func oneSandbox(evs []Event) []violation {
	type span struct{ minComp, maxInv int64 }
	byThread := map[string][]Event{}
	for _, e := range evs {
		if e.Kind == KindCmd && e.OK && e.Thread != "" && e.Answered != "" {
			byThread[e.Thread] = append(byThread[e.Thread], e)
		}
	}
	var out []violation
	for thread, cmds := range byThread {
		spans := map[string]*span{}
		for _, c := range cmds {
			s := spans[c.Answered]
			if s == nil {
				s = &span{minComp: c.Comp, maxInv: c.Inv}
				spans[c.Answered] = s
			}
			s.minComp, s.maxInv = min(s.minComp, c.Comp), max(s.maxInv, c.Inv)
		}
		seen := map[[2]string]bool{}
		for _, y := range cmds {
			for c, s := range spans {
				if c == y.Answered || seen[[2]string{c, y.Answered}] {
					continue
				}
				if s.minComp < y.Inv && s.maxInv > y.Comp {
					seen[[2]string{c, y.Answered}] = true
					out = append(out, violation{ruleOneSandbox, fmt.Sprintf("thread %s: container %s served before and after container %s served it at %s",
						thread, short(c), short(y.Answered), stamp(y.Inv))})
				}
			}
		}
	}
	return out
}

// lostLease: once any process saw owner O's lease absent, O must not run
// a command, create, adopt or claim again (a lost lease never comes
// back: a process that lost one continues under a new owner id).
func lostLease(evs []Event) []violation {
	lost := map[string]int64{}
	for _, e := range evs {
		if e.Kind != KindObserve {
			continue
		}
		for _, o := range e.Absent {
			if t, ok := lost[o]; !ok || e.Comp < t {
				lost[o] = e.Comp
			}
		}
	}
	var out []violation
	for _, e := range evs {
		if !e.OK || e.Owner == "" {
			continue
		}
		use := e.Kind == KindCmd || e.Kind == KindOp && (e.Op == "create" || e.Op == "adopt" || e.Op == "claim")
		t, gone := lost[e.Owner]
		if use && gone && e.Inv > t {
			what := "command"
			if e.Kind == KindOp {
				what = e.Op
			}
			out = append(out, violation{ruleLostLease, fmt.Sprintf("%s by %s in sandbox %s (thread %q) at %s, %s after its lease was seen gone",
				what, e.Owner, e.Sandbox, e.Thread, stamp(e.Inv), time.Duration(e.Inv-t).Round(time.Millisecond))})
		}
	}
	return out
}

// staleLock: a backend call under thread T's lock with token k must not
// begin after T's lock was granted to a newer token.
func staleLock(evs []Event) []violation {
	type grant struct{ token, comp int64 }
	grants := map[string][]grant{}
	for _, e := range evs {
		if e.Kind == KindLock && e.Token > 0 {
			grants[e.Thread] = append(grants[e.Thread], grant{e.Token, e.Comp})
		}
	}
	var out []violation
	for _, e := range evs {
		if e.Kind != KindOp || !e.OK || e.Token == 0 || e.Thread == "" {
			continue
		}
		for _, g := range grants[e.Thread] {
			if g.token > e.Token && e.Inv > g.comp {
				out = append(out, violation{ruleStaleLock, fmt.Sprintf("%s of %s (thread %s) by %s under token %d at %s, %s after token %d was granted",
					e.Op, e.Sandbox, e.Thread, e.Owner, e.Token, stamp(e.Inv), time.Duration(e.Inv-g.comp).Round(time.Millisecond), g.token)})
				break
			}
		}
	}
	return out
}

func maxSandboxes(evs []Event, max int) []violation {
	if max <= 0 {
		return nil
	}
	var out []violation
	for _, e := range evs {
		if e.Kind == kindSample && e.N > max {
			out = append(out, violation{ruleMax, fmt.Sprintf("%d sandboxes ran at %s (max_sandboxes %d): %v", e.N, stamp(e.Inv), max, e.Names)})
		}
	}
	return out
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000") }
