// Package opensandboxtest is a fake OpenSandbox for tests: a lifecycle server
// and, per sandbox, an execd that runs commands on this host in the
// sandbox's own directory. Both check every request strictly (unknown
// JSON fields, missing required fields, wrong content types, relative
// paths and wrong credentials are answered 400 or 401) and record every
// violation, so a test fails when the client sends something the real
// server would refuse. Besides, every request it receives and every
// answer it gives is validated against the project's OpenAPI document
// of the subset (api/opensandbox-subset.openapi.yaml, see spec.go; event
// streams line by line), and a mismatch is recorded the same way. It
// isolates nothing: it exists to test clients.
package opensandboxtest
