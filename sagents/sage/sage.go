package sage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"

	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local"       // registers "local"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough" // registers "passthrough"
	"github.com/sage-go/sage/sagents/tools"
)

// Options configure everything [New] builds. The zero value of each part
// takes that part's defaults. Observer is the one place to give the
// observability Manager: the Observer fields of the parts' own configs
// must be left nil (or be the same Manager).
type Options struct {
	// Observer receives the events of the sandbox, the model client, the
	// tools and the agent. nil: New makes a Manager with Handlers (which
	// may be none; handlers can be registered with it later, as
	// otelsage.Setup does), and Close shuts it down. A Manager given here
	// is the caller's to shut down.
	Observer *observability.Manager
	// Handlers are registered with the Manager New makes; with Observer
	// set, giving Handlers too is an error.
	Handlers []observability.Handler

	// Sandbox configures the sandbox. An empty Mode is local. An empty
	// Workspace in local and passthrough mode is a new temporary
	// directory that Close removes.
	Sandbox sandbox.Config
	// Model configures the model client. With no Standard model (empty
	// Standard.Model and Standard.BaseURL) New builds no client and no
	// agent: a framework's own model calls the tools.
	Model llm.Config
	// Tools configure the tool Manager (result bounds).
	Tools tools.Options
	// Builtins configure the built-in tools (the shell tools' policy and
	// approver), registered unless NoBuiltins.
	Builtins   tools.BuiltinOptions
	NoBuiltins bool
	// ExtraTools are registered after the built-ins.
	ExtraTools []tools.Tool
	// Agent configures the agent loop; its Client, Tools and Observer are
	// New's to set and must be left nil.
	Agent agent.Config
}

// Runtime is what [New] built. Its fields are the parts, ready to use on
// their own; Close releases them.
type Runtime struct {
	Observer *observability.Manager
	Sandbox  *sandbox.Sandbox
	// Client is nil when Options.Model names no model.
	Client *llm.Client
	Tools  *tools.Manager
	// Agent is nil when Options.Model names no model.
	Agent *agent.Agent

	ownObserver bool
	tempDir     string
	closeOnce   sync.Once
	closeErr    error
}

// New builds the parts Options describe, in the order they depend on each
// other: the Manager, the sandbox, the model client, the tools and the
// agent. A part that fails to build is an error naming it, and what was
// built before it is closed again.
func New(ctx context.Context, o Options) (_ *Runtime, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	rt := &Runtime{Observer: o.Observer}
	if rt.Observer == nil {
		rt.Observer = observability.New(observability.Options{Handlers: o.Handlers})
		rt.ownObserver = true
	}
	defer func() {
		if err != nil {
			rt.Close(context.WithoutCancel(ctx))
		}
	}()

	sc := o.Sandbox
	sc.Observer = rt.Observer
	if sc.Mode == "" {
		sc.Mode = sandbox.Local
	}
	if sc.Workspace == "" && sc.Mode != sandbox.Remote {
		if rt.tempDir, err = os.MkdirTemp("", "sage-workspace-"); err != nil {
			return nil, fmt.Errorf("sage: workspace: %w", err)
		}
		sc.Workspace = rt.tempDir
	}
	if rt.Sandbox, err = sandbox.New(ctx, sc); err != nil {
		return nil, fmt.Errorf("sage: sandbox: %w", err)
	}

	if o.Model.Standard.Model != "" || o.Model.Standard.BaseURL != "" {
		mc := o.Model
		mc.Observer = rt.Observer
		if rt.Client, err = llm.New(mc); err != nil {
			return nil, fmt.Errorf("sage: model: %w", err)
		}
	}

	to := o.Tools
	to.Observer = rt.Observer
	rt.Tools = tools.NewManager(rt.Sandbox, to)
	if !o.NoBuiltins {
		if err := rt.Tools.RegisterBuiltins(o.Builtins); err != nil {
			return nil, fmt.Errorf("sage: tools: %w", err)
		}
	}
	if err := rt.Tools.Register(o.ExtraTools...); err != nil {
		return nil, fmt.Errorf("sage: tools: %w", err)
	}

	if rt.Client != nil {
		ac := o.Agent
		ac.Client, ac.Tools, ac.Observer = rt.Client, rt.Tools, rt.Observer
		if rt.Agent, err = agent.New(ac); err != nil {
			return nil, fmt.Errorf("sage: agent: %w", err)
		}
	}
	return rt, nil
}

// check refuses a second way of giving the Observer and the parts New
// sets itself, naming the field and the fix.
func (o Options) check() error {
	if o.Observer != nil && len(o.Handlers) > 0 {
		return errors.New("sage: Options.Handlers is for the Manager New makes; with Options.Observer set, register them with it (Observer.Register)")
	}
	for _, f := range []struct {
		name string
		obs  *observability.Manager
	}{{"Sandbox", o.Sandbox.Observer}, {"Model", o.Model.Observer}, {"Tools", o.Tools.Observer}, {"Agent", o.Agent.Observer}} {
		if f.obs != nil && f.obs != o.Observer {
			return fmt.Errorf("sage: Options.%s.Observer is set and is not Options.Observer; set the Manager once, in Options.Observer", f.name)
		}
	}
	if o.Agent.Client != nil || o.Agent.Tools != nil {
		return errors.New("sage: Options.Agent.Client and Options.Agent.Tools are New's to set; leave them nil and configure Options.Model and Options.Tools")
	}
	if o.Model.Standard.Model == "" && o.Model.Standard.BaseURL == "" && !reflect.ValueOf(o.Agent).IsZero() {
		return errors.New("sage: Options.Agent is set but Options.Model names no model; set Options.Model.Standard")
	}
	return nil
}

// ErrNoAgent is returned by Run when Options.Model named no model.
var ErrNoAgent = errors.New("sage: no agent: Options.Model names no model (set Options.Model.Standard)")

// Run runs one task with the agent; see [agent.Agent.Run].
func (r *Runtime) Run(ctx context.Context, task string) (*agent.Result, error) {
	if r.Agent == nil {
		return nil, ErrNoAgent
	}
	return r.Agent.Run(ctx, task)
}

// Close closes the sandbox, removes the temporary workspace New made, and
// shuts down the Manager New made (flushing its handlers). It is
// idempotent; later calls return the first call's error.
func (r *Runtime) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		var errs []error
		if r.Sandbox != nil {
			errs = append(errs, r.Sandbox.Close(ctx))
		}
		if r.tempDir != "" {
			errs = append(errs, os.RemoveAll(r.tempDir))
		}
		if r.ownObserver {
			errs = append(errs, r.Observer.Shutdown(ctx))
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}
