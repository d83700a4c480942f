// Package provisioner is the sandbox provisioner service and its client.
//
// The provisioner is a small HTTP service that runs sandboxes on behalf of
// the orchestrating aio provider, usually on Kubernetes (sub-package kube)
// and optionally on Docker. Its API is the DeerFlow provisioner API:
//
//	POST   /api/sandboxes        {sandbox_id, thread_id, extra_mounts, ...} -> sandbox
//	GET    /api/sandboxes/{id}   -> sandbox, or 404
//	DELETE /api/sandboxes/{id}   -> {ok, sandbox_id} (an unknown id is not an error)
//	GET    /api/sandboxes        -> {sandboxes, count}
//	GET    /health               -> {status}  (no API key needed)
//
// Requests to /api/ carry the key in the X-API-Key header. Errors are JSON
// {"detail": message, "error": code}, detail as FastAPI writes it.
//
// The package has three parts:
//
//   - the client (client.go): an orchestrator.Backend over the API, registered with the
//     aio provider as backend "provisioner". Non-2xx answers are *APIError
//     values; a 404 matches ErrNotFound and fs.ErrNotExist.
//   - Server (server.go, mounts.go): an http.Handler over any orchestrator.Backend.
//     It validates sandbox and thread ids (driver.ValidID), applies the
//     host-mount policy, fills image, port and resources from its own
//     configuration (clients do not choose them), and serialises calls per
//     sandbox id.
//   - Serve (serve.go): listen, serve, graceful shutdown.
//
// Idle model. The provisioner cannot see traffic to the sandboxes, so
// "activity" is a call through the service: create and GET (which the
// client's Discover, IsAlive and Touch all use). Backends that support
// reaping (kube) record it as an annotation on the sandbox and remove
// sandboxes idle past a TTL. Choose a TTL well above the provider's own
// idle_timeout: it is a backstop for sandboxes that no process releases
// (crashed or killed owners), not the primary release path.
//
// Its API is the service's: NewServer (Options, Defaults, MountPolicy),
// Serve (ServeOptions, LoopbackAddr), the optional Checker, EnvAPIKey,
// and the errors (*APIError, ErrNotFound, ErrInvalid). The client has no
// Go API of its own: a program reaches it as the aio backend "provisioner"
// (provider_config provisioner_url and provisioner_api_key, else
// $SAGE_PROVISIONER_URL and $SAGE_PROVISIONER_API_KEY); the wire types are
// the package's own.
package provisioner
