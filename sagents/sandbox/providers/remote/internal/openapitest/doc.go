// Package openapitest is what the test validators of the remote
// providers share: loading an OpenAPI document (checked, its servers
// dropped so a request to any host matches, with a router), listing its
// operations, and checking one request and its answer against it with
// kin-openapi. The AIO validator (aio/internal/spectest) and the
// OpenSandbox fake (opensandbox/opensandboxtest) build on it, each adding
// what only its API has (AIO's error envelope, OpenSandbox's event
// streams). Only tests import it.
package openapitest
