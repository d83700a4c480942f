package local_test

import (
	"os"
	"testing"

	"github.com/sage-go/sage/internal/testenv"
)

// TestMain removes the programs the tests built (cmd/sage-supervisor, by
// testenv.SupervisorBinary and testenv.Build) once they ran: without it
// every run left a sage-test-bin-* directory in the temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveSageBinary()
	os.Exit(code)
}
