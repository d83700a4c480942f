// Package api embeds the project's HTTP API documents.
package api

import _ "embed"

// AIOSubset is the OpenAPI 3.1 document (YAML) of the AIO Sandbox API
// subset that `sage sandboxd` serves.
//
//go:embed aio-subset.openapi.yaml
var AIOSubset []byte

// OpenSandboxSubset is the OpenAPI 3.0 document (YAML) of the OpenSandbox
// lifecycle and execd operations the "opensandbox" provider calls.
//
//go:embed opensandbox-subset.openapi.yaml
var OpenSandboxSubset []byte
