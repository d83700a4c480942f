// Package aio registers the remote provider "aio" (remote.Register in
// provider.go): sandbox.New with Mode remote, Remote.Provider "aio" and
// a ServerURL returns the driver of that running sandbox
// (aiodriver.Open); without a ServerURL it orchestrates
// (orchestrator.NewDriver): the thread's sandbox is acquired from a
// backend, and closing the driver shuts the provider down according to
// its shutdown_policy.
//
// The pieces live in sub-packages cut along their seams:
//
//   - aioapi: the AIO Sandbox HTTP API's wire types and typed client, no
//     side effects; shared by the server, the driver and the orchestrator.
//   - aiodriver: the driver.Driver of one running AIO sandbox.
//   - orchestrator: Provider, Backend, StateStore, FileStore, config and
//     the idle reaper; dockerbackend, redisstore and provisioner depend
//     only on its small interfaces.
//   - aioserver: `sage sandboxd`, the server side.
//
// A `sage sandboxd` on this machine started without --token makes a token
// and saves it in aioapi.TokenFile ($SAGE_HOME/sandboxd/token, 0600);
// Open with no Token and a loopback ServerURL sends that token when the
// file exists.
package aio
