// Package a declares the names the test counts.
package a

// Used is spelled by b.
type Used struct{ K Kind }

// M is called by b; N by nobody.
func (Used) M() {}
func (Used) N() {}

// Hidden is New's result: no user spells it.
type Hidden struct{}

func New() *Hidden { return &Hidden{} }

// String is reached through fmt.Stringer.
func (*Hidden) String() string { return "" }

// Kind is Used.K's type, so its constants are API.
type Kind int

const KindA Kind = 1

const Unused = 1

// OnlyTested has a user in a's own tests only.
var OnlyTested = 2

// Wrapped's Unwrap is errors.Unwrap's.
type Wrapped struct{ error }

func (w Wrapped) Unwrap() error { return w.error }

func Wrap(err error) error { return Wrapped{err} }

func Exampled()   {}
func Documented() {}
func ByAdapter()  {}
