package main

import (
	"context"

	"github.com/sage-go/sage/sagents/observability"
)

// tracedRun starts the chain run of a sandbox command line (name: "sage
// exec", "sage python", "sage fs read") on an observer with the OTLP
// export of the environment (observer), so that its sandbox events
// (acquire, the operation, release) are traced as those of a session's
// daemon are. Give the returned Manager to sandbox.Config.Observer and
// call end once, with the run's error, after the sandbox is closed.
func tracedRun(ctx context.Context, name, session string) (context.Context, *observability.Manager, func(error), error) {
	obs, shutdown, err := observer(ctx)
	if err != nil {
		return ctx, nil, nil, err
	}
	ctx = obs.ChainStart(ctx, observability.ChainInfo{SessionID: session, Name: name})
	return ctx, obs, func(err error) {
		if err != nil {
			obs.ChainError(ctx, err)
		} else {
			obs.ChainEnd(ctx, observability.ChainResult{})
		}
		shutdown()
	}, nil
}
