package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"

	// The aio provider's Docker backend and Redis state store.
	_ "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

func init() {
	register(command{"sandbox", "list (ls) or release (rm) the aio provider's sandboxes", runSandbox},
		subcommand{"ls", "list the sandboxes, running or recorded"},
		subcommand{"rm", "release sandboxes: stop them and forget them"})
}

// sandboxRow is one line of `sage sandbox ls`.
type sandboxRow struct {
	ThreadID  string        `json:"thread_id"`
	SandboxID string        `json:"sandbox_id"`
	URL       string        `json:"url"`
	BackendID string        `json:"backend_id"`
	Idle      time.Duration `json:"idle_ns"`
	IdleText  string        `json:"idle"`
	Owner     string        `json:"owner"`
	// OwnerAlive says whether the owner's lease is held (absent when the
	// state store keeps no leases).
	OwnerAlive *bool `json:"owner_alive,omitempty"`
	Running    bool  `json:"running"`
	// Pool marks an unassigned warm-pool sandbox (ls --pool).
	Pool bool `json:"pool,omitempty"`
}

func runSandbox(ctx context.Context, env *cliEnv, args []string) int {
	var fs *flag.FlagSet
	var asJSON, poolOnly, all, purge = new(bool), new(bool), new(bool), new(bool)
	if args[0] == "ls" {
		fs = newFlagSet("sage sandbox ls", "sage sandbox ls [--json] [--pool]")
		fs.BoolVar(asJSON, "json", false, "print JSON")
		fs.BoolVar(poolOnly, "pool", false, "list the warm pool's unassigned sandboxes (pool_size) instead")
	} else {
		fs = newFlagSet("sage sandbox rm", "sage sandbox rm [--purge] THREAD... | --all")
		fs.BoolVar(all, "all", false, "release every thread's sandbox, and collect what dead owners left (their anonymous sandboxes and pool slots)")
		fs.BoolVar(purge, "purge", false, "also delete the threads' files (SAGE_HOME/threads/THREAD)")
	}
	rest, code, stop := parseFlagsInterspersed(env, fs, args[1:])
	if stop {
		return code
	}
	if args[0] == "ls" && len(rest) > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q", rest[0])
	}
	if args[0] == "rm" && *all == (len(rest) > 0) {
		return usageError(env, fs.Name(), "name the THREADs to release, or --all")
	}
	p, err := cliProvider()
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	defer p.Shutdown(context.WithoutCancel(ctx))
	if args[0] == "ls" {
		return sandboxLs(ctx, env, p, *asJSON, *poolOnly)
	}
	return sandboxRm(ctx, env, p, rest, *all, *purge)
}

// cliProvider builds the provider the CLI's remote mode uses, from the
// environment; keep, so that listing never stops anything.
func cliProvider() (*orchestrator.Provider, error) {
	cfg, err := sandbox.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	pc := map[string]any{orchestrator.KeyShutdownPolicy: orchestrator.PolicyKeep}
	for k, v := range cfg.Remote.ProviderConfig {
		pc[k] = v
	}
	pc[orchestrator.KeyPoolSize] = "0" // the CLI only looks: it keeps no pool of its own
	cfg.Remote.ProviderConfig = pc
	// No background sweep: `ls` collects nothing; `rm --all` sweeps once.
	return orchestrator.ProviderFromConfig(cfg.Remote, orchestrator.ProviderOptions{SweepInterval: -1})
}

func sandboxRows(ctx context.Context, p *orchestrator.Provider) ([]sandboxRow, error) {
	running, err := p.Backend().ListRunning(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]orchestrator.SandboxInfo{}
	for _, r := range running {
		byID[r.SandboxID] = r
	}
	var stored map[string]orchestrator.SandboxInfo
	if l, ok := p.Store().(orchestrator.Lister); ok {
		if stored, err = l.List(ctx); err != nil {
			return nil, err
		}
	}
	rows := []sandboxRow{}
	for thread, st := range stored {
		r, ok := byID[st.SandboxID]
		delete(byID, st.SandboxID)
		rows = append(rows, row(thread, st, r, ok))
	}
	for _, r := range byID {
		rows = append(rows, row(r.ThreadID, r, r, true))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ThreadID+rows[i].SandboxID < rows[j].ThreadID+rows[j].SandboxID })
	return rows, markOwners(ctx, p, rows)
}

// markOwners says, where the store keeps owner leases, whose has ended.
func markOwners(ctx context.Context, p *orchestrator.Provider, rows []sandboxRow) error {
	lr, ok := p.Store().(orchestrator.Leaser)
	if !ok {
		return nil
	}
	var owners []string
	for _, r := range rows {
		if r.Owner != "" {
			owners = append(owners, r.Owner)
		}
	}
	live, err := lr.LiveLeases(ctx, owners)
	if err != nil {
		return err
	}
	for i := range rows {
		if rows[i].Owner != "" {
			alive := live[rows[i].Owner]
			rows[i].OwnerAlive = &alive
		}
	}
	return nil
}

