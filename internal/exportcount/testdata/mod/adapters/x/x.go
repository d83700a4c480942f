// Package x is an adapter module's user of a.
package x

import "example.com/m/a"

func X() { a.ByAdapter() }
