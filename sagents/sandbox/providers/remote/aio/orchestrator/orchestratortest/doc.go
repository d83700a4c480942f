// Package orchestratortest holds an in-memory [orchestrator.Backend] for the
// tests of the orchestrating provider and of what serves or wraps a backend
// (the provisioner).
package orchestratortest
