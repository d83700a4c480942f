// Package remote is the registry of remote sandbox providers and the
// "remote" sandbox mode that dispatches to them.
//
// A remote provider registers itself by name, as database/sql drivers do:
//
//	func init() { remote.Register("aio", newAIO) }
//
// and a Config with Mode remote and Remote.Provider "aio" then reaches it
// through sandbox.New. Importing this package registers the mode.
package remote
