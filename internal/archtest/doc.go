// Package archtest holds no code: its test checks the import rules of
// ARCHITECTURE.md with `go list` (imports run one way, from cmd down to
// observability; the user's sagents/sandbox imports sagents/sandbox/driver,
// never the reverse, and only drivers use sagents/sandbox/internal/hostkit;
// and a program of the sandbox core plus local mode links
// no OpenTelemetry, Docker, Kubernetes or kin-openapi package).
package archtest
