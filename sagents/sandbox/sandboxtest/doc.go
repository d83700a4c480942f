// Package sandboxtest holds the provider contract suite: one set of tests
// that every sandbox provider (passthrough, local, remote) must pass
// through *sandbox.Sandbox alone.
//
//	func TestContract(t *testing.T) {
//		sandboxtest.Run(t, sandboxtest.Options{New: func(t *testing.T) *sandbox.Sandbox { ... }})
//	}
package sandboxtest
