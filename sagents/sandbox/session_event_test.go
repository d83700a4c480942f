package sandbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestSessionRestartEvent: a command whose result says session_restarted
// adds a "session_restart" sandbox event, whoever runs the Sandbox (a
// library, the session daemon). Control: a command without a restart
// adds none.
func TestSessionRestartEvent(t *testing.T) {
	rec := &observabilitytest.Recorder{}
	obs := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	restarted := false
	f := &sandboxtest.Fake{ExecFunc: func(context.Context, driver.ExecSpec) (*sandbox.CommandResult, error) {
		return &sandbox.CommandResult{Success: true, SessionRestarted: restarted}, nil
	}}
	s := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Passthrough, Observer: obs}, f)
	ops := func() (names []string) {
		for _, op := range observabilitytest.Data[observability.SandboxOp](rec, "SandboxStart") {
			names = append(names, op.Op)
		}
		return names
	}
	_, err := s.ExecuteCommand(context.Background(), "true", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.NotContains(t, ops(), "session_restart", "control: no restart, no event")
	restarted = true
	_, err = s.ExecuteCommand(context.Background(), "true", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Contains(t, ops(), "session_restart")
}
