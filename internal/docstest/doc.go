// Package docstest holds the checks of the user guide (README.md and
// docs/*.md): every Go snippet is code that the tests compile and run (an
// Example function with an Output comment, or a program under examples/
// with tests of its own), every relative link and anchor resolves, every
// docs page is reachable from the README, and the README's first two
// commands are make demo and make test. It has no code of its own.
package docstest