// row merges the stored record with what runs. Idle time counts from
// last_used_at, when a process last created or adopted the sandbox
// (in-process activity is not shared between processes).
func row(thread string, st, run orchestrator.SandboxInfo, running bool) sandboxRow {
	r := sandboxRow{ThreadID: thread, SandboxID: st.SandboxID, URL: st.URL, BackendID: st.ContainerID, Owner: st.Owner, Running: running}
	if running {
		r.URL, r.BackendID = run.URL, run.ContainerID
	}
	last := st.LastUsed
	if last.IsZero() {
		last = st.CreatedAt
	}
	if !last.IsZero() {
		r.Idle = time.Since(last).Round(time.Second)
		r.IdleText = r.Idle.String()
	}
	return r
}

// poolRows lists the warm pools' unassigned sandboxes (every process's).
func poolRows(ctx context.Context, p *orchestrator.Provider) ([]sandboxRow, error) {
	pl, ok := p.Backend().(orchestrator.Pooler)
	if !ok {
		return nil, fmt.Errorf("sage sandbox ls --pool: the %T backend keeps no warm pool", p.Backend())
	}
	slots, err := pl.ListPool(ctx)
	if err != nil {
		return nil, err
	}
	rows := []sandboxRow{}
	for _, s := range slots {
		r := row("", s, s, true)
		r.Pool = true
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].SandboxID < rows[j].SandboxID })
	return rows, markOwners(ctx, p, rows)
}

func sandboxLs(ctx context.Context, env *cliEnv, p *orchestrator.Provider, asJSON, poolOnly bool) int {
	list := sandboxRows
	if poolOnly {
		list = poolRows
	}
	rows, err := list(ctx, p)
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	if asJSON {
		return printJSON(env, rows)
	}
	tw := tabwriter.NewWriter(env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tSANDBOX\tURL\tBACKEND ID\tIDLE\tOWNER\tRUNNING")
	for _, r := range rows {
		id := r.BackendID
		if len(id) > 12 {
			id = id[:12]
		}
		owner := r.Owner
		if r.OwnerAlive != nil && !*r.OwnerAlive {
			owner += " (dead)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\n", r.ThreadID, r.SandboxID, r.URL, id, r.IdleText, owner, r.Running)
	}
	if poolOnly {
		fmt.Fprintf(tw, "%d unassigned pool sandboxes\n", len(rows))
	}
	if err := tw.Flush(); err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
}

func sandboxRm(ctx context.Context, env *cliEnv, p *orchestrator.Provider, threads []string, all, purge bool) int {
	if all {
		rows, err := sandboxRows(ctx, p)
		if err != nil {
			return fail(env, exitSandboxError, err)
		}
		for _, r := range rows {
			threads = append(threads, r.ThreadID)
		}
	}
	code := 0
	for _, t := range threads {
		if t == "" {
			continue // anonymous: a live owner's is in use; a dead one's is swept below
		}
		err := rmThread(ctx, env, p, t, purge)
		switch {
		case errors.Is(err, orchestrator.ErrNoThread):
			// As `sage session stop` of an unknown session: exit 1.
			fmt.Fprintf(env.stderr, "sage sandbox rm: no sandbox, state or files for thread %s ('sage sandbox ls' lists them)\n", t)
			code = max(code, exitFailed)
		case err != nil:
			fmt.Fprintf(env.stderr, "sage sandbox rm: %s: %s\n", t, oneLine(err.Error()))
			code = exitSandboxError
		}
	}
	if all {
		// What dead owners left: anonymous sandboxes, pool slots (and
		// their directories), counts. A lease Redis no longer has is
		// waited on for its TTL first: its holder may not know yet.
		r, err := p.SweepWait(ctx)
		if err != nil {
			fmt.Fprintf(env.stderr, "sage sandbox rm: collecting what dead owners left: %s\n", oneLine(err.Error()))
			code = exitSandboxError
		}
		if n := len(r.Sandboxes); n > 0 {
			fmt.Fprintf(env.stdout, "collected %d sandboxes of dead owners (%s)\n", n, strings.Join(r.DeadOwners, ", "))
		}
	}
	return code
}

// rmThread releases one thread's sandbox and says where its files are
// (or deletes them with purge). A thread nobody knows is an error.
func rmThread(ctx context.Context, env *cliEnv, p *orchestrator.Provider, t string, purge bool) error {
	if purge {
		if err := p.PurgeThread(ctx, t); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "released %s and deleted its files\n", t)
		return nil
	}
	ok, err := p.ThreadExists(ctx, t)
	if err != nil {
		return err
	}
	if !ok {
		return orchestrator.ErrNoThread
	}
	if err := p.ReleaseThread(ctx, t); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "released %s (its files stay in %s; --purge deletes them)\n", t, p.ThreadDir(t))
	return nil
}
