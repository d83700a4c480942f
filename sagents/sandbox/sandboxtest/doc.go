// Package sandboxtest holds the provider contract suite: one set of tests
// that every sandbox provider (passthrough, local, remote) must pass
// through the Handle interface alone.
//
//	func TestContract(t *testing.T) {
//		sandboxtest.Run(t, sandboxtest.Options{New: func(t *testing.T) sandbox.Handle { ... }})
//	}
package sandboxtest
