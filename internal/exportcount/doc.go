// Command exportcount counts, per package of a Go module, the exported
// names (types, functions, variables, constants, and the methods of
// exported concrete types) and how many of them have a user outside the
// package's own directory:
//
//	go run ./internal/exportcount            # the table, this module and adapters/*
//	go run ./internal/exportcount -unused    # and the names without a user
//
// A name has a user when code in another directory (a package, its
// tests, examples/, or one of the modules under adapters/) refers to it,
// when an Example function of the package's external test package does
// (an example is documentation a user reads), or when a Go snippet of the
// README or docs/ names it (pkg.Name; a snippet's .Name marks the methods
// of that name in the packages it names). A method also has a user when
// its type implements an interface with that method declared elsewhere
// (io.Writer, sandbox.Driver: its callers reach it through the
// interface), and a type has one when a name with a user mentions it (the
// result of a used function, the field of a used struct, the receiver of
// a used method: llm.New's *Client is API though no user spells it).
// Packages main and test-only packages declare no API and are left out.
//
// Code is loaded for the host's GOOS; -goos adds another (darwin, for
// Seatbelt's files), loaded without the tests, which are the host's.
package main
