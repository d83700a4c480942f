// Package observabilitytest has what tests of code that reports events
// share: Recorder, an observability handler that keeps every event it is
// given (every family, sandbox events included) with the run it belongs
// to, so a test asserts on what its code reported instead of writing a
// handler of its own. Only tests import it.
package observabilitytest
