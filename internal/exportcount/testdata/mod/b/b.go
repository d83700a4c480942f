// Package b uses a.
package b

import (
	"fmt"

	"example.com/m/a"
)

func B() fmt.Stringer {
	var u a.Used
	u.M()
	_ = a.Wrap(nil)
	return a.New()
}
